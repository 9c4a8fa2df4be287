"""Transform specs with torchvision's names and semantics
(torchvision.transforms.v2, as of torchvision 0.29).

These classes do no image work in Python: each one describes an op, and the
server runs the chain, the geometry fused into the decode. A transform is
either a preset name (:data:`PRESETS`), a :class:`Compose` of ops, or a
:class:`MultiView` of several views of every image (SimCLR, DINO)::

    from stoker import transforms as T
    T.Compose([T.RandomResizedCrop(224, interpolation="bicubic"), T.RandomHorizontalFlip(),
               T.RandomApply([T.ColorJitter(0.4, 0.4, 0.2, 0.1)], p=0.8), T.RandomGrayscale(0.2)])

The first op is the geometry (one RandomResizedCrop, or Resize and/or
CenterCrop in that order), which fixes the batch's size; every other op
runs after it in the order given, on the output-sized image; Normalize, if
any, comes last. The classes check their arguments as torchvision does (and
the bounds of a uint8 image: fills and thresholds in 0..255); the server
checks the chain and refuses what it cannot run with INVALID_ARGUMENT,
naming the op and the argument.

:func:`from_torchvision` turns a torchvision pipeline into a Compose;
:func:`timm_rand_augment` is timm's RandAugment, a policy of its own, and
:func:`timm_auto_augment` timm's AutoAugment and :func:`timm_aug_mix` its
AugMix.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence, Union

from stoker._from_torchvision import SUPPORTED as TORCHVISION_SUPPORTED
from stoker._from_torchvision import from_torchvision
from stoker._ops import (
    CenterCrop,
    ColorJitter,
    GaussianBlur,
    Grayscale,
    Normalize,
    Pad,
    RandomAdjustSharpness,
    RandomAffine,
    RandomAutocontrast,
    RandomCrop,
    RandomEqualize,
    RandomErasing,
    RandomGrayscale,
    RandomHorizontalFlip,
    RandomInvert,
    RandomPosterize,
    RandomResizedCrop,
    RandomRotation,
    RandomPerspective,
    RandomSolarize,
    RandomVerticalFlip,
    ConvertBoundingBoxFormat,
    RandomIoUCrop,
    RandomPhotometricDistort,
    RandomZoomOut,
    SanitizeBoundingBoxes,
    ClampBoundingBoxes,
    ClampKeyPoints,
    SanitizeKeyPoints,
    Resize,
    ScaleJitter,
    FixedSizeCrop,
    RandomShortestSize,
    RandomResize,
    PadIfSmaller,
)
from stoker._ops_base import Transform, mean_std
from stoker._ops_generated import *  # noqa: F401,F403  the named ops (RandomChannelPermutation, ...)
from stoker._ops_generated import NAMED as _NAMED
from stoker._ops_generated import SCHEMA as OP_SCHEMA
from stoker._ops_containers import Compose, RandomApply, RandomChoice, RandomOrder, flatten
from stoker._spec import one_view_spec
from stoker._ops_policies import (
    IMAGENET_MEAN_PIXELS,
    AugMix,
    AutoAugment,
    RandAugment,
    TimmAugMix,
    TimmAutoAugment,
    TimmRandAugment,
    TrivialAugmentWide,
    timm_aug_mix,
    timm_auto_augment,
    timm_rand_augment,
)
from stoker._views import MAX_VIEWS, VIEW_PRESETS, MultiView
from stoker._vlm import VLM_PRESETS, AnyResVision, InternVision, NaFlexVision, QwenVision, VisionCompose, VisionMultiView, from_hf
from stoker.v1 import stoker_pb2 as pb

if TYPE_CHECKING:  # pragma: no cover
    import torch

#: The ops the DETR family's configs (D-FINE's ``include/dataloader.yml``)
#: switch off at their stop_epoch: ``Loader(stop_ops=None)``'s default.
DETR_STOP_OPS = ("RandomPhotometricDistort", "RandomZoomOut", "RandomIoUCrop")
#: The ops ultralytics' ``close_mosaic`` switches off (those stoker has):
#: ``stop_ops``' default for a transform with a ``YOLOMosaic``.
YOLO_STOP_OPS = ("YOLOMosaic", "YOLOMixUp", "YOLOCopyPaste", "YOLOCutMix")

__all__ = [
    "DETR_STOP_OPS",
    "YOLO_STOP_OPS",
    "Transform",
    "Compose",
    "RandomResizedCrop",
    "Resize",
    "CenterCrop",
    "RandomCrop",
    "Pad",
    "RandomHorizontalFlip",
    "RandomVerticalFlip",
    "RandomZoomOut",
    "RandomIoUCrop",
    "ScaleJitter",
    "FixedSizeCrop",
    "RandomShortestSize",
    "RandomResize",
    "PadIfSmaller",
    "ConvertBoundingBoxFormat",
    "RandomPhotometricDistort",
    "SanitizeBoundingBoxes",
    "ClampBoundingBoxes",
    "ClampKeyPoints",
    "SanitizeKeyPoints",
    "ColorJitter",
    "Grayscale",
    "RandomGrayscale",
    "GaussianBlur",
    "RandomSolarize",
    "RandomPosterize",
    "RandomInvert",
    "RandomEqualize",
    "RandomAutocontrast",
    "RandomAdjustSharpness",
    "RandomRotation",
    "RandomAffine",
    "RandomPerspective",
    "RandomErasing",
    "RandomApply",
    "RandomChoice",
    "RandomOrder",
    "TrivialAugmentWide",
    "RandAugment",
    "AutoAugment",
    "AugMix",
    "TimmRandAugment",
    "timm_rand_augment",
    "TimmAutoAugment",
    "timm_auto_augment",
    "TimmAugMix",
    "timm_aug_mix",
    "Normalize",
    "MultiView",
    "MAX_VIEWS",
    "VIEW_PRESETS",
    "from_torchvision",
    "from_hf",
    "VLM_PRESETS",
    "QwenVision",
    "NaFlexVision",
    "InternVision",
    "AnyResVision",
    "VisionCompose",
    "VisionMultiView",
    "TORCHVISION_SUPPORTED",
    "PRESETS",
    "to_spec",
    "normalize",
    "IMAGENET_MEAN",
    "IMAGENET_STD",
    "IMAGENET_MEAN_PIXELS",
    "OP_SCHEMA",
    *sorted(_NAMED),
]

#: Preset names the server knows, each a recipe documented op by op in
#: docs/transforms.md: one-view presets, then :data:`VIEW_PRESETS`, whose
#: batches carry a list of views. "detr", "ssdlite", "lsj" and "frcnn" need ``Loader(targets=True)``;
#: "yolo" (ultralytics' v8_transforms, its Mosaic reading partners from the dataset) and "yolo-letterbox" are
#: ultralytics' (docs/detection.md); "segref" is torchvision's segmentation references' training recipe.
PRESETS = ("imagenet-train", "imagenet-eval", "tv-resnet50-v2", "deit", "simclr-view", "dino-global", "dino-local",
           "clip", "detr", "ssdlite", "lsj", "frcnn", "yolo", "yolo-letterbox", "segref") + VIEW_PRESETS

TransformLike = Union[str, Compose, Transform, Sequence[Transform], MultiView, pb.TransformSpec]


def to_spec(transform: TransformLike) -> pb.TransformSpec:
    """Returns the wire's TransformSpec for a preset name, a Compose (nested
    ones flattened), one op, a list of ops, a :class:`MultiView`, or a
    TransformSpec (a copy)."""
    if isinstance(transform, MultiView):
        return transform.to_spec()
    return one_view_spec(transform)


#: ImageNet's per-channel mean and std, in [0, 1] units.
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)

_norm_cache: dict = {}


def normalize(
    images: "torch.Tensor",
    mean: Sequence[float] = IMAGENET_MEAN,
    std: Sequence[float] = IMAGENET_STD,
    layout: str = "NCHW",
) -> "torch.Tensor":
    """Normalizes uint8 images on their own device: ``(x / 255 - mean) / std``
    as float32, what ``torchvision.transforms.Normalize`` gives on
    ``images.float() / 255``.

    ``images`` is ``[B, 3, H, W]`` or ``[3, H, W]`` (``layout="NCHW"``), or
    ``[B, H, W, 3]`` or ``[H, W, 3]`` (``layout="NHWC"``); move it to the GPU
    first (``images.cuda(non_blocking=True)``) so the work happens there.
    The input is never modified. The arithmetic is the server's
    ``Normalize``'s, so the two give the same floats; a mean and std the
    server refuses (a std of 0, NaN, inf, or so small that every output
    would be inf: 1e-300) raise ValueError here too.
    """
    import torch

    layout = layout.upper()
    if layout not in ("NCHW", "NHWC"):
        raise ValueError(f"layout must be 'NCHW' or 'NHWC', got {layout!r}")
    m, s = mean_std("normalize", mean, std, (3,))
    key = (m, s, layout, images.device)
    consts = _norm_cache.get(key)
    if consts is None:
        shape = (3, 1, 1) if layout == "NCHW" else (3,)
        # (x/255 - m) / s == x * (1 / (255 s)) - m / s, the scale and bias
        # in float64 and then rounded to float32, as the server does.
        mul = torch.tensor([1 / (255 * v) for v in s], dtype=torch.float32).view(shape).to(images.device)
        add = torch.tensor([-a / b for a, b in zip(m, s)], dtype=torch.float32).view(shape).to(images.device)
        consts = (mul, add)
        _norm_cache[key] = consts
    mul, add = consts
    c = images.shape[-3] if layout == "NCHW" else images.shape[-1]
    if images.dim() < 3 or c != 3:
        raise ValueError(f"images of shape {tuple(images.shape)} have no 3-channel axis for layout {layout}")
    # A fresh float32 tensor (a copy even when images already are float32),
    # then two in-place ops, each rounding to float32 as the server's do:
    # one allocation for the whole batch.
    return images.to(torch.float32, copy=True).mul_(mul).add_(add)
