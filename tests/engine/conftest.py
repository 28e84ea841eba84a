import pytest


@pytest.fixture(scope="session")
def shapes(tmp_path_factory):
    """A small generated shapes dataset: train and val splits of five classes."""
    from vbstore.data import make_shapes

    folder = tmp_path_factory.mktemp("data") / "shapes"
    return str(make_shapes(folder, per_class=6, seed=3, size=32))


@pytest.fixture
def forwards(monkeypatch):
    """Counts forward passes through any backbone."""
    from vbstore.backbones._base import Backbone

    calls = []
    real = Backbone.extract

    def counting(self, images, *args, **kwargs):
        calls.append(len(images))
        return real(self, images, *args, **kwargs)

    monkeypatch.setattr(Backbone, "extract", counting)
    return calls
