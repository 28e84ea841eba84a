"""A minimal valid suite document: the store tests' stand-in for any small JSON artifact."""

PROTOCOL = {"task": "knn", "data": {"kind": "external"}, "conditions": [{"name": "val", "sampleCount": 1}],
            "metrics": [{"key": "top1", "headline": True}]}


def suite_doc(name: str, version: int = 1) -> dict:
    return {"slug": "s", "name": name, "version": version, "protocol": PROTOCOL}
