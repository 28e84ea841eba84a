"""Pictures of stored results: bar charts with seed confidence intervals, and a dense result's
image / target / prediction grid, and a dataset's image / target grid before any training
(extra ``plot``).

```python
from vbstore.plots import backbone_bars, draw_bars, task_bars
draw_bars(task_bars(store, "knn"), "knn.svg", title="knn top1")
```

Collecting the bars needs no plotting library; drawing needs matplotlib
(``pip install 'vbstore[plot]'``).
"""

from ._bars import Bar, backbone_bars, task_bars
from ._datagrid import draw_data_grid
from ._draw import draw_bars
from ._grid import draw_dense_grid

__all__ = ["Bar", "backbone_bars", "draw_bars", "draw_data_grid", "draw_dense_grid", "task_bars"]
