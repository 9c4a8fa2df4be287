"""Transform specs and the client's argument checks: no server needed.

The op classes against the wire contract (proto/stoker/v1/stoker.proto's
defaults, field by field) and against torchvision (pinned in
python/requirements.txt: torchvision 0.29.2) for their defaults and
checks. from_torchvision: test_from_torchvision.py; the server's word on
the specs: test_transforms_server.py."""

from __future__ import annotations

import pytest

import stoker
from stoker import transforms as T
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
    assert rrc.random_resized_crop == pb.RandomResizedCrop(
        height=200, width=100, scale_min=0.5, scale_max=1, ratio_min=0.5, ratio_max=2
    )
    # p=0 is sent as set, not as "unset means 0.5".
    assert flip.random_horizontal_flip.HasField("p") and flip.random_horizontal_flip.p == 0.0
    assert jit.color_jitter == pb.ColorJitter(brightness=0.4, saturation=0.2)
    assert list(norm.normalize.mean) == [0.5] * 3 and list(norm.normalize.std) == [0.25] * 3


def test_sizes_follow_torchvision() -> None:
    assert T.Resize(256).to_proto().resize == pb.Resize(height=256, width=0)
    assert T.Resize((32, 48)).to_proto().resize == pb.Resize(height=32, width=48)
    assert T.CenterCrop(224).to_proto().center_crop == pb.CenterCrop(height=224, width=224)
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


# The op catalogue: every class's Op, field by field. A field left unset
# means what the proto says (interpolation: the op's default; antialias:
# True; sigma (0, 0): (0.1, 2.0)); a probability is always sent.

R = pb.Range
BICUBIC, BILINEAR, NEAREST = pb.INTERPOLATION_BICUBIC, pb.INTERPOLATION_BILINEAR, pb.INTERPOLATION_NEAREST


def _interp_modes():
    from torchvision.transforms import InterpolationMode

    return InterpolationMode


SPECS = [
    (lambda: T.RandomCrop(32, padding=4),
     pb.Op(random_crop=pb.RandomCrop(height=32, width=32, padding=[4], fill=[0]))),
    (lambda: T.RandomCrop((30, 40), padding=(1, 2), pad_if_needed=True, fill=(1, 2, 3)),
     pb.Op(random_crop=pb.RandomCrop(height=30, width=40, padding=[1, 2], pad_if_needed=True, fill=[1, 2, 3]))),
    (lambda: T.Pad(4), pb.Op(pad=pb.Pad(padding=[4], fill=[0]))),
    (lambda: T.Pad((1, 2, 3, 4), fill=(1, 2, 3)), pb.Op(pad=pb.Pad(padding=[1, 2, 3, 4], fill=[1, 2, 3]))),
    (lambda: T.RandomResizedCrop(224),
     pb.Op(random_resized_crop=pb.RandomResizedCrop(height=224, width=224, scale_min=0.08, scale_max=1,
                                                    ratio_min=3 / 4, ratio_max=4 / 3))),
    (lambda: T.RandomResizedCrop((200, 100), scale=(0.9, 1), interpolation=_interp_modes().BICUBIC, antialias=False),
     pb.Op(random_resized_crop=pb.RandomResizedCrop(height=200, width=100, scale_min=0.9, scale_max=1,
                                                    ratio_min=3 / 4, ratio_max=4 / 3, interpolation=BICUBIC,
                                                    antialias=False))),
    (lambda: T.RandomResizedCrop(64, interpolation=3), (  # PIL's BICUBIC code, as torchvision takes it
        pb.Op(random_resized_crop=pb.RandomResizedCrop(height=64, width=64, scale_min=0.08, scale_max=1,
                                                       ratio_min=3 / 4, ratio_max=4 / 3, interpolation=BICUBIC)))),
    (lambda: T.Resize([256], interpolation="nearest"),
     pb.Op(resize=pb.Resize(height=256, interpolation=NEAREST))),
    (lambda: T.Resize((32, 48), antialias=False), pb.Op(resize=pb.Resize(height=32, width=48, antialias=False))),
    (lambda: T.CenterCrop((3, 4)), pb.Op(center_crop=pb.CenterCrop(height=3, width=4))),
    (lambda: T.RandomHorizontalFlip(), pb.Op(random_horizontal_flip=pb.RandomHorizontalFlip(p=0.5))),
    (lambda: T.RandomVerticalFlip(), pb.Op(random_vertical_flip=pb.RandomVerticalFlip(p=0.5))),
    (lambda: T.RandomVerticalFlip(0.0), pb.Op(random_vertical_flip=pb.RandomVerticalFlip(p=0.0))),
    (lambda: T.RandomZoomOut(), pb.Op(random_zoom_out=pb.RandomZoomOut(fill=[0], p=0.5, side_range=pb.Range(min=1, max=4)))),
    (lambda: T.RandomZoomOut((1, 2, 3), side_range=[1.5, 2], p=1),
     pb.Op(random_zoom_out=pb.RandomZoomOut(fill=[1, 2, 3], p=1, side_range=pb.Range(min=1.5, max=2)))),
    (lambda: T.RandomIoUCrop(), pb.Op(random_iou_crop=pb.RandomIoUCrop(
        min_scale=0.3, max_scale=1, min_aspect_ratio=0.5, max_aspect_ratio=2, sampler_options=[0, 0.1, 0.3, 0.5, 0.7, 0.9, 1],
        trials=40))),
    (lambda: T.RandomIoUCrop(0.5, 0.9, 0.75, 1.5, [0.3, 1], trials=7), pb.Op(random_iou_crop=pb.RandomIoUCrop(
        min_scale=0.5, max_scale=0.9, min_aspect_ratio=0.75, max_aspect_ratio=1.5, sampler_options=[0.3, 1], trials=7))),
    (lambda: T.RandomPhotometricDistort(), pb.Op(random_photometric_distort=pb.RandomPhotometricDistort(
        brightness=pb.Range(min=0.875, max=1.125), contrast=pb.Range(min=0.5, max=1.5),
        saturation=pb.Range(min=0.5, max=1.5), hue=pb.Range(min=-0.05, max=0.05), p=0.5))),
    (lambda: T.RandomPhotometricDistort((0.9, 1.1), hue=[-0.1, 0.2], p=1), pb.Op(
        random_photometric_distort=pb.RandomPhotometricDistort(
            brightness=pb.Range(min=0.9, max=1.1), contrast=pb.Range(min=0.5, max=1.5),
            saturation=pb.Range(min=0.5, max=1.5), hue=pb.Range(min=-0.1, max=0.2), p=1))),
    (lambda: T.ScaleJitter((1024, 1024)), pb.Op(scale_jitter=pb.ScaleJitter(
        target_height=1024, target_width=1024, scale_range=pb.Range(min=0.1, max=2)))),
    (lambda: T.ScaleJitter([640, 480], scale_range=(0.5, 1.5), interpolation="bicubic", antialias=False),
     pb.Op(scale_jitter=pb.ScaleJitter(target_height=480, target_width=640, scale_range=pb.Range(min=0.5, max=1.5),
                                       interpolation=BICUBIC, antialias=False))),
    (lambda: T.FixedSizeCrop(1024), pb.Op(fixed_size_crop=pb.FixedSizeCrop(height=1024, width=1024, fill=[0]))),
    (lambda: T.FixedSizeCrop((64, 48), fill=(123, 117, 104)),
     pb.Op(fixed_size_crop=pb.FixedSizeCrop(height=64, width=48, fill=[123, 117, 104]))),
    (lambda: T.RandomShortestSize((480, 800), 1333), pb.Op(random_shortest_size=pb.RandomShortestSize(
        min_size=[480, 800], max_size=1333))),
    (lambda: T.RandomShortestSize(512, interpolation="nearest", antialias=False),
     pb.Op(random_shortest_size=pb.RandomShortestSize(min_size=[512], interpolation=NEAREST, antialias=False))),
    (lambda: T.RandomResize(256, 320), pb.Op(random_resize=pb.RandomResize(min_size=256, max_size=320))),
    (lambda: T.RandomResize(100, 140, "bicubic", antialias=False),
     pb.Op(random_resize=pb.RandomResize(min_size=100, max_size=140, interpolation=BICUBIC, antialias=False))),
    (lambda: T.PadIfSmaller(480), pb.Op(pad_if_smaller=pb.PadIfSmaller(size=480, fill=[0]))),
    (lambda: T.PadIfSmaller(480, fill={_mask(): 255, "others": (1, 2, 3)}),
     pb.Op(pad_if_smaller=pb.PadIfSmaller(size=480, fill=[1, 2, 3], mask_fill=255))),
    (lambda: T.ConvertBoundingBoxFormat("cxcywh"),
     pb.Op(convert_bounding_box_format=pb.ConvertBoundingBoxFormat(format="CXCYWH"))),
    (lambda: T.RandomPerspective(), pb.Op(random_perspective=pb.RandomPerspective(distortion_scale=0.5, p=0.5, fill=[0]))),
    # An op with no message of its own: its generated class sends a NamedOp.
    (lambda: T.RandomChannelPermutation(), pb.Op(named=pb.NamedOp(name="RandomChannelPermutation"))),
    (lambda: T.YOLOMosaic(), pb.Op(named=pb.NamedOp(name="YOLOMosaic"))),
    (lambda: T.YOLOMosaic(320, n=9), pb.Op(named=pb.NamedOp(name="YOLOMosaic", args=[
        pb.NamedArg(name="imgsz", number=320), pb.NamedArg(name="n", number=9)]))),
    (lambda: T.YOLOMixUp(), pb.Op(named=pb.NamedOp(name="YOLOMixUp"))),
    (lambda: T.YOLOMixUp(0.2), pb.Op(named=pb.NamedOp(name="YOLOMixUp", args=[pb.NamedArg(name="p", number=0.2)]))),
    (lambda: T.YOLOCopyPaste(), pb.Op(named=pb.NamedOp(name="YOLOCopyPaste"))),
    (lambda: T.YOLOCutMix(0.5, num_areas=4), pb.Op(named=pb.NamedOp(name="YOLOCutMix", args=[
        pb.NamedArg(name="p", number=0.5), pb.NamedArg(name="num_areas", number=4)]))),
    (lambda: T.YOLOCopyPaste(0.3, mode="flip"), pb.Op(named=pb.NamedOp(name="YOLOCopyPaste", args=[
        pb.NamedArg(name="p", number=0.3)]))),
    # The YOLO family (ultralytics' ops), named ops too: a default is not sent.
    (lambda: T.YOLOLoadImage(), pb.Op(named=pb.NamedOp(name="YOLOLoadImage"))),
    (lambda: T.YOLOLetterBox(640, scaleup=False), pb.Op(named=pb.NamedOp(name="YOLOLetterBox", args=[
        pb.NamedArg(name="new_shape", numbers=pb.Numbers(values=[640])), pb.NamedArg(name="scaleup", flag=False)]))),
    (lambda: T.YOLORandomPerspective(10.0, size=(640, 480)), pb.Op(named=pb.NamedOp(name="YOLORandomPerspective", args=[
        pb.NamedArg(name="degrees", number=10), pb.NamedArg(name="size", numbers=pb.Numbers(values=[640, 480]))]))),
    (lambda: T.YOLORandomHSV(0.015, 0.7, 0.4), pb.Op(named=pb.NamedOp(name="YOLORandomHSV", args=[
        pb.NamedArg(name="hgain", number=0.015), pb.NamedArg(name="sgain", number=0.7), pb.NamedArg(name="vgain", number=0.4)]))),
    (lambda: T.YOLORandomFlip(direction="vertical", flip_idx=[1, 0]), pb.Op(named=pb.NamedOp(name="YOLORandomFlip", args=[
        pb.NamedArg(name="direction", text="vertical"), pb.NamedArg(name="flip_idx", numbers=pb.Numbers(values=[1, 0]))]))),
    (lambda: T.RandomPerspective(0.3, 1, "nearest", None),
     pb.Op(random_perspective=pb.RandomPerspective(distortion_scale=0.3, p=1, interpolation=NEAREST, fill_none=True))),
    (lambda: T.ClampBoundingBoxes(), pb.Op(clamp_bounding_boxes=pb.ClampBoundingBoxes(clamping_mode="auto"))),
    (lambda: T.ClampBoundingBoxes(None), pb.Op(clamp_bounding_boxes=pb.ClampBoundingBoxes(clamping_mode="none"))),
    (lambda: T.ClampKeyPoints(), pb.Op(clamp_key_points=pb.ClampKeyPoints())),
    (lambda: T.SanitizeKeyPoints(), pb.Op(sanitize_key_points=pb.SanitizeKeyPoints())),
    (lambda: T.SanitizeBoundingBoxes(), pb.Op(sanitize_bounding_boxes=pb.SanitizeBoundingBoxes(min_size=1, min_area=1))),
    (lambda: T.SanitizeBoundingBoxes(2, min_area=3.5),
     pb.Op(sanitize_bounding_boxes=pb.SanitizeBoundingBoxes(min_size=2, min_area=3.5))),
    (lambda: T.ColorJitter(), pb.Op(color_jitter=pb.ColorJitter())),
    (lambda: T.ColorJitter(0.4, 0.4, 0.2, 0.1),
     pb.Op(color_jitter=pb.ColorJitter(brightness=0.4, contrast=0.4, saturation=0.2, hue=0.1))),
    (lambda: T.ColorJitter(brightness=(0.5, 1.5), hue=[-0.1, 0.25]),
     pb.Op(color_jitter=pb.ColorJitter(brightness_range=R(min=0.5, max=1.5), hue_range=R(min=-0.1, max=0.25)))),
    (lambda: T.Grayscale(), pb.Op(grayscale=pb.Grayscale(num_output_channels=3))),
    (lambda: T.RandomGrayscale(), pb.Op(random_grayscale=pb.RandomGrayscale(p=0.1))),
    (lambda: T.GaussianBlur(23),
     pb.Op(gaussian_blur=pb.GaussianBlur(kernel_x=23, kernel_y=23, sigma_min=0.1, sigma_max=2.0))),
    (lambda: T.GaussianBlur((3, 5), sigma=1.5),
     pb.Op(gaussian_blur=pb.GaussianBlur(kernel_x=3, kernel_y=5, sigma_min=1.5, sigma_max=1.5))),
    (lambda: T.RandomSolarize(128), pb.Op(random_solarize=pb.RandomSolarize(threshold=128, p=0.5))),
    (lambda: T.RandomPosterize(4, p=0.2), pb.Op(random_posterize=pb.RandomPosterize(bits=4, p=0.2))),
    (lambda: T.RandomInvert(), pb.Op(random_invert=pb.RandomInvert(p=0.5))),
    (lambda: T.RandomEqualize(0.25), pb.Op(random_equalize=pb.RandomEqualize(p=0.25))),
    (lambda: T.RandomAutocontrast(), pb.Op(random_autocontrast=pb.RandomAutocontrast(p=0.5))),
    (lambda: T.RandomAdjustSharpness(2), pb.Op(random_adjust_sharpness=pb.RandomAdjustSharpness(sharpness_factor=2,
                                                                                                p=0.5))),
    (lambda: T.RandomRotation(15), pb.Op(random_rotation=pb.RandomRotation(degrees=R(min=-15, max=15), fill=[0]))),
    (lambda: T.RandomRotation(15, expand=True),
     pb.Op(random_rotation=pb.RandomRotation(degrees=R(min=-15, max=15), fill=[0], expand=True))),
    (lambda: T.RandomRotation((0, 90), interpolation="bilinear", center=(1, 2), fill=(1, 2, 3)),
     pb.Op(random_rotation=pb.RandomRotation(degrees=R(min=0, max=90), interpolation=BILINEAR, fill=[1, 2, 3],
                                             center=[1, 2]))),
    (lambda: T.RandomAffine(0), pb.Op(random_affine=pb.RandomAffine(degrees=R(min=0, max=0), fill=[0]))),
    (lambda: T.RandomAffine(10, translate=(0.1, 0.2), scale=(0.9, 1.1), shear=5, interpolation=_interp_modes().BILINEAR,
                            fill=None, center=(3, 4)),
     pb.Op(random_affine=pb.RandomAffine(degrees=R(min=-10, max=10), translate=[0.1, 0.2], scale=R(min=0.9, max=1.1),
                                         shear=[-5, 5], interpolation=BILINEAR, center=[3, 4], fill_none=True))),
    (lambda: T.RandomAffine((-5, 5), shear=(1, 2, 3, 4)),
     pb.Op(random_affine=pb.RandomAffine(degrees=R(min=-5, max=5), shear=[1, 2, 3, 4], fill=[0]))),
    (lambda: T.RandomErasing(),
     pb.Op(random_erasing=pb.RandomErasing(p=0.5, scale=R(min=0.02, max=0.33), ratio=R(min=0.3, max=3.3), value=[0]))),
    (lambda: T.RandomErasing(p=0.1, value=(124, 116, 104)),
     pb.Op(random_erasing=pb.RandomErasing(p=0.1, scale=R(min=0.02, max=0.33), ratio=R(min=0.3, max=3.3),
                                           value=[124, 116, 104]))),
    (lambda: T.RandomErasing(scale=(0.02, 1 / 3), ratio=(0.3, 1 / 0.3), value="random"),
     pb.Op(random_erasing=pb.RandomErasing(p=0.5, scale=R(min=0.02, max=1 / 3), ratio=R(min=0.3, max=1 / 0.3),
                                           random_value=True))),
    (lambda: T.RandomErasing(value="random", per_box=True, count=(1, 3)),
     pb.Op(random_erasing=pb.RandomErasing(p=0.5, scale=R(min=0.02, max=0.33), ratio=R(min=0.3, max=3.3),
                                           random_value=True, random_color=True, min_count=1, max_count=3))),
    (lambda: T.RandomErasing(count=2),
     pb.Op(random_erasing=pb.RandomErasing(p=0.5, scale=R(min=0.02, max=0.33), ratio=R(min=0.3, max=3.3), value=[0],
                                           min_count=2, max_count=2))),
    (lambda: T.RandomErasing(value="random", noise_mean=(0.5, 0.5, 0.5), noise_std=(0.25, 0.25, 0.25)),
     pb.Op(random_erasing=pb.RandomErasing(p=0.5, scale=R(min=0.02, max=0.33), ratio=R(min=0.3, max=3.3),
                                           random_value=True, noise_mean=[0.5] * 3, noise_std=[0.25] * 3))),
    (lambda: T.RandomApply([T.ColorJitter(0.4)], p=0.8),
     pb.Op(random_apply=pb.RandomApply(ops=[pb.Op(color_jitter=pb.ColorJitter(brightness=0.4))], p=0.8))),
    (lambda: T.RandomApply([T.Compose([T.RandomInvert(), T.Compose([T.Grayscale()])])]),  # flattened
     pb.Op(random_apply=pb.RandomApply(ops=[pb.Op(random_invert=pb.RandomInvert(p=0.5)),
                                            pb.Op(grayscale=pb.Grayscale(num_output_channels=3))], p=0.5))),
    (lambda: T.RandomChoice([T.Grayscale(), T.RandomSolarize(0, p=1.0)], p=[1, 3]),
     pb.Op(random_choice=pb.RandomChoice(ops=[pb.Op(grayscale=pb.Grayscale(num_output_channels=3)),
                                              pb.Op(random_solarize=pb.RandomSolarize(threshold=0, p=1))], p=[1, 3]))),
    # A Compose in a RandomChoice or a RandomOrder is one choice: all its
    # ops, as RandomApply(p=1).
    (lambda: T.RandomChoice([T.Compose([T.RandomInvert(1.0), T.Grayscale()]), T.Compose([T.RandomInvert(1.0)])]),
     pb.Op(random_choice=pb.RandomChoice(ops=[
         pb.Op(random_apply=pb.RandomApply(ops=[pb.Op(random_invert=pb.RandomInvert(p=1)),
                                                pb.Op(grayscale=pb.Grayscale(num_output_channels=3))], p=1)),
         pb.Op(random_invert=pb.RandomInvert(p=1))]))),
    (lambda: T.RandomOrder([T.RandomInvert(), T.RandomApply([T.RandomEqualize()], p=0.3)]),
     pb.Op(random_order=pb.RandomOrder(ops=[
         pb.Op(random_invert=pb.RandomInvert(p=0.5)),
         pb.Op(random_apply=pb.RandomApply(ops=[pb.Op(random_equalize=pb.RandomEqualize(p=0.5))], p=0.3))]))),
    (lambda: T.TrivialAugmentWide(), pb.Op(trivial_augment_wide=pb.TrivialAugmentWide(num_magnitude_bins=31))),
    (lambda: T.TrivialAugmentWide(interpolation="bilinear", fill=128),
     pb.Op(trivial_augment_wide=pb.TrivialAugmentWide(num_magnitude_bins=31, interpolation=BILINEAR, fill=[128]))),
    (lambda: T.RandAugment(), pb.Op(rand_augment=pb.RandAugment(num_ops=2, magnitude=9, num_magnitude_bins=31))),
    (lambda: T.RandAugment(num_ops=0, magnitude=0, num_magnitude_bins=5, fill=[1, 2, 3]),
     pb.Op(rand_augment=pb.RandAugment(num_ops=0, magnitude=0, num_magnitude_bins=5, fill=[1, 2, 3]))),
    (lambda: T.AutoAugment(), pb.Op(auto_augment=pb.AutoAugment(policy="imagenet"))),
    (lambda: T.AutoAugment(__import__("torchvision").transforms.AutoAugmentPolicy.SVHN, interpolation="bilinear"),
     pb.Op(auto_augment=pb.AutoAugment(policy="svhn", interpolation=BILINEAR))),
    (lambda: T.AugMix(),
     pb.Op(aug_mix=pb.AugMix(severity=3, mixture_width=3, chain_depth=-1, alpha=1.0, all_ops=True))),
    (lambda: T.AugMix(severity=1, mixture_width=2, chain_depth=2, alpha=0.5, all_ops=False, interpolation="nearest"),
     pb.Op(aug_mix=pb.AugMix(severity=1, mixture_width=2, chain_depth=2, alpha=0.5, all_ops=False,
                             interpolation=NEAREST))),
    (lambda: T.timm_rand_augment(),
     pb.Op(timm_rand_augment=pb.TimmRandAugment(config="rand-m9-mstd0.5-inc1", fill=[124, 116, 104]))),
    (lambda: T.timm_rand_augment("rand-m7-n3-mmax12", interpolation="bicubic", fill=0),
     pb.Op(timm_rand_augment=pb.TimmRandAugment(config="rand-m7-n3-mmax12", interpolation=BICUBIC, fill=[0]))),
    (lambda: T.timm_aug_mix(),
     pb.Op(timm_aug_mix=pb.TimmAugMix(config="augmix-m3-w3", fill=[124, 116, 104]))),
    (lambda: T.timm_aug_mix("augmix-m5-w4-d2", interpolation="bilinear", fill=(1, 2, 3)),
     pb.Op(timm_aug_mix=pb.TimmAugMix(config="augmix-m5-w4-d2", interpolation=BILINEAR, fill=[1, 2, 3]))),
    (lambda: T.timm_auto_augment(),
     pb.Op(timm_auto_augment=pb.TimmAutoAugment(config="original", fill=[124, 116, 104]))),
    (lambda: T.timm_auto_augment("v0r-mstd0.5", interpolation="bicubic", fill=0),
     pb.Op(timm_auto_augment=pb.TimmAutoAugment(config="v0r-mstd0.5", interpolation=BICUBIC, fill=[0]))),
    (lambda: T.Normalize([0.5], [0.25]), pb.Op(normalize=pb.Normalize(mean=[0.5] * 3, std=[0.25] * 3))),
]


@pytest.mark.parametrize("make,want", SPECS, ids=lambda x: "" if isinstance(x, pb.Op) else None)
def test_every_op_to_proto(make, want) -> None:
    got = make().to_proto()
    assert got == want, f"{got}\n!=\n{want}"
    # Optional fields set to their default stay set (p=0.5 is "0.5", not
    # "unset"), and unset ones stay unset (antialias).
    for field in ("p", "antialias", "num_ops", "magnitude", "chain_depth", "all_ops"):
        msg = getattr(got, got.WhichOneof("op"))
        if field in msg.DESCRIPTOR.fields_by_name and msg.DESCRIPTOR.fields_by_name[field].has_presence:
            assert msg.HasField(field) == getattr(want, want.WhichOneof("op")).HasField(field), field


def test_every_wire_op_has_a_class() -> None:
    covered = {make().to_proto().WhichOneof("op") for make, _ in SPECS}
    assert covered == {f.name for f in pb.Op.DESCRIPTOR.oneofs_by_name["op"].fields}


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
