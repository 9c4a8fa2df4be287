"""ClampBoundingBoxes, ClampKeyPoints and SanitizeKeyPoints against
torchvision.transforms.v2.

A real `stoker serve` over mkdata --coco's set on real photos
(testdata/photos as backgrounds), its COCO boxes grown by half about their
centres so that many pass the image's edges (COCO's own boxes sometimes
do; stoker reads them as given), and the stars' five tips as keypoints.
Each sample's trace is replayed through torchvision: the geometry by its
functional ops on the source BoundingBoxes and KeyPoints, the three ops by
torchvision's transform classes on the whole target dict
(`v2.ClampBoundingBoxes()`, `v2.ClampKeyPoints()`, and
`v2.SanitizeKeyPoints` with a labels_getter returning every per-instance
field: stoker drops an instance whole), and the boxes after a
ConvertBoundingBoxFormat in each format.

Exactness: the boxes and keypoints within torch.testing.assert_close's
float32 defaults (and counted where they are the same bits); the kept
instances, their labels, crowd flags and visibilities identical.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest
import torch
from torchvision import tv_tensors
from torchvision.datasets import CocoDetection, wrap_dataset_for_transforms_v2
from torchvision.transforms import v2 as tv2
from torchvision.transforms.v2 import InterpolationMode
from torchvision.transforms.v2 import functional as F

import stoker
from helpers import wire_args
from stoker import transforms as T
from stoker._local import LocalServer
from test_targets import PIXELS

N = 24
P = 5
REPO = Path(__file__).resolve().parents[2]

#: The trace's geometric steps this file replays (functional ops on boxes
#: and keypoints alike), and the three ops on the targets alone.
MOVES = {"resized_crop", "resize", "center_crop", "pad", "crop", "horizontal_flip", "vertical_flip", "rotate", "affine",
         "perspective"}
OWN = {"clamp_bounding_boxes", "clamp_keypoints", "sanitize_keypoints", "sanitize_bounding_boxes",
       "convert_bounding_box_format"}


@pytest.fixture(scope="module")
def grown(stoker_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """mkdata --coco on real photos, its boxes grown by half about their
    centres (x - w/4, y - h/4, 1.5 w, 1.5 h), and the stars' tips spread as
    far: past the image where an object is near its edge."""
    out = tmp_path_factory.mktemp("clamp")
    r = subprocess.run([str(stoker_bin), "mkdata", "--coco", "--out", str(out), "--n", str(N), "--seed", "11",
                        "--backgrounds", str(REPO / "testdata" / "photos")], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    ann = out / "annotations" / "instances.json"
    doc = json.loads(ann.read_text())
    for a in doc["annotations"]:
        x, y, w, h = a["bbox"]
        a["bbox"] = [x - w / 4, y - h / 4, w * 1.5, h * 1.5]
        kp = a.get("keypoints") or []
        for j in range(0, len(kp), 3):  # the stars' tips spread as far from the centre
            if kp[j + 2]:
                kp[j], kp[j + 1] = x + w / 2 + (kp[j] - x - w / 2) * 1.5, y + h / 2 + (kp[j + 1] - y - h / 2) * 1.5
    ann.write_text(json.dumps(doc))
    return out


@pytest.fixture(scope="module")
def server(stoker_bin: Path, grown: Path) -> Any:
    srv = LocalServer(str(stoker_bin), {"coco": str(grown / "images" / "train")}, workers=2,
                      args=["--grace", "1s", "--annotations", f"coco={grown / 'annotations' / 'instances.json'}"],
                      log_path=str(grown / "server.log"))
    with srv:
        yield srv.addr


def sources(root: Path) -> Dict[int, Dict[str, Any]]:
    """Per sample index, what torchvision's CocoDetection wrapper gives
    (boxes XYXY float32, contiguous labels, iscrowd), with the keypoints
    as a COCO loader makes them (float32 [K, P, 2]; an instance without
    keypoints is zeros, visibility 0)."""
    ds = wrap_dataset_for_transforms_v2(
        CocoDetection(str(root / "images" / "train"), str(root / "annotations" / "instances.json")),
        target_keys=("boxes", "labels", "iscrowd", "image_id"))
    doc = json.loads((root / "annotations" / "instances.json").read_text())
    anns: Dict[int, List[Any]] = {}
    for a in doc["annotations"]:
        anns.setdefault(a["image_id"], []).append(a)
    out = {}
    for i in range(len(ds)):
        img, t = ds[i]
        h, w = F.get_size(img)
        if "boxes" not in t:
            t = {"image_id": t["image_id"], "boxes": tv_tensors.BoundingBoxes(torch.zeros(0, 4), format="XYXY", canvas_size=(h, w)),
                 "labels": torch.zeros(0, dtype=torch.int64), "iscrowd": torch.zeros(0, dtype=torch.int64)}
        else:
            t["labels"] = torch.as_tensor(t["labels"], dtype=torch.int64)
            t["iscrowd"] = torch.tensor(t["iscrowd"], dtype=torch.int64)
        kps = [a.get("keypoints") or [0.0] * (3 * P) for a in anns.get(t["image_id"], [])]
        kp = torch.as_tensor(kps, dtype=torch.float32).reshape(-1, P, 3)
        t["keypoints"] = tv_tensors.KeyPoints(kp[..., :2], canvas_size=(h, w))
        t["keypoints_visibility"] = kp[..., 2].to(torch.uint8)
        out[i] = t
    return out


def every_field(s: Dict[str, Any]) -> Tuple[torch.Tensor, ...]:
    """A labels_getter returning each per-instance field of the sample."""
    return s["labels"], s["iscrowd"], s["keypoints_visibility"], s["boxes"]


def replay(src: Dict[str, Any], trace: List[Any]) -> Dict[str, Any]:
    """torchvision's replay of a sample's trace on its target dict."""
    s = {k: src[k] for k in ("boxes", "labels", "iscrowd", "keypoints", "keypoints_visibility")}
    for name, args in trace:
        if name in PIXELS:
            continue
        kw = dict(args)
        if name == "clamp_bounding_boxes":
            s = tv2.ClampBoundingBoxes()(s)
        elif name == "clamp_keypoints":
            s = tv2.ClampKeyPoints()(s)
        elif name == "sanitize_keypoints":
            boxes = s["boxes"]
            s = tv2.SanitizeKeyPoints(labels_getter=every_field)(s)
            s["boxes"] = tv_tensors.wrap(s["boxes"], like=boxes)  # a label comes back a plain tensor
        elif name == "sanitize_bounding_boxes":
            _, valid = F.sanitize_bounding_boxes(s["boxes"], **kw)
            s = {k: tv_tensors.wrap(v[valid], like=v) if isinstance(v, tv_tensors.TVTensor) else v[valid] for k, v in s.items()}
        elif name == "convert_bounding_box_format":
            s["boxes"] = F.convert_bounding_box_format(s["boxes"], new_format=kw["new_format"])
        else:
            assert name in MOVES, f"an op this test does not replay: {name}"
            if "interpolation" in kw:
                kw["interpolation"] = InterpolationMode(kw["interpolation"])
            for k in ("fill", "antialias", "expand"):
                kw.pop(k, None)
            s["boxes"] = getattr(F, name)(s["boxes"], **kw)
            kw.pop("interpolation", None)
            s["keypoints"] = getattr(F, name)(s["keypoints"], **kw)
    return s


def check(got: Dict[str, Any], src: Dict[str, Any], trace: List[Any], image: torch.Tensor, where: str) -> Tuple[int, int]:
    """One sample's targets against torchvision's replay; returns whether
    the boxes and the keypoints were the same bits (1 or 0 each)."""
    want = replay(src, trace)
    hw = tuple(image.shape[-2:])
    assert isinstance(got["boxes"], tv_tensors.BoundingBoxes) and got["boxes"].format == want["boxes"].format, where
    assert tuple(got["boxes"].canvas_size) == tuple(want["boxes"].canvas_size) == hw, where
    for k in ("labels", "iscrowd", "keypoints_visibility"):
        assert got[k].dtype == want[k].dtype and torch.equal(got[k], want[k]), (where, k, got[k], want[k])
    assert got["image_id"] == src["image_id"], where
    same = []
    for k in ("boxes", "keypoints"):
        g, m = got[k].as_subclass(torch.Tensor), want[k].as_subclass(torch.Tensor)
        assert g.dtype == m.dtype == torch.float32 and g.shape == m.shape, (where, k, g.shape, m.shape)
        torch.testing.assert_close(g, m, msg=lambda s: f"{where} {k}: {trace}: {s}")
        same.append(int(torch.equal(g, m)))
    assert tuple(got["keypoints"].canvas_size) == hw, where
    return same[0], same[1]


# Each format's boxes clamped after the conversion (a resize does not
# clamp: the grown boxes stay past the edge until the clamp), the keypoints
# clamped; SanitizeKeyPoints after a crop and a turn that leave points off
# the canvas, before and after a flip, in XYXY and CXCYWH; a clamp of the
# keypoints first, which a sanitize then leaves; clamping_mode None.
TRANSFORMS = {
    "resize-xyxy-clamp": [T.Resize((72, 96)), T.RandomHorizontalFlip(), T.ConvertBoundingBoxFormat("XYXY"),
                          T.ClampBoundingBoxes(), T.ClampKeyPoints()],
    "resize-xywh-clamp": [T.Resize((72, 96)), T.RandomVerticalFlip(), T.ConvertBoundingBoxFormat("XYWH"),
                          T.ClampBoundingBoxes("hard"), T.ColorJitter(0.2), T.ClampKeyPoints()],
    "resize-cxcywh-clamp": [T.Resize((80, 64)), T.RandomHorizontalFlip(), T.ConvertBoundingBoxFormat("CXCYWH"),
                            T.ClampKeyPoints(), T.ClampBoundingBoxes("soft")],
    "rrc-sanitize-kpts": [T.RandomResizedCrop(64, scale=(0.2, 1.0)), T.SanitizeKeyPoints(), T.RandomHorizontalFlip(),
                          T.ClampBoundingBoxes()],
    "rotate-sanitize-cxcywh": [T.Resize((96, 128)), T.RandomRotation(40), T.SanitizeKeyPoints(),
                               T.SanitizeBoundingBoxes(), T.ConvertBoundingBoxFormat("CXCYWH"), T.ClampBoundingBoxes()],
    "affine-clamp-then-sanitize": [T.Resize((80, 80)), T.RandomAffine(20, translate=(0.2, 0.2), scale=(0.8, 1.3)),
                                   T.ClampKeyPoints(), T.SanitizeKeyPoints(), T.ClampBoundingBoxes(None)],
}
OPS_OF = {
    "resize-xyxy-clamp": {"resize", "clamp_bounding_boxes", "clamp_keypoints"},
    "resize-xywh-clamp": {"resize", "convert_bounding_box_format", "clamp_bounding_boxes", "clamp_keypoints"},
    "resize-cxcywh-clamp": {"resize", "convert_bounding_box_format", "clamp_bounding_boxes", "clamp_keypoints"},
    "rrc-sanitize-kpts": {"resized_crop", "sanitize_keypoints", "horizontal_flip", "clamp_bounding_boxes"},
    "rotate-sanitize-cxcywh": {"resize", "rotate", "sanitize_keypoints", "sanitize_bounding_boxes",
                               "convert_bounding_box_format", "clamp_bounding_boxes"},
    "affine-clamp-then-sanitize": {"affine", "clamp_keypoints", "sanitize_keypoints"},
}
#: The transforms whose SanitizeKeyPoints drops instances.
DROPS = {"rrc-sanitize-kpts", "rotate-sanitize-cxcywh"}


@pytest.mark.parametrize("name", sorted(TRANSFORMS))
def test_clamp_and_sanitize_are_torchvisions(server: str, grown: Path, name: str) -> None:
    src = sources(grown)
    seen, boxes_same, points_same, ops, dropped, kept = 0, 0, 0, set(), 0, 0
    clamped = {"clamp_bounding_boxes": 0, "clamp_keypoints": 0}
    for seed in (1, 2):
        with stoker.Loader(server, "coco", batch_size=6, transform=T.Compose(TRANSFORMS[name]), targets=True,
                           trace=True, return_indices=True, pin_memory=False, timeout=60, seed=seed) as ld:
            for b in ld:
                images, targets, indices = b
                for i, (t, idx) in enumerate(zip(targets, indices.tolist())):
                    bs, ps = check(t, src[idx], b.trace[i], images[i], f"{name} seed {seed} sample {idx}")
                    boxes_same, points_same = boxes_same + bs, points_same + ps
                    ops.update(op for op, _ in b.trace[i])
                    dropped += len(src[idx]["labels"]) - len(t["labels"])
                    kept += len(t["labels"])
                    for op in {"clamp_bounding_boxes", "clamp_keypoints"} & {op for op, _ in b.trace[i]}:
                        # What the clamp did: without it, the boxes or points differ.
                        without = replay(src[idx], [s for s in b.trace[i] if s[0] != op])
                        clamped[op] += int(any(not torch.equal(without[k].as_subclass(torch.Tensor), t[k].as_subclass(torch.Tensor))
                                               for k in ("boxes", "keypoints")))
                    seen += 1
            assert not list(ld.sample_errors)
    assert seen == 2 * N and kept > 0, (seen, kept)
    assert OPS_OF[name] <= ops, ops
    assert (dropped > 0) == (name in DROPS), dropped
    # Each clamp did something: the grown boxes past the edge (a crop or a
    # turn clamps boxes itself: the clamp after it changes only CXCYWH's
    # bits, through its round trip to XYXY), the spread points past it.
    assert (clamped["clamp_bounding_boxes"] > 0) == (name.startswith("resize-") or name == "rotate-sanitize-cxcywh"), clamped
    assert (clamped["clamp_keypoints"] > 0) == ("clamp_keypoints" in OPS_OF[name]), clamped
    print(f"\n{name}: boxes torchvision's bits in {boxes_same} of {seen} samples, keypoints in {points_same}; "
          f"{dropped} instances dropped, {kept} kept; changed by the clamps {clamped}")


def test_from_torchvision_converts_them() -> None:
    """v2's three classes convert to stoker's; SanitizeKeyPoints with a
    callable labels_getter is refused (stoker drops an instance whole)."""
    got = T.from_torchvision(tv2.Compose([tv2.Resize((32, 32)), tv2.ConvertBoundingBoxFormat("XYWH"),
                                          tv2.ClampBoundingBoxes(), tv2.ClampBoundingBoxes(clamping_mode=None),
                                          tv2.ClampKeyPoints(), tv2.SanitizeKeyPoints(),
                                          tv2.SanitizeKeyPoints(labels_getter="default")]))
    ops = [op.to_proto() for op in got.transforms[2:]]
    assert [op.named.name for op in ops] == ["ClampBoundingBoxes", "ClampBoundingBoxes", "ClampKeyPoints",
                                             "SanitizeKeyPoints", "SanitizeKeyPoints"]
    assert wire_args(ops[0])["clamping_mode"] == "auto" and wire_args(ops[1])["clamping_mode"] is None
    with pytest.raises(ValueError, match="labels_getter"):
        T.from_torchvision(tv2.Compose([tv2.Resize((32, 32)), tv2.SanitizeKeyPoints(labels_getter=every_field)]))
    with pytest.raises(ValueError, match="clamping_mode"):
        T.ClampBoundingBoxes("loose")


def test_refused_without_targets_or_keypoints(server: str, stoker_bin: Path, grown: Path, tmp_path: Path) -> None:
    """A job without targets refuses each op, naming it; a dataset whose
    instances have no keypoints refuses SanitizeKeyPoints at open, saying
    so (it failed every sample, as torchvision's fails a sample with no
    KeyPoints), and ClampKeyPoints passes it (torchvision's passes it
    through)."""
    for op in (T.ClampBoundingBoxes(), T.ClampKeyPoints(), T.SanitizeKeyPoints()):
        with pytest.raises(stoker.StokerError) as e:
            with stoker.Loader(server, "coco", batch_size=4, transform=T.Compose([T.Resize((32, 32)), op]),
                               pin_memory=False, timeout=60) as ld:
                next(iter(ld))
        assert e.value.code == "INVALID_ARGUMENT" and type(op).__name__ in str(e.value), e.value
    doc = json.loads((grown / "annotations" / "instances.json").read_text())
    for a in doc["annotations"]:
        a.pop("keypoints", None)
        a.pop("num_keypoints", None)
    for c in doc["categories"]:
        c.pop("keypoints", None)
        c.pop("skeleton", None)
    ann = tmp_path / "instances.json"
    ann.write_text(json.dumps(doc))
    srv = LocalServer(str(stoker_bin), {"d": str(grown / "images" / "train")}, workers=1,
                      args=["--grace", "1s", "--annotations", f"d={ann}"], log_path=str(tmp_path / "log"))
    with srv:
        with stoker.Loader(srv.addr, "d", batch_size=4, transform=T.Compose([T.Resize((32, 32)), T.ClampKeyPoints()]),
                           targets=True, pin_memory=False, timeout=60) as ld:
            _, targets = next(iter(ld))
            assert all("keypoints" not in t for t in targets)
        # Every sample would fail: the job is refused at open, saying why.
        with pytest.raises(stoker.StokerError) as e:
            with stoker.Loader(srv.addr, "d", batch_size=4, timeout=60, pin_memory=False, targets=True,
                               transform=T.Compose([T.Resize((32, 32)), T.SanitizeKeyPoints()])) as ld:
                next(iter(ld))
        assert e.value.code == "INVALID_ARGUMENT" and "SanitizeKeyPoints (op 1) acts on keypoints" in str(e.value) \
            and "instances have none" in str(e.value), e.value
