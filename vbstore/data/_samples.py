"""scikit-image's bundled photos that vbstore reads, with a caption each (a leaf: the
``skimage:samples`` caption list in ``._packaged`` and the triplets ``._make_triplets`` distorts
both read it)."""

from __future__ import annotations

# Descriptions from OpenAI's CLIP "Interacting with CLIP" notebook (MIT), which uses these images.
SKIMAGE_CAPTIONS = {
    "page": "a page of text about segmentation",
    "chelsea": "a facial photo of a tabby cat",
    "astronaut": "a portrait of an astronaut with the American flag",
    "rocket": "a rocket standing on a launchpad",
    "motorcycle_right": "a red motorcycle standing in a garage",
    "camera": "a person looking at a camera on a tripod",
    "horse": "a black-and-white silhouette of a horse",
    "coffee": "a cup of coffee on a saucer",
}
