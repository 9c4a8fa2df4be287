"""The single ops of stoker.transforms: the geometry, flips, photometric and
geometric ops, RandomErasing and Normalize, with
torchvision.transforms.v2's names, arguments, defaults and checks."""

from __future__ import annotations

import math
from typing import Any, Dict, Optional, Sequence, Tuple, Union

from stoker._ops_base import (
    Fill,
    Size,
    Transform,
    angle,
    fill_by_type,
    fill_values,
    hw,
    integer,
    interp_name,
    mean_std,
    named_op,
    min_max,
    prob,
    real,
    seq,
    typed_fill,
)
from stoker.v1 import stoker_pb2 as pb

_RESAMPLE = ("nearest", "bilinear", "bicubic")
# torchvision rotates and shears tensors with these two only.
_WARP = ("nearest", "bilinear")


def _antialias(cls: str, v: Optional[bool]) -> bool:
    if v is None:  # torchvision: True on PIL images, where recipes resize
        return True
    if not isinstance(v, bool):
        raise TypeError(f"{cls}: antialias should be a bool, got {v!r}")
    return v


class RandomResizedCrop(Transform):
    """A random crop of area ``scale`` and aspect ``ratio`` of the image,
    resized to ``size`` with ``interpolation`` ("nearest", "bilinear" or
    "bicubic"; or "random": bilinear or bicubic drawn per image, timm's
    ``RandomResizedCropAndInterpolation(interpolation="random")``;
    antialiased unless ``antialias=False``; None is True, what torchvision
    does on PIL images). It is fused into the decode: it must be the first
    op."""

    def __init__(
        self,
        size: Size,
        scale: Tuple[float, float] = (0.08, 1.0),
        ratio: Tuple[float, float] = (3.0 / 4.0, 4.0 / 3.0),
        interpolation: Any = "bilinear",
        antialias: Optional[bool] = True,
    ) -> None:
        cls = "RandomResizedCrop"
        self.size = hw(cls, size)
        # 0 <= min <= max <= 1; torchvision takes scale=(0.0, 1.0) (an empty
        # area drawn fails the try, and ten failures fall back to the
        # center crop)
        self.scale = min_max(cls, "scale", scale, 0.0, 1.0)
        if self.scale[1] == 0:
            # the wire's (0, 0) is "unset" (the default, (0.08, 1.0))
            raise ValueError(f"{cls}: scale={scale!r} draws an empty area every try, so every crop is torchvision's "
                             f"fallback, the center crop: use CenterCrop, or a scale with max > 0")
        self.ratio = min_max(cls, "ratio", ratio, 0.0)
        if self.ratio[0] <= 0:
            raise ValueError(f"{cls}: ratio should be of the form (min, max) with 0 < min, got {ratio!r}")
        if isinstance(interpolation, str) and interpolation == "random":
            self.interpolation = "random"
        else:
            self.interpolation = interp_name(cls, interpolation, _RESAMPLE)
        self.antialias = _antialias(cls, antialias)

    def to_proto(self) -> pb.Op:
        return named_op("RandomResizedCrop", size=self.size, scale=self.scale, ratio=self.ratio,
                        interpolation=self.interpolation, antialias=self.antialias)


class Resize(Transform):
    """Resize to (h, w), or the shorter side to ``size`` when it is an int
    (then a CenterCrop must follow: a batch's images have one size). Fused
    into the decode: it must be the first op. ``max_size`` is not supported
    (the size would vary per image)."""

    def __init__(self, size: Size, interpolation: Any = "bilinear", max_size: Optional[int] = None,
                 antialias: Optional[bool] = True) -> None:
        cls = "Resize"
        if hasattr(size, "__len__") and not isinstance(size, (str, bytes)) and len(size) == 1:
            size = tuple(size)[0]
        if hasattr(size, "__index__") and not isinstance(size, bool):
            self.size: Union[int, Tuple[int, int]] = integer(cls, "size", size, 1, 1 << 30)
        else:
            self.size = hw(cls, size)
        if max_size is not None:
            raise ValueError(f"{cls}: max_size={max_size!r} is not supported by stoker: a batch's images have one "
                             f"size (Resize then CenterCrop, or Resize((h, w)))")
        self.interpolation = interp_name(cls, interpolation, _RESAMPLE)
        self.antialias = _antialias(cls, antialias)

    def to_proto(self) -> pb.Op:
        return named_op("Resize", size=self.size, interpolation=self.interpolation, antialias=self.antialias)


class CenterCrop(Transform):
    """The central (h, w) crop; an int size is square."""

    def __init__(self, size: Size) -> None:
        self.size = hw("CenterCrop", size)

    def to_proto(self) -> pb.Op:
        return named_op("CenterCrop", size=self.size)


def _padding(cls: str, padding: Any) -> Tuple[int, ...]:
    """torchvision's pad forms: an int for every side, (left/right,
    top/bottom), or (left, top, right, bottom)."""
    vals = list(padding) if hasattr(padding, "__len__") and not isinstance(padding, str) else [padding]
    if len(vals) not in (1, 2, 4):
        raise ValueError(f"{cls}: padding {padding!r}: give 1, 2 or 4 values, as torchvision's pad")
    return tuple(integer(cls, "padding", v, 0, 4096) for v in vals)


def _typed(op: Transform, cls: str, fill: Any) -> Any:
    """A fill per type (torchvision's dict) split: the masks' kept as
    ``op.mask_fill`` (set only then: a plain fill is every type's, the
    masks' too), the pixels' returned; another fill returned as it is."""
    fill, mask = fill_by_type(cls, fill)
    if mask is not None:
        op.mask_fill = mask  # type: ignore[attr-defined]
    return fill


def _constant_fill(cls: str, fill: Any, padding_mode: str) -> Optional[Tuple[float, ...]]:
    """A constant padding's fill (uint8 integers, one or per channel); a
    padding_mode other than constant refused."""
    if padding_mode != "constant":
        raise ValueError(f"{cls}: padding_mode={padding_mode!r} is not supported by stoker: it pads with a "
                         f"constant fill only (padding_mode='constant')")
    fv = fill_values(cls, fill)
    if fv is not None and any(v != int(v) for v in fv):
        raise ValueError(f"{cls}: fill {fill!r}: stoker's images are uint8, so each value should be an integer")
    return fv


class RandomCrop(Transform):
    """torchvision's RandomCrop: a (h, w) crop (an int is square) at a
    uniform position of the image padded by ``padding`` (an int for every
    side, (left/right, top/bottom), or (left, top, right, bottom), as
    torchvision's pad) and, with ``pad_if_needed``, by what a side still
    lacks on both ends; the padding is ``fill`` (uint8 pixels: one value or
    one per channel; or torchvision's fill per type, ``{tv_tensors.Image: v,
    tv_tensors.Mask: m}``: v to the pixels, m to a job's masks),
    ``padding_mode="constant"`` only. It is the geometry:
    the first op (after a ``Pad``, if any), fused into the decode."""

    def __init__(self, size: Size, padding: Any = None, pad_if_needed: bool = False, fill: Any = 0,
                 padding_mode: str = "constant") -> None:
        cls = "RandomCrop"
        self.size = hw(cls, size)
        self.padding = () if padding is None or padding == 0 else _padding(cls, padding)
        self.pad_if_needed = bool(pad_if_needed)
        self.fill = _constant_fill(cls, _typed(self, cls, fill), padding_mode)
        self.padding_mode = padding_mode

    def to_proto(self) -> pb.Op:
        return named_op("RandomCrop", size=self.size, padding=self.padding or None, pad_if_needed=self.pad_if_needed,
                        fill=typed_fill(self, self.fill))


class Pad(Transform):
    """torchvision's Pad: the image padded by ``padding`` (an int for every
    side, (left/right, top/bottom), or (left, top, right, bottom)) with a
    constant ``fill`` (uint8 pixels: one value or one per channel; or a fill
    per type, as RandomCrop's), ``padding_mode="constant"`` only. Part of
    the geometry, fused into the
    decode: right before a ``RandomCrop`` or a ``CenterCrop`` (which fix
    the batch's size), or right after one that is not resized."""

    def __init__(self, padding: Any, fill: Any = 0, padding_mode: str = "constant") -> None:
        cls = "Pad"
        self.padding = _padding(cls, padding)
        self.fill = _constant_fill(cls, _typed(self, cls, fill), padding_mode)
        self.padding_mode = padding_mode

    def to_proto(self) -> pb.Op:
        return named_op("Pad", padding=self.padding, fill=typed_fill(self, self.fill))


class RandomZoomOut(Transform):
    """torchvision.transforms.v2's RandomZoomOut (SSD's zoom out): with
    probability ``p``, the image padded with a constant ``fill`` (or a fill
    per type, as RandomCrop's: the SSD references' ``{tv_tensors.Image:
    (123, 117, 104), "others": 0}``) onto a
    canvas ``r`` times its size (``r`` uniform in ``side_range``), at a
    uniform position; a job's target boxes move with it. Part of the
    geometry, fused into the decode: first, then ``Resize((h, w))`` (the
    canvas resized), a ``RandomCrop`` or a ``CenterCrop``, which fix the
    batch's size."""

    def __init__(self, fill: Any = 0, side_range: Sequence[float] = (1.0, 4.0), p: float = 0.5) -> None:
        cls = "RandomZoomOut"
        self.fill = _constant_fill(cls, _typed(self, cls, fill), "constant")
        lo, hi = seq(cls, "side_range", side_range, (2,))
        if lo < 1.0 or lo > hi:
            raise ValueError(f"Invalid side range provided {tuple(side_range)}.")
        if hi > 16:
            raise ValueError(f"{cls}: side_range {tuple(side_range)}: stoker's canvas is at most 16 times the image "
                             f"a side")
        self.side_range = (lo, hi)
        self.p = prob(cls, p)

    def to_proto(self) -> pb.Op:
        return named_op("RandomZoomOut", fill=typed_fill(self, self.fill), side_range=self.side_range, p=self.p)


class RandomIoUCrop(Transform):
    """torchvision.transforms.v2's RandomIoUCrop (SSD's IoU crop), on a job
    with targets (``Loader(targets=True)``): its crop is drawn against the
    sample's boxes (an option of ``sampler_options`` as the minimal IoU,
    one >= 1 leaving the image; ``trials`` crops of each side times a scale
    in [``min_scale``, ``max_scale``] with an aspect in
    [``min_aspect_ratio``, ``max_aspect_ratio``]), and the boxes whose
    centre falls outside it become (0, 0, 0, 0), which a
    ``SanitizeBoundingBoxes`` after it drops. Part of the geometry, fused
    into the decode: first, or right after a ``RandomZoomOut``, then
    ``Resize((h, w))`` (after ``SanitizeBoundingBoxes`` and one
    ``RandomHorizontalFlip``, if any). A job without targets is refused.
    ``p`` is the probability that the crop is drawn at all (the DETR
    family's ``RandomIoUCrop(p=0.8)``, torchvision's
    ``RandomApply([RandomIoUCrop()], p)``); a crop not drawn leaves the
    image whole."""

    def __init__(self, min_scale: float = 0.3, max_scale: float = 1.0, min_aspect_ratio: float = 0.5,
                 max_aspect_ratio: float = 2.0, sampler_options: Optional[Sequence[float]] = None,
                 trials: int = 40, *, p: float = 1.0) -> None:
        cls = "RandomIoUCrop"
        self.min_scale = real(cls, "min_scale", min_scale)
        self.max_scale = real(cls, "max_scale", max_scale)
        if not 0 < self.min_scale <= self.max_scale <= 1:
            raise ValueError(f"{cls}: min_scale {min_scale}, max_scale {max_scale}: want 0 < min_scale <= max_scale <= 1")
        self.min_aspect_ratio = real(cls, "min_aspect_ratio", min_aspect_ratio)
        self.max_aspect_ratio = real(cls, "max_aspect_ratio", max_aspect_ratio)
        if not 0 < self.min_aspect_ratio <= self.max_aspect_ratio:
            raise ValueError(f"{cls}: min_aspect_ratio {min_aspect_ratio}, max_aspect_ratio {max_aspect_ratio}: want "
                             f"0 < min <= max")
        opts = [0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0] if sampler_options is None else \
            [real(cls, "sampler_options", v) for v in sampler_options]
        if not 1 <= len(opts) <= 64 or any(v < 0 for v in opts):
            raise ValueError(f"{cls}: sampler_options {sampler_options!r}: want 1 to 64 minimal IoUs >= 0")
        self.sampler_options = tuple(opts)
        self.trials = integer(cls, "trials", trials, 1, 1000)
        self.p = real(cls, "p", p)
        if not 0 < self.p <= 1:
            raise ValueError(f"{cls}: p={p}: want 0 < p <= 1 (p=0 never crops: leave the op out)")

    def to_proto(self) -> pb.Op:
        return named_op("RandomIoUCrop", min_scale=self.min_scale, max_scale=self.max_scale,
                        min_aspect_ratio=self.min_aspect_ratio, max_aspect_ratio=self.max_aspect_ratio,
                        sampler_options=self.sampler_options, trials=self.trials, p=self.p)


class ScaleJitter(Transform):
    """torchvision.transforms.v2's ScaleJitter (large-scale jitter): the
    image resized by ``r = min(target_size[1] / height, target_size[0] /
    width)`` times a scale uniform in ``scale_range``, each side
    ``int(side * r)`` (torchvision's make_params, whose ``target_size``
    pairs its second value with the height); a job's target boxes move
    with it. Part of the geometry, fused into the decode: first, then
    ``FixedSizeCrop``, which fixes the batch's size."""

    def __init__(self, target_size: Sequence[int], scale_range: Sequence[float] = (0.1, 2.0),
                 interpolation: Any = "bilinear", antialias: Optional[bool] = True) -> None:
        cls = "ScaleJitter"
        if not hasattr(target_size, "__len__") or len(target_size) != 2:
            raise TypeError(f"{cls}: target_size should be a (w, h) pair, as torchvision indexes it, got {target_size!r}")
        self.target_size = (integer(cls, "target_size", target_size[0], 1, 4096),
                            integer(cls, "target_size", target_size[1], 1, 4096))
        lo, hi = seq(cls, "scale_range", scale_range, (2,))
        if not 0 < lo <= hi <= 16:
            raise ValueError(f"{cls}: scale_range {tuple(scale_range)}: want 0 < min <= max <= 16")
        self.scale_range = (lo, hi)
        self.interpolation = interp_name(cls, interpolation, _RESAMPLE)
        self.antialias = _antialias(cls, antialias)

    def to_proto(self) -> pb.Op:
        return named_op("ScaleJitter", target_size=self.target_size, scale_range=self.scale_range,
                        interpolation=self.interpolation, antialias=self.antialias)


class FixedSizeCrop(Transform):
    """torchvision's FixedSizeCrop (its detection references' and
    prototype transforms', of the large-scale-jitter recipe): a crop of at
    most ``size`` (h, w; an int is square) at one uniform ``r`` (top
    ``int((height - h) * r)``, left ``int((width - w) * r)`` where the
    image is larger), padded on the right and bottom with ``fill`` to
    ``size``; a job's target boxes are cropped, and those left empty
    dropped with their labels. Part of the geometry, fused into the
    decode: first, or right after a ``ScaleJitter``."""

    def __init__(self, size: Size, fill: Any = 0, padding_mode: str = "constant") -> None:
        cls = "FixedSizeCrop"
        self.size = hw(cls, size)
        self.fill = _constant_fill(cls, fill, padding_mode)

    def to_proto(self) -> pb.Op:
        return named_op("FixedSizeCrop", size=self.size, fill=self.fill)


class RandomShortestSize(Transform):
    """torchvision.transforms.v2's RandomShortestSize: the shorter side
    resized to one of ``min_size`` (drawn uniformly), the longer at most
    ``max_size``: ``r = min(min_size / shorter, max_size / longer)``, each
    side ``int(side * r)`` (torchvision's make_params); a job's target
    boxes move with it. Part of the geometry, fused into the decode:
    first. A ``CenterCrop`` after it fixes the batch's size; without one
    each sample has its own size, at most ``max_size`` a side (required
    then), and a batch comes padded to its largest sample with each
    sample's size (``Batch.sizes``, ``Batch.mask``)."""

    def __init__(self, min_size: Union[int, Sequence[int]], max_size: Optional[int] = None,
                 interpolation: Any = "bilinear", antialias: Optional[bool] = True) -> None:
        cls = "RandomShortestSize"
        sizes = [min_size] if isinstance(min_size, int) else list(min_size)
        if not 1 <= len(sizes) <= 256:
            raise ValueError(f"{cls}: min_size of {len(sizes)} sizes: want 1 to 256")
        self.min_size = tuple(integer(cls, "min_size", v, 1, 4096) for v in sizes)
        self.max_size = None if max_size is None else integer(cls, "max_size", max_size, 1, 4096)
        self.interpolation = interp_name(cls, interpolation, _RESAMPLE)
        self.antialias = _antialias(cls, antialias)

    def to_proto(self) -> pb.Op:
        return named_op("RandomShortestSize", min_size=self.min_size, max_size=self.max_size,
                        interpolation=self.interpolation, antialias=self.antialias)


class RandomResize(Transform):
    """torchvision.transforms.v2's RandomResize: the shorter side resized
    to a size uniform in ``[min_size, max_size)``, the longer scaled and
    truncated (``Resize(size)``); a job's target boxes move with it. Part
    of the geometry, fused into the decode: first, then a ``CenterCrop``,
    or (the segmentation references' recipe) a ``RandomHorizontalFlip``
    (if any), a ``PadIfSmaller`` (if any) and a ``RandomCrop`` (its longer
    side has no bound of its own: for per-sample sizes use
    ``RandomShortestSize`` with a ``max_size``)."""

    def __init__(self, min_size: int, max_size: int, interpolation: Any = "bilinear",
                 antialias: Optional[bool] = True) -> None:
        cls = "RandomResize"
        self.min_size = integer(cls, "min_size", min_size, 1, 4096)
        self.max_size = integer(cls, "max_size", max_size, 2, 4097)
        if self.min_size >= self.max_size:
            raise ValueError(f"{cls}: min_size {min_size} >= max_size {max_size}: torch.randint draws in [min, max)")
        self.interpolation = interp_name(cls, interpolation, _RESAMPLE)
        self.antialias = _antialias(cls, antialias)

    def to_proto(self) -> pb.Op:
        return named_op("RandomResize", min_size=self.min_size, max_size=self.max_size,
                        interpolation=self.interpolation, antialias=self.antialias)


class PadIfSmaller(Transform):
    """torchvision's segmentation references' PadIfSmaller
    (``references/segmentation/v2_extras.py``, not in torchvision proper):
    the image padded on the right and bottom with ``fill`` to at least
    ``size`` a side (padding ``[0, 0, max(size - w, 0), max(size - h,
    0)]``); ``fill`` is one value or one per channel, or a fill per type
    (the references' ``{tv_tensors.Mask: 255, "others": 0}``: 255 to a
    job's masks). Part of the geometry: after a ``RandomResize`` (and a
    ``RandomHorizontalFlip``), right before a ``RandomCrop``."""

    def __init__(self, size: int, fill: Any = 0) -> None:
        cls = "PadIfSmaller"
        self.size = integer(cls, "size", size, 1, 4096)
        self.fill = _constant_fill(cls, _typed(self, cls, fill), "constant")

    def to_proto(self) -> pb.Op:
        return named_op("PadIfSmaller", size=self.size, fill=typed_fill(self, self.fill))


class ConvertBoundingBoxFormat(Transform):
    """torchvision.transforms.v2's ConvertBoundingBoxFormat, on a job's
    targets (``Loader(targets=True)``; refused without): the boxes come in
    ``format`` ("XYXY", "XYWH", "CXCYWH", or a
    ``tv_tensors.BoundingBoxFormat``), their ``BoundingBoxes`` carrying it.
    It comes after every op that moves or drops boxes."""

    def __init__(self, format: Any) -> None:
        name = getattr(format, "name", format)
        if not isinstance(name, str) or name.upper() not in ("XYXY", "XYWH", "CXCYWH"):
            raise ValueError(f"ConvertBoundingBoxFormat: format {format!r}: stoker's boxes are XYXY, XYWH or CXCYWH "
                             f"(the rotated formats are not supported)")
        self.format = name.upper()

    def to_proto(self) -> pb.Op:
        return named_op("ConvertBoundingBoxFormat", format=self.format)


class RandomHorizontalFlip(Transform):
    """Flip left-right with probability ``p``."""

    def __init__(self, p: float = 0.5) -> None:
        self.p = prob("RandomHorizontalFlip", p)

    def to_proto(self) -> pb.Op:
        return named_op("RandomHorizontalFlip", p=self.p)


class RandomVerticalFlip(Transform):
    """Flip upside down with probability ``p``."""

    def __init__(self, p: float = 0.5) -> None:
        self.p = prob("RandomVerticalFlip", p)

    def to_proto(self) -> pb.Op:
        return named_op("RandomVerticalFlip", p=self.p)


class SanitizeBoundingBoxes(Transform):
    """torchvision.transforms.v2's SanitizeBoundingBoxes, on the job's
    targets (``Loader(targets=True)``): drops the boxes narrower or lower
    than ``min_size``, smaller in area than ``min_area``, or outside the
    canvas, with their labels, where it stands among the ops; the pixels are
    untouched. A job without targets is refused, as torchvision's fails
    when it finds no boxes. ``labels_getter`` is torchvision's; only its
    default is taken: the labels always go with their boxes."""

    def __init__(self, min_size: float = 1.0, min_area: float = 1.0, labels_getter: Any = "default") -> None:
        if not (isinstance(labels_getter, str) and labels_getter == "default"):
            raise ValueError(f"SanitizeBoundingBoxes: labels_getter={labels_getter!r}: stoker's targets drop each box's "
                             f"label with it (labels_getter='default')")
        self.min_size = real("SanitizeBoundingBoxes", "min_size", min_size)
        self.min_area = real("SanitizeBoundingBoxes", "min_area", min_area)
        if self.min_size < 1:
            raise ValueError(f"SanitizeBoundingBoxes: min_size must be >= 1, got {min_size}.")
        if self.min_area < 1:
            raise ValueError(f"SanitizeBoundingBoxes: min_area must be >= 1, got {min_area}.")

    def to_proto(self) -> pb.Op:
        return named_op("SanitizeBoundingBoxes", min_size=self.min_size, min_area=self.min_area)


class ClampBoundingBoxes(Transform):
    """torchvision.transforms.v2's ClampBoundingBoxes, on a job's targets
    (``Loader(targets=True)``; refused without): the boxes clamped to the
    canvas where it stands, in their format (after a
    ``ConvertBoundingBoxFormat`` too), in float32 as torchvision computes.
    ``clamping_mode`` "auto" (the boxes' own: stoker's are "soft"), "soft"
    and "hard" are the same for these boxes; ``None`` leaves them. The
    pixels are untouched."""

    def __init__(self, clamping_mode: Any = "auto") -> None:
        if clamping_mode is not None and clamping_mode not in ("soft", "hard", "auto"):
            raise ValueError(f"ClampBoundingBoxes: clamping_mode must be soft, hard, auto or None, got {clamping_mode!r}")
        self.clamping_mode = clamping_mode

    def to_proto(self) -> pb.Op:
        return named_op("ClampBoundingBoxes", clamping_mode=self.clamping_mode)


class ClampKeyPoints(Transform):
    """torchvision.transforms.v2's ClampKeyPoints, on a job's targets
    (refused without): the keypoints clamped to the canvas, x to
    ``[0, W - 1]``, y to ``[0, H - 1]``, where it stands (a dataset
    without keypoints: nothing to clamp)."""

    def to_proto(self) -> pb.Op:
        return named_op("ClampKeyPoints")


class SanitizeKeyPoints(Transform):
    """torchvision.transforms.v2's SanitizeKeyPoints, on a job's targets
    (refused without; a sample of a dataset without keypoints fails, as
    torchvision's does): every instance with a keypoint outside the canvas
    (``x < 0`` or ``x >= W``, ``y < 0`` or ``y >= H``) is dropped where it
    stands, whole: its keypoints and their visibilities, its box, label and
    crowd flag. That is torchvision's with a ``labels_getter`` returning
    every per-instance field; its default (``None``) drops the keypoints
    alone, leaving the boxes and labels with rows no keypoints match any
    more, which stoker's per-instance targets cannot carry. ``labels_getter``
    ``None`` or ``"default"`` is taken (each means stoker's whole
    instance); a callable is refused."""

    def __init__(self, labels_getter: Any = None) -> None:
        if not (labels_getter is None or (isinstance(labels_getter, str) and labels_getter == "default")):
            raise ValueError(f"SanitizeKeyPoints: labels_getter={labels_getter!r}: stoker's targets drop an instance "
                             f"whole (keypoints, box, label, crowd flag, visibilities); give None or 'default'")
        self.labels_getter = labels_getter

    def to_proto(self) -> pb.Op:
        return named_op("SanitizeKeyPoints", labels_getter=self.labels_getter)


def _jitter(name: str, v: Any, center: float, bound: Tuple[float, float], clip: bool) -> Tuple[Any, Any]:
    """torchvision's ColorJitter._check_input: returns (the range, or None
    for no change; the wire's form: a number or a pair)."""
    cls = "ColorJitter"
    if v is None:
        return None, 0.0
    if hasattr(v, "__len__") and not isinstance(v, (str, bytes)):
        if len(v) != 2:
            raise TypeError(f"{cls}: {name}={v!r} should be a single number or a sequence with length 2.")
        r = [real(cls, name, x) for x in v]
        given: Any = tuple(r)
    else:
        x = real(cls, name, v)
        if x < 0:
            raise ValueError(f"{cls}: If {name} is a single number, it must be non negative, got {v!r}")
        r = [center - x, center + x]
        if clip:
            r[0] = max(r[0], 0.0)
        given = x
    if not bound[0] <= r[0] <= r[1] <= bound[1]:
        raise ValueError(f"{cls}: {name} values should be between {bound} and increasing, but got {r}.")
    if name != "hue" and r[1] > 100:
        raise ValueError(f"{cls}: {name} {r}: a factor over 100 makes every pixel 0 or 255 (stoker's bound)")
    return (None if r[0] == r[1] == center else (r[0], r[1])), given


class ColorJitter(Transform):
    """Random brightness, contrast, saturation and hue, applied in a random
    order. Each is None (no change), a number x (a factor drawn from
    ``[max(0, 1 - x), 1 + x]``, hue from ``[-x, x]`` with x <= 0.5) or a
    (min, max) range; as torchvision's, the attributes hold the ranges."""

    def __init__(self, brightness: Any = None, contrast: Any = None, saturation: Any = None, hue: Any = None) -> None:
        self.brightness, b = _jitter("brightness", brightness, 1.0, (0.0, math.inf), True)
        self.contrast, c = _jitter("contrast", contrast, 1.0, (0.0, math.inf), True)
        self.saturation, s = _jitter("saturation", saturation, 1.0, (0.0, math.inf), True)
        self.hue, h = _jitter("hue", hue, 0.0, (-0.5, 0.5), False)
        self._given = (b, c, s, h)

    def to_proto(self) -> pb.Op:
        return named_op("ColorJitter", **dict(zip(("brightness", "contrast", "saturation", "hue"), self._given)))


class RandomPhotometricDistort(Transform):
    """torchvision.transforms.v2's RandomPhotometricDistort (SSD's): each of
    ``brightness``, ``contrast``, ``saturation`` and ``hue`` (a (min, max)
    range each) applied with probability ``p`` at a factor uniform in its
    range, contrast before or after saturation and hue at even odds, and
    the channels permuted at random with probability ``p``; boxes stay.
    After the geometry, or first, before a geometry that ends in
    ``Resize((h, w))`` (after a ``RandomZoomOut`` or ``RandomIoUCrop``, if
    any): then on the image at its own size, as the DETR recipes have it."""

    def __init__(self, brightness: Tuple[float, float] = (0.875, 1.125), contrast: Tuple[float, float] = (0.5, 1.5),
                 saturation: Tuple[float, float] = (0.5, 1.5), hue: Tuple[float, float] = (-0.05, 0.05),
                 p: float = 0.5) -> None:
        cls = "RandomPhotometricDistort"
        self.brightness = min_max(cls, "brightness", brightness, 0.0, 100.0)
        self.contrast = min_max(cls, "contrast", contrast, 0.0, 100.0)
        self.saturation = min_max(cls, "saturation", saturation, 0.0, 100.0)
        self.hue = min_max(cls, "hue", hue, -0.5, 0.5)
        self.p = prob(cls, p)

    def to_proto(self) -> pb.Op:
        return named_op("RandomPhotometricDistort", brightness=self.brightness, contrast=self.contrast,
                        saturation=self.saturation, hue=self.hue, p=self.p)


class Normalize(Transform):
    """``(pixel / 255 - mean) / std`` per channel; the output becomes
    float32. It must be the last op.

    Four times the bytes on the wire: prefer uint8 batches and
    :func:`stoker.normalize` on the GPU. ``inplace`` is accepted for
    torchvision's signature and changes nothing.
    """

    def __init__(self, mean: Sequence[float], std: Sequence[float], inplace: bool = False) -> None:
        self.mean, self.std = mean_std("Normalize", mean, std)

    def to_proto(self) -> pb.Op:
        return named_op("Normalize", mean=self.mean, std=self.std)


class Grayscale(Transform):
    """Convert to grayscale (ITU-R 601-2 luma), the grey value in all three
    channels.

    ``num_output_channels`` defaults to 3, not torchvision's 1: every batch
    stoker makes has 3 channels (one shape for the whole batch, and one
    layout for the GPU side), so a one-channel output cannot be expressed;
    Grayscale(3) is what torchvision gives with ``num_output_channels=3``.
    """

    def __init__(self, num_output_channels: int = 3) -> None:
        n = integer("Grayscale", "num_output_channels", num_output_channels, 1, 3)
        if n != 3:
            raise ValueError(f"Grayscale: num_output_channels={n} is not supported by stoker: its batches have 3 "
                             f"channels; use num_output_channels=3 (the grey value in each)")
        self.num_output_channels = n

    def to_proto(self) -> pb.Op:
        return named_op("Grayscale", num_output_channels=3)


class RandomGrayscale(Transform):
    """Grayscale (3 channels) with probability ``p``."""

    def __init__(self, p: float = 0.1) -> None:
        self.p = prob("RandomGrayscale", p)

    def to_proto(self) -> pb.Op:
        return named_op("RandomGrayscale", p=self.p)


class GaussianBlur(Transform):
    """Blur with a Gaussian of ``kernel_size`` (odd; an int or (x, y)) and a
    sigma drawn uniformly from ``sigma`` (a number or (min, max), > 0)."""

    def __init__(self, kernel_size: Size, sigma: Any = (0.1, 2.0)) -> None:
        cls = "GaussianBlur"
        ks = hw(cls, kernel_size, "kernel_size")
        if any(k % 2 == 0 for k in ks):
            raise ValueError(f"{cls}: Kernel size value should be an odd and positive number, got {kernel_size!r}")
        if hasattr(sigma, "__len__") and not isinstance(sigma, (str, bytes)):
            sig = seq(cls, "sigma", sigma, (1, 2))
            sig = (sig[0], sig[-1])
        else:
            s = real(cls, "sigma", sigma)
            sig = (s, s)
        if not 0.0 < sig[0] <= sig[1]:
            raise ValueError(f"{cls}: sigma values should be positive and of the form (min, max). Got {sigma!r}")
        self.kernel_size = ks
        self.sigma = sig

    def to_proto(self) -> pb.Op:
        return named_op("GaussianBlur", kernel_size=self.kernel_size, sigma=self.sigma)


class RandomSolarize(Transform):
    """Invert every pixel value >= ``threshold`` (uint8 units: 0..255) with
    probability ``p``."""

    def __init__(self, threshold: float, p: float = 0.5) -> None:
        t = real("RandomSolarize", "threshold", threshold)
        if not 0 <= t <= 255:
            raise ValueError(f"RandomSolarize: threshold {threshold!r}: stoker's images are uint8, so it should be "
                             f"in 0..255")
        self.threshold = t
        self.p = prob("RandomSolarize", p)

    def to_proto(self) -> pb.Op:
        return named_op("RandomSolarize", threshold=self.threshold, p=self.p)


class RandomPosterize(Transform):
    """Keep ``bits`` (0..8) bits of each channel, with probability ``p``."""

    def __init__(self, bits: int, p: float = 0.5) -> None:
        self.bits = integer("RandomPosterize", "bits", bits, 0, 8)
        self.p = prob("RandomPosterize", p)

    def to_proto(self) -> pb.Op:
        return named_op("RandomPosterize", bits=self.bits, p=self.p)


class _RandomPointOp(Transform):
    """An op with no argument but its probability ``p``."""

    _field = ""

    def __init__(self, p: float = 0.5) -> None:
        self.p = prob(type(self).__name__, p)

    def to_proto(self) -> pb.Op:
        return named_op(type(self).__name__, p=self.p)


class RandomInvert(_RandomPointOp):
    """Invert the colours (255 - x) with probability ``p``."""

    _field = "random_invert"


class RandomEqualize(_RandomPointOp):
    """Equalize each channel's histogram with probability ``p``."""

    _field = "random_equalize"


class RandomAutocontrast(_RandomPointOp):
    """Stretch each channel to 0..255 with probability ``p``."""

    _field = "random_autocontrast"


class RandomAdjustSharpness(Transform):
    """Sharpen by ``sharpness_factor`` (0 blurs, 1 keeps, 2 doubles) with
    probability ``p``."""

    def __init__(self, sharpness_factor: float, p: float = 0.5) -> None:
        f = real("RandomAdjustSharpness", "sharpness_factor", sharpness_factor)
        if not 0 <= f <= 1000:
            raise ValueError(f"RandomAdjustSharpness: sharpness_factor should be non-negative (at most 1000), got "
                             f"{sharpness_factor!r}")
        self.sharpness_factor = f
        self.p = prob("RandomAdjustSharpness", p)

    def to_proto(self) -> pb.Op:
        return named_op("RandomAdjustSharpness", sharpness_factor=self.sharpness_factor, p=self.p)


def _center(cls: str, v: Any) -> Optional[Tuple[float, ...]]:
    return None if v is None else seq(cls, "center", v, (2,))


class RandomRotation(Transform):
    """Rotate by an angle drawn from ``degrees`` (x: (-x, x)), about
    ``center`` (x, y) (None: the image's center), resampling with
    "nearest" (the default) or "bilinear", filling uncovered pixels with
    ``fill`` (uint8 units; or a fill per type, as RandomCrop's).
    ``expand=True`` makes each image large enough
    to hold the whole rotated one, as torchvision's: each sample then has
    its own size (the batch padded to its largest, with the sizes beside
    it), bounded by the rotation of the size before it, unless a
    ``Resize((h, w))`` or ``CenterCrop`` after it fixes the size again.
    It stands after the geometry."""

    def __init__(self, degrees: Any, interpolation: Any = "nearest", expand: bool = False, center: Any = None,
                 fill: Fill = 0) -> None:
        cls = "RandomRotation"
        self.degrees = angle(cls, "degrees", degrees)
        self.interpolation = interpolation_warp(cls, interpolation)
        self.expand = bool(expand)
        self.center = _center(cls, center)
        self.fill = fill_values(cls, _typed(self, cls, fill))

    def to_proto(self) -> pb.Op:
        return named_op("RandomRotation", degrees=self.degrees, interpolation=self.interpolation, expand=self.expand,
                        center=self.center, fill=typed_fill(self, self.fill))


def interpolation_warp(cls: str, v: Any) -> str:
    """A rotation's or shear's interpolation: nearest or bilinear, what
    torchvision's tensor kernels take."""
    return interp_name(cls, v, _WARP)


class RandomPerspective(Transform):
    """torchvision.transforms.v2's RandomPerspective: with probability
    ``p``, the image's corners each moved inward by up to
    ``distortion_scale`` of half its side (drawn as its ``make_params``),
    the image resampled through the perspective that takes them there with
    "bilinear" (the default) or "nearest", ``fill`` (uint8 units; None: no
    fill blended) where nothing maps: torch's pixels to the byte (or a fill
    per type, as RandomCrop's). After the geometry; a job's target boxes,
    keypoints and masks (nearest, the Mask's fill) move with it."""

    def __init__(self, distortion_scale: float = 0.5, p: float = 0.5, interpolation: Any = "bilinear",
                 fill: Fill = 0) -> None:
        cls = "RandomPerspective"
        self.distortion_scale = prob(cls, distortion_scale, "distortion_scale")
        self.p = prob(cls, p)
        self.interpolation = interpolation_warp(cls, interpolation)
        self.fill = fill_values(cls, _typed(self, cls, fill))

    def to_proto(self) -> pb.Op:
        return named_op("RandomPerspective", distortion_scale=self.distortion_scale, p=self.p,
                        interpolation=self.interpolation, fill=typed_fill(self, self.fill))


class RandomAffine(Transform):
    """A random affine map keeping the center: a rotation from ``degrees``,
    a translation up to ``translate`` (max_dx, max_dy) fractions of the
    size, a scale from ``scale`` (min, max), a shear from ``shear`` (x:
    (-x, x) along x; (min, max) along x; or (min_x, max_x, min_y, max_y));
    resampled with "nearest" (the default) or "bilinear"; ``fill`` in uint8
    units (or a fill per type, as RandomCrop's)."""

    def __init__(self, degrees: Any, translate: Optional[Sequence[float]] = None,
                 scale: Optional[Sequence[float]] = None, shear: Any = None, interpolation: Any = "nearest",
                 fill: Fill = 0, center: Any = None) -> None:
        cls = "RandomAffine"
        self.degrees = angle(cls, "degrees", degrees)
        self.translate: Optional[Tuple[float, ...]] = None
        if translate is not None:
            self.translate = seq(cls, "translate", translate, (2,))
            if not all(0.0 <= t <= 1.0 for t in self.translate):
                raise ValueError(f"{cls}: translation values should be between 0 and 1, got {translate!r}")
        self.scale: Optional[Tuple[float, ...]] = None
        if scale is not None:
            self.scale = seq(cls, "scale", scale, (2,))
            if not all(s > 0 for s in self.scale):
                raise ValueError(f"{cls}: scale values should be positive, got {scale!r}")
            if self.scale[0] > self.scale[1]:
                raise ValueError(f"{cls}: scale should be of the form (min, max), got {scale!r}")
        self.shear = None if shear is None else angle(cls, "shear", shear, (2, 4))
        self.interpolation = interpolation_warp(cls, interpolation)
        self.fill = fill_values(cls, _typed(self, cls, fill))
        self.center = _center(cls, center)

    def to_proto(self) -> pb.Op:
        return named_op("RandomAffine", degrees=self.degrees, translate=self.translate, scale=self.scale,
                        shear=self.shear, interpolation=self.interpolation, fill=typed_fill(self, self.fill),
                        center=self.center)


class RandomErasing(Transform):
    """Erase a random rectangle (area ``scale``, aspect ``ratio`` of the
    image) with probability ``p``, as torchvision's RandomErasing.

    stoker erases the uint8 pixels, before any Normalize: ``value`` is in
    pixel units (0..255; one value or one per channel), or ``"random"`` for
    noise. torchvision's recipes erase after Normalize, where
    ``value=0`` is the mean colour: to write what they write, give
    ``255 * (mean + std * v)`` per channel (``(124, 116, 104)`` for 0 under
    ImageNet's Normalize; :func:`from_torchvision` converts it for you).
    ``"random"`` draws a standard normal value per pixel and channel as it
    would be after a Normalize of ``noise_mean`` and ``noise_std`` (None:
    ImageNet's), written as the pixel that normalizes to it.

    What differs from erasing after Normalize: each value is rounded to the
    nearest uint8 pixel (at most 0.5/255/std off, about 0.009 in normalized
    units under ImageNet's std), and noise beyond the pixel range is clipped
    to 0 or 255 (under ImageNet's Normalize, draws below -1.8 to -2.1 or
    above 2.2 to 2.6 standard deviations, by channel: 3 to 4% of them); a
    value whose pixel would fall outside 0..255 cannot be written at all.

    Beyond torchvision's, timm's RandomErasing: ``per_box=True`` with
    ``value="random"`` draws one standard normal value per channel for the
    whole box (timm's ``mode='rand'``) instead of one per pixel; ``count``
    is timm's number of boxes, an int or ``(min_count, max_count)`` for a
    uniform number of them (at most 16), each box's area range divided by
    that number and each its own ten tries.
    """

    def __init__(self, p: float = 0.5, scale: Sequence[float] = (0.02, 0.33), ratio: Sequence[float] = (0.3, 3.3),
                 value: Any = 0, inplace: bool = False, *, noise_mean: Optional[Sequence[float]] = None,
                 noise_std: Optional[Sequence[float]] = None, per_box: bool = False,
                 count: Union[int, Sequence[int]] = 1) -> None:
        cls = "RandomErasing"
        self.p = prob(cls, p)
        self.scale = min_max(cls, "scale", scale, 0.0, 1.0)
        if self.scale[1] == 0:
            # the wire's (0, 0) is "unset" (the default, (0.08, 1.0))
            raise ValueError(f"{cls}: scale={scale!r} draws an empty area every try, so every crop is torchvision's "
                             f"fallback, the center crop: use CenterCrop, or a scale with max > 0")
        self.ratio = min_max(cls, "ratio", ratio, 0.0)
        if self.ratio[0] <= 0:
            raise ValueError(f"{cls}: ratio should be of the form (min, max) with 0 < min, got {ratio!r}")
        if isinstance(value, str):
            if value != "random":
                raise ValueError(f"{cls}: If value is str, it should be 'random', got {value!r}")
            self.value: Any = "random"
        else:
            self.value = fill_values(cls, value, "value")
        self.noise_mean = self.noise_std = None
        if (noise_mean is None) != (noise_std is None):
            raise ValueError(f"{cls}: give noise_mean and noise_std together")
        if noise_mean is not None:
            if self.value != "random":
                raise ValueError(f"{cls}: noise_mean and noise_std are for value='random'")
            self.noise_mean = seq(cls, "noise_mean", noise_mean, (3,))
            self.noise_std = seq(cls, "noise_std", noise_std, (3,))
            if not all(s > 0 for s in self.noise_std):
                raise ValueError(f"{cls}: noise_std should be > 0, got {noise_std!r}")
        if not isinstance(per_box, bool):
            raise TypeError(f"{cls}: per_box should be a bool, got {per_box!r}")
        if per_box and self.value != "random":
            raise ValueError(f"{cls}: per_box (one random colour per box) is for value='random'")
        self.per_box = per_box
        if hasattr(count, "__len__"):
            if len(count) != 2:
                raise ValueError(f"{cls}: count should be an int or (min_count, max_count), got {count!r}")
            lo, hi = integer(cls, "min_count", count[0], 1, 16), integer(cls, "max_count", count[1], 1, 16)
            if lo > hi:
                raise ValueError(f"{cls}: count should be (min_count, max_count) with min <= max, got {count!r}")
            self.count: Any = lo if lo == hi else (lo, hi)
        else:
            self.count = integer(cls, "count", count, 1, 16)

    def to_proto(self) -> pb.Op:
        args: Dict[str, Any] = {"p": self.p, "scale": self.scale, "ratio": self.ratio, "value": self.value}
        if self.value == "random":
            args.update(noise_mean=self.noise_mean, noise_std=self.noise_std, per_box=self.per_box)
        args["count"] = self.count
        return named_op("RandomErasing", **args)
