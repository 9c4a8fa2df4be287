"""stoker.ultralytics: ultralytics' own YOLO(...).train with its training
batches from a real stoker serve (the local default, started from the data
YAML), its hyper-parameters mapped onto the yolo ops, close_mosaic honoured,
and what cannot be mapped refused by name."""

from __future__ import annotations

import math
import os
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from conftest import PHOTOS_TESTDATA

from stoker import ultralytics as ultra  # pinned in requirements-dev.txt: a missing one fails, never skips


@pytest.fixture(scope="module")
def yolo_set(stoker_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("yolo") / "set"
    r = subprocess.run([str(stoker_bin), "mkdata", "--coco", "--yolo", "--out", str(out), "--n", "16",
                        "--max-side", "160", "--backgrounds", str(PHOTOS_TESTDATA)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    # ultralytics resolves a relative `path` against its datasets directory,
    # not the YAML's: give it the set's absolute path.
    y = out / "data.yaml"
    y.write_text(y.read_text().replace("path: .", f"path: {out}"))
    return out


class TracedTrainer(ultra.DetectionTrainer):
    """Records, per epoch, the first op each sample's trace shows: a
    mosaic ("yolo_mosaic") or a lone image ("yolo_load_image")."""

    stoker_trace = True


def test_yolo_train_from_stoker(yolo_set: Path, tmp_path: Path, stoker_bin: Path,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    from ultralytics import YOLO

    monkeypatch.setenv("STOKER_BIN", str(stoker_bin))
    for k in ("STOKER_SERVER", "STOKER_DATASET"):
        monkeypatch.delenv(k, raising=False)
    model = YOLO("yolov8n.yaml")
    model.train(data=str(yolo_set / "data.yaml"), trainer=TracedTrainer, epochs=2, imgsz=64, batch=4,
                mosaic=0.5, close_mosaic=1, device="cpu", workers=0, plots=False, amp=False, seed=0,
                project=str(tmp_path), name="run", exist_ok=True, verbose=False, val=False)
    tr = model.trainer
    ld = tr.train_loader
    assert [e for e, _ in ld.jobs] == [0, 1]
    assert "YOLOMosaic(imgsz=64, p=0.5" in ld.jobs[0][1], ld.jobs[0][1]
    assert "YOLOMosaic(imgsz=64, p=0.0" in ld.jobs[1][1], ld.jobs[1][1]
    # The trace: epoch 0 mosaics about half its samples, epoch 1 (close_mosaic=1) none.
    first = ld.first_ops
    assert sum(first[0].values()) == 16 and sum(first[1].values()) == 16, first
    assert 0 < first[0]["yolo_mosaic"] < 16, first
    assert first[1].get("yolo_mosaic", 0) == 0 and first[1]["yolo_load_image"] == 16, first
    assert tr.loss is not None and math.isfinite(float(tr.loss.detach())), tr.loss
    assert ld.batches_served == 8  # 2 epochs of 16 images at batch 4
    assert (tmp_path / "run" / "weights" / "last.pt").exists()
    assert ld._loader is None  # closed with the training (on_train_end)


def _args(**kw):
    from ultralytics.cfg import get_cfg

    return get_cfg(overrides=kw)


@pytest.mark.parametrize("kw, name", [
    (dict(rect=True), "rect=True"),
    (dict(fraction=0.5), "fraction=0.5"),
    (dict(single_cls=True), "single_cls"),
    (dict(classes=[0]), "classes=[0]"),
    (dict(bgr=0.1), "bgr=0.1"),
    (dict(mixup=0.1, mosaic=0.5), "mixup=0.1 with mosaic=0.5"),
    (dict(copy_paste=0.5), "copy_paste=0.5 on a detect task"),
])
def test_unmapped_refused_by_name(kw, name: str) -> None:
    with pytest.raises(ValueError, match=name.replace("[", r"\[").replace("]", r"\]")):
        ultra.refuse_unmapped(_args(**kw), "detect")


def test_hyperparameters_map_onto_the_yolo_ops() -> None:
    """v8_transforms' order: Mosaic, CopyPaste (flip), RandomPerspective,
    MixUp, CutMix, RandomHSV, the vertical then the horizontal flip."""
    args = _args(imgsz=320, mosaic=1.0, copy_paste=0.3, mixup=0.2, cutmix=0.1, degrees=5, translate=0.2,
                 scale=0.4, shear=2, perspective=0.0005, hsv_h=0.01, hsv_s=0.6, hsv_v=0.3, flipud=0.1, fliplr=0.4)
    ultra.refuse_unmapped(args, "segment")
    names = [type(op).__name__ for op in ultra.yolo_transform(args, [0, 2, 1]).transforms]
    assert names == ["YOLOMosaic", "YOLOCopyPaste", "YOLORandomPerspective", "YOLOMixUp", "YOLOCutMix",
                     "YOLORandomHSV", "YOLORandomFlip", "YOLORandomFlip"], names
    tf = repr(ultra.yolo_transform(args))
    for s in ("imgsz=320", "degrees=5", "translate=0.2", "scale=0.4", "shear=2", "perspective=0.0005",
              "hgain=0.01", "sgain=0.6", "vgain=0.3", "direction='vertical'"):
        assert s in tf, (s, tf)
    closed = ultra.yolo_transform(ultra.closed_mosaic(args))
    assert [type(op).__name__ for op in closed.transforms][:3] == ["YOLOMosaic", "YOLORandomPerspective", "YOLORandomHSV"]


def test_batch_dict_is_ultralytics_collate() -> None:
    """Boxes XYXY in pixels become normalized xywh, labels float [N, 1],
    each instance's image its batch_idx."""
    from torchvision import tv_tensors

    images = torch.zeros(2, 3, 64, 128, dtype=torch.uint8)
    t0 = {"boxes": tv_tensors.BoundingBoxes([[0, 0, 64, 32], [32, 16, 96, 48]], format="XYXY", canvas_size=(64, 128)),
          "labels": torch.tensor([3, 1])}
    t1 = {"boxes": tv_tensors.BoundingBoxes(torch.zeros(0, 4), format="XYXY", canvas_size=(64, 128)),
          "labels": torch.zeros(0, dtype=torch.int64)}
    b = ultra.to_yolo_batch(images, [t0, t1], torch.tensor([5, 7]), "detect", None)
    assert b["img"] is images
    assert torch.equal(b["batch_idx"], torch.tensor([0.0, 0.0]))
    assert torch.equal(b["cls"], torch.tensor([[3.0], [1.0]]))
    assert torch.allclose(b["bboxes"], torch.tensor([[0.25, 0.25, 0.5, 0.5], [0.5, 0.5, 0.5, 0.5]]))
    assert b["im_file"] == ["5", "7"]


def test_local_default_reads_the_yaml(yolo_set: Path) -> None:
    from stoker import _serve

    assert _serve.dataset_args(str(yolo_set / "data.yaml")) == [
        "--dataset", f"local={yolo_set / 'images' / 'train'}", "--annotations", f"local={yolo_set / 'data.yaml'}"]
    bad = yolo_set.parent / "bad.yaml"
    bad.write_text("train: [a, b]\n")
    with pytest.raises(ValueError, match="one 'train' directory"):
        _serve.dataset_args(str(bad))
    assert not os.environ.get("STOKER_SERVER")


def test_yolo_segment_train_from_stoker(yolo_set: Path, tmp_path: Path, stoker_bin: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """yolov8n-seg: the overlap masks and CopyPaste (flip) from stoker, one
    epoch; the loss's mask term computed from them."""
    from ultralytics import YOLO

    monkeypatch.setenv("STOKER_BIN", str(stoker_bin))
    model = YOLO("yolov8n-seg.yaml")
    model.train(data=str(yolo_set / "data.yaml"), trainer=ultra.SegmentationTrainer, epochs=1, imgsz=64, batch=4,
                copy_paste=0.5, close_mosaic=0, device="cpu", workers=0, plots=False, amp=False, seed=0,
                project=str(tmp_path), name="seg", exist_ok=True, verbose=False, val=False)
    tr = model.trainer
    assert tr.train_loader.batches_served == 4
    assert "YOLOCopyPaste(p=0.5, mode='flip')" in tr.train_loader.jobs[0][1], tr.train_loader.jobs[0][1]
    assert math.isfinite(float(tr.loss.detach()))
    assert float(tr.tloss["seg_loss"]) > 0, tr.tloss  # the masks reached the loss


def test_yolo_pose_train_from_stoker(stoker_bin: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """yolov8n-pose: a YOLO pose set (mkdata's stars, their 5 tips as
    keypoints) trained one epoch from stoker, the keypoints moved by the
    mosaic and flips (the data YAML's flip_idx) reaching the pose loss."""
    import json

    from ultralytics import YOLO

    out = tmp_path / "coco"
    r = subprocess.run([str(stoker_bin), "mkdata", "--coco", "--out", str(out), "--n", "24", "--max-side", "160",
                        "--backgrounds", str(PHOTOS_TESTDATA)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    doc = json.loads((out / "annotations" / "instances.json").read_text())
    star = next(c["id"] for c in doc["categories"] if c["name"] == "star")
    root = tmp_path / "pose"
    (root / "labels" / "train").mkdir(parents=True)
    (root / "images" / "train").mkdir(parents=True)  # copies: ultralytics finds labels beside the images' real path
    for f in (out / "images" / "train").iterdir():
        (root / "images" / "train" / f.name).write_bytes(f.read_bytes())
    stars = 0
    for im in doc["images"]:
        lines = []
        for a in doc["annotations"]:
            if a["image_id"] != im["id"] or a["category_id"] != star or a.get("iscrowd"):
                continue
            x, y, w, h = a["bbox"]
            W, H = im["width"], im["height"]
            kp = a["keypoints"]
            pts = " ".join(f"{kp[3 * j] / W:.6f} {kp[3 * j + 1] / H:.6f} {kp[3 * j + 2]}" for j in range(5))
            lines.append(f"0 {(x + w / 2) / W:.6f} {(y + h / 2) / H:.6f} {w / W:.6f} {h / H:.6f} {pts}")
            stars += 1
        (root / "labels" / "train" / (Path(im["file_name"]).stem + ".txt")).write_text("\n".join(lines) + ("\n" if lines else ""))
    assert stars > 0
    (root / "data.yaml").write_text(f"path: {root}\ntrain: images/train\nval: images/train\nnames:\n  0: star\n"
                                    "kpt_shape: [5, 3]\nflip_idx: [0, 4, 3, 2, 1]\n")
    monkeypatch.setenv("STOKER_BIN", str(stoker_bin))
    model = YOLO("yolov8n-pose.yaml")
    model.train(data=str(root / "data.yaml"), trainer=ultra.PoseTrainer, epochs=1, imgsz=64, batch=4, close_mosaic=0,
                device="cpu", workers=0, plots=False, amp=False, seed=0, project=str(tmp_path), name="pose",
                exist_ok=True, verbose=False, val=False)
    tr = model.trainer
    assert tr.train_loader.batches_served == 6
    assert "flip_idx=[0, 4, 3, 2, 1]" in tr.train_loader.jobs[0][1], tr.train_loader.jobs[0][1]
    assert math.isfinite(float(tr.loss.detach()))
    assert float(tr.tloss["pose_loss"]) > 0, tr.tloss  # the keypoints reached the loss
