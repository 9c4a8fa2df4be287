"""`stoker serve --dataset NAME=DIR --annotations NAME=FILE`: a COCO
dataset served with each sample's annotations as its field "coco", checked
against pycocotools' reading of the same file; a malformed annotation fails
its sample alone, naming the file, the annotation and the field; a file that
is not COCO, or that names images the directory has not, is refused at
start."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from pycocotools.coco import COCO

import stoker
from stoker import transforms as T
from stoker._local import LocalServer

N = 30


@pytest.fixture(scope="module")
def det(stoker_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("det")
    r = subprocess.run([str(stoker_bin), "mkdata", "--coco", "--out", str(out), "--n", str(N), "--seed", "5"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return out


def serve(stoker_bin: Path, det: Path, ann: Path, tmp_path: Path) -> LocalServer:
    return LocalServer(str(stoker_bin), {"coco": str(det / "images" / "train")}, workers=1,
                       args=["--grace", "1s", "--annotations", f"coco={ann}"], log_path=str(tmp_path / "server.log"))


@pytest.mark.filterwarnings("ignore:stoker.*could not be made:RuntimeWarning")
def test_annotations_reach_the_trainer(stoker_bin: Path, det: Path, tmp_path: Path) -> None:
    """Every image once an epoch, each with its own annotations (those
    pycocotools reads for it, in its order), label -1; one annotation made
    malformed fails its image alone, saying where."""
    doc = json.loads((det / "annotations" / "instances.json").read_text())
    broken = doc["annotations"][7]
    broken["bbox"] = broken["bbox"][:3]  # not 4 numbers (a negative width is kept, as torchvision keeps it)
    ann = tmp_path / "instances.json"
    ann.write_text(json.dumps(doc))
    coco = COCO(str(ann))
    by_file = {im["file_name"]: im for im in coco.dataset["images"]}
    labels = {c: i for i, c in enumerate(sorted(coco.cats))}
    broken_file = coco.imgs[broken["image_id"]]["file_name"]
    with serve(stoker_bin, det, ann, tmp_path) as srv:
        with stoker.Loader(srv.addr, "coco", batch_size=4, transform=T.Compose([T.Resize((32, 32))]),
                           fields=("coco", "path"), pin_memory=False, timeout=60, seed=1) as ld:
            seen = []
            for b in ld:
                assert b.labels.tolist() == [-1] * b.images.shape[0]
                for raw, path in zip(b.fields["coco"], b.fields["path"]):
                    got = json.loads(raw)
                    im = by_file[path.decode()]
                    assert got["image"] == {"id": im["id"], "file_name": im["file_name"], "width": im["width"], "height": im["height"]}
                    want = coco.imgToAnns[im["id"]]
                    assert [a["id"] for a in got["annotations"]] == [a["id"] for a in want]
                    for g, w in zip(got["annotations"], want):
                        assert g["bbox"] == w["bbox"] and g["category_id"] == w["category_id"]
                        assert g["label"] == labels[w["category_id"]]
                        assert g["iscrowd"] == w["iscrowd"] and g["area"] == w["area"]
                        assert g["segmentation"] == w["segmentation"]
                        assert g.get("keypoints") == w.get("keypoints")
                    seen.append(path.decode())
            errors = list(ld.sample_errors)
    assert len(errors) == 1, errors
    e = errors[0]
    assert e.name == broken_file
    assert "instances.json" in e.reason and f"annotation {broken['id']}" in e.reason and "field bbox" in e.reason, e.reason
    # Every image came once, but the broken one, whose place another
    # sample filled.
    assert set(seen) == set(by_file) - {broken_file}


def test_not_coco_refused_at_start(stoker_bin: Path, det: Path, tmp_path: Path) -> None:
    bad = tmp_path / "labels.json"
    bad.write_text(json.dumps([{"image": "000000.jpg", "label": 3}]))
    with pytest.raises(RuntimeError):
        serve(stoker_bin, det, bad, tmp_path)
    log = (tmp_path / "server.log").read_text()
    assert "not a COCO annotations file" in log and 'want a JSON object with "images"' in log, log


def test_annotations_of_another_directory_refused(stoker_bin: Path, det: Path, tmp_path: Path) -> None:
    doc = json.loads((det / "annotations" / "instances.json").read_text())
    doc["images"][3]["file_name"] = "elsewhere.jpg"
    ann = tmp_path / "instances.json"
    ann.write_text(json.dumps(doc))
    with pytest.raises(RuntimeError):
        serve(stoker_bin, det, ann, tmp_path)
    log = (tmp_path / "server.log").read_text()
    assert "1 of the 30 images" in log and "elsewhere.jpg" in log, log
