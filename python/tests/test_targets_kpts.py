"""Keypoints in a job's targets, against torchvision.

1. The keypoint maths alone: torchvision.transforms.v2.functional's
   geometry (flips, crop, center_crop, pad, resize, resized_crop, rotate,
   affine) on tv_tensors.KeyPoints (float32) over a grid of explicit
   parameters and 1 to 34 points (torch.matmul's three summation orders:
   one point, fewer than 16, more) make pipeline/transform/testdata/targets_kpts.json,
   which the Go test TestKeypointsGolden holds the server's arithmetic to,
   bit for bit. Here the file is checked to be what torchvision computes
   now (STOKER_UPDATE_GOLDEN=1 rewrites it).
2. End to end: a real `stoker serve` over mkdata --coco's set (stars carry
   their five tips as keypoints, visibility 2; every other instance (0, 0)
   with visibility 0, as COCO writes an unlabelled point) and a YOLO pose
   layout written here from it (kpt_shape [5, 3], visibilities 0, 1 and
   2); each sample's trace replayed on its source KeyPoints through
   torchvision.transforms.v2.functional; SanitizeBoundingBoxes drops the
   same instances' keypoints as their boxes.

Exactness: the same float32 bits where torch here sums its matmul as the
server does (the `torch_is_stokers` fixture checks that on the grid);
elsewhere within torchvision's own test tolerance (torch.testing.
assert_close's float32 defaults, rtol 1.3e-6, atol 1e-5). Every op but
rotate and affine is exact everywhere (one float32 operation a coordinate).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, Dict, List, Tuple

import numpy as np
import pytest
import torch
import torchvision
from PIL import Image
from torchvision import tv_tensors
from torchvision.transforms.v2 import functional as F

import stoker
from stoker import transforms as T
from stoker._local import LocalServer
from test_targets import GEOMETRY, N, PIXELS, coco_sources, det, replay, server, yolo_labels  # noqa: F401 (the fixtures)

GOLDEN = Path(__file__).resolve().parents[2] / "pipeline" / "transform" / "testdata" / "targets_kpts.json"
P = 5  # mkdata's stars: five tips


def golden_cases() -> List[Dict[str, Any]]:
    """The grid: each case a canvas, its points and one functional op (as a
    trace step: [name, arguments])."""
    rng = np.random.default_rng(4646)
    fns = ["rotate", "affine", "horizontal_flip", "vertical_flip", "crop", "center_crop", "pad", "resize",
           "resized_crop", "rotate", "affine"]
    counts = [1, 2, 5, 15, 16, 17, 34]
    cases = []
    for i in range(88):
        w, h = int(rng.integers(8, 700)), int(rng.integers(8, 700))
        n = counts[i % len(counts)]
        pts = np.stack([rng.uniform(-0.2 * w, 1.2 * w, n), rng.uniform(-0.2 * h, 1.2 * h, n)], 1).astype(np.float32)
        if i % 5 == 2:
            pts[0] = 0  # an unlabelled point
        fn = fns[i % len(fns)]
        args: Dict[str, Any]
        if fn == "rotate":
            angle = [0.0, 90.0, -90.0, 180.0, 45.0, 1e-3][i % 6] if i % 3 == 0 else float(rng.uniform(-180, 180))
            args = {"angle": angle}
            if i % 4 == 0:
                args["center"] = [float(rng.uniform(-20, w + 20)), float(np.round(rng.uniform(0, h)))]
        elif fn == "affine":
            args = {"angle": float(rng.uniform(-180, 180)),
                    "translate": [float(np.round(rng.uniform(-0.3, 0.3) * w)), float(np.round(rng.uniform(-0.3, 0.3) * h))],
                    "scale": float(rng.uniform(0.3, 2.0)),
                    "shear": [float(rng.uniform(-40, 40)) if i % 3 else 0.0, float(rng.uniform(-40, 40)) if i % 5 else 0.0]}
            if i % 4 == 1:
                args["center"] = [float(rng.uniform(0, w)), float(rng.uniform(0, h))]
        elif fn in ("crop", "resized_crop"):
            ch, cw = int(rng.integers(1, h + 1)), int(rng.integers(1, w + 1))
            args = {"top": int(rng.integers(-10, h - ch + 1)), "left": int(rng.integers(-10, w - cw + 1)),
                    "height": ch, "width": cw}
            if fn == "resized_crop":
                args["size"] = [int(rng.integers(8, 300)), int(rng.integers(8, 300))] if i % 2 else [ch, cw]
        elif fn == "center_crop":
            args = {"output_size": [int(rng.integers(1, 2 * h)), int(rng.integers(1, 2 * w))]}
        elif fn == "pad":
            args = {"padding": [int(v) for v in rng.integers(0, 40, 4)]}
        elif fn == "resize":
            args = {"size": [int(rng.integers(8, 900)), int(rng.integers(8, 900))] if i % 4 else [h, w]}
        else:
            args = {}
        cases.append({"w": w, "h": h, "step": [fn, args], "points": pts.tolist()})
    return cases


def torchvision_points(c: Dict[str, Any]) -> Tuple[torch.Tensor, Tuple[int, int]]:
    kp = tv_tensors.KeyPoints(torch.tensor(c["points"], dtype=torch.float32), canvas_size=(c["h"], c["w"]))
    name, args = c["step"]
    out = getattr(F, name)(kp, **args)
    assert isinstance(out, tv_tensors.KeyPoints) and out.dtype == torch.float32
    return out.as_subclass(torch.Tensor), tuple(out.canvas_size)


@pytest.fixture(scope="module")
def torch_is_stokers() -> bool:
    """Whether torchvision here computes the golden file's bits (which the
    server's arithmetic is held to)."""
    doc = json.loads(GOLDEN.read_text())
    return all(torch.equal(torchvision_points(c)[0], torch.tensor(c["want"], dtype=torch.float32)) for c in doc["cases"])


def test_golden_file_is_torchvisions() -> None:
    cases = golden_cases()
    for c in cases:
        got, canvas = torchvision_points(c)
        c["want"], c["canvas"] = got.tolist(), list(canvas)
    if os.environ.get("STOKER_UPDATE_GOLDEN") == "1":
        doc = {"torch": torch.__version__, "torchvision": torchvision.__version__,
               "what": "python/tests/test_targets_kpts.py: torchvision.transforms.v2.functional's geometry on float32 "
                       "KeyPoints; pipeline/transform/targets_kpts_test.go checks the server's",
               "cases": cases}
        GOLDEN.write_text(json.dumps(doc, indent=None, separators=(",", ":")) + "\n")
    doc = json.loads(GOLDEN.read_text())
    strip = lambda cs: [{k: v for k, v in c.items() if k not in ("want", "canvas")} for c in cs]  # noqa: E731
    assert strip(doc["cases"]) == strip(cases), "the grid changed: STOKER_UPDATE_GOLDEN=1"
    exact = 0
    for i, (c, d) in enumerate(zip(cases, doc["cases"])):
        got, want = torch.tensor(c["want"], dtype=torch.float32), torch.tensor(d["want"], dtype=torch.float32)
        assert c["canvas"] == d["canvas"], i
        torch.testing.assert_close(got, want, msg=lambda m: f"case {i} {c['step']}: {m}")
        exact += torch.equal(got, want)
    print(f"\n{exact} of {len(cases)} cases the file's bits (torch {torch.__version__})")
    # Every op, and each of torch.matmul's summation orders for rotate and
    # affine, are in the grid.
    assert {c["step"][0] for c in cases} == {"rotate", "affine", "horizontal_flip", "vertical_flip", "crop",
                                              "center_crop", "pad", "resize", "resized_crop"}
    turned = {len(c["points"]) for c in cases if c["step"][0] in ("rotate", "affine")}
    assert {1, 2, 15, 16, 34} <= turned, turned


def replay_points(points: tv_tensors.KeyPoints, trace: List[Any], keep_boxes: torch.Tensor) -> tv_tensors.KeyPoints:
    """torchvision's functional ops of a sample's trace on its keypoints;
    at each sanitize_bounding_boxes, the instances its boxes lost dropped
    (keep_boxes: test_targets.replay's, per sanitize step in order)."""
    drops = iter(keep_boxes)
    for name, args in trace:
        if name in PIXELS or name == "convert_bounding_box_format":
            continue
        assert name in GEOMETRY, f"an op the targets do not support in the trace: {name}"
        kw = dict(args)
        if name == "sanitize_bounding_boxes":
            points = tv_tensors.wrap(points[next(drops)], like=points)
            continue
        if name == "iou_crop":  # RandomIoUCrop.transform crops a KeyPoints; it marks boxes only
            name = "crop"
        for k in ("interpolation", "antialias", "fill"):
            kw.pop(k, None)
        points = getattr(F, name)(points, **kw)
    return points


def boxes_valid_per_sanitize(boxes: tv_tensors.BoundingBoxes, trace: List[Any]) -> List[torch.Tensor]:
    """Each sanitize_bounding_boxes step's valid mask over the instances
    left before it, from the boxes' replay (test_targets.replay's ops)."""
    masks = []
    for j, (name, args) in enumerate(trace):
        if name == "sanitize_bounding_boxes":
            before, _ = replay(boxes, trace[:j])
            _, valid = F.sanitize_bounding_boxes(before, **dict(args))
            masks.append(valid)
    return masks


def check_points(got: Dict[str, Any], src_points: tv_tensors.KeyPoints, src_vis: torch.Tensor, src_boxes: Any,
                 trace: List[Any], image: torch.Tensor, exact: bool, where: str) -> bool:
    """One sample's keypoints against torchvision's replay of its trace:
    the bits when exact, else within assert_close's float32 defaults; the
    canvas the image's, the visibilities those of the instances kept.
    Returns whether they were the same bits."""
    _, keep = replay(src_boxes, trace)
    moved = replay_points(src_points, trace, boxes_valid_per_sanitize(src_boxes, trace))
    kp = got["keypoints"]
    assert isinstance(kp, tv_tensors.KeyPoints), where
    assert tuple(kp.canvas_size) == tuple(moved.canvas_size) == tuple(image.shape[-2:]), where
    g, m = kp.as_subclass(torch.Tensor), moved.as_subclass(torch.Tensor)
    assert g.dtype == m.dtype == torch.float32 and g.shape == m.shape == (len(got["labels"]), P, 2), (where, g.shape)
    same = torch.equal(g, m)
    if exact:
        assert same, f"{where}: {trace}\n{g}\n{m}\n{g - m}"
    else:
        torch.testing.assert_close(g, m, msg=lambda s: f"{where}: {trace}: {s}")
    vis = got["keypoints_visibility"]
    assert vis.dtype == torch.uint8 and torch.equal(vis, src_vis[keep]), where
    return same


def coco_points(det: Path) -> Dict[int, Tuple[tv_tensors.KeyPoints, torch.Tensor]]:
    """Per sample index (images sorted by id), the file's keypoints as a
    COCO loader makes them (torch.as_tensor(keypoints, float32), [K, P,
    3]), P = 5 for every instance: an instance without keypoints is zeros,
    visibility 0."""
    doc = json.loads((det / "annotations" / "instances.json").read_text())
    images = sorted(doc["images"], key=lambda im: im["id"])
    anns: Dict[int, List[Any]] = {}
    for a in doc["annotations"]:
        anns.setdefault(a["image_id"], []).append(a)
    out = {}
    for i, im in enumerate(images):
        kps = [a.get("keypoints") or [0.0] * (3 * P) for a in anns.get(im["id"], [])]
        t = torch.as_tensor(kps, dtype=torch.float32).reshape(-1, P, 3)
        out[i] = (tv_tensors.KeyPoints(t[..., :2], canvas_size=(im["height"], im["width"])), t[..., 2].to(torch.uint8))
    return out


# Transforms through every geometry the targets support, with the points
# moved: flips, RandomResizedCrop, rotation and affine (one point, few and
# many: a sample's points are 5 a star), zoom-out + IoU crop + Resize with
# sanitize (the DETR geometry), Resize + CenterCrop, a CenterCrop past the
# image + Pad, Pad + RandomCrop.
TRANSFORMS = {
    "rrc-flips": [T.RandomResizedCrop(64, scale=(0.2, 1.0)), T.RandomHorizontalFlip(), T.ColorJitter(0.3, 0.3),
                  T.RandomVerticalFlip()],
    "resize-rotate-affine": [T.Resize((96, 128)), T.RandomRotation(30),
                             T.RandomAffine(20, translate=(0.1, 0.2), scale=(0.7, 1.3), shear=(-10, 10, -5, 5),
                                            center=(30, 40)),
                             T.SanitizeBoundingBoxes(min_size=1)],
    "detr": [T.RandomPhotometricDistort(), T.RandomZoomOut(p=0.6), T.RandomIoUCrop(), T.SanitizeBoundingBoxes(min_size=1),
             T.RandomHorizontalFlip(), T.Resize((80, 80)), T.SanitizeBoundingBoxes(), T.ConvertBoundingBoxFormat("CXCYWH")],
    "resize-center": [T.Resize(72), T.CenterCrop((56, 80)), T.RandomGrayscale(0.5)],
    "center-past-pad": [T.CenterCrop((431, 401)), T.Pad(4), T.RandomErasing(p=0.5)],
    "pad-randomcrop": [T.Pad((3, 5, 7, 2)), T.RandomCrop((300, 350), padding=(10, 20), pad_if_needed=True),
                       T.RandomVerticalFlip()],
    "rrc-sanitize-rotate": [T.RandomResizedCrop(48, scale=(0.02, 0.3)), T.SanitizeBoundingBoxes(min_size=2, min_area=6),
                            T.RandomApply([T.RandomRotation((-180, 180), center=(10.5, 20))], p=0.7),
                            T.RandomHorizontalFlip()],
}
OPS_OF = {
    "rrc-flips": {"resized_crop", "horizontal_flip", "vertical_flip"},
    "resize-rotate-affine": {"resize", "rotate", "affine", "sanitize_bounding_boxes"},
    "detr": {"pad", "iou_crop", "sanitize_bounding_boxes", "horizontal_flip", "resize"},
    "resize-center": {"resize", "center_crop", "rgb_to_grayscale"},
    "center-past-pad": {"center_crop", "pad", "erase"},
    "pad-randomcrop": {"pad", "crop", "vertical_flip"},
    "rrc-sanitize-rotate": {"resized_crop", "sanitize_bounding_boxes", "rotate", "horizontal_flip"},
}
SANITIZED = {"resize-rotate-affine", "detr", "rrc-sanitize-rotate"}


@pytest.mark.parametrize("name", sorted(TRANSFORMS))
def test_coco_keypoints_are_torchvisions(server: str, det: Path, torch_is_stokers: bool, name: str) -> None:  # noqa: F811
    boxes = coco_sources(det)
    points = coco_points(det)
    seen, same, ops, stars, dropped, outside = 0, 0, set(), 0, 0, 0
    for seed in (1, 2):
        with stoker.Loader(server, "coco", batch_size=5, transform=T.Compose(TRANSFORMS[name]), targets=True,
                           trace=True, return_indices=True, pin_memory=False, timeout=60, seed=seed) as ld:
            for b in ld:
                images, targets, indices = b
                for i, (t, idx) in enumerate(zip(targets, indices.tolist())):
                    where = f"{name} seed {seed} sample {idx}"
                    kp, vis = points[idx]
                    same += check_points(t, kp, vis, boxes[idx]["boxes"], b.trace[i], images[i], torch_is_stokers, where)
                    ops.update(op for op, _ in b.trace[i])
                    stars += int((t["keypoints_visibility"] == 2).any(dim=1).sum())
                    dropped += len(boxes[idx]["labels"]) - len(t["labels"])
                    g = t["keypoints"].as_subclass(torch.Tensor)
                    h, w = images[i].shape[-2:]
                    outside += int(((g[..., 0] < 0) | (g[..., 0] >= w) | (g[..., 1] < 0) | (g[..., 1] >= h)).sum())
                    seen += 1
            assert not list(ld.sample_errors)
    assert seen == 2 * N and stars > 0, (seen, stars)
    assert OPS_OF[name] <= ops, ops
    assert (dropped > 0) == (name in SANITIZED), dropped
    # Points are not clamped (torchvision clamps them only in
    # ClampKeyPoints): crops and turns leave some outside the canvas.
    assert outside > 0, outside
    print(f"\n{name}: {same} of {seen} samples torchvision's bits (exact required: {torch_is_stokers})")


def write_pose(det: Path, out: Path) -> Path:
    """A YOLO pose layout of mkdata's set: its images, and per image a
    label file of `class cx cy w h` and 5 (x, y, v) points per instance
    (the stars' tips; other shapes' points inside their box, v drawn from
    0, 1, 2), normalized; kpt_shape [5, 3]. Returns the images' dir."""
    doc = json.loads((det / "annotations" / "instances.json").read_text())
    images = out / "images" / "train"
    labels = out / "labels" / "train"
    images.mkdir(parents=True)
    labels.mkdir(parents=True)
    rng = np.random.default_rng(5)
    anns: Dict[int, List[Any]] = {}
    for a in doc["annotations"]:
        if not a["iscrowd"]:
            anns.setdefault(a["image_id"], []).append(a)
    for im in doc["images"]:
        shutil.copy(det / "images" / "train" / im["file_name"], images / im["file_name"])
        w, h = im["width"], im["height"]
        lines = []
        for a in anns.get(im["id"], []):
            x, y, bw, bh = a["bbox"]
            kp = a.get("keypoints")
            if kp is None:
                kp = []
                for _ in range(P):
                    v = int(rng.integers(0, 3))
                    kp += [0.0, 0.0, 0] if v == 0 else [x + rng.uniform(0, bw), y + rng.uniform(0, bh), v]
            nums = [(x + bw / 2) / w, (y + bh / 2) / h, bw / w, bh / h]
            for j in range(P):
                nums += [min(max(kp[3 * j] / w, 0.0), 1.0), min(max(kp[3 * j + 1] / h, 0.0), 1.0), kp[3 * j + 2]]
            lines.append(" ".join([str(a["category_id"] % 5)] + [f"{v:.6f}" for v in nums]))
        (labels / (Path(im["file_name"]).stem + ".txt")).write_text("\n".join(lines) + "\n")
    (out / "data.yaml").write_text("path: .\ntrain: images/train\nkpt_shape: [5, 3]\nnames: [a, b, c, d, e]\n")
    return images


@pytest.fixture(scope="module")
def pose(stoker_bin: Path, det: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    out = tmp_path_factory.mktemp("pose")
    images = write_pose(det, out)
    srv = LocalServer(str(stoker_bin), {"pose": str(images)}, workers=2,
                      args=["--grace", "1s", "--annotations", f"pose={out / 'data.yaml'}"],
                      log_path=str(out / "server.log"))
    with srv:
        yield srv.addr, out


def pose_sources(addr: str, out: Path) -> Dict[int, Dict[str, Any]]:
    """Per sample index, the label file's boxes and keypoints (the field
    "yolo", as the file gives them) in pixels as ultralytics' denormalize
    and torchvision make them: float32 times (W, H)."""
    res = {}
    for idx, labels, w, h, boxes in yolo_labels(addr, "pose", out / "images" / "train"):
        kp = torch.tensor([lb["keypoints"] for lb in labels], dtype=torch.float32).reshape(-1, P, 3)
        xy = kp[..., :2] * torch.tensor([w, h], dtype=torch.float32)
        res[idx] = {"boxes": boxes, "points": tv_tensors.KeyPoints(xy, canvas_size=(h, w)), "vis": kp[..., 2].to(torch.uint8),
                    "labels": torch.tensor([lb["class"] for lb in labels], dtype=torch.int64).reshape(-1)}
    return res


@pytest.mark.parametrize("name,transport", [("rrc-flips", "grpc"), ("rrc-flips", "shm"), ("resize-rotate-affine", "auto"),
                                            ("detr", "auto")])
def test_yolo_pose_keypoints_are_torchvisions(pose: Any, torch_is_stokers: bool, name: str, transport: str) -> None:
    """Through both transports: the targets are a field of the batch's
    header, in gRPC chunks or beside a shared-memory slot."""
    addr, out = pose
    want = pose_sources(addr, out)
    assert len(want) == N
    seen, vis_seen = 0, set()
    with stoker.Loader(addr, "pose", batch_size=6, transform=T.Compose(TRANSFORMS[name]), targets=True, trace=True,
                       return_indices=True, pin_memory=False, timeout=60, seed=3, transport=transport) as ld:
        for b in ld:
            images, targets, indices = b
            for i, (t, idx) in enumerate(zip(targets, indices.tolist())):
                w = want[idx]
                check_points(t, w["points"], w["vis"], w["boxes"], b.trace[i], images[i], torch_is_stokers,
                             f"pose {name} sample {idx}")
                _, keep = replay(w["boxes"], b.trace[i])
                assert torch.equal(t["labels"], w["labels"][keep])
                vis_seen.update(t["keypoints_visibility"].flatten().tolist())
                seen += 1
        assert not list(ld.sample_errors)
    assert seen == N and vis_seen == {0, 1, 2}, vis_seen


def test_no_keypoints_no_key(server: str) -> None:  # noqa: F811
    """A dataset without keypoints (the YOLO layout of polygons) gives no
    "keypoints": its targets are the bytes they were before keypoints."""
    with stoker.Loader(server, "yolo", batch_size=4, transform=T.Compose([T.Resize((32, 32))]), targets=True,
                       pin_memory=False, timeout=60) as ld:
        _, targets = next(iter(ld))
    assert all("keypoints" not in t and "keypoints_visibility" not in t for t in targets)


@pytest.mark.filterwarnings("ignore:stoker.*could not be made:RuntimeWarning")
@pytest.mark.parametrize("kind", ["coco", "yolo"])
def test_malformed_keypoints_fail_their_sample(stoker_bin: Path, det: Path, tmp_path: Path, kind: str) -> None:
    """Keypoints of the wrong length (COCO: 3*K numbers for a category of
    K named keypoints; YOLO: columns for kpt_shape) fail their image alone
    when targets are asked for, naming the file and the field; the others
    come with their keypoints."""
    if kind == "coco":
        doc = json.loads((det / "annotations" / "instances.json").read_text())
        broken = next(a for a in doc["annotations"] if a.get("keypoints"))
        broken["keypoints"] = broken["keypoints"][:-3]
        ann = tmp_path / "instances.json"
        ann.write_text(json.dumps(doc))
        images, spec = det / "images" / "train", str(ann)
        bad_image, want = broken["image_id"], ["instances.json", f"annotation {broken['id']}", "field keypoints"]
    else:
        images = write_pose(det, tmp_path / "pose")
        spec = str(tmp_path / "pose" / "data.yaml")
        lf = sorted((tmp_path / "pose" / "labels" / "train").glob("*.txt"))[2]
        lines = lf.read_text().splitlines()
        lines[0] = " ".join(lines[0].split()[:-1])  # one number short
        lf.write_text("\n".join(lines) + "\n")
        bad_image, want = None, [f"labels/train/{lf.name}", "line 1", "field keypoints"]
    srv = LocalServer(str(stoker_bin), {"d": str(images)}, workers=1,
                      args=["--grace", "1s", "--annotations", f"d={spec}"], log_path=str(tmp_path / "log"))
    with srv:
        with stoker.Loader(srv.addr, "d", batch_size=4, transform=T.Compose([T.Resize((32, 32))]), targets=True,
                           pin_memory=False, timeout=60, shuffle=False, fail_policy="drop") as ld:
            got = [t for _, targets in ld for t in targets]
            errors = list(ld.sample_errors)
    assert len(errors) == 1, errors
    reason = errors[0].reason
    assert "targets" in reason and all(w in reason for w in want), reason
    assert len(got) == N - 1 and all(t["keypoints"].shape[1:] == (P, 2) for t in got)
    if bad_image is not None:
        assert bad_image not in [t["image_id"] for t in got]
