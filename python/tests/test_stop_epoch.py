"""The DETR family's stop_epoch against a real ``stoker serve``: with
``stop_epoch=1``, epoch 0 has RandomPhotometricDistort's, RandomZoomOut's
and RandomIoUCrop's steps (some samples), epoch 1 none; in both, every
sample's boxes are torchvision's replay of its trace on the source boxes
(the same float32 bits: test_targets.check), and from the stop on its
pixels are torchvision's functional ops of the trace (the flip, the
resize) on decode_jpeg's pixels, byte for byte. With RandomIoUCrop alone
stopped, epoch 1 still zooms out and flips, its boxes still torchvision's."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, List

import pytest
import torch
from torchvision.io import ImageReadMode, decode_jpeg, read_file
from torchvision.transforms import v2 as tv2

import stoker
from stoker import transforms as T
from stoker._errors import StokerError
from test_detection_ops import replay_pixels
from test_targets import N, check, coco_sources, det, server  # noqa: F401 (the fixtures)

#: The trace's steps of the ops the stop switches off.
STOPPED = {"pad", "iou_crop", "adjust_brightness", "adjust_contrast", "adjust_saturation", "adjust_hue",
           "permute_channels"}


def run(server: str, det: Path, transform: Any, pixels: bool = True, **kw: Any) -> List[Counter]:  # noqa: F811
    """Epochs 0 and 1 of a loader with stop_epoch=1: checks every sample's
    boxes (and, with ``pixels``, the D-FINE recipe's epoch 1 pixels and
    steps); returns, per epoch, how many samples drew each step."""
    want = coco_sources(det)
    images_dir = det / "images" / "train"
    drew = []
    with stoker.Loader(server, "coco", transform=transform, batch_size=4, seed=5, targets=True, trace=True,
                       return_indices=True, fields=("path",), pin_memory=False, timeout=120, stop_epoch=1,
                       **kw) as ld:
        for epoch in range(2):
            n, count = 0, Counter()
            for b in ld:
                assert b.epoch == epoch
                images, targets, indices = b
                for i, (t, idx) in enumerate(zip(targets, indices.tolist())):
                    trace = b.trace[i]
                    count.update({op for op, _ in trace})
                    check(t, want[idx], trace, images[i], f"epoch {epoch} sample {idx}")
                    if epoch == 1 and pixels:
                        assert [op for op, _ in trace] in (
                            ["sanitize_bounding_boxes", "resize", "sanitize_bounding_boxes"],
                            ["sanitize_bounding_boxes", "horizontal_flip", "resize", "sanitize_bounding_boxes"]), trace
                        src = decode_jpeg(read_file(str(images_dir / b.fields["path"][i].decode())), mode=ImageReadMode.RGB)
                        assert torch.equal(images[i], replay_pixels(src, trace)), f"epoch 1 sample {idx}: {trace}"
                    n += 1
            assert n == N
            drew.append(count)
        assert not list(ld.sample_errors)
    return drew


def stopped(count: Counter) -> int:
    return sum(count[s] for s in STOPPED)


def test_detr_preset_stops(server: str, det: Path) -> None:  # noqa: F811
    """transform="detr" with stop_epoch=1: D-FINE's three ops by default."""
    drew = run(server, det, "detr")
    assert stopped(drew[0]) > 0 and stopped(drew[1]) == 0, drew


def test_from_torchvision_stops(server: str, det: Path) -> None:  # noqa: F811
    """A recipe converted from torchvision's classes (which have no
    stop_epoch), the ops to stop named by their torchvision classes."""
    recipe = T.from_torchvision(tv2.Compose([
        tv2.RandomPhotometricDistort(p=0.5), tv2.RandomZoomOut(fill=0), tv2.RandomIoUCrop(),
        tv2.SanitizeBoundingBoxes(min_size=1), tv2.RandomHorizontalFlip(), tv2.Resize((160, 160)),
        tv2.SanitizeBoundingBoxes()]))
    drew = run(server, det, recipe, stop_ops=(tv2.RandomPhotometricDistort, tv2.RandomZoomOut, tv2.RandomIoUCrop))
    assert stopped(drew[0]) > 0 and stopped(drew[1]) == 0, drew


def test_iou_crop_alone_stops(server: str, det: Path) -> None:  # noqa: F811
    """Only RandomIoUCrop stopped: epoch 1 still zooms out (and distorts),
    its crops gone; the boxes follow the zoom and the flip as torchvision
    replays them."""
    recipe = T.Compose([T.RandomPhotometricDistort(p=0.5), T.RandomZoomOut(), T.RandomIoUCrop(),
                        T.SanitizeBoundingBoxes(), T.RandomHorizontalFlip(), T.Resize((120, 160)),
                        T.SanitizeBoundingBoxes()])
    drew = run(server, det, recipe, pixels=False, stop_ops=("RandomIoUCrop",))
    assert drew[0]["iou_crop"] > 0 and drew[1]["iou_crop"] == 0, drew
    assert drew[1]["pad"] > 0 and drew[1]["horizontal_flip"] > 0, drew  # the zoom and the flip are not stopped


def test_stop_epoch_refused(server: str) -> None:  # noqa: F811
    with pytest.raises(ValueError, match="stop_ops needs stop_epoch"):
        stoker.Loader(server, "coco", transform="detr", targets=True, stop_ops=("RandomZoomOut",))
    with pytest.raises(ValueError, match="stop_epoch must be in 1"):
        stoker.Loader(server, "coco", transform="detr", targets=True, stop_epoch=0)
    with pytest.raises(TypeError, match="stop_ops"):
        stoker.Loader(server, "coco", transform="detr", targets=True, stop_epoch=3, stop_ops=(3,))
    with stoker.Loader(server, "coco", transform="detr", targets=True, stop_epoch=3, stop_ops=("Resize",),
                       timeout=60) as ld:
        with pytest.raises(StokerError, match="Resize cannot be switched off") as e:
            next(iter(ld))
        assert e.value.code == "INVALID_ARGUMENT"


def test_state_dict_holds_the_stop(server: str) -> None:  # noqa: F811
    """A state_dict records the stop: loading it into a loader with
    another stop_epoch or stop_ops is refused, as another transform is."""
    kw = dict(transform="detr", targets=True, timeout=60)
    with stoker.Loader(server, "coco", stop_epoch=3, **kw) as a, stoker.Loader(server, "coco", stop_epoch=4, **kw) as b, \
            stoker.Loader(server, "coco", stop_epoch=3, stop_ops=("RandomIoUCrop",), **kw) as c, \
            stoker.Loader(server, "coco", stop_epoch=3, **kw) as d:
        state = a.state_dict()
        assert state["stop_epoch"] == 3 and state["stop_ops"] == []
        with pytest.raises(ValueError, match="stop_epoch: saved 3, now 4"):
            b.load_state_dict(state)
        with pytest.raises(ValueError, match="stop_ops: saved"):
            c.load_state_dict(state)
        d.load_state_dict(state)
