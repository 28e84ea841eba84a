"""Synthetic scenes: small ray-cast 3D rooms with exact per-pixel targets for every dense probe.

Each image is a room (a floor and four walls) holding two to four boxes and spheres that rest on
the floor, seen by a random pinhole camera and lit by one directional light. The floor is a
checkerboard and the walls are striped, so the images have texture edges as well as object
outlines. Every target is computed from the geometry, not estimated from the image:

- ``labels``: 8-bit palette PNG of class indices: 0 floor, 1 wall, 2 box, 3 sphere
  (:data:`CLASSES`).
- ``masks``: 8-bit palette PNG, 1 on a box or sphere (foreground), 0 on floor and walls.
- ``depth``: 16-bit grey PNG, z-depth along the optical axis in millimetres (``target_scale``
  1000).
- ``normals``: RGB PNG, the unit normal in camera axes (x right, y up, z towards the camera)
  stored as round((n + 1) * 127.5).
- ``edges``: 8-bit grey PNG, the Sobel gradient magnitude of the image's luma, 255 = 4 (a full
  black-to-white step).
- ``occlusion_edges``: 8-bit grey PNG, the depth jump in cm (clipped at 255) to a 4-neighbour on
  another surface, where it exceeds 5 cm and 2 % of the depth; 0 elsewhere.
- ``keypoints``: 8-bit grey PNG, 255 * exp(-d^2 / (2 * 1.5^2)) around each visible box corner
  and room corner, d in pixels.
- ``instances``: 8-bit grey PNG of instance ids: k + 1 on the visible pixels of the scene's k-th
  object, 0 on floor and walls.
- ``boxes``: per-image JSON (vbstore's box format, docs/data.md): for each object with a visible
  pixel, the tight box ``[x0, y0, x1, y1]`` of its visible pixels (x1, y1 exclusive), its class
  (``box`` or ``sphere``, :data:`BOX_CLASSES`, also written to ``<root>/classes.txt``) and
  instance id; ``instances`` names the instance PNG with its BLAKE3.

Every scene is also seen from a second camera, for pair probes (``relative_pose``): the
camera turned about the first one's target by up to 25 degrees, raised or lowered by up to
0.3 m. Each split holds ``views/<NNNN>.png`` (the second view of ``images/<NNNN>.png``),
``flow/<NNNN>.npy`` ((H, W, 2) float32: where each pixel centre of the first view lands in the
second, in continuous pixel coordinates, NaN where out of frame or hidden: the exact pixel
correspondences) and ``pairs.csv`` (the pairs layout: ``image_a``, ``image_b``, the relative
rotation as a quaternion ``qw, qx, qy, qz`` and translation ``tx, ty, tz`` in metres, taking
camera-A coordinates to camera-B ones, camera axes as for ``normals``). The second view draws
from its own generator, so the first view and its targets are byte for byte what they were
before pairs existed.

The layout is vbstore's dense layout, ``<root>/<split>/{images,<target>}/<NNNN>.png`` paired by
stem, so ``--data scenes --split val --target depth`` reads it like any dense dataset. Every
image has its own generator seeded by (seed, split, index): the same seed writes the same bytes
everywhere, and a larger ``per_split`` only adds images.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np

from .. import canonical
from ..canonical import digest
from ..errors import UsageError
from ._kinds import TARGETS_FILE
from ._png import png_bytes, write_png

CLASSES = ("floor", "wall", "box", "sphere")
TARGETS = ("labels", "masks", "depth", "normals", "edges", "occlusion_edges", "keypoints",
           "instances")
BOX_CLASSES = ("box", "sphere")
# the data options scenes' targets need, stated in root/targets.json (docs/data.md)
TARGET_OPTIONS = {"depth": {"target_scale": 1000.0}}
SPLITS = ("train", "val")
PALETTE = np.array([[128, 96, 64], [96, 128, 192], [220, 60, 60], [60, 200, 90]], np.uint8)
MASK_PALETTE = np.array([[0, 0, 0], [255, 255, 255]], np.uint8)
ROOM = 3.0  # half-width of the room in metres: every depth stays below 10 m
FOV = math.radians(60)
KEYPOINT_SIGMA = 1.5
PAIR_YAW = 25.0  # degrees the second view turns about the first view's target, at most
PAIR_VIEWS, PAIR_FLOW, PAIRS_FILE = "views", "flow", "pairs.csv"
_FAR = 1e9


def _camera(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Camera centre and the point it looks at."""
    eye = np.array([rng.uniform(-1.0, 1.0), rng.uniform(1.0, 2.0), rng.uniform(1.6, 2.6)])
    target = np.array([rng.uniform(-0.8, 0.8), rng.uniform(0.2, 0.5), rng.uniform(-1.2, 0.0)])
    return eye, target


def look_at(eye: np.ndarray, target: np.ndarray) -> np.ndarray:
    """The (3, 3) world-to-camera rotation (rows: right, up, backward) of a level camera."""
    forward = (target - eye) / np.linalg.norm(target - eye)
    right = np.cross(forward, [0.0, 1.0, 0.0])
    right /= np.linalg.norm(right)
    up = np.cross(right, forward)
    return np.stack([right, up, -forward])


def _objects(rng: np.random.Generator) -> list[dict]:
    objects = []
    for _ in range(int(rng.integers(2, 5))):
        kind = "box" if rng.random() < 0.5 else "sphere"
        centre = np.array([rng.uniform(-1.8, 1.8), 0.0, rng.uniform(-2.2, 0.6)])
        colour = rng.uniform(0.15, 1.0, 3)
        if kind == "sphere":
            radius = rng.uniform(0.25, 0.6)
            centre[1] = radius
            objects.append({"kind": kind, "centre": centre, "radius": radius, "colour": colour})
        else:
            half = rng.uniform(0.2, 0.55, 3)
            centre[1] = half[1]
            objects.append({"kind": kind, "centre": centre, "half": half,
                            "angle": rng.uniform(0, math.pi / 2), "colour": colour})
    return objects


def _rot_y(angle: float) -> np.ndarray:
    c, s = math.cos(angle), math.sin(angle)
    return np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])


def _hit_sphere(o, d, obj):
    oc = o - obj["centre"]
    b = d @ oc
    disc = b * b - (oc @ oc - obj["radius"] ** 2)
    t = -b - np.sqrt(np.maximum(disc, 0.0))
    t = np.where((disc > 0) & (t > 1e-6), t, _FAR)
    normal = (o + t[:, None] * d - obj["centre"]) / obj["radius"]
    return t, normal


def _hit_box(o, d, obj):
    """Slab test in the box's frame (rotated about y by its angle)."""
    rot = _rot_y(obj["angle"])
    lo = (o - obj["centre"]) @ rot  # world -> box frame is rot.T applied to column vectors
    ld = d @ rot
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = 1.0 / np.where(ld == 0, 1e-12, ld)
    t1, t2 = (-obj["half"] - lo) * inv, (obj["half"] - lo) * inv
    near, far = np.minimum(t1, t2), np.maximum(t1, t2)
    t_in, axis = near.max(axis=1), near.argmax(axis=1)
    t_out = far.min(axis=1)
    ok = (t_in <= t_out) & (t_in > 1e-6)
    t = np.where(ok, t_in, _FAR)
    local = np.zeros_like(d)
    rows = np.arange(len(d))
    local[rows, axis] = -np.sign(ld[rows, axis])
    return t, local @ rot.T


def _room(o, d):
    """Nearest hit on the floor (y = 0) or one of the four walls (x, z = +-ROOM)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        t_floor = np.where(d[:, 1] < 0, -o[1] / d[:, 1], _FAR)
        tx = np.where(d[:, 0] != 0, (np.sign(d[:, 0]) * ROOM - o[0]) / d[:, 0], _FAR)
        tz = np.where(d[:, 2] != 0, (np.sign(d[:, 2]) * ROOM - o[2]) / d[:, 2], _FAR)
    normal = np.zeros_like(d)
    wall_x = tx < tz
    t_wall = np.where(wall_x, tx, tz)
    normal[wall_x, 0] = -np.sign(d[wall_x, 0])
    normal[~wall_x, 2] = -np.sign(d[~wall_x, 2])
    floor = t_floor < t_wall
    normal[floor] = [0.0, 1.0, 0.0]
    return np.where(floor, t_floor, t_wall), normal, np.where(floor, 0, 1)


def _sobel_magnitude(grey: np.ndarray) -> np.ndarray:
    """|Sobel gradient| with edge-replicated borders (the images have no outside)."""
    p = np.pad(grey, 1, mode="edge")
    gx = (p[:-2, 2:] + 2 * p[1:-1, 2:] + p[2:, 2:]) - (p[:-2, :-2] + 2 * p[1:-1, :-2] + p[2:, :-2])
    gy = (p[2:, :-2] + 2 * p[2:, 1:-1] + p[2:, 2:]) - (p[:-2, :-2] + 2 * p[:-2, 1:-1] + p[:-2, 2:])
    return np.hypot(gx, gy)


def luminance(rgb: np.ndarray) -> np.ndarray:
    """ITU-R BT.601 luma of an (H, W, 3) array, in its units."""
    return rgb[..., 0] * 0.299 + rgb[..., 1] * 0.587 + rgb[..., 2] * 0.114


def edge_map(image: np.ndarray) -> np.ndarray:
    """The ``edges`` target of an (H, W, 3) uint8 image (see the module table)."""
    mag = _sobel_magnitude(luminance(image.astype(np.float64) / 255.0))
    return np.clip(np.rint(mag / 4.0 * 255.0), 0, 255).astype(np.uint8)


def occlusion_map(depth: np.ndarray, surface: np.ndarray) -> np.ndarray:
    """The ``occlusion_edges`` target from z-depth (metres) and a per-pixel surface id."""
    out = np.zeros(depth.shape)
    for axis in (0, 1):
        for shift in (1, -1):
            nd = np.roll(depth, shift, axis=axis)
            ns = np.roll(surface, shift, axis=axis)
            jump = np.abs(depth - nd)
            edge = (ns != surface) & (jump > np.maximum(0.05, 0.02 * depth))
            # np.roll wraps around: the first row/column (or last) has no such neighbour
            wrap = [slice(None), slice(None)]
            wrap[axis] = slice(0, 1) if shift == 1 else slice(-1, None)
            edge[tuple(wrap)] = False
            out = np.where(edge, np.maximum(out, jump), out)
    return np.clip(np.rint(out * 100.0), 0, 255).astype(np.uint8)


def draw_scene(rng: np.random.Generator) -> dict:
    """A room's content and its first camera (``eye``, ``target``), drawn from ``rng``."""
    eye, target = _camera(rng)
    objects = _objects(rng)
    light = np.array([rng.uniform(-0.6, 0.6), 1.0, rng.uniform(0.2, 0.8)])
    light /= np.linalg.norm(light)
    checker = rng.uniform(0.2, 0.95, (2, 3))
    stripes = rng.uniform(0.2, 0.95, (2, 3))
    return {"eye": eye, "target": target, "objects": objects, "light": light,
            "checker": checker, "stripes": stripes}


def render_scene(size: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """One scene: the image and every target as arrays (what :func:`make_scenes` writes)."""
    scene = draw_scene(rng)
    return render_view(size, scene, scene["eye"], look_at(scene["eye"], scene["target"]))


def render_view(size: int, scene: dict, eye: np.ndarray,
                world_to_cam: np.ndarray) -> dict[str, np.ndarray]:
    """The image and every target of ``scene`` seen from ``eye`` with ``world_to_cam``."""
    objects, light = scene["objects"], scene["light"]
    checker, stripes = scene["checker"], scene["stripes"]

    focal = (size / 2) / math.tan(FOV / 2)
    pix = (np.arange(size) + 0.5 - size / 2) / focal
    px, py = np.meshgrid(pix, -pix)  # image rows go down, camera y goes up
    cam_dirs = np.stack([px, py, -np.ones_like(px)], axis=-1).reshape(-1, 3)
    dirs = cam_dirs @ world_to_cam  # camera -> world: the rotation's transpose
    dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)

    t, normal, label = _room(eye, dirs)
    surface = label.copy()  # floor 0, wall 1, object k at 2 + k
    albedo = np.zeros_like(dirs)
    for k, obj in enumerate(objects):
        tk, nk = (_hit_sphere if obj["kind"] == "sphere" else _hit_box)(eye, dirs, obj)
        closer = tk < t
        t = np.where(closer, tk, t)
        normal[closer] = nk[closer]
        label[closer] = CLASSES.index(obj["kind"])
        surface[closer] = 2 + k
        albedo[closer] = obj["colour"]
    points = eye + t[:, None] * dirs
    floor, wall = label == 0, label == 1
    cell = (np.floor(points[:, 0] / 0.5) + np.floor(points[:, 2] / 0.5)).astype(int) % 2
    albedo[floor] = checker[cell[floor]]
    along = np.where(np.abs(normal[:, 0]) > 0.5, points[:, 2], points[:, 0])
    band = np.floor(along / 0.4).astype(int) % 2
    albedo[wall] = stripes[band[wall]]
    shade = 0.35 + 0.65 * np.clip(normal @ light, 0.0, None)
    image = np.clip(np.rint(albedo * shade[:, None] * 255), 0, 255).astype(np.uint8)

    shape = (size, size)
    z_depth = (t * -(cam_dirs[:, 2] / np.linalg.norm(cam_dirs, axis=1))).reshape(shape)
    cam_normal = normal @ world_to_cam.T
    image = image.reshape(size, size, 3)
    return {
        "images": image,
        "labels": label.reshape(shape).astype(np.uint8),
        "masks": (label >= 2).reshape(shape).astype(np.uint8),
        "depth": np.clip(np.rint(z_depth * 1000.0), 1, 65535).astype(np.uint16),
        "normals": np.clip(np.rint((cam_normal + 1) * 127.5), 0, 255).astype(np.uint8).reshape(
            size, size, 3),
        "edges": edge_map(image),
        "occlusion_edges": occlusion_map(z_depth, surface.reshape(shape)),
        "keypoints": _keypoints(objects, eye, world_to_cam, focal, z_depth),
        "z_depth": z_depth,  # metres, float: what the exact pair correspondences are made of
        "instances": np.where(surface >= 2, surface - 1, 0).reshape(shape).astype(np.uint8),
    }


def scene_boxes(instances: np.ndarray, labels: np.ndarray) -> list[dict]:
    """The ``objects`` of a scene's box file: the tight box of each instance's visible pixels."""
    objects = []
    for instance in sorted(int(v) for v in np.unique(instances) if v):
        rows, cols = np.nonzero(instances == instance)
        kind = CLASSES[int(labels[rows[0], cols[0]])]
        objects.append({"box": [int(cols.min()), int(rows.min()), int(cols.max()) + 1,
                                int(rows.max()) + 1], "class": kind, "instance": instance})
    return objects


def _corners(objects: list[dict]) -> np.ndarray:
    points = [np.array([x, 0.0, z]) for x in (-ROOM, ROOM) for z in (-ROOM, ROOM)]
    for obj in objects:
        if obj["kind"] == "box":
            signs = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)])
            points += list((signs * obj["half"]) @ _rot_y(obj["angle"]).T + obj["centre"])
    return np.array(points)


def _keypoints(objects, eye, world_to_cam, focal, z_depth) -> np.ndarray:
    """Gaussian blobs at the corners a pinhole camera sees (in front, in view, not occluded)."""
    size = len(z_depth)
    cam = (_corners(objects) - eye) @ world_to_cam.T
    depth = -cam[:, 2]
    out = np.zeros((size, size))
    grid = np.arange(size) + 0.5
    for (x, y, _), z in zip(cam, depth, strict=True):
        if z <= 1e-3:
            continue
        u, v = size / 2 + focal * x / z, size / 2 - focal * y / z
        col, row = math.floor(u), math.floor(v)
        if not (0 <= col < size and 0 <= row < size):
            continue
        if z > z_depth[row, col] * 1.03 + 0.02:  # something nearer covers the corner
            continue
        blob = np.exp(-((grid[None, :] - u) ** 2 + (grid[:, None] - v) ** 2)
                      / (2 * KEYPOINT_SIGMA**2))
        out = np.maximum(out, blob)
    return np.clip(np.rint(out * 255), 0, 255).astype(np.uint8)


def second_camera(scene: dict, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Another level camera on ``scene``: turned about the first one's target by up to 25
    degrees, raised or lowered by up to 0.3 m, looking at a point near the same target."""
    yaw = rng.uniform(-PAIR_YAW, PAIR_YAW)
    rise = rng.uniform(-0.3, 0.3)
    jitter = rng.uniform(-0.25, 0.25, 3)
    eye = scene["target"] + _rot_y(math.radians(yaw)) @ (scene["eye"] - scene["target"])
    eye = np.clip(eye + np.array([0.0, rise, 0.0]), [-2.6, 0.6, -2.6], [2.6, 2.4, 2.6])
    return eye, look_at(eye, scene["target"] + jitter)


def relative_pose(eye_a: np.ndarray, rot_a: np.ndarray, eye_b: np.ndarray,
                  rot_b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(R, t)`` taking camera-A coordinates to camera-B ones: ``X_b = R X_a + t``."""
    return rot_b @ rot_a.T, rot_b @ (eye_a - eye_b)


def quaternion(rotation: np.ndarray) -> np.ndarray:
    """The unit quaternion ``(w, x, y, z)`` of a rotation matrix, ``w >= 0``."""
    m = rotation
    trace = np.trace(m)
    candidates = [trace, m[0, 0], m[1, 1], m[2, 2]]
    k = int(np.argmax(candidates))
    if k == 0:
        w = math.sqrt(max(1.0 + trace, 0.0)) / 2
        q = [w, (m[2, 1] - m[1, 2]) / (4 * w), (m[0, 2] - m[2, 0]) / (4 * w),
             (m[1, 0] - m[0, 1]) / (4 * w)]
    else:
        i, j, n = k - 1, k % 3, (k + 1) % 3  # the largest diagonal axis, then the other two
        v = math.sqrt(max(1.0 + m[i, i] - m[j, j] - m[n, n], 0.0)) / 2
        q = [0.0, 0.0, 0.0, 0.0]
        q[0] = (m[n, j] - m[j, n]) / (4 * v)
        q[1 + i] = v
        q[1 + j] = (m[j, i] + m[i, j]) / (4 * v)
        q[1 + n] = (m[n, i] + m[i, n]) / (4 * v)
    out = np.array(q) / np.linalg.norm(q)
    return out if out[0] >= 0 else -out


def pair_flow(z_a: np.ndarray, z_b: np.ndarray, rotation: np.ndarray,
              translation: np.ndarray) -> np.ndarray:
    """(H, W, 2): where each pixel centre of view A lands in view B, in B's continuous pixel
    coordinates (x, y); NaN where the surface it shows is out of B's frame or hidden in B."""
    size = len(z_a)
    focal = (size / 2) / math.tan(FOV / 2)
    pix = (np.arange(size) + 0.5 - size / 2) / focal
    px, py = np.meshgrid(pix, -pix)
    points = np.stack([px * z_a, py * z_a, -z_a], axis=-1) @ rotation.T + translation
    depth = -points[..., 2]
    with np.errstate(divide="ignore", invalid="ignore"):
        u = size / 2 + focal * points[..., 0] / depth
        v = size / 2 - focal * points[..., 1] / depth
    inside = (depth > 1e-3) & (u >= 0) & (u < size) & (v >= 0) & (v < size)
    col = np.clip(np.nan_to_num(u), 0, size - 1).astype(int)
    row = np.clip(np.nan_to_num(v), 0, size - 1).astype(int)
    seen = np.abs(z_b[row, col] - depth) <= 0.02 * depth + 0.02  # not behind something in B
    flow = np.stack([u, v], axis=-1)
    return np.where((inside & seen)[..., None], flow, np.nan).astype(np.float32)


def _write_pairs(root: Path, split: str, rows: list[str]) -> None:
    header = "id,image_a,image_b,qw,qx,qy,qz,tx,ty,tz\n"
    (root / split / PAIRS_FILE).write_text(header + "".join(rows), encoding="utf-8")


def make_scenes(root: str | Path, per_split: int = 32, seed: int = 0, size: int = 64) -> Path:
    """Write ``root/{train,val}/{images,<target>}/<NNNN>.png`` for every target in :data:`TARGETS`,
    ``root/{train,val}/boxes/<NNNN>.json``, ``root/classes.txt`` (:data:`BOX_CLASSES`),
    and a second view of every scene for pair probes (see the module docstring).

    Args:
        root: The folder to write (created; existing files with the same names are replaced).
        per_split: Images in each split.
        seed: Selects the dataset.
        size: Image side in pixels (at least 16).

    Returns:
        ``root`` as a :class:`~pathlib.Path`.

    Raises:
        UsageError: an out-of-range argument.
    """
    for name, value, low in (("per_split", per_split, 1), ("seed", seed, 0), ("size", size, 16)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise UsageError(f"scenes {name} must be an integer >= {low}, got {value!r}")
    root = Path(root)
    for split_index, split in enumerate(SPLITS):
        rows = []
        for i in range(per_split):
            scene = draw_scene(np.random.default_rng([seed, split_index, i]))
            rot_a = look_at(scene["eye"], scene["target"])
            view_a = render_view(size, scene, scene["eye"], rot_a)
            for folder in ("images", *TARGETS):
                palette = {"labels": PALETTE, "masks": MASK_PALETTE}.get(folder)
                write_png(root / split / folder / f"{i:04d}.png", view_a[folder], palette)
            mask = png_bytes(view_a["instances"])
            boxes = {"width": size, "height": size,
                     "objects": scene_boxes(view_a["instances"], view_a["labels"]),
                     "instances": {"file": f"../instances/{i:04d}.png", "blake3": digest(mask)}}
            (root / split / "boxes").mkdir(parents=True, exist_ok=True)
            (root / split / "boxes" / f"{i:04d}.json").write_bytes(canonical.dumps(boxes))
            # the second view draws from its own generator: the first view's bytes never change
            eye_b, rot_b = second_camera(scene, np.random.default_rng([seed, split_index, i, 1]))
            view_b = render_view(size, scene, eye_b, rot_b)
            write_png(root / split / PAIR_VIEWS / f"{i:04d}.png", view_b["images"])
            rotation, translation = relative_pose(scene["eye"], rot_a, eye_b, rot_b)
            flow = pair_flow(view_a["z_depth"], view_b["z_depth"], rotation, translation)
            (root / split / PAIR_FLOW).mkdir(parents=True, exist_ok=True)
            np.save(root / split / PAIR_FLOW / f"{i:04d}.npy", flow)
            pose = [*quaternion(rotation), *translation]
            rows.append(f"{i:04d},images/{i:04d}.png,{PAIR_VIEWS}/{i:04d}.png,"
                        + ",".join(repr(float(v)) for v in pose) + "\n")
        _write_pairs(root, split, rows)
    (root / "classes.txt").write_text("".join(f"{c}\n" for c in BOX_CLASSES), encoding="utf-8")
    state_target_options(root)
    return root


def state_target_options(root: Path) -> None:
    """Write ``root/targets.json``, the data options of scenes' targets (depth PNGs are in
    millimetres), unless it is there: a scenes folder states its own units, so depth on it
    needs no ``-p target_scale``."""
    path = root / TARGETS_FILE
    if not path.exists():
        tmp = path.with_name(f".{TARGETS_FILE}.{os.getpid()}")
        tmp.write_bytes(canonical.dumps(TARGET_OPTIONS))
        os.replace(tmp, path)
