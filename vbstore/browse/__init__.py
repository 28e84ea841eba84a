"""The store's registry as a website: a read-only snapshot served by Datasette (extra ``browse``).

```python
from vbstore.browse import build_snapshot, serve
path = build_snapshot(store, "/tmp/vbstore-browse.db")
process = serve(path, port=8001)     # http://127.0.0.1:8001/vbstore/results
```

The snapshot is a separate SQLite file with readable tables (results with their settings and
headline, heads, named refs, lineage), rebuilt on every ``vbstore browse``, so the registry is
never opened by a web server and never needs a migration for a view.
"""

from ._serve import serve, serving, wait_until_up
from ._snapshot import TABLES, build_snapshot

__all__ = ["TABLES", "build_snapshot", "serve", "serving", "wait_until_up"]
