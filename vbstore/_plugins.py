"""``load_plugin``: a user's Python file of registrations (tasks, target kinds, backbones).

A plugin is one file that calls the public registration API (``register_task``,
``register_target_kind``, ``register_backbone``) at import. ``vbstore get result --plugin FILE``
and ``vbstore.load_plugin(FILE)`` import it once per process; from then on its task runs and is
cached like a built-in (its module file is part of what a cached answer depends on).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from blake3 import blake3

from .errors import UsageError

_LOADED: dict[Path, ModuleType] = {}


def load_plugin(path: str | Path) -> ModuleType:
    """Import the Python file ``path`` (once per process), running its registrations.

    Raises:
        UsageError: no such ``.py`` file.
        Exception: whatever the file raises while it runs (a bad declaration: UsageError).
    """
    file = Path(path).expanduser().resolve()
    if file in _LOADED:
        return _LOADED[file]
    if not file.is_file() or file.suffix != ".py":
        raise UsageError(f"plugin {path} is not a Python file", hint="pass --plugin FILE.py")
    # a name of its own per path: two plugins called probe.py never shadow each other
    name = f"vbstore_plugin_{file.stem}_{blake3(str(file).encode()).hexdigest()[:8]}"
    spec = importlib.util.spec_from_file_location(name, file)
    assert spec is not None  # a .py file always has a spec and a loader
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look their module up here
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    _LOADED[file] = module
    return module
