"""The server's word on stoker.transforms' specs (the session's real
`stoker serve`): every class's spec is accepted and runs, the recipes
converted by from_torchvision make the presets' batches, and bad specs
built directly as protobufs are refused with INVALID_ARGUMENT naming the op
and the argument. The kernels are not asserted on here (their parity with
torchvision is the Go side's)."""

from __future__ import annotations

import pytest
import torch
from test_from_torchvision import PRESET_OPS, dino, open_clip, simclr, tv_resnet50_v2
from test_transforms import SPECS, _mask
from torchvision.transforms import v2 as tv2

import stoker
from helpers import assert_same_batches, loader
from stoker import transforms as T
from stoker._ops_base import named_op
from stoker.v1 import stoker_pb2 as pb

pytestmark = pytest.mark.filterwarnings(r"ignore:The transform `ToTensor\(\)` is deprecated:UserWarning")

SIZE = 16
GEOMETRY = ("RandomResizedCrop", "Resize", "CenterCrop", "RandomCrop", "Pad", "RandomZoomOut", "RandomIoUCrop",
            "ScaleJitter", "FixedSizeCrop", "RandomShortestSize", "RandomResize", "PadIfSmaller", "Normalize")


#: Ops that act on a job's targets alone: refused in these jobs, which
#: have none (test_targets.py runs them, and checks that refusal).
TARGETS_ONLY = {"SanitizeBoundingBoxes", "RandomIoUCrop", "ConvertBoundingBoxFormat", "ClampBoundingBoxes",
                "ClampKeyPoints", "SanitizeKeyPoints"}


#: The YOLO family's geometry, named ops (test_yolo_ops.py runs them).
YOLO_GEOMETRY = {"YOLOLoadImage", "YOLOLetterBox", "YOLORandomPerspective", "YOLOMosaic", "YOLOMixUp",
                 "YOLOCopyPaste", "YOLOCutMix"}


def _after_geometry():
    """Each op of test_transforms.SPECS that runs after the geometry, on
    any dataset."""
    return [make() for make, want in SPECS if want.named.name not in (*GEOMETRY, *TARGETS_ONLY, *YOLO_GEOMETRY)
            and not getattr(make(), "expand", False)]  # a RandomRotation of its own size: below


def test_every_op_is_accepted(server: str) -> None:
    ops = _after_geometry()
    assert len(ops) > 35
    for op in ops:
        ld = loader(server, transform=[T.RandomResizedCrop(SIZE), op], batch_size=8)
        assert len(ld) == 6, op  # DescribeJob: compiled by the server, nothing made
    for geometry in ([T.RandomResizedCrop(SIZE, interpolation="bicubic", antialias=False)],
                     [T.Resize((SIZE, 20), interpolation="nearest")],
                     [T.Resize(20), T.CenterCrop(SIZE)], [T.CenterCrop(SIZE)],
                     [T.CenterCrop(SIZE), T.Normalize([0.5], [0.2])],
                     [T.RandomCrop(SIZE, padding=4, pad_if_needed=True, fill=(1, 2, 3))],
                     [T.Pad(4, fill=(1, 2, 3)), T.RandomCrop(SIZE, pad_if_needed=True, fill=(1, 2, 3))],
                     [T.Pad((2, 3)), T.CenterCrop(SIZE)], [T.CenterCrop(SIZE - 4), T.Pad(2)],
                     [T.RandomZoomOut(fill=(1, 2, 3)), T.Resize((SIZE, 20))], [T.RandomZoomOut(), T.CenterCrop(SIZE)],
                     [T.RandomZoomOut(side_range=(1, 2), p=1), T.RandomCrop(SIZE)],
                     [T.RandomPhotometricDistort(), T.Resize((SIZE, 20))],
                     [T.RandomPhotometricDistort(p=1), T.RandomZoomOut(), T.Resize((SIZE, 20))],
                     [T.ScaleJitter((SIZE, SIZE)), T.FixedSizeCrop(SIZE, fill=(1, 2, 3))], [T.FixedSizeCrop((SIZE, 20))],
                     [T.RandomShortestSize((20, 30)), T.CenterCrop(SIZE)], [T.RandomResize(20, 30), T.CenterCrop(SIZE)],
                     [T.RandomResize(20, 30), T.RandomHorizontalFlip(), T.PadIfSmaller(SIZE, fill={_mask(): 255}),
                      T.RandomCrop(SIZE)], [T.RandomResize(40, 50), T.RandomCrop(SIZE, pad_if_needed=True)],
                     [T.YOLOLoadImage(40), T.YOLOLetterBox(SIZE)],
                     [T.YOLOLoadImage(40), T.YOLOLetterBox((SIZE, 20)), T.YOLORandomPerspective(degrees=5.0)],
                     [T.YOLOLoadImage(40), T.YOLORandomPerspective(perspective=0.001, size=SIZE)],
                     [T.YOLOMosaic(32)], [T.YOLOMosaic(32, n=9), T.YOLOMixUp(0.5)],
                     [T.YOLOMosaic(40, p=0.5), T.YOLORandomPerspective(size=SIZE)],
                     [T.YOLOMosaic(40), T.YOLORandomPerspective(size=SIZE), T.YOLOMixUp(0.5)],
                     [T.RandomResizedCrop(SIZE), T.RandomRotation(15, expand=True), T.CenterCrop(SIZE)],
                     [T.RandomResizedCrop(SIZE), T.RandomRotation(15, expand=True), T.Resize((SIZE, 20))]):
        assert len(loader(server, transform=geometry, batch_size=8)) == 6, geometry


def test_every_op_runs(server: str) -> None:
    ops = _after_geometry()
    # At most 32 ops after the geometry: two chains.
    for chain in (ops[: len(ops) // 2], ops[len(ops) // 2:]):
        with loader(server, transform=[T.RandomResizedCrop(SIZE), *chain, T.Normalize([0.5] * 3, [0.25] * 3)],
                    batch_size=8) as ld:
            images, labels = next(iter(ld))
        assert images.shape == (8, 3, SIZE, SIZE) and images.dtype == torch.float32 and labels.shape == (8,)
    # An expanding rotation makes an image larger than the crop (each its own
    # size, the batch padded to its largest); a CenterCrop after it the crop's again.
    with loader(server, transform=[T.RandomResizedCrop(SIZE), T.RandomRotation((10, 20), expand=True),
                                   T.CenterCrop(SIZE)], batch_size=8) as ld:
        images, labels = next(iter(ld))
    assert images.shape == (8, 3, SIZE, SIZE) and labels.shape == (8,)


def test_presets_are_accepted(server: str) -> None:
    for name in T.PRESETS:
        if name in ("detr", "ssdlite", "lsj", "frcnn"):  # jobs with targets only: test_detection_ops.py, test_lsj.py, test_sizes.py
            continue
        assert len(loader(server, transform=name, batch_size=8)) == 6, name


def _recipes():
    g1, _, local = dino(tv2)
    return {
        "tv-resnet50-v2": T.from_torchvision(tv_resnet50_v2(tv2)),
        "simclr-view": T.from_torchvision(simclr(tv2)),
        "dino-global": T.from_torchvision(g1),
        "dino-local": T.from_torchvision(local),
        "clip": T.from_torchvision(open_clip(tv2)),
        "deit": T.Compose(PRESET_OPS["deit"]),
    }


@pytest.mark.parametrize("preset", sorted(PRESET_OPS))
def test_recipes_make_the_presets_batches(server: str, preset: str) -> None:
    """The recipe, converted from torchvision's Compose (or built from
    stoker's classes), is the preset: the same draws (the traces: every
    parameter, interpolations included) and the same batches, seed for
    seed."""
    recipe = _recipes()[preset]
    assert recipe.transforms == PRESET_OPS[preset]
    kw = dict(batch_size=16, seed=7, return_indices=True, trace=True)
    with loader(server, transform=preset, **kw) as a, loader(server, transform=recipe, **kw) as b:
        (got, got_traces), (want, want_traces) = _take(b), _take(a)
    assert got_traces == want_traces
    assert all(s[0][0] == "resized_crop" for t in got_traces for s in t)
    assert_same_batches(got, want)


def _take(ld: stoker.Loader):
    """An epoch's batches (copied: a loader reuses its buffers) and traces."""
    batches, traces = [], []
    for b in ld:
        batches.append(tuple(t.clone() for t in b))
        traces.append(b.trace)
    return batches, traces


def _op(name: str, **args) -> pb.Op:
    """An op as a client that skips stoker.transforms' checks sends it."""
    return named_op(name, **{k: pb.OpList(ops=v) if isinstance(v, list) else v for k, v in args.items()})


RRC = _op("RandomResizedCrop", size=SIZE)
FLIP = _op("RandomHorizontalFlip")

BAD_SPECS = [
    ([RRC, _op("RandomSolarize", threshold=128, p=1.5)], ["op 1", "RandomSolarize", "p: 1.5: want 0..1"]),
    ([RRC, FLIP, _op("RandomGrayscale", p=-0.5)], ["op 2", "RandomGrayscale", "p: -0.5: want 0..1"]),
    ([RRC, _op("RandomApply", transforms=[_op("GaussianBlur", kernel_size=4)])],
     ["op 1 (RandomApply) > op 0 (GaussianBlur)", "kernel_size [4 4]"]),
    ([RRC, FLIP, _op("RandAugment", magnitude=31)], ["op 2 (RandAugment)", "magnitude 31"]),
    ([FLIP, RRC], ["op 0 is RandomHorizontalFlip", "the first op must be the geometry"]),
    ([RRC, _op("AutoAugment", policy="imagenet2")], ["op 1 (AutoAugment)", 'policy "imagenet2"']),
    ([RRC, _op("TimmRandAugment", config="rand-m9-x3")], ["op 1 (TimmRandAugment)", 'unknown section "x"']),
    ([RRC, _op("TimmRandAugment", config="rand-m31")], ["op 1 (TimmRandAugment)", "m31"]),
    ([RRC, _op("RandomErasing", value=300)], ["op 1 (RandomErasing)", "value [300 300 300]"]),
    ([RRC, _op("RandomRotation", degrees=10, interpolation="bicubic")], ["op 1 (RandomRotation)", "interpolation bicubic"]),
    ([RRC, _op("Grayscale", num_output_channels=1)], ["op 1", "Grayscale", "num_output_channels=1"]),
    ([RRC, _op("RandomChoice", transforms=[FLIP], p=(1, 2))], ["op 1 (RandomChoice)", "2 values of p"]),
    ([RRC, _op("RandomSolarize", threshold=128, bits=3)], ["op 1", "RandomSolarize", 'unknown argument "bits"']),
    ([RRC, _op("ColorJitter", brightness=(0.5, 1.5, 2))], ["op 1", "ColorJitter", "brightness [0.5 1.5 2]"]),
    ([RRC, _op("RandomErasing", value="noise")], ["op 1", "RandomErasing", "want 'random'"]),
]


@pytest.mark.parametrize("ops,want", BAD_SPECS, ids=lambda x: None)
def test_bad_specs_are_refused_naming_the_op_and_argument(server: str, ops, want) -> None:
    spec = pb.TransformSpec(ops=ops)
    with pytest.raises(stoker.StokerError) as e:
        len(loader(server, transform=spec))
    assert e.value.code == "INVALID_ARGUMENT", e.value
    for fragment in want:
        assert fragment in e.value.message, e.value.message
    with pytest.raises(stoker.StokerError) as e:  # the stream too, before any decode
        next(iter(loader(server, transform=spec)))
    assert e.value.code == "INVALID_ARGUMENT" and want[0] in e.value.message
    assert len(loader(server, transform="imagenet-train")) == 10  # still serving
