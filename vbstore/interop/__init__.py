"""Other tools' formats: CLIP_benchmark's model lists and result files, VisBench's result
records.

```python
from vbstore.interop import clip_benchmark_record, clip_benchmark_spec
clip_benchmark_spec("ViT-B-32-quickgelu,laion400m_e32")
# 'open_clip:ViT-B-32-quickgelu@laion400m_e32'
```
"""

from ._cb_collections import (
    DATASET_COLLECTIONS,
    MODEL_COLLECTIONS,
    clip_benchmark_models,
    clip_benchmark_task,
)
from .clip_benchmark import (
    CLIP_BENCHMARK_FIELDS,
    DEFAULT_TEMPLATE,
    IDENTITY_FIELD,
    PROVENANCE_FIELDS,
    WeightsIdentity,
    check_template,
    clip_benchmark_datasets,
    clip_benchmark_export,
    clip_benchmark_filename,
    clip_benchmark_identity,
    clip_benchmark_record,
    clip_benchmark_spec,
)
from .visbench import (
    VISBENCH_FIELDS,
    VISBENCH_SCHEMA_VERSION,
    visbench_export,
    visbench_lines,
    visbench_record,
)

__all__ = [
    "CLIP_BENCHMARK_FIELDS",
    "DATASET_COLLECTIONS",
    "DEFAULT_TEMPLATE",
    "IDENTITY_FIELD",
    "MODEL_COLLECTIONS",
    "PROVENANCE_FIELDS",
    "VISBENCH_FIELDS",
    "VISBENCH_SCHEMA_VERSION",
    "WeightsIdentity",
    "check_template",
    "clip_benchmark_datasets",
    "clip_benchmark_export",
    "clip_benchmark_filename",
    "clip_benchmark_identity",
    "clip_benchmark_models",
    "clip_benchmark_record",
    "clip_benchmark_spec",
    "clip_benchmark_task",
    "visbench_export",
    "visbench_lines",
    "visbench_record",
]
