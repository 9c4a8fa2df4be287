"""bench/detcompare.py's torchvision side (make bench-detection): its
FixedSizeCrop, which torchvision.transforms.v2 lacks, is the detection
references' that test_lsj.py checks stoker's against (the same draw, the
same pixels, boxes and labels kept), and make bench-detection makes its
COCO-sized set with mkdata --coco --yolo and runs every preset; yolo's
baseline, ultralytics' own training dataloader (bench/yolocompare.py), runs
on a small YOLO-layout set."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torchvision import tv_tensors

from test_lsj import fixed_size_crop, their_fixed_offset

REPO = Path(__file__).resolve().parents[2]


def detcompare():
    spec = importlib.util.spec_from_file_location("detcompare", REPO / "bench" / "detcompare.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("hw", [(300, 500), (700, 900), (1100, 600)])
def test_fixed_size_crop_is_the_references(hw) -> None:
    """Cropped on a side larger than 640, padded on a smaller one: the
    baseline's FixedSizeCrop gives, seed for seed, what test_lsj's
    fixed_size_crop gives at the references' draw."""
    h, w = hw
    crop = detcompare().fixed_size_crop_class()(640, fill=(123, 117, 104))
    g = torch.Generator().manual_seed(h * w)
    img = torch.randint(0, 256, (3, h, w), dtype=torch.uint8, generator=g)
    xy = torch.rand(12, 2, generator=g) * torch.tensor([w, h])
    wh = torch.rand(12, 2, generator=g) * 150 + 1
    boxes = tv_tensors.BoundingBoxes(torch.cat([xy, xy + wh], 1), format="XYXY", canvas_size=(h, w))
    labels = torch.arange(12)
    dropped = 0
    for seed in range(8):
        torch.manual_seed(seed)
        got_img, got = crop(img, {"boxes": boxes, "labels": labels})
        torch.manual_seed(seed)
        top, left = their_fixed_offset(h, w, (640, 640))
        ch, cw = min(h, 640), min(w, 640)
        want_img, _ = fixed_size_crop(img, top, left, ch, cw, [640, 640], [123, 117, 104])
        want_boxes, keep = fixed_size_crop(boxes, top, left, ch, cw, [640, 640], [123, 117, 104])
        assert got_img.shape == (3, 640, 640) and torch.equal(got_img, want_img), (hw, seed)
        assert torch.equal(got["boxes"].as_subclass(torch.Tensor), want_boxes.as_subclass(torch.Tensor)), (hw, seed)
        assert tuple(got["boxes"].canvas_size) == (640, 640)
        assert torch.equal(got["labels"], labels[keep]), (hw, seed)
        dropped += int((~keep).sum())
    if max(h, w) > 640:
        assert dropped > 0, "no box left outside a crop: the test does not test the drop"


def test_make_bench_detection_runs_every_preset() -> None:
    out = subprocess.run(["make", "-n", "bench-detection", "DET_N=3"], cwd=REPO, capture_output=True, text=True,
                         timeout=60, check=True).stdout
    assert "mkdata --coco --yolo --out out/bench-det-640-3.tmp --n 3 --max-side 640 --instances 7" in out
    assert "for t in detr ssdlite lsj segref ssd yolo; do" in out
    assert "bench/detcompare.py --stoker bin/stoker --data out/bench-det-640-3 --transform $t" in out


def yolocompare():
    spec = importlib.util.spec_from_file_location("yolocompare", REPO / "bench" / "yolocompare.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def yolo_set(stoker_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small YOLO-layout set (polygon labels), as make bench-detection's
    but 12 photos of 320 px."""
    out = tmp_path_factory.mktemp("yolo") / "det"
    r = subprocess.run([str(stoker_bin), "mkdata", "--coco", "--yolo", "--out", str(out), "--n", "12", "--max-side", "320",
                        "--instances", "7"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return out


def test_yolo_boxes_set_is_each_polygons_extent(yolo_set: Path) -> None:
    """The "boxes" baseline's labels: each polygon line as its box (class
    cx cy w h), the images linked, not copied."""
    boxes = Path(yolocompare().boxes_set(str(yolo_set)))
    assert (boxes / "images" / "train").is_symlink()
    n = 0
    for lp in sorted((yolo_set / "labels" / "train").glob("*.txt")):
        want = [line.split() for line in lp.read_text().splitlines() if line.strip()]
        got = [line.split() for line in (boxes / "labels" / "train" / lp.name).read_text().splitlines()]
        assert len(got) == len(want), lp.name
        for g, w in zip(got, want):
            xs, ys = [float(v) for v in w[1::2]], [float(v) for v in w[2::2]]
            assert len(w) > 5 and g[0] == w[0]
            box = [(min(xs) + max(xs)) / 2, (min(ys) + max(ys)) / 2, max(xs) - min(xs), max(ys) - min(ys)]
            assert [float(v) for v in g[1:]] == pytest.approx(box, abs=2e-6)
            n += 1
    assert n > 12


@pytest.mark.parametrize("labels", ["polygons", "boxes"])
def test_yolo_baseline_runs(yolo_set: Path, labels: str) -> None:
    """ultralytics' own training dataloader (YOLODataset, mosaic 640, its
    collate) runs on the set, one core: 640x640 uint8 mosaics with their
    instances, OpenCV single-threaded as ultralytics leaves it."""
    r = subprocess.run([sys.executable, str(REPO / "bench" / "yolocompare.py"), "--baseline", labels, "--data",
                        str(yolo_set), "--seconds", "0.1", "--batch", "4"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    b = json.loads(r.stdout.strip().splitlines()[-1])
    assert b["ultralytics"] == "8.4.190" and b["cv2_threads"] <= 1, b
    assert b["images"] >= 4 and b["images"] % 4 == 0 and b["images_per_cpu_sec"] > 0, b
    assert b["image_shape"] == [3, 640, 640] and b["image_dtype"] == "torch.uint8", b
    assert b["instances_per_sample"] > 1, b


def test_yolocompare_rounds(stoker_bin: Path, yolo_set: Path) -> None:
    """The whole comparison, one short round: stoker's side says "preset not
    available" exactly when stoker refuses the yolo preset, else a verdict
    on the smaller of the two ratios, each stoker row against ultralytics
    on the same labels."""
    known = subprocess.run([str(stoker_bin), "bench", "pipeline", "--data", str(yolo_set / "images" / "train"),
                            "--annotations", str(yolo_set / "data.yaml"), "--transform", "yolo", "--epochs", "1"],
                           capture_output=True, text=True, timeout=300)
    has_yolo = 'unknown transform preset "yolo"' not in known.stderr
    r = subprocess.run([sys.executable, str(REPO / "bench" / "yolocompare.py"), "--stoker", str(stoker_bin), "--data",
                        str(yolo_set), "--seconds", "0.1", "--rounds", "1", "--batch", "4", "--json"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert res["stoker_preset"] is has_yolo, (known.stderr, res)
    rates = res["images_per_cpu_sec"]
    assert set(rates) >= {"ultralytics polygons", "ultralytics boxes"}
    if has_yolo:
        assert set(rates) >= {f"stoker {x} {p}" for x in ("polygons", "boxes") for p in ("epoch1", "later")}
        ratios = {x: rates[f"stoker {x} later"] / rates[f"ultralytics {x}"] for x in ("polygons", "boxes")}
        assert res["verdict_baseline"] == min(ratios, key=ratios.get), res  # the smaller like-for-like ratio
        assert res["verdict"] in ("PASS", "FAIL") and res["target"] == 2.0
    else:
        assert res["verdict"] == "preset not available" and "preset not available" in r.stdout


def test_detcompare_runs_yolocompare_for_yolo(yolo_set: Path) -> None:
    """make bench-detection's loop gives yolo to detcompare.py, which runs
    yolocompare.py (its baseline is not torchvision's)."""
    r = subprocess.run([sys.executable, str(REPO / "bench" / "detcompare.py"), "--transform", "yolo", "--baseline",
                        "--data", str(yolo_set)], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "yolocompare.py --baseline" in r.stderr, r.stderr
