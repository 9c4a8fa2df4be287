"""A COCO dataset through an identity pipeline comes back as the file
says (issue 46's parity point 5): every image's instances, boxes (the
file's XYWH as torchvision's CocoDetection wrapper makes them XYXY, to the
float32 bit, and back to XYWH within float32's rounding), category ids
(the contiguous labels mapped back), crowd flags, image ids and masks
(pycocotools' annToMask, byte for byte); and COCOeval of the ground truth
against what the server sent, as detections of score 1, is AP 1.000 for
boxes and for masks.

The identity pipeline: `stoker mkdata --coco --max-side 640` makes images
whose longer side is 640, so RandomShortestSize(640, max_size=640) scales
each by min(640 / shorter, 640 / longer) = 1: each sample its own size,
its pixels the decoded image's (checked) and its targets unmoved."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
from pathlib import Path
from typing import Any, Dict, Iterator, List

import numpy as np
import pytest
import torch
from pycocotools import mask as mask_utils
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval
from torchvision.io import ImageReadMode, decode_jpeg, read_file

import stoker
from stoker import transforms as T
from stoker._local import LocalServer

N = 16


@pytest.fixture(scope="module")
def coco640(stoker_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("coco640")
    r = subprocess.run([str(stoker_bin), "mkdata", "--coco", "--out", str(out), "--n", str(N), "--seed", "3",
                        "--max-side", "640", "--instances", "5"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return out


@pytest.fixture(scope="module")
def addr(stoker_bin: Path, coco640: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    log = tmp_path_factory.mktemp("log") / "server.log"
    srv = LocalServer(str(stoker_bin), {"coco": str(coco640 / "images" / "train")}, workers=2,
                      args=["--grace", "1s", "--annotations", f"coco={coco640 / 'annotations' / 'instances.json'}"],
                      log_path=str(log))
    with srv:
        yield srv.addr


def served(addr: str, images: Path) -> List[Dict[str, Any]]:
    """Every sample's targets, through the identity pipeline; its pixels
    are the decoded file's."""
    out = []
    with stoker.Loader(addr, "coco", batch_size=4, shuffle=False, pin_memory=False, timeout=120,
                       transform=T.Compose([T.RandomShortestSize(640, max_size=640)]), fields=("path",),
                       targets=("boxes", "labels", "iscrowd", "image_id", "masks")) as ld:
        for b in ld:
            for i, t in enumerate(b.targets):
                h, w = (int(x) for x in b.sizes[i])
                assert tuple(t["boxes"].canvas_size) == (h, w)
                src = decode_jpeg(read_file(str(images / b.fields["path"][i].decode())), mode=ImageReadMode.RGB)
                assert torch.equal(b.images[i, :, :h, :w], src), b.fields["path"][i]
                out.append(t)
        assert not list(ld.sample_errors)
    return out


def test_identity_gives_back_the_file(addr: str, coco640: Path) -> None:
    with contextlib.redirect_stdout(io.StringIO()):
        gt = COCO(str(coco640 / "annotations" / "instances.json"))
    got = served(addr, coco640 / "images" / "train")
    assert sorted(t["image_id"] for t in got) == sorted(gt.getImgIds())
    n = 0
    for t in got:
        img = gt.imgs[t["image_id"]]
        assert tuple(t["boxes"].canvas_size) == (img["height"], img["width"])
        anns = gt.loadAnns(gt.getAnnIds(imgIds=[t["image_id"]]))
        assert len(anns) == len(t["labels"]), t["image_id"]
        boxes = t["boxes"].as_subclass(torch.Tensor)
        for k, a in enumerate(anns):  # the file's order
            x, y, w, h = (np.float32(v) for v in a["bbox"])
            want = torch.tensor([x, y, x + w, y + h], dtype=torch.float32)  # the wrapper's XYWH -> XYXY
            assert torch.equal(boxes[k], want), (t["image_id"], k, boxes[k], a["bbox"])
            back = [float(boxes[k, 0]), float(boxes[k, 1]), float(boxes[k, 2] - boxes[k, 0]), float(boxes[k, 3] - boxes[k, 1])]
            assert np.allclose(back, a["bbox"], rtol=0, atol=1e-3), (back, a["bbox"])
            assert int(t["labels"][k]) == a["category_id"]  # torchvision's wrapper's labels
            assert int(t["iscrowd"][k]) == a.get("iscrowd", 0)
            assert np.array_equal(t["masks"][k].numpy(), gt.annToMask(a)), (t["image_id"], k)
            n += 1
    assert n > N


def test_cocoeval_of_itself_is_one(addr: str, coco640: Path) -> None:
    with contextlib.redirect_stdout(io.StringIO()):
        gt = COCO(str(coco640 / "annotations" / "instances.json"))
    dets = []
    for t in served(addr, coco640 / "images" / "train"):
        b = t["boxes"].as_subclass(torch.Tensor).tolist()
        for k, (x1, y1, x2, y2) in enumerate(b):
            rle = mask_utils.encode(np.asfortranarray(t["masks"][k].numpy()))
            rle["counts"] = rle["counts"].decode()
            dets.append({"image_id": t["image_id"], "category_id": int(t["labels"][k]), "score": 1.0,
                         "bbox": [x1, y1, x2 - x1, y2 - y1], "segmentation": rle})
    for iou_type in ("bbox", "segm"):
        with contextlib.redirect_stdout(io.StringIO()):
            dt = gt.loadRes(json.loads(json.dumps(dets)))
            ev = COCOeval(gt, dt, iou_type)
            ev.evaluate()
            ev.accumulate()
            ev.summarize()
        assert ev.stats[0] == pytest.approx(1.0, abs=1e-9), (iou_type, ev.stats)  # AP @[.5:.95]


def test_cocoeval_of_a_model_equals_torchvisions_loader(addr: str, coco640: Path) -> None:
    """The evaluation path (docs/detection.md, "How do I evaluate?"): a
    model's predictions on a stoker validation loader (no random op, each
    image its own size, shuffle=False) scored by COCOeval equal the same
    model's on torchvision's wrap_dataset_for_transforms_v2(CocoDetection)
    loader, stat for stat: the same pixels in, the labels the category ids
    the model was built for (num_classes=91), the boxes in the file's
    pixels (the model maps its resize back)."""
    from torchvision.datasets import CocoDetection, wrap_dataset_for_transforms_v2
    from torchvision.models.detection import fasterrcnn_mobilenet_v3_large_320_fpn

    torch.manual_seed(0)
    model = fasterrcnn_mobilenet_v3_large_320_fpn(weights=None, weights_backbone=None, num_classes=91,
                                                  box_score_thresh=0.0).eval()
    ann = coco640 / "annotations" / "instances.json"

    def predict(images: List[torch.Tensor], image_ids: List[int]) -> List[Dict[str, Any]]:
        with torch.no_grad():
            out = model([im.float() / 255 for im in images])
        dets = []
        for o, iid in zip(out, image_ids):
            for (x1, y1, x2, y2), s, c in zip(o["boxes"].tolist(), o["scores"].tolist(), o["labels"].tolist()):
                dets.append({"image_id": iid, "category_id": int(c), "score": float(s), "bbox": [x1, y1, x2 - x1, y2 - y1]})
        return dets

    ours, theirs = [], []
    with stoker.Loader(addr, "coco", batch_size=4, shuffle=False, pin_memory=False, timeout=120, image_list=True,
                       transform=T.Compose([T.RandomShortestSize(640, max_size=640)]), targets=("image_id",)) as ld:
        for images, targets in ld:
            ours += predict(images, [int(t["image_id"]) for t in targets])
    ds = wrap_dataset_for_transforms_v2(CocoDetection(str(coco640 / "images" / "train"), str(ann)), target_keys=("image_id",))
    from torchvision.transforms.v2 import functional as F

    for i in range(len(ds)):
        img, t = ds[i]
        theirs += predict([F.pil_to_tensor(img)], [int(t["image_id"])])
    assert len(ours) == len(theirs) > 0
    stats = []
    for dets in (ours, theirs):
        with contextlib.redirect_stdout(io.StringIO()):
            gt = COCO(str(ann))
            ev = COCOeval(gt, gt.loadRes(json.loads(json.dumps(dets))), "bbox")
            ev.evaluate()
            ev.accumulate()
            ev.summarize()
        stats.append(list(ev.stats))
    assert stats[0] == stats[1], stats
