"""Transform specs and the client's argument checks: no server needed.

The op classes against the wire contract (each op a NamedOp of the
server's schema, argument by argument) and against torchvision (pinned in
python/requirements.txt: torchvision 0.29.2) for their defaults and
checks. from_torchvision: test_from_torchvision.py; the server's word on
the specs: test_transforms_server.py."""

from __future__ import annotations

import pytest

import stoker
from stoker import transforms as T
from stoker._ops_base import named_op
from stoker.v1 import stoker_pb2 as pb


def _mask() -> type:
    """tv_tensors.Mask, imported when a spec asks for it."""
    from torchvision import tv_tensors

    return tv_tensors.Mask


def test_preset_is_a_name() -> None:
    assert T.to_spec("imagenet-train") == pb.TransformSpec(preset="imagenet-train")


def test_ops_convert_to_proto() -> None:
    spec = T.to_spec(
        T.Compose(
            [
                T.RandomResizedCrop((200, 100), scale=(0.5, 1), ratio=(0.5, 2)),
                T.RandomHorizontalFlip(0.0),
                T.ColorJitter(brightness=0.4, saturation=0.2),
                T.Normalize([0.5, 0.5, 0.5], [0.25, 0.25, 0.25]),
            ]
        )
    )
    rrc, flip, jit, norm = spec.ops
    assert rrc == N("RandomResizedCrop", size=(200, 100), scale=(0.5, 1), ratio=(0.5, 2), interpolation="bilinear",
                    antialias=True)
    # p=0 is sent, not left to the default 0.5.
    assert flip == N("RandomHorizontalFlip", p=0)
    assert jit == N("ColorJitter", brightness=0.4, contrast=0, saturation=0.2, hue=0)
    assert norm == N("Normalize", mean=(0.5, 0.5, 0.5), std=(0.25, 0.25, 0.25))


def test_sizes_follow_torchvision() -> None:
    assert T.Resize(256).to_proto() == N("Resize", size=256, interpolation="bilinear", antialias=True)
    assert T.Resize((32, 48)).to_proto() == N("Resize", size=(32, 48), interpolation="bilinear", antialias=True)
    assert T.CenterCrop(224).to_proto() == N("CenterCrop", size=(224, 224))
    assert T.RandomResizedCrop([7]).size == (7, 7)
    spec = T.to_spec([T.Resize(256), T.CenterCrop(224)])
    assert len(spec.ops) == 2


@pytest.mark.parametrize(
    "make",
    [
        lambda: T.RandomHorizontalFlip(2),
        lambda: T.Resize(0),
        lambda: T.CenterCrop((1, 2, 3)),
        lambda: T.ColorJitter(brightness=(1.5, 0.5)),
        lambda: T.ColorJitter(contrast=-1),
        lambda: T.Normalize([0.5, 0.5], [1, 1]),
        lambda: T.Normalize([0, 0, 0], [1, 0, 1]),
        # Not finite: NaN passes no comparison, and the server refuses it too.
        lambda: T.RandomHorizontalFlip(float("nan")),
        lambda: T.ColorJitter(saturation=float("nan")),
        lambda: T.ColorJitter(brightness=float("inf")),
        lambda: T.RandomResizedCrop(32, scale=(float("nan"), 1.0)),
        lambda: T.RandomResizedCrop(32, ratio=(0.75, float("inf"))),
        lambda: T.Normalize([float("nan"), 0, 0], [1, 1, 1]),
        lambda: T.Normalize([0, 0, 0], [1, float("inf"), 1]),
    ],
)
def test_bad_ops_fail_early(make) -> None:
    with pytest.raises(ValueError):
        make()


def test_bad_loader_arguments_fail_early() -> None:
    for kw in ({"batch_size": 0}, {"rank": 2, "world_size": 2}, {"prefetch": 0}, {"layout": "CHW"}):
        with pytest.raises(ValueError):
            stoker.Loader("127.0.0.1:1", "tiny", **kw)
    with pytest.raises(TypeError):
        stoker.Loader("127.0.0.1:1", "tiny", transform=42)


def test_no_channel_before_iteration() -> None:
    # Constructing a loader, its state and its repr touch no network.
    ld = stoker.Loader("127.0.0.1:1", "tiny", transform=T.Compose([T.CenterCrop(8)]))
    assert ld.state_dict()["batches_consumed"] == 0
    assert "tiny" in repr(ld)


def test_stoker_error() -> None:
    e = stoker.StokerError("NOT_FOUND", 'unknown dataset "x"')
    assert isinstance(e, RuntimeError)
    assert e.code == "NOT_FOUND" and str(e) == 'NOT_FOUND: unknown dataset "x"'


def test_fast_chunk_parser_agrees_with_protobuf() -> None:
    from stoker.loader import _Chunk, _parse_response

    cases = [
        pb.Chunk(number=0, offset=0, data=b""),
        pb.Chunk(number=3, offset=4 << 20, data=bytes(range(256)) * 10),
        pb.Chunk(number=2**40, offset=2**33 + 5, data=b"\x00\xff" * 1000),
    ]
    for c in cases:
        raw = pb.FeedResponse(chunk=c).SerializeToString()
        got = _parse_response(raw)
        assert isinstance(got, _Chunk)
        assert (got.number, got.offset, bytes(got.data)) == (c.number, c.offset, c.data)
    # Unknown fields inside the chunk are skipped.
    raw = pb.FeedResponse(chunk=cases[1]).SerializeToString()
    inner = pb.Chunk(number=3, offset=7, data=b"abc").SerializeToString() + b"\x20\x05" + b"\x2a\x02hi"
    got = _parse_response(b"\x1a" + bytes([len(inner)]) + inner)
    assert (got.number, got.offset, bytes(got.data)) == (3, 7, b"abc")
    # Everything else goes through protobuf.
    hdr = pb.FeedResponse(batch=pb.BatchHeader(number=1, data_bytes=10))
    assert _parse_response(hdr.SerializeToString()) == hdr
    # A truncated chunk is protobuf's to reject.
    with pytest.raises(Exception):
        _parse_response(raw[:-10])


def test_buffer_pool_reuses_only_released_buffers() -> None:
    import torch

    from stoker.loader import _BufferPool

    pool = _BufferPool(2)
    a = pool.get(100)
    held = torch.from_numpy(a).view(10, 10)
    del a
    b = pool.get(100)  # `held` still uses the first buffer
    assert b.__array_interface__["data"][0] != held.data_ptr()
    addr_b = b.__array_interface__["data"][0]
    del b
    c = pool.get(80)  # the second buffer is free again
    assert c.__array_interface__["data"][0] == addr_b


# The op catalogue: every class's Op, argument by argument, as the server
# reads it (its schema: `stoker ops list`). A hand-written class sends every
# argument it has; a generated one (the YOLO family's, the vision-language
# resizes) only those not at their defaults.


def N(name: str, **args: object) -> pb.Op:
    """The wire's op ``name`` with ``args``, as a test writes it (a
    container's ops a list)."""
    return named_op(name, **{k: pb.OpList(ops=v) if isinstance(v, list) else v for k, v in args.items()})


def Typed(image: object, mask: float) -> pb.TypedFill:
    """A fill per type on the wire: the pixels' (None: None) and the masks'."""
    t = pb.TypedFill(mask=mask)
    if image is not None:
        t.image.values.extend(image)  # type: ignore[arg-type]
    return t


def _interp_modes():
    from torchvision.transforms import InterpolationMode

    return InterpolationMode


SPECS = [
    (lambda: T.RandomCrop(32, padding=4), N('RandomCrop', size=(32, 32), padding=(4,), pad_if_needed=False, fill=(0,))),
    (lambda: T.RandomCrop((30, 40), padding=(1, 2), pad_if_needed=True, fill=(1, 2, 3)),
     N('RandomCrop', size=(30, 40), padding=(1, 2), pad_if_needed=True, fill=(1, 2, 3))),
    (lambda: T.Pad(4), N('Pad', padding=(4,), fill=(0,))),
    (lambda: T.Pad((1, 2, 3, 4), fill=(1, 2, 3)), N('Pad', padding=(1, 2, 3, 4), fill=(1, 2, 3))),
    (lambda: T.RandomResizedCrop(224),
     N('RandomResizedCrop', size=(224, 224), scale=(0.08, 1), ratio=(0.75, 1.3333333333333333),
       interpolation='bilinear', antialias=True)),
    (lambda: T.RandomResizedCrop((200, 100), scale=(0.9, 1), interpolation=_interp_modes().BICUBIC, antialias=False),
     N('RandomResizedCrop', size=(200, 100), scale=(0.9, 1), ratio=(0.75, 1.3333333333333333), interpolation='bicubic',
       antialias=False)),
    (lambda: T.RandomResizedCrop(64, interpolation=3),
     N('RandomResizedCrop', size=(64, 64), scale=(0.08, 1), ratio=(0.75, 1.3333333333333333), interpolation='bicubic',
       antialias=True)),
    (lambda: T.Resize([256], interpolation="nearest"), N('Resize', size=256, interpolation='nearest', antialias=True)),
    (lambda: T.Resize((32, 48), antialias=False),
     N('Resize', size=(32, 48), interpolation='bilinear', antialias=False)),
    (lambda: T.CenterCrop((3, 4)), N('CenterCrop', size=(3, 4))),
    (lambda: T.RandomHorizontalFlip(), N('RandomHorizontalFlip', p=0.5)),
    (lambda: T.RandomVerticalFlip(), N('RandomVerticalFlip', p=0.5)),
    (lambda: T.RandomVerticalFlip(0.0), N('RandomVerticalFlip', p=0)),
    (lambda: T.RandomZoomOut(), N('RandomZoomOut', fill=(0,), side_range=(1, 4), p=0.5)),
    (lambda: T.RandomZoomOut((1, 2, 3), side_range=[1.5, 2], p=1),
     N('RandomZoomOut', fill=(1, 2, 3), side_range=(1.5, 2), p=1)),
    (lambda: T.RandomIoUCrop(),
     N('RandomIoUCrop', min_scale=0.3, max_scale=1, min_aspect_ratio=0.5, max_aspect_ratio=2,
       sampler_options=(0, 0.1, 0.3, 0.5, 0.7, 0.9, 1), trials=40, p=1)),
    (lambda: T.RandomIoUCrop(0.5, 0.9, 0.75, 1.5, [0.3, 1], trials=7),
     N('RandomIoUCrop', min_scale=0.5, max_scale=0.9, min_aspect_ratio=0.75, max_aspect_ratio=1.5,
       sampler_options=(0.3, 1), trials=7, p=1)),
    (lambda: T.RandomPhotometricDistort(),
     N('RandomPhotometricDistort', brightness=(0.875, 1.125), contrast=(0.5, 1.5), saturation=(0.5, 1.5),
       hue=(-0.05, 0.05), p=0.5)),
    (lambda: T.RandomPhotometricDistort((0.9, 1.1), hue=[-0.1, 0.2], p=1),
     N('RandomPhotometricDistort', brightness=(0.9, 1.1), contrast=(0.5, 1.5), saturation=(0.5, 1.5), hue=(-0.1, 0.2),
       p=1)),
    (lambda: T.ScaleJitter((1024, 1024)),
     N('ScaleJitter', target_size=(1024, 1024), scale_range=(0.1, 2), interpolation='bilinear', antialias=True)),
    (lambda: T.ScaleJitter([640, 480], scale_range=(0.5, 1.5), interpolation="bicubic", antialias=False),
     N('ScaleJitter', target_size=(640, 480), scale_range=(0.5, 1.5), interpolation='bicubic', antialias=False)),
    (lambda: T.FixedSizeCrop(1024), N('FixedSizeCrop', size=(1024, 1024), fill=(0,))),
    (lambda: T.FixedSizeCrop((64, 48), fill=(123, 117, 104)), N('FixedSizeCrop', size=(64, 48), fill=(123, 117, 104))),
    (lambda: T.RandomShortestSize((480, 800), 1333),
     N('RandomShortestSize', min_size=(480, 800), max_size=1333, interpolation='bilinear', antialias=True)),
    (lambda: T.RandomShortestSize(512, interpolation="nearest", antialias=False),
     N('RandomShortestSize', min_size=(512,), max_size=None, interpolation='nearest', antialias=False)),
    (lambda: T.RandomResize(256, 320),
     N('RandomResize', min_size=256, max_size=320, interpolation='bilinear', antialias=True)),
    (lambda: T.RandomResize(100, 140, "bicubic", antialias=False),
     N('RandomResize', min_size=100, max_size=140, interpolation='bicubic', antialias=False)),
    (lambda: T.PadIfSmaller(480), N('PadIfSmaller', size=480, fill=(0,))),
    (lambda: T.PadIfSmaller(480, fill={_mask(): 255, "others": (1, 2, 3)}),
     N('PadIfSmaller', size=480, fill=Typed((1, 2, 3), 255))),
    (lambda: T.ConvertBoundingBoxFormat("cxcywh"), N('ConvertBoundingBoxFormat', format='CXCYWH')),
    (lambda: T.RandomPerspective(),
     N('RandomPerspective', distortion_scale=0.5, p=0.5, interpolation='bilinear', fill=(0,))),
    # An op with no message of its own: its generated class sends a NamedOp.
    (lambda: T.RandomChannelPermutation(), N('RandomChannelPermutation')),
    (lambda: T.YOLOMosaic(), N('YOLOMosaic')),
    (lambda: T.YOLOMosaic(320, n=9), N('YOLOMosaic', imgsz=320, n=9)),
    (lambda: T.YOLOMixUp(), N('YOLOMixUp')),
    (lambda: T.YOLOMixUp(0.2), N('YOLOMixUp', p=0.2)),
    (lambda: T.YOLOCopyPaste(), N('YOLOCopyPaste')),
    (lambda: T.YOLOCutMix(0.5, num_areas=4), N('YOLOCutMix', p=0.5, num_areas=4)),
    (lambda: T.YOLOCopyPaste(0.3, mode="flip"), N('YOLOCopyPaste', p=0.3)),
    # The YOLO family (ultralytics' ops), named ops too: a default is not sent.
    (lambda: T.YOLOLoadImage(), N('YOLOLoadImage')),
    (lambda: T.YOLOLetterBox(640, scaleup=False), N('YOLOLetterBox', new_shape=(640,), scaleup=False)),
    (lambda: T.YOLORandomPerspective(10.0, size=(640, 480)), N('YOLORandomPerspective', degrees=10, size=(640, 480))),
    (lambda: T.YOLORandomHSV(0.015, 0.7, 0.4), N('YOLORandomHSV', hgain=0.015, sgain=0.7, vgain=0.4)),
    (lambda: T.YOLORandomFlip(direction="vertical", flip_idx=[1, 0]),
     N('YOLORandomFlip', direction='vertical', flip_idx=(1, 0))),
    (lambda: T.RandomPerspective(0.3, 1, "nearest", None),
     N('RandomPerspective', distortion_scale=0.3, p=1, interpolation='nearest', fill=None)),
    (lambda: T.ClampBoundingBoxes(), N('ClampBoundingBoxes', clamping_mode='auto')),
    (lambda: T.ClampBoundingBoxes(None), N('ClampBoundingBoxes', clamping_mode=None)),
    (lambda: T.ClampKeyPoints(), N('ClampKeyPoints')),
    (lambda: T.SanitizeKeyPoints(), N('SanitizeKeyPoints', labels_getter=None)),
    (lambda: T.SanitizeBoundingBoxes(), N('SanitizeBoundingBoxes', min_size=1, min_area=1)),
    (lambda: T.SanitizeBoundingBoxes(2, min_area=3.5), N('SanitizeBoundingBoxes', min_size=2, min_area=3.5)),
    (lambda: T.ColorJitter(), N('ColorJitter', brightness=0, contrast=0, saturation=0, hue=0)),
    (lambda: T.ColorJitter(0.4, 0.4, 0.2, 0.1),
     N('ColorJitter', brightness=0.4, contrast=0.4, saturation=0.2, hue=0.1)),
    (lambda: T.ColorJitter(brightness=(0.5, 1.5), hue=[-0.1, 0.25]),
     N('ColorJitter', brightness=(0.5, 1.5), contrast=0, saturation=0, hue=(-0.1, 0.25))),
    (lambda: T.Grayscale(), N('Grayscale', num_output_channels=3)),
    (lambda: T.RandomGrayscale(), N('RandomGrayscale', p=0.1)),
    (lambda: T.GaussianBlur(23), N('GaussianBlur', kernel_size=(23, 23), sigma=(0.1, 2))),
    (lambda: T.GaussianBlur((3, 5), sigma=1.5), N('GaussianBlur', kernel_size=(3, 5), sigma=(1.5, 1.5))),
    (lambda: T.RandomSolarize(128), N('RandomSolarize', threshold=128, p=0.5)),
    (lambda: T.RandomPosterize(4, p=0.2), N('RandomPosterize', bits=4, p=0.2)),
    (lambda: T.RandomInvert(), N('RandomInvert', p=0.5)),
    (lambda: T.RandomEqualize(0.25), N('RandomEqualize', p=0.25)),
    (lambda: T.RandomAutocontrast(), N('RandomAutocontrast', p=0.5)),
    (lambda: T.RandomAdjustSharpness(2), N('RandomAdjustSharpness', sharpness_factor=2, p=0.5)),
    (lambda: T.RandomRotation(15),
     N('RandomRotation', degrees=(-15, 15), interpolation='nearest', expand=False, center=None, fill=(0,))),
    (lambda: T.RandomRotation(15, expand=True),
     N('RandomRotation', degrees=(-15, 15), interpolation='nearest', expand=True, center=None, fill=(0,))),
    (lambda: T.RandomRotation((0, 90), interpolation="bilinear", center=(1, 2), fill=(1, 2, 3)),
     N('RandomRotation', degrees=(0, 90), interpolation='bilinear', expand=False, center=(1, 2), fill=(1, 2, 3))),
    (lambda: T.RandomAffine(0),
     N('RandomAffine', degrees=(0, 0), translate=None, scale=None, shear=None, interpolation='nearest', fill=(0,),
       center=None)),
    (lambda: T.RandomAffine(10, translate=(0.1, 0.2), scale=(0.9, 1.1), shear=5, interpolation=_interp_modes().BILINEAR,
                            fill=None, center=(3, 4)),
     N('RandomAffine', degrees=(-10, 10), translate=(0.1, 0.2), scale=(0.9, 1.1), shear=(-5, 5),
       interpolation='bilinear', fill=None, center=(3, 4))),
    (lambda: T.RandomAffine((-5, 5), shear=(1, 2, 3, 4)),
     N('RandomAffine', degrees=(-5, 5), translate=None, scale=None, shear=(1, 2, 3, 4), interpolation='nearest',
       fill=(0,), center=None)),
    (lambda: T.RandomErasing(), N('RandomErasing', p=0.5, scale=(0.02, 0.33), ratio=(0.3, 3.3), value=(0,), count=1)),
    (lambda: T.RandomErasing(p=0.1, value=(124, 116, 104)),
     N('RandomErasing', p=0.1, scale=(0.02, 0.33), ratio=(0.3, 3.3), value=(124, 116, 104), count=1)),
    (lambda: T.RandomErasing(scale=(0.02, 1 / 3), ratio=(0.3, 1 / 0.3), value="random"),
     N('RandomErasing', p=0.5, scale=(0.02, 0.3333333333333333), ratio=(0.3, 3.3333333333333335), value='random',
       noise_mean=None, noise_std=None, per_box=False, count=1)),
    (lambda: T.RandomErasing(value="random", per_box=True, count=(1, 3)),
     N('RandomErasing', p=0.5, scale=(0.02, 0.33), ratio=(0.3, 3.3), value='random', noise_mean=None, noise_std=None,
       per_box=True, count=(1, 3))),
    (lambda: T.RandomErasing(count=2),
     N('RandomErasing', p=0.5, scale=(0.02, 0.33), ratio=(0.3, 3.3), value=(0,), count=2)),
    (lambda: T.RandomErasing(value="random", noise_mean=(0.5, 0.5, 0.5), noise_std=(0.25, 0.25, 0.25)),
     N('RandomErasing', p=0.5, scale=(0.02, 0.33), ratio=(0.3, 3.3), value='random', noise_mean=(0.5, 0.5, 0.5),
       noise_std=(0.25, 0.25, 0.25), per_box=False, count=1)),
    (lambda: T.RandomApply([T.ColorJitter(0.4)], p=0.8),
     N('RandomApply', transforms=[N('ColorJitter', brightness=0.4, contrast=0, saturation=0, hue=0)], p=0.8)),
    (lambda: T.RandomApply([T.Compose([T.RandomInvert(), T.Compose([T.Grayscale()])])]),
     N('RandomApply', transforms=[N('RandomInvert', p=0.5), N('Grayscale', num_output_channels=3)], p=0.5)),
    (lambda: T.RandomChoice([T.Grayscale(), T.RandomSolarize(0, p=1.0)], p=[1, 3]),
     N('RandomChoice', transforms=[N('Grayscale', num_output_channels=3), N('RandomSolarize', threshold=0,
       p=1)], p=(1, 3))),
    # A Compose in a RandomChoice or a RandomOrder is one choice: all its
    # ops, as RandomApply(p=1).
    (lambda: T.RandomChoice([T.Compose([T.RandomInvert(1.0), T.Grayscale()]), T.Compose([T.RandomInvert(1.0)])]),
     N('RandomChoice', transforms=[N('RandomApply', transforms=[N('RandomInvert', p=1), N('Grayscale',
       num_output_channels=3)], p=1), N('RandomInvert', p=1)], p=None)),
    (lambda: T.RandomOrder([T.RandomInvert(), T.RandomApply([T.RandomEqualize()], p=0.3)]),
     N('RandomOrder', transforms=[N('RandomInvert', p=0.5), N('RandomApply', transforms=[N('RandomEqualize',
       p=0.5)], p=0.3)])),
    (lambda: T.TrivialAugmentWide(),
     N('TrivialAugmentWide', num_magnitude_bins=31, interpolation='nearest', fill=None)),
    (lambda: T.TrivialAugmentWide(interpolation="bilinear", fill=128),
     N('TrivialAugmentWide', num_magnitude_bins=31, interpolation='bilinear', fill=(128,))),
    (lambda: T.RandAugment(),
     N('RandAugment', num_ops=2, magnitude=9, num_magnitude_bins=31, interpolation='nearest', fill=None)),
    (lambda: T.RandAugment(num_ops=0, magnitude=0, num_magnitude_bins=5, fill=[1, 2, 3]),
     N('RandAugment', num_ops=0, magnitude=0, num_magnitude_bins=5, interpolation='nearest', fill=(1, 2, 3))),
    (lambda: T.AutoAugment(), N('AutoAugment', policy='imagenet', interpolation='nearest', fill=None)),
    (lambda: T.AutoAugment(__import__("torchvision").transforms.AutoAugmentPolicy.SVHN, interpolation="bilinear"),
     N('AutoAugment', policy='svhn', interpolation='bilinear', fill=None)),
    (lambda: T.AugMix(),
     N('AugMix', severity=3, mixture_width=3, chain_depth=-1, alpha=1, all_ops=True, interpolation='bilinear',
       fill=None)),
    (lambda: T.AugMix(severity=1, mixture_width=2, chain_depth=2, alpha=0.5, all_ops=False, interpolation="nearest"),
     N('AugMix', severity=1, mixture_width=2, chain_depth=2, alpha=0.5, all_ops=False, interpolation='nearest',
       fill=None)),
    (lambda: T.timm_rand_augment(),
     N('TimmRandAugment', config='rand-m9-mstd0.5-inc1', interpolation=None, fill=(124, 116, 104))),
    (lambda: T.timm_rand_augment("rand-m7-n3-mmax12", interpolation="bicubic", fill=0),
     N('TimmRandAugment', config='rand-m7-n3-mmax12', interpolation='bicubic', fill=(0,))),
    (lambda: T.timm_aug_mix(), N('TimmAugMix', config='augmix-m3-w3', interpolation=None, fill=(124, 116, 104))),
    (lambda: T.timm_aug_mix("augmix-m5-w4-d2", interpolation="bilinear", fill=(1, 2, 3)),
     N('TimmAugMix', config='augmix-m5-w4-d2', interpolation='bilinear', fill=(1, 2, 3))),
    (lambda: T.timm_auto_augment(), N('TimmAutoAugment', config='original', interpolation=None, fill=(124, 116, 104))),
    (lambda: T.timm_auto_augment("v0r-mstd0.5", interpolation="bicubic", fill=0),
     N('TimmAutoAugment', config='v0r-mstd0.5', interpolation='bicubic', fill=(0,))),
    (lambda: T.Normalize([0.5], [0.25]), N('Normalize', mean=(0.5, 0.5, 0.5), std=(0.25, 0.25, 0.25))),
]

@pytest.mark.parametrize("make,want", SPECS, ids=lambda x: "" if isinstance(x, pb.Op) else None)
def test_every_op_to_proto(make, want) -> None:
    got = make().to_proto()
    assert got == want, f"{got}\n!=\n{want}"


def test_every_op_has_a_case() -> None:
    """Every hand-written op class is in SPECS, and every op travels as a
    NamedOp whose arguments are its schema's (the server's, generated into
    stoker._ops_generated.SCHEMA)."""
    from stoker._ops_generated import SCHEMA
    from stoker._ops_named import NamedOp

    covered = {make().to_proto().named.name for make, _ in SPECS}
    classes = {n for n in T.__all__ if isinstance(getattr(T, n), type) and issubclass(getattr(T, n), T.Transform)
               and n in SCHEMA and not issubclass(getattr(T, n), NamedOp)}
    assert classes - covered == set()
    for make, want in SPECS:
        params = {p.name for p in SCHEMA[want.named.name]}
        assert {a.name for a in want.named.args} <= params, want.named.name


def test_signatures_are_torchvisions() -> None:
    """Every class torchvision.transforms.v2 has takes its arguments, in its
    order, with its defaults; the differences are stoker's, on purpose."""
    import inspect

    from torchvision.transforms import v2

    def norm(d):
        return getattr(d, "value", d)  # InterpolationMode.BILINEAR is "bilinear"

    own = {("Grayscale", "num_output_channels"): 3}  # 3-channel batches (its docstring)
    checked = 0
    for name in T.__all__:
        tv = getattr(v2, name, None)
        if not inspect.isclass(tv) or name == "Transform":
            continue
        ours = inspect.signature(getattr(T, name)).parameters
        theirs = inspect.signature(tv).parameters
        keyword_only = [n for n, p in ours.items() if p.kind is p.KEYWORD_ONLY]
        assert list(ours)[: len(theirs)] == list(theirs), name
        assert keyword_only == list(ours)[len(theirs):], name  # stoker's additions (RandomErasing's noise)
        for arg, p in theirs.items():
            want = own.get((name, arg), norm(p.default))
            assert norm(ours[arg].default) == want, (name, arg)
        checked += 1
    # Every op of the registry but FixedSizeCrop (not in v2), the timm
    # policies and Compose's containers' stand-ins: ScaleJitter,
    # RandomShortestSize, RandomResize and the named ops among them.
    assert checked == len([n for n in T.OP_SCHEMA if hasattr(v2, n)]) + 1  # + Compose


def _tv(version: str):
    if version == "v1":
        import torchvision.transforms as tv
    else:
        from torchvision.transforms import v2 as tv
    return tv


# (torchvision's op with its required arguments, stoker's with the same):
# the defaults each reads are the same.
SAME_DEFAULTS = [
    (lambda tv: tv.RandomHorizontalFlip(), T.RandomHorizontalFlip()),
    (lambda tv: tv.RandomVerticalFlip(), T.RandomVerticalFlip()),
    (lambda tv: tv.ColorJitter(), T.ColorJitter()),
    (lambda tv: tv.ColorJitter(0.4, (0.5, 1.5), 0, 0.1), T.ColorJitter(0.4, (0.5, 1.5), 0, 0.1)),
    (lambda tv: tv.Grayscale(3), T.Grayscale()),
    (lambda tv: tv.RandomGrayscale(), T.RandomGrayscale()),
    (lambda tv: tv.GaussianBlur(3), T.GaussianBlur(3)),
    (lambda tv: tv.GaussianBlur((3, 5), 0.5), T.GaussianBlur((3, 5), 0.5)),
    (lambda tv: tv.RandomSolarize(128), T.RandomSolarize(128)),
    (lambda tv: tv.RandomPosterize(4), T.RandomPosterize(4)),
    (lambda tv: tv.RandomInvert(), T.RandomInvert()),
    (lambda tv: tv.RandomEqualize(), T.RandomEqualize()),
    (lambda tv: tv.RandomAutocontrast(), T.RandomAutocontrast()),
    (lambda tv: tv.RandomAdjustSharpness(2), T.RandomAdjustSharpness(2)),
    (lambda tv: tv.RandomRotation(10), T.RandomRotation(10)),
    (lambda tv: tv.RandomAffine(10), T.RandomAffine(10)),
    (lambda tv: tv.RandomAffine(10, (0.1, 0.1), (0.9, 1.1), 5, fill=3), T.RandomAffine(10, (0.1, 0.1), (0.9, 1.1), 5,
                                                                                      fill=3)),
    (lambda tv: tv.RandomErasing(), T.RandomErasing()),
    (lambda tv: tv.RandomApply([tv.RandomInvert()]), T.RandomApply([T.RandomInvert()])),
    (lambda tv: tv.RandomChoice([tv.RandomInvert(), tv.Grayscale(3)]),
     T.RandomChoice([T.RandomInvert(), T.Grayscale()])),
    (lambda tv: tv.RandomOrder([tv.RandomInvert(), tv.Grayscale(3)]),
     T.RandomOrder([T.RandomInvert(), T.Grayscale()])),
    (lambda tv: tv.TrivialAugmentWide(), T.TrivialAugmentWide()),
    (lambda tv: tv.RandAugment(), T.RandAugment()),
    (lambda tv: tv.AutoAugment(), T.AutoAugment()),
    (lambda tv: tv.AugMix(), T.AugMix()),
]


@pytest.mark.parametrize("version", ["v1", "v2"])
@pytest.mark.parametrize("make,want", SAME_DEFAULTS, ids=lambda x: None)
def test_defaults_are_torchvisions(version, make, want) -> None:
    tv = _tv(version)
    got = T.from_torchvision(tv.Compose([tv.RandomResizedCrop(8), make(tv)]))
    assert got.transforms == [T.RandomResizedCrop(8), want]
    assert T.to_spec(got) == T.to_spec([T.RandomResizedCrop(8), want]) or isinstance(want, T.ColorJitter)


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_geometry_defaults_are_torchvisions(version) -> None:
    tv = _tv(version)
    assert T.from_torchvision(tv.RandomResizedCrop(224)).transforms == [T.RandomResizedCrop(224)]
    assert T.from_torchvision(tv.Resize((8, 9))).transforms == [T.Resize((8, 9))]
    assert T.from_torchvision(tv.CenterCrop(7)).transforms == [T.CenterCrop(7)]
    got = T.from_torchvision([tv.Resize(256), tv.CenterCrop(224)])
    assert got.transforms == [T.Resize(256), T.CenterCrop(224)] and got.normalize_mean is None


BAD = [
    (lambda: T.RandomResizedCrop(224, interpolation="lanczos"), ValueError, "'lanczos'"),
    (lambda: T.RandomResizedCrop(224, interpolation="nearest-exact"), ValueError, "nearest-exact"),
    (lambda: T.RandomResizedCrop(224, antialias="yes"), TypeError, "antialias"),
    (lambda: T.RandomResizedCrop(0), ValueError, "size"),
    (lambda: T.RandomResizedCrop(224, scale=(0.5,)), ValueError, "scale"),
    (lambda: T.Resize(256, max_size=300), ValueError, "max_size"),
    (lambda: T.ColorJitter(hue=0.6), ValueError, "hue"),
    (lambda: T.ColorJitter(hue=(-0.6, 0)), ValueError, "hue"),
    (lambda: T.ColorJitter(brightness=(1, 2, 3)), TypeError, "brightness"),
    (lambda: T.ColorJitter(contrast=200), ValueError, "100"),
    (lambda: T.Grayscale(1), ValueError, "3 channels"),
    (lambda: T.GaussianBlur(4), ValueError, "odd"),
    (lambda: T.GaussianBlur(3, sigma=0), ValueError, "sigma"),
    (lambda: T.GaussianBlur(3, sigma=(2, 1)), ValueError, "sigma"),
    (lambda: T.RandomSolarize(300), ValueError, "0..255"),
    (lambda: T.RandomSolarize(10, p=1.5), ValueError, "`p`"),
    (lambda: T.RandomPosterize(9), ValueError, "bits"),
    (lambda: T.RandomPosterize(4.0), TypeError, "bits"),
    (lambda: T.RandomAdjustSharpness(-1), ValueError, "sharpness_factor"),
    (lambda: T.RandomRotation(-5), ValueError, "positive"),
    (lambda: T.RandomRotation(10, interpolation="bicubic"), ValueError, "'bicubic'"),
    (lambda: T.RandomRotation(10, fill=300), ValueError, "fill"),
    (lambda: T.RandomRotation(10, fill={"image": 0}), TypeError, "fill per type: key 'image'"),
    (lambda: T.RandomRotation(10, fill=(1, 2)), ValueError, "fill"),
    (lambda: T.RandomRotation(10, center=(1, 2, 3)), ValueError, "center"),
    (lambda: T.RandomAffine(10, translate=(0.1, 2)), ValueError, "translation"),
    (lambda: T.RandomAffine(10, scale=(0, 1)), ValueError, "scale"),
    (lambda: T.RandomAffine(10, shear=(1, 2, 3)), ValueError, "shear"),
    (lambda: T.RandomErasing(value="noise"), ValueError, "'random'"),
    (lambda: T.RandomErasing(value=-1), ValueError, "value"),
    (lambda: T.RandomErasing(scale=(0.5, 1.5)), ValueError, "scale"),
    (lambda: T.RandomErasing(p=2), ValueError, "`p`"),
    (lambda: T.RandomErasing(noise_mean=(0, 0, 0), noise_std=(1, 1, 1)), ValueError, "random"),
    (lambda: T.RandomApply([]), ValueError, "at least one"),
    (lambda: T.RandomApply([T.Grayscale()], p=-0.1), ValueError, "`p`"),
    (lambda: T.RandomApply([_tv("v2").RandomInvert()]), TypeError, "from_torchvision"),
    (lambda: T.RandomChoice([T.Grayscale(), T.RandomInvert()], p=[1]), ValueError, "Length of p"),
    (lambda: T.RandomChoice([T.Grayscale()], p=[0]), ValueError, "positive sum"),
    (lambda: T.RandomOrder([]), ValueError, "at least one"),
    (lambda: T.TrivialAugmentWide(num_magnitude_bins=1), ValueError, "num_magnitude_bins"),
    (lambda: T.RandAugment(num_ops=-1), ValueError, "non-negative"),
    (lambda: T.RandAugment(magnitude=31), ValueError, "magnitude"),
    (lambda: T.RandAugment(interpolation="lanczos"), ValueError, "'lanczos'"),
    (lambda: T.AutoAugment("imagenet2"), ValueError, "not recognized"),
    (lambda: T.AugMix(severity=11), ValueError, "severity"),
    (lambda: T.AugMix(chain_depth=0), ValueError, "chain_depth"),
    (lambda: T.AugMix(alpha=0), ValueError, "alpha"),
    (lambda: T.timm_rand_augment("rand-m99"), ValueError, "m99"),
    (lambda: T.timm_rand_augment("randaug-m9"), ValueError, "rand-"),
    (lambda: T.timm_rand_augment("rand-w0-m9"), ValueError, "'w0'"),
    (lambda: T.timm_rand_augment("rand-m9", interpolation="nearest"), ValueError, "'nearest'"),
    (lambda: T.timm_auto_augment("v1"), ValueError, "want one of original, originalr, v0, v0r, 3a"),
    (lambda: T.timm_aug_mix("augmix-b0.5"), ValueError, "b0.5: want b an integer"),
    (lambda: T.timm_aug_mix("augmix-m9-x1"), ValueError, "unknown section 'x1'"),
    (lambda: T.timm_auto_augment("v0-m9"), ValueError, "unknown section 'm9'"),
    (lambda: T.timm_auto_augment("v0", interpolation="nearest"), ValueError, "'nearest'"),
    (lambda: T.RandomErasing(value=0, per_box=True), ValueError, "per_box"),
    (lambda: T.RandomErasing(count=(3, 2)), ValueError, "min <= max"),
    (lambda: T.RandomErasing(count=17), ValueError, "1..16"),
    (lambda: T.Compose([_tv("v1").RandomInvert()]), TypeError, "from_torchvision"),
    (lambda: T.to_spec(_tv("v2").Compose([_tv("v2").RandomInvert()])), TypeError, "from_torchvision"),
]


@pytest.mark.parametrize("make,exc,fragment", BAD, ids=lambda x: None)
def test_bad_arguments_are_refused_as_torchvision_would(make, exc, fragment) -> None:
    with pytest.raises(exc) as e:
        make()
    assert fragment in str(e.value), str(e.value)


def test_to_spec_takes_presets_lists_composes_and_specs() -> None:
    assert T.PRESETS == ("imagenet-train", "imagenet-eval", "tv-resnet50-v2", "deit", "simclr-view", "dino-global",
                         "dino-local", "clip", "detr", "ssdlite", "lsj", "frcnn", "yolo", "yolo-letterbox", "segref", "simclr", "dino",
                         "dinov2")
    ops = [T.RandomResizedCrop(8), T.RandomApply([T.Grayscale()])]
    want = pb.TransformSpec(ops=[op.to_proto() for op in ops])
    assert T.to_spec(ops) == want and T.to_spec(tuple(ops)) == want
    assert T.to_spec(T.Compose([T.Compose(ops[:1]), T.Compose([T.Compose(ops[1:])])])) == want  # flattened
    assert T.to_spec(T.Compose(ops)) == want
    assert T.to_spec(T.RandomResizedCrop(8)) == pb.TransformSpec(ops=[ops[0].to_proto()])
    spec = T.to_spec(want)
    assert spec == want and spec is not want  # a wire spec as it is, copied
    c = T.Compose([T.Compose([T.CenterCrop(8), T.Normalize([0.5] * 3, [0.5] * 3)])])
    assert c.ends_in_normalize and not T.Compose(ops).ends_in_normalize
    assert "RandomApply" in repr(T.Compose(ops)) and T.Compose(ops) == T.Compose(list(ops))
