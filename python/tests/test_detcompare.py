"""bench/detcompare.py's torchvision side (make bench-detection): its
FixedSizeCrop, which torchvision.transforms.v2 lacks, is the detection
references' that test_lsj.py checks stoker's against (the same draw, the
same pixels, boxes and labels kept), and make bench-detection makes its
COCO-sized set with mkdata --coco and runs both presets."""

from __future__ import annotations

import importlib.util
import subprocess
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


def test_make_bench_detection_runs_both_presets() -> None:
    out = subprocess.run(["make", "-n", "bench-detection", "DET_N=3"], cwd=REPO, capture_output=True, text=True,
                         timeout=60, check=True).stdout
    assert "mkdata --coco --out out/bench-coco-640-3.tmp --n 3 --max-side 640 --instances 7" in out
    assert "for t in detr lsj; do" in out and "bench/detcompare.py --stoker bin/stoker --data out/bench-coco-640-3 --transform $t" in out
