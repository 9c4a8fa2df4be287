"""The YOLO family's ops (YOLOLoadImage, YOLOLetterBox, YOLORandomPerspective,
YOLORandomHSV, YOLORandomFlip) served end to end, against ultralytics.

A real `stoker serve` of a YOLO pose layout written here from mkdata --coco's
set (`class cx cy w h` and 5 (x, y, v) keypoints a line, kpt_shape [5, 3]), a
real client with targets and traces; each sample's trace is replayed by the
pinned ultralytics (python/requirements-dev.txt) on the same image file as
its dataset loads it (cv2.imread, then load_image's cv2.resize INTER_LINEAR
with augment=True) and the label file's normalized labels: LetterBox,
RandomPerspective with the drawn parameters forced (its `random`), RandomHSV
with the drawn gains forced (np.random.uniform), RandomFlip with the drawn
flip forced. What must agree: the pixels byte for byte (RandomHSV: within 1,
pipeline/kernels/cv's bound), the boxes and keypoints within 1e-3 px (the
count of those not the same float32 bits printed), the instances kept, their
classes and keypoints' visibilities exactly. A missing ultralytics fails the
import: nothing is skipped.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
from pathlib import Path
from typing import Any, Dict, Iterator, List


import cv2  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from ultralytics.data import augment  # noqa: E402
from ultralytics.utils.instance import Instances  # noqa: E402

import stoker  # noqa: E402
from stoker import transforms as T  # noqa: E402
from stoker._local import LocalServer  # noqa: E402
from yolo_replay import assert_served, finish, served_bgr, warp  # noqa: E402

N = 16
P = 5
FLIP_IDX = [0, 2, 1, 4, 3]

# Each recipe: its ops (as the client sends them) and what replaying them
# takes (the letterbox's flags, the perspective's hyperparameters).
RECIPES: Dict[str, Dict[str, Any]] = {
    # ultralytics' close_mosaic epochs before 8.1 (LetterBox as
    # RandomPerspective's pre_transform), and the yolo-letterbox preset's ops
    # with more rotation and shear; mkdata's 320-480 px images loaded up to
    # 640.
    "letterbox": {"imgsz": 640, "letterbox": {"new_shape": 640, "scaleup": False, "center": True},
                  "persp": {"degrees": 10.0, "translate": 0.1, "scale": 0.5, "shear": 3.0, "perspective": 0.0},
                  "hsv": (0.015, 0.7, 0.4), "flips": ["horizontal", "vertical"]},
    # 8.4.190's close_mosaic epochs: RandomPerspective warps the loaded image
    # straight to (imgsz, imgsz), in perspective here; loaded down to 320.
    "perspective-size": {"imgsz": 320, "persp": {"degrees": 5.0, "translate": 0.2, "scale": 0.3, "shear": 0.0,
                                                 "perspective": 0.0005, "size": (320, 320)},
                         "flips": ["horizontal"]},
    # LetterBox alone, to a rectangle, up (scaleup), padded right and bottom.
    "letterbox-rect": {"imgsz": 320, "letterbox": {"new_shape": (256, 384), "scaleup": True, "center": False},
                       "flips": ["vertical"]},
}


def ops_of(r: Dict[str, Any]) -> List[Any]:
    ops: List[Any] = [T.YOLOLoadImage(r["imgsz"])]
    if "letterbox" in r:
        ops.append(T.YOLOLetterBox(**r["letterbox"]))
    if "persp" in r:
        ops.append(T.YOLORandomPerspective(**r["persp"]))
    if "hsv" in r:
        ops.append(T.YOLORandomHSV(*r["hsv"]))
    for d in r["flips"]:
        ops.append(T.YOLORandomFlip(p=0.5, direction=d, flip_idx=FLIP_IDX))
    return ops


def write_pose(det: Path, out: Path) -> Path:
    """A YOLO pose layout of mkdata's set: per image a label file of `class
    cx cy w h` and 5 (x, y, v) points an instance (the stars' tips, other
    shapes' points inside their box with v drawn from 0, 1, 2), normalized;
    crowds left out. Returns the images' dir."""
    doc = json.loads((det / "annotations" / "instances.json").read_text())
    images, labels = out / "images" / "train", out / "labels" / "train"
    images.mkdir(parents=True)
    labels.mkdir(parents=True)
    rng = np.random.default_rng(46)
    anns: Dict[int, List[Any]] = {}
    for a in doc["annotations"]:
        if not a["iscrowd"]:
            anns.setdefault(a["image_id"], []).append(a)
    for im in doc["images"]:
        (images / im["file_name"]).write_bytes((det / "images" / "train" / im["file_name"]).read_bytes())
        w, h = im["width"], im["height"]
        lines = []
        for a in anns.get(im["id"], []):
            x, y, bw, bh = a["bbox"]
            kp = a.get("keypoints") or []
            if not kp:
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
def pose(stoker_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    det = tmp_path_factory.mktemp("det")
    r = subprocess.run([str(stoker_bin), "mkdata", "--coco", "--out", str(det / "d"), "--n", str(N), "--seed", "46"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    out = tmp_path_factory.mktemp("pose")
    images = write_pose(det / "d", out)
    srv = LocalServer(str(stoker_bin), {"pose": str(images)}, workers=2,
                      args=["--grace", "1s", "--annotations", f"pose={out / 'data.yaml'}"], log_path=str(out / "server.log"))
    with srv:
        yield srv.addr, out


def load_image(path: Path, imgsz: int) -> np.ndarray:
    """BaseDataset.load_image with augment=True: cv2.imread, the long side
    to imgsz (cv2.INTER_LINEAR)."""
    im = cv2.imread(str(path))
    assert im is not None, path
    h0, w0 = im.shape[:2]
    r = imgsz / max(h0, w0)
    if r != 1:
        w, h = min(math.ceil(w0 * r), imgsz), min(math.ceil(h0 * r), imgsz)
        im = cv2.resize(im, (w, h), interpolation=cv2.INTER_LINEAR)
    return im


def ultralytics_labels(img: np.ndarray, label_file: Path) -> Dict[str, Any]:
    """The labels dict YOLODataset hands its transforms: classes, and
    Instances of the file's normalized xywh boxes and keypoints."""
    rows = [[float(v) for v in ln.split()] for ln in label_file.read_text().splitlines() if ln.strip()]
    a = np.array(rows, np.float32).reshape(-1, 5 + 3 * P)
    return {"img": img, "cls": a[:, :1], "ori_shape": img.shape[:2], "resized_shape": img.shape[:2],
            "instances": Instances(a[:, 1:5].copy(), np.zeros((0, 1000, 2), np.float32), a[:, 5:].reshape(-1, P, 3).copy(),
                                   bbox_format="xywh", normalized=True)}


def replay(monkeypatch: pytest.MonkeyPatch, r: Dict[str, Any], trace: List[Any], img_path: Path, label_file: Path) -> Dict[str, Any]:
    """Ultralytics' transforms on the image and labels, with the trace's
    draws forced."""
    name, args = trace[0]
    img = load_image(img_path, r["imgsz"])
    assert name == "yolo_load_image" and list(args["size"]) == list(img.shape[:2]), (trace[0], img.shape)
    labels = ultralytics_labels(img, label_file)
    for name, args in trace[1:]:
        if name == "yolo_letterbox":
            lb = r["letterbox"]
            op = augment.LetterBox(new_shape=lb["new_shape"], scaleup=lb["scaleup"], center=lb["center"])
            params = op.get_params(dict(labels))
            assert (params["top"], params["left"], params["new_unpad"][::-1]) == (args["top"], args["left"], tuple(args["new_unpad"])), \
                (params, args)
            labels = op(labels)
        elif name == "yolo_random_perspective":
            p = r["persp"]
            size = (args["size"][1], args["size"][0])
            op = augment.RandomPerspective(degrees=p["degrees"], translate=p["translate"], scale=p["scale"], shear=p["shear"],
                                           perspective=p["perspective"], size=size if "size" in p else None)
            assert args["warp_perspective"] == (1 if p["perspective"] else 0)
            labels = warp(op, args, labels, monkeypatch)
        else:
            labels = finish(labels, [(name, args)], monkeypatch, flip_idx=FLIP_IDX)
    return labels


@pytest.mark.parametrize("recipe", list(RECIPES))
def test_yolo_ops_are_ultralytics(pose: Any, monkeypatch: pytest.MonkeyPatch, recipe: str) -> None:
    addr, out = pose
    r = RECIPES[recipe]
    hsv = "hsv" in r
    seen, inexact, coords, off1, steps = 0, 0, 0, 0, set()
    with stoker.Loader(addr, "pose", batch_size=4, transform=T.Compose(ops_of(r)), targets=True, trace=True,
                       fields=("path",), return_indices=True, pin_memory=False, timeout=120, seed=5) as ld:
        for b in ld:
            images, targets, _ = b[0], b[1], b[2]
            for i, t in enumerate(targets):
                path = b.fields["path"][i].decode()
                trace = b.trace[i]
                steps.update(s[0] for s in trace)
                want = replay(monkeypatch, r, trace, out / "images" / "train" / path,
                              out / "labels" / "train" / (Path(path).stem + ".txt"))
                wb = assert_served(served_bgr(images, i), t, want, f"{recipe} {path}", tol=1 if hsv else 0)
                off1 += want["_off"]
                gb, inst = t["boxes"].numpy(), want["instances"]
                wk = inst.keypoints
                gk = t["keypoints"].numpy().reshape(wk.shape[0], P, 2)
                np.testing.assert_array_equal(t["keypoints_visibility"].numpy().reshape(-1, P), wk[..., 2].astype(np.uint8),
                                              err_msg=f"{recipe} {path}: visibility")
                np.testing.assert_allclose(gk, wk[..., :2], rtol=0, atol=1e-3, err_msg=f"{recipe} {path}: keypoints")
                inexact += int((gb != wb).sum()) + int((gk != wk[..., :2]).sum())
                coords += gb.size + gk.size
                seen += 1
        assert not list(ld.sample_errors)
    assert seen == N
    want_steps = {"yolo_load_image"} | ({"yolo_letterbox"} if "letterbox" in r else set()) | \
        ({"yolo_random_perspective"} if "persp" in r else set()) | ({"yolo_random_hsv"} if hsv else set()) | \
        {"yolo_fliplr" if d == "horizontal" else "yolo_flipud" for d in r["flips"]}
    assert steps == want_steps, steps
    print(f"\n{recipe}: {inexact} of {coords} coordinates within 1e-3 but not ultralytics' bits; "
          f"{off1} bytes off by 1 (RandomHSV)")


def test_decode_is_cv2_imread(stoker_bin: Path, tmp_path: Path) -> None:
    """The YOLO geometry's decode (the whole image, exact, full scale) is
    cv2.imread's pixels on testdata/photos' JPEGs (baseline and progressive,
    alike): each loaded to a long side of 1024 (cv2.resize up) and padded to
    1024 x 1024 by a YOLOLetterBox with scaleup=False, as ultralytics'
    load_image and LetterBox do to cv2.imread's image: the same bytes."""
    photos = Path(__file__).resolve().parents[2] / "testdata" / "photos"
    srv = LocalServer(str(stoker_bin), {"photos": str(photos)}, workers=2, args=["--grace", "1s"],
                      log_path=str(tmp_path / "log"))
    seen = 0
    with srv:
        tf = T.Compose([T.YOLOLoadImage(1024), T.YOLOLetterBox(1024, scaleup=False)])
        with stoker.Loader(srv.addr, "photos", batch_size=6, transform=tf, fields=("path",), pin_memory=False,
                           timeout=120) as ld:
            for b in ld:
                for img, path in zip(b[0], b.fields["path"]):
                    im = load_image(photos / path.decode(), 1024)  # upsampled: the long side to 1024
                    want = augment.LetterBox(new_shape=1024, scaleup=False)(image=im)
                    got = img.numpy().transpose(1, 2, 0)[..., ::-1]
                    d = np.abs(got.astype(int) - want.astype(int))
                    assert d.max() == 0, f"{path.decode()}: {int((d > 0).sum())} bytes differ, by {int(d.max())}"
                    seen += 1
    assert seen == len(list(photos.glob("*/*.jpg")))


def test_preset_is_its_ops(pose: Any) -> None:
    """The preset "yolo-letterbox" is its ops sent as stoker's classes: the
    same traces, pixels and targets for the same seed."""
    addr, _ = pose
    ops = [T.YOLOLoadImage(640), T.YOLOLetterBox(640, scaleup=False), T.YOLORandomPerspective(translate=0.1, scale=0.5),
           T.YOLORandomHSV(0.015, 0.7, 0.4), T.YOLORandomFlip(p=0.5, direction="horizontal")]
    got = []
    for tf in ("yolo-letterbox", T.Compose(ops)):
        with stoker.Loader(addr, "pose", batch_size=8, transform=tf, targets=True, trace=True, shuffle=False,
                           pin_memory=False, timeout=120, seed=9) as ld:
            got.append([(b[0].clone(), [t["boxes"].clone() for t in b[1]], list(b.trace)) for b in ld])
    assert len(got[0]) == len(got[1]) == N // 8
    for (ia, ba, ta), (ib, bb, tb) in zip(*got):
        assert ta == tb
        assert (ia == ib).all()
        assert all((x == y).all() for x, y in zip(ba, bb))
    assert any(s[0] == "yolo_fliplr" for _, _, tr in got[0] for t in tr for s in t)
