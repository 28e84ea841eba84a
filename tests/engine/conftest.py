import pytest


@pytest.fixture(scope="session")
def shapes(shapes_folder):
    """A small generated shapes dataset: train and val splits of five classes, 6 images each."""
    return shapes_folder(6, 3)


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
