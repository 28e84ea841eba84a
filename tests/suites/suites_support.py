"""Constructed suites and evidence for the suites tests."""


def road_test(version=1, **protocol):
    """A Visin-style suite with two conditions and two metrics (headline miou)."""
    base = {
        "task": "segmentation",
        "split": "test",
        "params": {"lr": 0.001},
        "data": {"kind": "external", "label": "road", "manifestSha256": "a" * 64},
        "conditions": [{"name": "day", "sampleCount": 1200}, {"name": "night", "sampleCount": 800}],
        "metrics": [
            {
                "key": "miou",
                "direction": "max",
                "unit": "fraction",
                "range": {"min": 0, "max": 1},
                "headline": True,
            },
            {"key": "pixel_acc", "direction": "max"},
        ],
        "evaluator": {"package": "vbstore", "minVersion": "0.1"},
    }
    base.update(protocol)
    return {"slug": "road-test", "version": version, "name": "Road test", "protocol": base}


def evidence(day=0.8, night=0.7, **overrides):
    """Complete evidence that ranks on road_test unless overridden."""
    fields = {
        "checkpoint": {"id": "w" * 64, "label": "model-a", "weights": "pretrained"},
        "results": {
            "day": {"overall": {"miou": day, "pixel_acc": 0.9}},
            "night": {"overall": {"miou": night, "pixel_acc": 0.85}},
        },
        "sample_counts": {"day": 1200, "night": 800},
        "data": {"kind": "external", "manifestSha256": "a" * 64},
        "protocol": {"task": "segmentation", "params": {"lr": 0.001}},
        "evaluator": {"package": "vbstore", "version": "0.1.0"},
    }
    fields.update(overrides)
    return fields
