"""Backbone errors live in :mod:`vbstore.errors`; re-exported here for the adapters."""

from ..errors import (  # noqa: F401
    AmbiguousBackbone,
    BackboneAlreadyRegistered,
    CheckpointError,
    CheckpointNotFound,
    InvalidSpec,
    MissingExtra,
    NoPretrainedWeights,
    TamperedWeights,
    UnknownBackbone,
    WeightsUnavailable,
)
