"""RandomCrop, Pad (before or after a RandomCrop or a CenterCrop) and a CenterCrop
larger than the image against torchvision:
the samples the server makes of the eval photos are, byte for byte,
torchvision's ``F.pad`` (constant fill; a Pad's, then RandomCrop's) then ``F.crop`` (or ``F.center_crop``,
which pads with zeros) of ``decode_jpeg``'s pixels at the traced
arguments, flipped after where traced; and RandomCrop's positions are drawn
as torchvision's ``make_params`` draws them (test_parity_sampling.py's
chi-square on top and left)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List

import pytest
import torch
from torchvision.io import ImageReadMode, decode_jpeg, read_file
from torchvision.transforms import v2 as T
from torchvision.transforms.v2 import functional as F

from helpers import loader
from stoker import transforms as ST
from stoker.v1 import stoker_pb2 as pb
from test_parity_sampling import continuous_case, image

CASES: Dict[str, List[pb.Op]] = {
    # CIFAR's recipe on photos: a crop inside, 4 px of zeros around
    "padding": [ST.RandomCrop(224, padding=[4]).to_proto()],
    # crops larger than the photos (300-500 px): pad_if_needed, a fill per
    # channel, uneven padding, flipped after
    "pad-if-needed": [ST.RandomCrop((520, 480), padding=[3, 0, 9, 2], pad_if_needed=True,
                                    fill=[10, 200, 30]).to_proto(),
                      ST.RandomHorizontalFlip().to_proto()],
    "center-crop-larger": [ST.CenterCrop((515, 520)).to_proto()],
    # Pad: CIFAR's recipe written with Pad (the crop reaches into it), a
    # fill per channel; then RandomCrop's own padding of the same fill
    "pad-random-crop": [ST.Pad([4]).to_proto(), ST.RandomCrop(224).to_proto()],
    "pad-random-crop-fill": [ST.Pad([2, 50, 7, 1], fill=[10, 200, 30]).to_proto(),
                             ST.RandomCrop((520, 480), padding=[3], pad_if_needed=True, fill=[10, 200, 30]).to_proto(),
                             ST.RandomHorizontalFlip().to_proto()],
    # Pad then CenterCrop: into the Pad's fill (photos of 213-500 px), and
    # past the padded image (center_crop's zeros beside a Pad of 0)
    "pad-center-crop": [ST.Pad([300, 300], fill=[7, 8, 9]).to_proto(), ST.CenterCrop((500, 540)).to_proto()],
    "pad-center-crop-larger": [ST.Pad([5, 0, 1, 3]).to_proto(), ST.CenterCrop((515, 520)).to_proto()],
    # Pad after the crop: CIFAR's recipe's crop padded again (a fill per
    # channel), and a CenterCrop past the photos (zeros) then Pad(0),
    # flipped after
    "random-crop-pad": [ST.RandomCrop(200, padding=[4], fill=[10, 200, 30]).to_proto(),
                        ST.Pad([3, 0, 9, 2], fill=[10, 200, 30]).to_proto()],
    "center-crop-larger-pad": [ST.CenterCrop((515, 520)).to_proto(), ST.Pad([1, 2]).to_proto(),
                               ST.RandomHorizontalFlip().to_proto()],
    # a resize before the padded crop: torch's kernels to the byte, bicubic
    # and (the default) antialiased bilinear
    "resize-center-crop-larger": [ST.Resize(200, interpolation="bicubic").to_proto(), ST.CenterCrop(230).to_proto()],
    "resize-center-crop-larger-bilinear": [ST.Resize(200).to_proto(), ST.CenterCrop(230).to_proto()],
    # RandomZoomOut: the canvas resized (a fill per channel; antialiased
    # bilinear down, bicubic, nearest), flipped after; the canvas cropped
    # (RandomCrop, CenterCrop: its padding before theirs)
    "zoom-out-resize": [ST.RandomZoomOut(fill=[10, 200, 30], p=0.8).to_proto(), ST.Resize((160, 200)).to_proto(),
                        ST.RandomHorizontalFlip().to_proto()],
    "zoom-out-resize-bicubic": [ST.RandomZoomOut(side_range=(1.2, 2), p=1).to_proto(),
                                ST.Resize((600, 640), interpolation="bicubic").to_proto()],
    "zoom-out-resize-nearest": [ST.RandomZoomOut(fill=[5], p=0.7).to_proto(),
                                ST.Resize((300, 300), interpolation="nearest").to_proto()],
    "zoom-out-random-crop": [ST.RandomZoomOut(fill=[10, 200, 30], side_range=(1, 2)).to_proto(),
                             ST.RandomCrop((400, 450), pad_if_needed=True, fill=[10, 200, 30]).to_proto()],
    "zoom-out-center-crop": [ST.RandomZoomOut(side_range=(1.5, 3), p=0.9).to_proto(),
                             ST.CenterCrop((520, 500)).to_proto()],
}


def _replay(img: torch.Tensor, trace: List) -> torch.Tensor:
    for name, a in trace:
        kw: Dict[str, Any] = dict(a)
        if "interpolation" in kw:
            kw["interpolation"] = T.InterpolationMode(kw["interpolation"])
        img = getattr(F, name)(img, **kw)
    return img


@pytest.mark.parametrize("case", list(CASES))
def test_pixels_are_torchvisions(server: str, data_dirs: Dict[str, Path], case: str) -> None:
    files = sorted(p for p in data_dirs["eval"].rglob("*.jpg"))
    decoded = [decode_jpeg(read_file(str(f)), mode=ImageReadMode.RGB) for f in files]
    n, padded = 0, 0
    for seed in range(3):
        with loader(server, "eval", batch_size=4, shuffle=False, seed=seed, trace=True) as ld:
            ld._spec = pb.TransformSpec(ops=CASES[case])
            for b in ld:
                for img, idx, tr in zip(b.images, b.indices.tolist(), b.trace):
                    want = _replay(decoded[idx], tr)
                    assert torch.equal(img, want), f"{case} sample {idx}: not torchvision's {tr}"
                    n += 1
                    size = list(decoded[idx].shape[-2:])
                    for s, a in tr:
                        if s == "resize":
                            size = a["size"]
                        padded += s == "pad" or (s == "center_crop" and (a["output_size"][0] > size[0] or
                                                                           a["output_size"][1] > size[1]))
    assert n > 0 and padded > 0, f"{case}: {n} samples, {padded} of them padded"


@pytest.mark.parametrize("spec, tv", [
    (ST.RandomCrop((300, 360), padding=[5, 7]), lambda: T.RandomCrop((300, 360), padding=[5, 7])),
    (ST.RandomCrop((400, 520), pad_if_needed=True), lambda: T.RandomCrop((400, 520), pad_if_needed=True)),
])
def test_positions_are_torchvisions(stoker_bin: Path, spec: ST.RandomCrop, tv: Any) -> None:
    t = tv()
    img = image(375, 500)
    continuous_case(stoker_bin, spec.to_proto(), "crop", lambda a: {"top": a["top"], "left": a["left"]},
                    lambda: {k: float(v) for k, v in t.make_params([img]).items() if k in ("top", "left")},
                    seed=21, source=(500, 375), geometry=True)
