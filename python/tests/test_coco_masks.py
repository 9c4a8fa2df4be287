"""COCO masks as pycocotools makes them: `stoker annotations masks` (the Go
rasterizer of pipeline/annot) against the pinned pycocotools' annToRLE,
annToMask, area and toBbox, on the same annotations file: random polygons
(tiny, degenerate, collinear, out of the image, on the rounding
boundaries of the 5x upsampling), several polygons an instance (merge),
run-length masks given as counts lists and as compressed strings, and the
synthetic detection set of `stoker mkdata --coco`. Masks compared byte for
byte, counts strings equal."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

import pycocotools.mask as mask_util  # pinned in python/requirements.txt
from pycocotools.coco import COCO

# pycocotools' decode passes copy=False to numpy 2's __array__, which warns.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def random_polygon(rng: np.random.Generator, h: int, w: int) -> list:
    kind = rng.integers(0, 8)
    n = int(rng.integers(3, 24))
    if kind == 0:  # tiny: inside one pixel or two
        c = rng.uniform(0, [w, h])
        pts = c + rng.uniform(-0.7, 0.7, (n, 2))
    elif kind == 1:  # degenerate: all one point, or on a line
        c = rng.uniform(0, [w, h])
        if rng.integers(0, 2):
            pts = np.repeat(c[None], n, 0)
        else:
            d = rng.uniform(-1, 1, 2)
            pts = c + np.outer(rng.uniform(-20, 20, n), d)
    elif kind == 2:  # out of the image, partly or wholly
        pts = rng.uniform(-2 * max(w, h), 3 * max(w, h), (n, 2))
    elif kind == 3:  # on the grid of the upsampling: k/5 and k/5 - 0.1
        pts = rng.integers(-10, 5 * max(w, h) + 10, (n, 2)) / 5.0 - rng.integers(0, 2, (n, 2)) * 0.1
    elif kind == 4:  # integers and halves
        pts = rng.integers(-2, 2 * max(w, h) + 2, (n, 2)) / 2.0
    elif kind == 5:  # two decimals, as COCO's files
        pts = np.round(rng.uniform(-1, [w + 1, h + 1], (n, 2)), 2)
    else:  # a blob around a centre
        c = rng.uniform(0, [w, h])
        ang = np.sort(rng.uniform(0, 2 * np.pi, n))
        r = rng.uniform(0.5, max(w, h) / 2, n)
        pts = c + np.stack([np.cos(ang) * r, np.sin(ang) * r], 1)
    return [float(v) for v in pts.reshape(-1)]


def random_runs(rng: np.random.Generator, h: int, w: int) -> list:
    """Counts of an h x w mask, zero-length runs included."""
    total, runs = h * w, []
    while total > 0:
        r = int(min(total, rng.integers(0, max(2, total // 3 + 1))))
        runs.append(r)
        total -= r
    return runs


def make_file(path: Path, seed: int, images: int) -> None:
    rng = np.random.default_rng(seed)
    imgs, anns, aid = [], [], 1
    for i in range(images):
        h, w = (int(v) for v in rng.integers(1, 80, 2))
        if i % 10 == 0:
            h, w = (int(v) for v in rng.integers(100, 500, 2))
        imgs.append({"id": 1000 + i, "file_name": f"{i:05d}.jpg", "height": h, "width": w})
        for _ in range(int(rng.integers(1, 6))):
            kind = rng.integers(0, 6)
            if kind <= 3:
                seg = [random_polygon(rng, h, w) for _ in range(int(rng.integers(1, 4)))]
                crowd = 0
            elif kind == 4:
                seg = {"size": [h, w], "counts": random_runs(rng, h, w)}
                crowd = 1
            else:
                m = np.asfortranarray((rng.random((h, w)) < rng.uniform(0, 1)).astype(np.uint8))
                seg = mask_util.encode(m)
                seg["counts"] = seg["counts"].decode()
                crowd = 1
            anns.append({"id": aid, "image_id": 1000 + i, "category_id": int(rng.choice([1, 7, 90])),
                         "bbox": [0, 0, 1, 1], "area": 1.0, "iscrowd": crowd, "segmentation": seg})
            aid += 1
    cats = [{"id": c, "name": f"c{c}"} for c in (90, 1, 7)]
    path.write_text(json.dumps({"images": imgs, "annotations": anns, "categories": cats}))


def stoker_masks(stoker_bin: Path, path: Path) -> dict:
    r = subprocess.run([str(stoker_bin), "annotations", "masks", str(path)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    out = {}
    for line in r.stdout.splitlines():
        d = json.loads(line)
        assert "error" not in d, d
        out[d["id"]] = d
    return out


def compare(stoker_bin: Path, path: Path) -> int:
    coco = COCO(str(path))
    got = stoker_masks(stoker_bin, path)
    with_segm = [a for a in coco.dataset["annotations"] if a.get("segmentation")]
    assert set(got) == {a["id"] for a in with_segm}
    # The order: images by id, then the file's order within each.
    want_order = [a["id"] for i in sorted(coco.imgs) for a in coco.imgToAnns[i] if a.get("segmentation")]
    assert list(got) == want_order
    for a in with_segm:
        g = got[a["id"]]
        rle = coco.annToRLE(a)
        want_counts = rle["counts"].decode() if isinstance(rle["counts"], bytes) else rle["counts"]
        assert g["counts"] == want_counts, (a["id"], a["segmentation"])
        assert g["size"] == list(rle["size"])
        mine = mask_util.decode({"size": g["size"], "counts": g["counts"].encode()})
        np.testing.assert_array_equal(mine, coco.annToMask(a), err_msg=f"annotation {a['id']}")
        assert g["area"] == int(mask_util.area(rle))
        assert g["bbox"] == [float(v) for v in mask_util.toBbox(rle)], a["id"]
    return len(with_segm)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_masks_match_pycocotools(stoker_bin: Path, tmp_path: Path, seed: int) -> None:
    path = tmp_path / "instances.json"
    make_file(path, seed, 400)
    assert compare(stoker_bin, path) > 1000


def test_mkdata_coco_masks_match_pycocotools(stoker_bin: Path, tmp_path: Path) -> None:
    out = tmp_path / "det"
    r = subprocess.run([str(stoker_bin), "mkdata", "--coco", "--out", str(out), "--n", "40"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    path = out / "annotations" / "instances.json"
    n = compare(stoker_bin, path)
    coco = COCO(str(path))
    assert n == len(coco.dataset["annotations"]) > 40
    # The boxes mkdata writes are those of the masks it drew, and its
    # areas their pixel counts.
    for a in coco.dataset["annotations"]:
        rle = coco.annToRLE(a)
        assert a["area"] == float(mask_util.area(rle))
