"""`stoker serve --annotations NAME=.json`: WebDataset shards whose samples
carry their annotations as a COCO-style KEY.json member give the trainer
the very targets (boxes, labels, crowd flags, image ids, keypoints) and
pixels of the COCO dataset they were written from, through the real Python
client; a malformed member fails its sample alone, naming the member, the
annotation and the field."""

from __future__ import annotations

import io
import json
import subprocess
import tarfile
from pathlib import Path
from typing import Any, Dict, List

import pytest
import torch

import stoker
from stoker import transforms as T
from stoker._local import LocalServer

N = 20


@pytest.fixture(scope="module")
def det(stoker_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("det")
    r = subprocess.run([str(stoker_bin), "mkdata", "--coco", "--out", str(out), "--n", str(N), "--seed", "7"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return out


def write_shards(det: Path, out: Path, bad: int = -1) -> Path:
    """The COCO set as two shards, in its sample order (images by id):
    KEY.jpg and KEY.json, the image's annotations with their category_id
    (so the targets are the COCO dataset's); sample `bad`
    gets a box of 3 numbers."""
    doc = json.loads((det / "annotations" / "instances.json").read_text())
    by_image: Dict[int, List[Dict[str, Any]]] = {}
    for a in doc["annotations"]:
        by_image.setdefault(a["image_id"], []).append(a)
    out.mkdir(parents=True, exist_ok=True)
    images = sorted(doc["images"], key=lambda im: im["id"])
    for s in range(2):
        with tarfile.open(out / f"shard-{s:06d}.tar", "w", format=tarfile.USTAR_FORMAT) as tar:
            for i, im in enumerate(images):
                if i * 2 // len(images) != s:
                    continue
                anns = []
                for a in by_image.get(im["id"], []):
                    m = {"bbox": list(a["bbox"]), "category_id": a["category_id"], "iscrowd": a.get("iscrowd", 0),
                         "segmentation": a.get("segmentation")}
                    if "keypoints" in a:
                        m["keypoints"] = a["keypoints"]
                    if i == bad:
                        m["bbox"] = m["bbox"][:3]
                    anns.append(m)
                for ext, data in (("jpg", (det / "images" / "train" / im["file_name"]).read_bytes()),
                                  ("json", json.dumps({"image_id": im["id"], "width": im["width"], "height": im["height"],
                                                       "annotations": anns}).encode())):
                    info = tarfile.TarInfo(f"{i:06d}.{ext}")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
    return out


TF = [T.RandomResizedCrop(64, scale=(0.3, 1.0)), T.RandomHorizontalFlip(), T.RandomRotation(20)]


def epoch(addr: str, name: str) -> List[Any]:
    with stoker.Loader(addr, name, batch_size=4, transform=T.Compose(TF), targets=True, return_indices=True,
                       pin_memory=False, timeout=60, seed=3) as ld:
        return [(images.clone(), targets, indices.tolist()) for images, targets, indices in ld]


def test_shards_give_the_coco_targets(stoker_bin: Path, det: Path, tmp_path: Path) -> None:
    shards = write_shards(det, tmp_path / "shards")
    ann = det / "annotations" / "instances.json"
    with LocalServer(str(stoker_bin), {"coco": str(det / "images" / "train"), "wds": str(shards)}, workers=1,
                     args=["--grace", "1s", "--annotations", f"coco={ann}", "--annotations", "wds=.json"],
                     log_path=str(tmp_path / "server.log")) as srv:
        want, got = epoch(srv.addr, "coco"), epoch(srv.addr, "wds")
    assert len(got) == len(want) == N // 4
    kpts = 0
    for (gi, gt, gx), (wi, wt, wx) in zip(got, want):
        assert gx == wx and torch.equal(gi, wi)
        for g, w in zip(gt, wt):
            assert g["boxes"].format == w["boxes"].format and g["boxes"].canvas_size == w["boxes"].canvas_size
            assert torch.equal(g["boxes"].as_subclass(torch.Tensor), w["boxes"].as_subclass(torch.Tensor))
            for k in ("labels", "iscrowd"):
                assert torch.equal(g[k], w[k]), k
            assert int(g["image_id"]) == int(w["image_id"])
            if "keypoints" in g:
                kpts += 1
                assert torch.equal(g["keypoints"].as_subclass(torch.Tensor), w["keypoints"].as_subclass(torch.Tensor))
                assert torch.equal(g["keypoints_visibility"], w["keypoints_visibility"])
            else:  # a sample without keypoints: no instance had any
                assert "keypoints" not in w or not bool(w["keypoints_visibility"].any())
    assert kpts > 0


@pytest.mark.filterwarnings("ignore:stoker.*could not be made:RuntimeWarning")
def test_malformed_member_fails_its_sample(stoker_bin: Path, det: Path, tmp_path: Path) -> None:
    doc = json.loads((det / "annotations" / "instances.json").read_text())
    with_boxes = {a["image_id"] for a in doc["annotations"]}
    bad = next(i for i, im in enumerate(sorted(doc["images"], key=lambda im: im["id"])) if im["id"] in with_boxes)
    shards = write_shards(det, tmp_path / "shards", bad=bad)
    with LocalServer(str(stoker_bin), {"wds": str(shards)}, workers=1,
                     args=["--grace", "1s", "--annotations", "wds=.json"], log_path=str(tmp_path / "server.log")) as srv:
        with stoker.Loader(srv.addr, "wds", batch_size=4, transform=T.Compose(TF), targets=True,
                           pin_memory=False, timeout=60, seed=3) as ld:
            n = sum(images.shape[0] for images, _ in ld)
            errors = list(ld.sample_errors)
    assert n == N and len(errors) == 1, (n, errors)
    e = errors[0]
    assert e.index == bad and f"{bad:06d}.json: annotation 0: field bbox" in e.reason, e.reason
