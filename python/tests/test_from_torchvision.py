"""from_torchvision on today's recipes, in torchvision's v1 and v2 forms (as
their sources write them), its refusals (by name and position) and how it
carries values across ToTensor and Normalize. No server needed: the
server's word on the results is in test_transforms_server.py."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torchvision.transforms as tv1
from PIL import Image
from torchvision import tv_tensors
from torchvision.transforms import InterpolationMode
from torchvision.transforms import v2 as tv2

from helpers import wire_args
from stoker import transforms as T
from stoker.v1 import stoker_pb2 as pb

# The recipes use v2.ToTensor as they were written (deprecated in v2).
pytestmark = pytest.mark.filterwarnings(r"ignore:The transform `ToTensor\(\)` is deprecated:UserWarning")

IMAGENET = ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))
# open_clip's OPENAI_DATASET_MEAN and OPENAI_DATASET_STD.
OPENAI = ((0.48145466, 0.4578275, 0.40821073), (0.26862954, 0.26130258, 0.27577711))
TV = {"v1": tv1, "v2": tv2}


def tv_resnet50_v2(tv, backend: str = "pil"):
    """torchvision's references/classification/presets.py
    ClassificationPresetTrain(crop_size=176, auto_augment_policy="ta_wide",
    random_erase_prob=0.1), as train.py builds it (use_v2 for v2)."""
    v2 = tv is tv2
    ops = [tv.PILToTensor()] if backend == "tensor" else []
    ops += [tv.RandomResizedCrop(176, interpolation=InterpolationMode.BILINEAR, antialias=True),
            tv.RandomHorizontalFlip(0.5), tv.TrivialAugmentWide(interpolation=InterpolationMode.BILINEAR)]
    if backend == "pil":
        ops.append(tv.PILToTensor())
    ops += [tv.ToDtype(torch.float, scale=True) if v2 else tv.ConvertImageDtype(torch.float),
            tv.Normalize(mean=IMAGENET[0], std=IMAGENET[1]), tv.RandomErasing(p=0.1)]
    if v2:
        ops.append(tv.ToPureTensor())
    return tv.Compose(ops)


def simclr(tv):
    """SimCLR's ImageNet views (Chen et al. 2020, appendix A; as
    sthalles/SimCLR's get_simclr_pipeline_transform with s=1), the blur
    torchvision's GaussianBlur at 10% of the side (odd), with p=0.5."""
    color_jitter = tv.ColorJitter(0.8, 0.8, 0.8, 0.2)
    return tv.Compose([tv.RandomResizedCrop(size=224), tv.RandomHorizontalFlip(),
                       tv.RandomApply([color_jitter], p=0.8), tv.RandomGrayscale(p=0.2),
                       tv.RandomApply([tv.GaussianBlur(kernel_size=23, sigma=(0.1, 2.0))], p=0.5), tv.ToTensor()])


def dino(tv):
    """DINO's DataAugmentationDINO (main_dino.py) with torchvision's
    GaussianBlur for its PIL blur: the two global crops and a local one."""
    flip_and_color_jitter = tv.Compose([
        tv.RandomHorizontalFlip(p=0.5),
        tv.RandomApply([tv.ColorJitter(brightness=0.4, contrast=0.4, saturation=0.2, hue=0.1)], p=0.8),
        tv.RandomGrayscale(p=0.2),
    ])
    normalize = tv.Compose([tv.ToTensor(), tv.Normalize(*IMAGENET)])
    blur = tv.GaussianBlur(23, sigma=(0.1, 2.0))
    global1 = tv.Compose([tv.RandomResizedCrop(224, scale=(0.4, 1.0), interpolation=Image.BICUBIC),
                          flip_and_color_jitter, blur, normalize])
    global2 = tv.Compose([tv.RandomResizedCrop(224, scale=(0.4, 1.0), interpolation=Image.BICUBIC),
                          flip_and_color_jitter, tv.RandomApply([blur], p=0.1), tv.RandomSolarize(128, p=0.2),
                          normalize])
    local = tv.Compose([tv.RandomResizedCrop(96, scale=(0.05, 0.4), interpolation=Image.BICUBIC),
                        flip_and_color_jitter, tv.RandomApply([tv.GaussianBlur(9, sigma=(0.1, 2.0))], p=0.5),
                        normalize])
    return global1, global2, local


def _convert_to_rgb(image):
    return image.convert("RGB")


def open_clip(tv, rgb=None):
    """open_clip's image_transform(224, is_train=True) (transform.py): its
    convert-to-RGB step is a bare function (or a Lambda, or v2.RGB)."""
    ops = [tv.RandomResizedCrop(224, scale=(0.9, 1.0), interpolation=InterpolationMode.BICUBIC)]
    if rgb is not None:
        ops.append(rgb)
    return tv.Compose([*ops, tv.ToTensor(), tv.Normalize(mean=OPENAI[0], std=OPENAI[1])])


# The recipes in stoker's classes: the presets' ops (pipeline/transform/presets.go).
JITTER_DINO = T.RandomApply([T.ColorJitter(0.4, 0.4, 0.2, 0.1)], p=0.8)
PRESET_OPS = {
    "tv-resnet50-v2": [T.RandomResizedCrop(176), T.RandomHorizontalFlip(),
                       T.TrivialAugmentWide(interpolation="bilinear"), T.RandomErasing(p=0.1, value=(124, 116, 104))],
    "simclr-view": [T.RandomResizedCrop(224), T.RandomHorizontalFlip(),
               T.RandomApply([T.ColorJitter(0.8, 0.8, 0.8, 0.2)], p=0.8), T.RandomGrayscale(0.2),
               T.RandomApply([T.GaussianBlur(23, (0.1, 2.0))], p=0.5)],
    "dino-global": [T.RandomResizedCrop(224, scale=(0.4, 1), interpolation="bicubic"), T.RandomHorizontalFlip(),
                    JITTER_DINO, T.RandomGrayscale(0.2), T.GaussianBlur(23, (0.1, 2.0))],
    "dino-local": [T.RandomResizedCrop(96, scale=(0.05, 0.4), interpolation="bicubic"), T.RandomHorizontalFlip(),
                   JITTER_DINO, T.RandomGrayscale(0.2), T.RandomApply([T.GaussianBlur(9, (0.1, 2.0))], p=0.5)],
    "clip": [T.RandomResizedCrop(224, scale=(0.9, 1), interpolation="bicubic")],
    # timm's create_transform(224, is_training=True, auto_augment="rand-m9-mstd0.5-inc1",
    # interpolation="bicubic", re_prob=0.25, re_mode="pixel"): timm's classes, not torchvision's.
    "deit": [T.RandomResizedCrop(224, interpolation="bicubic"), T.RandomHorizontalFlip(),
             T.timm_rand_augment("rand-m9-mstd0.5-inc1", interpolation="bicubic"),
             T.RandomErasing(p=0.25, scale=(0.02, 1 / 3), ratio=(0.3, 1 / 0.3), value="random")],
}


@pytest.mark.parametrize("version", ["v1", "v2"])
@pytest.mark.parametrize("backend", ["pil", "tensor"])
def test_tv_resnet50_v2(version, backend) -> None:
    got = T.from_torchvision(tv_resnet50_v2(TV[version], backend))
    # RandomErasing's value 0 after Normalize is ImageNet's mean colour.
    assert got.transforms == PRESET_OPS["tv-resnet50-v2"]
    assert (got.normalize_mean, got.normalize_std) == IMAGENET


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_simclr(version) -> None:
    got = T.from_torchvision(simclr(TV[version]))
    assert got.transforms == PRESET_OPS["simclr-view"]
    assert got.normalize_mean is None  # none in the recipe: uint8 out, or stoker.normalize as you like


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_dino(version) -> None:
    global1, global2, local = (T.from_torchvision(t) for t in dino(TV[version]))
    assert global1.transforms == PRESET_OPS["dino-global"]
    assert local.transforms == PRESET_OPS["dino-local"]
    assert global2.transforms == [*PRESET_OPS["dino-global"][:4],
                                  T.RandomApply([T.GaussianBlur(23, (0.1, 2.0))], p=0.1),
                                  T.RandomSolarize(128, p=0.2)]  # on the PIL image: pixels
    for c in (global1, global2, local):
        assert (c.normalize_mean, c.normalize_std) == IMAGENET


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_open_clip(version) -> None:
    tv = TV[version]
    # A function of one's own is not open_clip's (open_clip's own, by its
    # module and name, is: test_open_clip_objects.py), refused in one line.
    with pytest.raises(ValueError, match=r"^op 1 \(_convert_to_rgb\) is not supported by stoker: stoker decodes "
                                         r"every image to 3-channel RGB, so leave out a conversion to RGB$"):
        T.from_torchvision(open_clip(tv, _convert_to_rgb))
    with pytest.raises(ValueError, match=r"^op 1 \(Lambda\) is not supported by stoker: stoker decodes every image"):
        T.from_torchvision(open_clip(tv, tv.Lambda(_convert_to_rgb)))
    # Without it (stoker's images are RGB already), or as v2.RGB, dropped.
    for rgb in [None] + ([tv2.RGB()] if version == "v2" else []):
        got = T.from_torchvision(open_clip(tv, rgb))
        assert got.transforms == PRESET_OPS["clip"]
        assert (got.normalize_mean, got.normalize_std) == OPENAI


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_pad(version) -> None:
    """Pad (constant) before a RandomCrop or CenterCrop: CIFAR's recipe
    written with Pad, and a Pad of 4 values and a fill per channel."""
    tv = TV[version]
    got = T.from_torchvision(tv.Compose([tv.Pad(4), tv.RandomCrop(32), tv.RandomHorizontalFlip(), tv.ToTensor()]))
    assert got.transforms == [T.Pad(4), T.RandomCrop(32), T.RandomHorizontalFlip()]
    got = T.from_torchvision(tv.Compose([tv.Pad([1, 2, 3, 4], fill=(9, 8, 7)), tv.CenterCrop(40)]))
    assert got.transforms == [T.Pad([1, 2, 3, 4], fill=(9, 8, 7)), T.CenterCrop(40)]
    assert wire_args(got.transforms[0].to_proto())["padding"] == [1, 2, 3, 4]
    # after the crop (not resized), and on both sides of it
    got = T.from_torchvision(tv.Compose([tv.RandomCrop(28), tv.Pad(2), tv.RandomHorizontalFlip()]))
    assert got.transforms == [T.RandomCrop(28), T.Pad(2), T.RandomHorizontalFlip()]
    got = T.from_torchvision(tv.Compose([tv.Pad(1), tv.CenterCrop(30), tv.Pad((1, 2))]))
    assert got.transforms == [T.Pad(1), T.CenterCrop(30), T.Pad((1, 2))]


def test_random_zoom_out() -> None:
    """v2.RandomZoomOut (fill, side_range, p; a fill per type kept one)
    before Resize((h, w)), RandomCrop or CenterCrop; alone, before
    another geometry or after other ops it is refused, saying why."""
    got = T.from_torchvision(tv2.Compose([tv2.RandomZoomOut(), tv2.Resize((640, 640)), tv2.RandomHorizontalFlip()]))
    assert got.transforms == [T.RandomZoomOut(0, (1.0, 4.0), 0.5), T.Resize((640, 640)), T.RandomHorizontalFlip()]
    got = T.from_torchvision(tv2.Compose([tv2.RandomZoomOut(fill={tv_tensors.Image: (1, 2, 3), tv_tensors.Mask: 0},
                                                            side_range=(1.5, 2), p=1), tv2.RandomCrop(300)]))
    assert got.transforms == [T.RandomZoomOut({tv_tensors.Image: (1, 2, 3), tv_tensors.Mask: 0}, (1.5, 2), 1),
                              T.RandomCrop(300)]
    zoom = wire_args(got.transforms[0].to_proto())
    assert got.transforms[0].mask_fill == 0 and zoom["fill"] == pb.TypedFill(image=pb.Numbers(values=[1, 2, 3]), mask=0)
    assert zoom["side_range"][1] == 2
    got = T.from_torchvision(tv2.Compose([tv2.RandomZoomOut(fill=7), tv2.CenterCrop(64)]))
    assert got.transforms == [T.RandomZoomOut(7), T.CenterCrop(64)]
    for bad, want in [([tv2.RandomZoomOut()], "RandomZoomOut needs Resize"),
                      ([tv2.RandomZoomOut(), tv2.Resize(640)], "RandomZoomOut needs Resize"),
                      ([tv2.RandomZoomOut(), tv2.RandomResizedCrop(64)], "RandomZoomOut needs Resize"),
                      ([tv2.RandomResizedCrop(64), tv2.RandomZoomOut()], "a geometry op after other ops"),
]:
        with pytest.raises(ValueError, match=want):
            T.from_torchvision(tv2.Compose(bad))
    with pytest.raises(ValueError, match="Invalid side range"):
        T.RandomZoomOut(side_range=(0.5, 2))


def test_random_iou_crop() -> None:
    """v2.RandomIoUCrop (its arguments; sampler_options None is its
    default list) first or after RandomZoomOut, then Resize((h, w)) after
    SanitizeBoundingBoxes and one RandomHorizontalFlip: the DETR recipes'
    geometry."""
    got = T.from_torchvision(tv2.Compose([tv2.RandomPhotometricDistort(p=0.5), tv2.RandomZoomOut(fill=0),
                                          tv2.RandomIoUCrop(), tv2.SanitizeBoundingBoxes(min_size=1),
                                          tv2.RandomHorizontalFlip(), tv2.Resize((640, 640)),
                                          tv2.SanitizeBoundingBoxes(), tv2.ConvertBoundingBoxFormat("CXCYWH")]))
    assert got.transforms[-1] == T.ConvertBoundingBoxFormat("CXCYWH")
    assert got.transforms[:-1] == [T.RandomPhotometricDistort(p=0.5), T.RandomZoomOut(0), T.RandomIoUCrop(), T.SanitizeBoundingBoxes(min_size=1),
                   T.RandomHorizontalFlip(), T.Resize((640, 640)), T.SanitizeBoundingBoxes()]
    got = T.from_torchvision(tv2.Compose([tv2.RandomIoUCrop(0.5, 0.9, 0.75, 1.5, [0.3, 1], 7), tv2.Resize((64, 48))]))
    assert got.transforms == [T.RandomIoUCrop(0.5, 0.9, 0.75, 1.5, [0.3, 1], 7), T.Resize((64, 48))]
    assert wire_args(got.transforms[0].to_proto())["sampler_options"] == [0.3, 1]
    got = T.from_torchvision(tv2.Compose([tv2.Resize((64, 64)),
                                          tv2.ConvertBoundingBoxFormat(tv_tensors.BoundingBoxFormat.XYWH)]))
    assert wire_args(got.transforms[1].to_proto())["format"] == "XYWH"
    got = T.from_torchvision(tv2.Compose([tv2.Resize((64, 64)), tv2.RandomPhotometricDistort((0.9, 1.1), p=1)]))
    assert got.transforms == [T.Resize((64, 64)), T.RandomPhotometricDistort((0.9, 1.1), p=1)]
    got = T.from_torchvision(tv2.Compose([tv2.ColorJitter(0.4, 0.4), tv2.Resize((64, 64))]))
    assert got.transforms == [T.ColorJitter(0.4, 0.4), T.Resize((64, 64))]  # on the image at its own size, then resized
    for bad in ([tv2.ColorJitter(0.4), tv2.Resize(64)], [tv2.ColorJitter(0.4), tv2.Resize((64, 64)), tv2.CenterCrop(48)]):
        with pytest.raises(ValueError, match="comes before the geometry"):
            T.from_torchvision(tv2.Compose(bad))
    for bad in ([tv2.RandomPhotometricDistort(), tv2.RandomResizedCrop(64)],
                [tv2.RandomPhotometricDistort(), tv2.Resize(64), tv2.CenterCrop(64)],
                [tv2.RandomPhotometricDistort(), tv2.RandomZoomOut(), tv2.RandomCrop(64)]):
        with pytest.raises(ValueError, match="RandomPhotometricDistort before the geometry needs"):
            T.from_torchvision(tv2.Compose(bad))


def test_scale_jitter_fixed_size_crop() -> None:
    """v2.ScaleJitter (its target_size as torchvision indexes it,
    scale_range, interpolation, antialias) then FixedSizeCrop: the detection
    references' (module ``transforms``, as their presets import it) or the
    prototype's (size, fill of a fill per type, padding_mode); FixedSizeCrop
    alone; ScaleJitter needs FixedSizeCrop after it."""

    def fixed(module: str, size: Any, fill: Any, mode: str = "constant") -> Any:
        cls = type("FixedSizeCrop", (torch.nn.Module,), {"__module__": module})
        t = cls()
        t.crop_height, t.crop_width, t.fill, t.padding_mode = size[0], size[1], fill, mode
        return t

    got = T.from_torchvision(tv2.Compose([tv2.ScaleJitter((1024, 1024), antialias=True),
                                          fixed("transforms", (1024, 1024), (123.0, 117.0, 104.0)),
                                          tv2.RandomHorizontalFlip(0.5), tv2.SanitizeBoundingBoxes()]))
    assert got.transforms == [T.ScaleJitter((1024, 1024)), T.FixedSizeCrop(1024, fill=(123, 117, 104)),
                              T.RandomHorizontalFlip(0.5), T.SanitizeBoundingBoxes()]
    got = T.from_torchvision(tv2.Compose([
        tv2.ToImage(), tv2.ScaleJitter((640, 480), (0.5, 1.5), interpolation=tv2.InterpolationMode.BICUBIC,
                                       antialias=False),
        fixed("torchvision.prototype.transforms._geometry", (300, 200), {tv_tensors.Image: 7, tv_tensors.Mask: 0})]))
    assert got.transforms == [T.ScaleJitter((640, 480), (0.5, 1.5), "bicubic", antialias=False),
                              T.FixedSizeCrop((300, 200), fill=7)]
    # torchvision's order, (w, h): make_params divides target_size[1] by the height
    assert wire_args(got.transforms[0].to_proto())["target_size"] == [640, 480]
    assert T.from_torchvision(tv2.Compose([fixed("transforms", (64, 48), 0)])).transforms == [T.FixedSizeCrop((64, 48))]
    for bad, want in (([tv2.ScaleJitter((64, 64))], "ScaleJitter needs FixedSizeCrop right after it"),
                      ([tv2.ScaleJitter((64, 64)), tv2.RandomHorizontalFlip(), fixed("transforms", (64, 64), 0)],
                       "ScaleJitter needs FixedSizeCrop right after it"),
                      ([tv2.Resize((64, 64)), tv2.ScaleJitter((64, 64)), fixed("transforms", (64, 64), 0)],
                       "a geometry op after other ops"),
                      ([fixed("transforms", (64, 64), 0, "edge")], "padding_mode='edge' is not supported")):
        with pytest.raises(ValueError, match=want):
            T.from_torchvision(tv2.Compose(bad))


def test_dinov2_blur_subclass() -> None:
    """A subclass that only sets other defaults is its torchvision base
    (dinov2/data/transforms.py's GaussianBlur)."""

    class GaussianBlur(tv1.RandomApply):
        def __init__(self, *, p: float = 0.5, radius_min: float = 0.1, radius_max: float = 2.0):
            super().__init__(transforms=[tv1.GaussianBlur(kernel_size=9, sigma=(radius_min, radius_max))], p=1 - p)

    got = T.from_torchvision(tv1.Compose([tv1.RandomResizedCrop(96), GaussianBlur(p=0.5)]))
    assert got.transforms == [T.RandomResizedCrop(96), T.RandomApply([T.GaussianBlur(9, (0.1, 2.0))], p=0.5)]


def test_containers_and_sequential() -> None:
    seq = torch.nn.Sequential(tv2.RandomResizedCrop(32), tv2.RandomChoice(
        [tv2.Compose([tv2.RandomInvert(1), tv2.Grayscale(3)]), tv2.RandomEqualize()], p=[1, 3]),
        tv2.RandomOrder([tv2.RandomPosterize(4), tv2.RandomAutocontrast()]),
        tv2.RandomApply(torch.nn.ModuleList([tv2.RandomAdjustSharpness(2), tv2.RandomVerticalFlip()]), p=0.3))
    got = T.from_torchvision(seq)
    assert got.transforms == [
        T.RandomResizedCrop(32),
        T.RandomChoice([T.Compose([T.RandomInvert(1), T.Grayscale()]), T.RandomEqualize()], p=[0.25, 0.75]),
        T.RandomOrder([T.RandomPosterize(4), T.RandomAutocontrast()]),
        T.RandomApply([T.RandomAdjustSharpness(2), T.RandomVerticalFlip()], p=0.3)]
    # A single geometry op, and a list.
    assert T.from_torchvision(tv1.CenterCrop(8)).transforms == [T.CenterCrop(8)]
    assert T.from_torchvision([tv1.CenterCrop(8), tv1.RandomInvert()]).transforms == [T.CenterCrop(8), T.RandomInvert()]


def test_values_follow_the_image_unit() -> None:
    """Fills, thresholds and erasing values given on float images ([0, 1])
    or after Normalize become pixels."""
    rrc = T.RandomResizedCrop(8)
    got = T.from_torchvision([tv2.RandomResizedCrop(8), tv2.ToImage(), tv2.ToDtype(torch.float32, scale=True),
                              tv2.RandomSolarize(0.5, p=1), tv2.RandomRotation(10, fill=0.5),
                              tv2.RandomAffine(0, fill={tv_tensors.Image: [0, 1, 0.2], "others": 0}),
                              tv2.TrivialAugmentWide(fill=[1.0]), tv2.RandomErasing(value=0.5),
                              tv2.RandomErasing(value="random")])
    assert got.transforms == [rrc, T.RandomSolarize(127.5, p=1), T.RandomRotation(10, fill=127.5),
                              T.RandomAffine(0, fill={tv_tensors.Image: (0, 255, 51), "others": 0}),  # a Mask's unscaled
                              T.TrivialAugmentWide(fill=255),
                              T.RandomErasing(value=128),  # 127.5 rounded half up
                              T.RandomErasing(value="random", noise_mean=(0, 0, 0), noise_std=(1, 1, 1))]
    # On a uint8 tensor torchvision's cast truncates the value toward zero.
    got = T.from_torchvision([tv2.RandomResizedCrop(8), tv2.PILToTensor(), tv2.RandomErasing(value=0.5),
                              tv2.RandomErasing(value=[-0.2, 0.0, 1.3]), tv2.RandomErasing(value=127.9)])
    assert got.transforms[1:] == [T.RandomErasing(value=0), T.RandomErasing(value=(0, 0, 1)),
                                  T.RandomErasing(value=127)]
    # Normalize in pixel units (ToDtype without scale): [0, 1] units on the result.
    got = T.from_torchvision([tv2.RandomResizedCrop(8), tv2.PILToTensor(), tv2.ToDtype(torch.float32),
                              tv2.Normalize([123.675, 116.28, 103.53], [58.395, 57.12, 57.375]),
                              tv2.RandomErasing(), tv2.RandomErasing(value=(0, 1, -1)),
                              tv2.RandomErasing(value="random")])
    assert got.normalize_mean == pytest.approx(IMAGENET[0]) and got.normalize_std == pytest.approx(IMAGENET[1])
    e0, e1, noise = got.transforms[1:]
    assert e0 == T.RandomErasing(value=(124, 116, 104))
    assert e1 == T.RandomErasing(value=(124, 173, 46))  # 255 * (mean + std * v), rounded
    assert noise.value == "random" and noise.noise_mean == pytest.approx(IMAGENET[0])
    # A one-value Normalize is every channel's.
    got = T.from_torchvision([tv1.CenterCrop(8), tv1.ToTensor(), tv1.Normalize([0.5], [0.5])])
    assert (got.normalize_mean, got.normalize_std) == ((0.5,) * 3, (0.5,) * 3)


def _where(version: str):
    tv = TV[version]
    lam = tv.Lambda(lambda x: x)

    class MyFlip(tv.RandomHorizontalFlip):
        def forward(self, *inputs):
            return super().forward(*inputs)

    class Solarization:  # DINO's own PIL op
        def __call__(self, img):
            return img

    rrc = tv.RandomResizedCrop(8)
    tensor = [tv.ToTensor(), tv.Normalize(*IMAGENET)]
    return [
        ([rrc, tv.RandomHorizontalFlip(), tv.ToTensor(), lam], r"op 3 \(Lambda\) is not supported by stoker"),
        ([rrc, tv.Compose([tv.RandomHorizontalFlip(), lam])], r"op 1 \(Compose\) > op 1 \(Lambda\) is not supported"),
        ([rrc, tv.RandomApply([tv.RandomInvert(), lam])], r"op 1 \(RandomApply\) > op 1 \(Lambda\) is not supported"),
        ([rrc, tv.RandomChoice([tv.Compose([lam])])], r"op 1 \(RandomChoice\) > op 0 \(Compose\) > op 0 \(Lambda\)"),
        ([rrc, tv.Grayscale()], r"op 1 \(Grayscale\): num_output_channels=1 is not supported by stoker: its batches "
                                r"have 3 channels"),
        ([rrc, tv.RandomRotation(10, interpolation=InterpolationMode.BICUBIC)],
         r"op 1 \(RandomRotation\): interpolation 'bicubic' is not supported"),
        # A Normalize on pixels (torchvision refuses it): never rescaled silently.
        ([rrc, tv.Normalize(*IMAGENET)], r"op 1 \(Normalize\) would act on a PIL image \(torchvision refuses it"),
        ([tv.PILToTensor(), rrc, tv.Normalize(*IMAGENET)], r"op 2 \(Normalize\) would act on a uint8 tensor"),
        ([rrc, tv.Resize(256, max_size=300)], r"op 1 \(Resize\): max_size=300 is not supported"),
        ([rrc, *tensor, tv.RandomHorizontalFlip()], r"op 3 \(RandomHorizontalFlip\) comes after Normalize"),
        ([rrc, *tensor, tv.Normalize(*IMAGENET)], r"op 3 \(Normalize\) comes after Normalize"),
        ([tv.RandomHorizontalFlip(), rrc], r"op 0 \(RandomHorizontalFlip\) comes before the geometry"),
        ([tv.Resize(256), tv.ToTensor()], r"op 0 \(Resize\): Resize\(256\) of the shorter side gives a size that "
                                          r"varies per image"),
        ([rrc, tv.RandomHorizontalFlip(), tv.CenterCrop(4)], r"op 2 \(CenterCrop\): a geometry op after other ops"),
        ([rrc, tv.RandomApply([tv.CenterCrop(4)])], r"op 1 \(RandomApply\) > op 0 \(CenterCrop\) inside a container"),
        ([rrc, tv.RandomApply([tv.Normalize(*IMAGENET)])], r"op 1 \(RandomApply\) > op 0 \(Normalize\) inside a "),
        ([tv.ToTensor()], r"no op stoker runs"),
        ([tv.PILToTensor(), rrc, tv.RandomErasing(value="random")], r"op 2 \(RandomErasing\): value='random' on a "
                                                                    r"uint8 image"),
        ([rrc, *tensor, tv.RandomErasing(value=10)],
         r"op 3 \(RandomErasing\): value \[?10(\.0)?\]? is the pixel .*, outside 0..255"),
        ([tv.RandomCrop(224, padding=4, padding_mode="reflect")],
         r"op 0 \(RandomCrop\): padding_mode='reflect' is not supported by stoker: it pads with a constant fill only"),
        ([tv.Pad(4, padding_mode="edge"), tv.RandomCrop(8)],
         r"op 0 \(Pad\): padding_mode='edge' is not supported by stoker: it pads with a constant fill only"),
        ([tv.Pad(4), tv.ToTensor()], r"op 0 \(Pad\): Pad needs a RandomCrop or CenterCrop right after it"),
        ([rrc, tv.Pad(4)], r"op 1 \(Pad\): a geometry op after other ops"),
        ([tv.CenterCrop(8), tv.Pad(4), tv.Pad(4)], r"op 2 \(Pad\): a geometry op after other ops"),
        ([rrc, MyFlip()], r"op 1 \(MyFlip, a subclass of torchvision's RandomHorizontalFlip that overrides forward\) "
                          r"is not supported"),
        ([rrc, tv.RandomApply([Solarization()], p=0.2)], r"op 1 \(RandomApply\) > op 0 \(Solarization\) is not "
                                                         r"supported"),
    ]


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_refusals_name_the_op_and_its_position(version) -> None:
    for ops, want in _where(version):
        with pytest.raises(ValueError, match="^" + want):
            T.from_torchvision(TV[version].Compose(ops))


def test_supported_names_every_converted_class() -> None:
    assert set(T.TORCHVISION_SUPPORTED) >= {n for n in T.__all__ if n[0].isupper() and hasattr(tv2, n)} - {"Transform"}
