"""from_torchvision: a torchvision pipeline (transforms v1 or v2) as a stoker
Compose.

torchvision's classes are recognized by their class and module, so nothing
here imports torchvision. A subclass defined elsewhere counts as its
torchvision base when it overrides none of the methods that make an op's
behaviour (DINOv2's GaussianBlur, a RandomApply with other defaults, say).

The image's value unit is followed through the pipeline: a PIL or uint8
image holds pixels (0..255); after ToTensor, ConvertImageDtype(float) or
ToDtype(float, scale=True) it holds pixel / 255, so a fill or a solarize
threshold given there is scaled to pixels; after Normalize it holds
normalized values, and only RandomErasing may follow (its value written
as the pixel that normalizes to it). A Normalize on pixels (a PIL or uint8
image) is refused, as torchvision refuses it.

Beside torchvision's classes, the objects users hold are taken as they
are: timm's create_transform output (its RandomResizedCropAndInterpolation,
RandAugment, AutoAugment, AugMixAugment, RandomErasing and MaybeToTensor,
recognized by module and name), open_clip's image_transform output (its _convert_to_rgb,
MaybeConvertMode, MaybeToTensor, color_jitter and gray_scale), torchvision's
references' ClassificationPresetTrain/Eval (their ``.transforms``) and
DINOv2's DataAugmentationDINO (a MultiView of its crops)."""

from __future__ import annotations

import math
import struct
from typing import Any, Callable, Dict, List, Optional, Tuple

from stoker import _ops as O
from stoker import _ops_containers as C
from stoker import _ops_policies as P
from stoker._ops_base import Transform, fill_by_type
from stoker._ops_generated import NAMED

_BEHAVIOUR = ("forward", "__call__", "transform", "_transform", "make_params", "_get_params", "get_params",
              "_apply_image_or_video_transform")
_GEOMETRY = ("RandomResizedCrop", "Resize", "CenterCrop", "RandomCrop", "Pad", "RandomZoomOut", "RandomIoUCrop",
             "ScaleJitter", "FixedSizeCrop", "RandomShortestSize", "RandomResize", "PadIfSmaller",
             "timm.RandomResizedCropAndInterpolation")
#: Conversions the Loader already does (decode to RGB uint8): dropped.
_DROPPED = ("ToTensor", "PILToTensor", "ToImage", "ToDtype", "ConvertImageDtype", "ToPureTensor", "ToPILImage",
            "RGB", "Identity", "timm.ToTensor", "open_clip.MaybeConvertMode")


#: Other libraries' transforms, by (module, name): the name the converter
#: handles them as. timm's (timm.data), open_clip's (open_clip.transform)
#: and DINOv2's (dinov2.data.transforms).
_FOREIGN = {
    ("timm.data.transforms", "RandomResizedCropAndInterpolation"): "timm.RandomResizedCropAndInterpolation",
    ("timm.data.transforms", "MaybeToTensor"): "ToTensor",
    ("timm.data.transforms", "MaybePILToTensor"): "PILToTensor",
    ("timm.data.transforms", "ToNumpy"): "PILToTensor",
    ("timm.data.transforms", "ToTensor"): "timm.ToTensor",
    ("timm.data.auto_augment", "RandAugment"): "timm.RandAugment",
    ("timm.data.auto_augment", "AutoAugment"): "timm.AutoAugment",
    ("timm.data.auto_augment", "AugMixAugment"): "timm.AugMixAugment",
    ("timm.data.random_erasing", "RandomErasing"): "timm.RandomErasing",
    ("open_clip.transform", "_convert_to_rgb"): "RGB",
    ("open_clip.transform", "MaybeConvertMode"): "open_clip.MaybeConvertMode",
    ("open_clip.transform", "MaybeToTensor"): "ToTensor",
    ("open_clip.transform", "color_jitter"): "open_clip.color_jitter",
    ("open_clip.transform", "gray_scale"): "open_clip.gray_scale",
    ("dinov2.data.transforms", "MaybeToTensor"): "ToTensor",
    # FixedSizeCrop is not in torchvision.transforms.v2: the detection
    # references' (references/detection/transforms.py, imported there as
    # transforms) and the prototype transforms' have the same draw.
    ("transforms", "FixedSizeCrop"): "FixedSizeCrop",
    ("torchvision.prototype.transforms._geometry", "FixedSizeCrop"): "FixedSizeCrop",
    # PadIfSmaller is the segmentation references' (references/segmentation/
    # v2_extras.py; their prototype-era transforms.py had it too).
    ("v2_extras", "PadIfSmaller"): "PadIfSmaller",
    ("transforms", "PadIfSmaller"): "PadIfSmaller",
}


def _tv_name(t: Any) -> Tuple[Optional[str], str]:
    """(the torchvision class t is, or the name of the other library's
    transform it is, or None; the name to call it by)."""
    if t is None or isinstance(t, (str, bytes, int, float)):
        return None, repr(t)
    cls = type(t)
    own = cls.__name__ if cls.__name__ != "function" else getattr(t, "__name__", "function")
    key = (getattr(t, "__module__", None), getattr(t, "__name__", None)) if cls.__name__ == "function" else \
        (cls.__module__, cls.__name__)
    if key in _FOREIGN:
        return _FOREIGN[key], own
    if _detr_iou_crop(cls):
        return "DETR.RandomIoUCrop", own
    for i, k in enumerate(cls.__mro__):
        if k.__module__.startswith("torchvision.transforms"):
            if i == 0:
                return k.__name__, own
            for sub in cls.__mro__[:i]:
                over = [m for m in _BEHAVIOUR if m in vars(sub)]
                if over:
                    return None, f"{own}, a subclass of torchvision's {k.__name__} that overrides {over[0]}"
            return k.__name__, own
        if k.__module__ == "torch.nn.modules.container" and k.__name__ == "Sequential":
            return "Compose", own
    return None, own


def _detr_iou_crop(cls: type) -> bool:
    """Whether cls is the DETR family's RandomIoUCrop (RT-DETR v2's and
    D-FINE's src/data/transforms/_transforms.py, DEIM's engine/...): a
    subclass of torchvision's with a p, whose __call__ leaves the sample
    when torch.rand(1) >= p and else is torchvision's."""
    return cls.__name__ == "RandomIoUCrop" and cls.__module__.endswith("data.transforms._transforms") and \
        any(k.__module__.startswith("torchvision.transforms") and k.__name__ == "RandomIoUCrop" for k in cls.__mro__[1:])


def _lone_iou_crop(t: Any) -> bool:
    """Whether t (a RandomApply) holds one RandomIoUCrop and nothing else."""
    inner = _members(t)
    return len(inner) == 1 and _tv_name(inner[0])[0] in ("RandomIoUCrop", "DETR.RandomIoUCrop")


def _members(t: Any) -> List[Any]:
    return list(t.transforms) if hasattr(t, "transforms") else list(t)


def _dtype(d: Any) -> Any:
    """ToDtype's dtype for images: a dict's entry for Image, else for a
    plain tensor (torch.Tensor: the image after PILToTensor, as the
    segmentation references key it), else "others"."""
    if isinstance(d, dict):
        names = {getattr(k, "__name__", k): v for k, v in d.items()}
        for name in ("Image", "Tensor", "others"):
            if name in names:
                return names[name]
        return None
    return d


def _fill_of(t: Any) -> Any:
    f = getattr(t, "fill", None)
    return _dtype(f)  # a fill per type: the Image's (or "others")


def _fill_typed(cv: "_Converter", t: Any) -> Any:
    """t's fill in pixels; a fill per type stays one (stoker's ops take
    it): its pixels' in pixels, its masks' as given (ToDtype scales an
    Image, not a Mask)."""
    f = getattr(t, "fill", None)
    if not isinstance(f, dict):
        return cv.pixels(f)
    from torchvision import tv_tensors

    image, mask = fill_by_type(type(t).__name__, f)
    return {tv_tensors.Image: cv.pixels(image), tv_tensors.Mask: mask}


class _Converter:
    """Walks a pipeline, converting its ops and following the image's unit."""

    def __init__(self) -> None:
        self.pil = True  # the image is a PIL image (a dataset's, before ToTensor)
        self.floating = False
        self.unit = 1.0  # pixels per image value
        self.norm: Optional[Tuple[Tuple[float, ...], Tuple[float, ...]]] = None
        self.ops: List[Tuple[str, str, Transform]] = []  # (where, torchvision name, op)

    # The walk.

    def top(self, items: List[Any], path: str) -> None:
        for i, t in enumerate(items):
            name, own = _tv_name(t)
            where = f"{path}op {i} ({own})"
            if name == "Compose":
                self.top(_members(t), where + " > ")
                continue
            if name is None or (name not in _CONVERT and name not in _DROPPED and name != "Normalize"):
                raise _unsupported(where, name)
            if self.norm is not None and name not in ("RandomErasing", "timm.RandomErasing", "ToPureTensor",
                                                      "Identity"):
                raise ValueError(f"{where} comes after Normalize: stoker normalizes last, on the GPU "
                                 f"(stoker.normalize), so only RandomErasing may follow it")
            if name in _DROPPED:
                self.drop(name, t, where)
            elif name == "Normalize":
                self.normalize(t, where)
            elif name == "RandomApply" and _lone_iou_crop(t):
                # RandomApply([RandomIoUCrop()], p): the crop's own p (part
                # of the geometry, it cannot sit in a container).
                inner = _members(t)[0]
                iname, iown = _tv_name(inner)
                op = self.convert(iname, inner, f"{where} > op 0 ({iown})")
                p = float(t.p) * op.p
                if not 0 < p <= 1:
                    raise ValueError(f"{where}: p={t.p}: want 0 < p <= 1 (p=0 never crops: leave it out)")
                op.p = p
                self.ops.append((where, "RandomIoUCrop", op))
            elif name == "DETR.RandomIoUCrop":
                self.ops.append((where, "RandomIoUCrop", self.convert(name, t, where)))
            else:
                self.ops.append((where, name, self.convert(name, t, where)))

    def inner(self, items: Any, path: str) -> List[Transform]:
        """A container's ops."""
        out: List[Transform] = []
        for i, t in enumerate(list(items)):  # a list, or an nn.ModuleList
            name, own = _tv_name(t)
            where = f"{path}op {i} ({own})"
            if name == "Compose":
                out.append(C.Compose(self.inner(_members(t), where + " > ")))
            elif name in _DROPPED or name == "Normalize" or name in _GEOMETRY:
                raise ValueError(f"{where} inside a container is not supported by stoker: the geometry comes "
                                 f"first, conversions and Normalize outside any container")
            elif name is None or name not in _CONVERT:
                raise _unsupported(where, name)
            else:
                out.append(self.convert(name, t, where))
        return out

    def convert(self, name: str, t: Any, where: str) -> Transform:
        try:
            return _CONVERT[name](self, t, where)
        except (ValueError, TypeError) as e:
            msg = str(e)
            if msg.startswith(where):  # located already (a container's op, or by its converter)
                raise
            for prefix in (f"{name}: ", f"{name} "):
                if msg.startswith(prefix):
                    msg = msg[len(prefix):]
                    break
            raise type(e)(f"{where}: {msg}") from None

    # The image's unit.

    def drop(self, name: str, t: Any, where: str) -> None:
        if name == "ToTensor":
            self.pil, self.floating, self.unit = False, True, 255.0
        elif name in ("PILToTensor", "ToImage"):
            if self.pil:
                self.pil, self.floating, self.unit = False, False, 1.0
        elif name == "ToPILImage":
            self.pil, self.floating, self.unit = True, False, 1.0
        elif name in ("ConvertImageDtype", "ToDtype"):
            self.retype(_dtype(t.dtype), name == "ConvertImageDtype" or bool(getattr(t, "scale", False)), where)
        elif name == "timm.ToTensor":  # timm's ToTensor(dtype): pil_to_tensor, then a cast that keeps 0..255
            self.pil, self.floating, self.unit = False, False, 1.0
            self.retype(t.dtype, False, where)
        elif name == "open_clip.MaybeConvertMode" and getattr(t, "mode", "RGB") != "RGB":
            raise ValueError(f"{where}: mode {t.mode!r}: stoker decodes every image to RGB; use mode='RGB'")

    def retype(self, dtype: Any, scale: bool, where: str) -> None:
        if dtype is None:
            return
        if getattr(dtype, "is_floating_point", False):
            if scale and not self.floating:
                self.unit = 255.0
            self.floating = True
        elif str(dtype) == "torch.uint8":
            if scale and self.floating:
                self.unit = 1.0
            self.floating = False
        else:
            raise ValueError(f"{where}: dtype {dtype}: stoker's images are uint8 (float after Normalize)")
        self.pil = False

    def pixels(self, v: Any) -> Any:
        """A fill or threshold in image values, as pixels."""
        if v is None or self.unit == 1.0:
            return v
        if hasattr(v, "__len__"):
            return [float(x) * self.unit for x in v]
        return float(v) * self.unit

    def normalize(self, t: Any, where: str) -> None:
        if not self.floating:
            img = "a PIL image" if self.pil else "a uint8 tensor"
            raise ValueError(f"{where} would act on {img} (torchvision refuses it: Normalize wants floats): put "
                             f"ToTensor, or ToDtype(torch.float32, scale=True), before it")
        try:
            n = O.Normalize(_short(t.mean), _short(t.std))
        except (ValueError, TypeError) as e:
            raise type(e)(f"{where}: {str(e).removeprefix('Normalize: ')}") from None
        k = self.unit / 255.0  # image values -> [0, 1] units
        self.norm = (tuple(m * k for m in n.mean), tuple(s * k for s in n.std))

    def erase_value(self, value: Any) -> Tuple[Any, Dict[str, Any]]:
        """RandomErasing's value (v1: a number, tuple or "random"; v2: a
        list, or None for "random") as stoker's: pixels, or noise."""
        if value is None or (isinstance(value, str) and value == "random"):
            if self.norm is not None:
                return "random", {"noise_mean": self.norm[0], "noise_std": self.norm[1]}
            if self.floating and self.unit == 255.0:  # N(0, 1) image values: pixels 255 z
                return "random", {"noise_mean": (0.0, 0.0, 0.0), "noise_std": (1.0, 1.0, 1.0)}
            raise ValueError("value='random' on a uint8 image (torchvision casts the noise to uint8): stoker "
                             "erases with noise only after ToTensor/ToDtype(float, scale=True) or Normalize")
        vals = [float(x) for x in value] if hasattr(value, "__len__") else [float(value)]
        if len(vals) not in (1, 3):
            raise ValueError(f"value {value!r}: want one value or three")
        if self.norm is not None:
            m, s = self.norm
            vals = vals * 3 if len(vals) == 1 else vals
            px = [255.0 * (m[c] + s[c] * vals[c]) for c in range(3)]
        elif not self.floating and not self.pil:
            # A uint8 tensor: torchvision writes the value (a float32
            # tensor) into it with torch's cast, which truncates toward
            # zero (0.5 and -0.2 are 0, 127.9 is 127); out of -1..256 the
            # cast is undefined, left outside 0..255 to be refused.
            px = [float(math.trunc(struct.unpack("f", struct.pack("f", v))[0])) if -1 < v < 256 else v for v in vals]
        else:
            px = [v * self.unit for v in vals]
        px = [float(int(p + 0.5)) if p >= 0 else p for p in px]  # the nearest uint8 pixel
        if not all(0 <= p <= 255 for p in px):
            raise ValueError(f"value {value!r} is the pixel {px}, outside 0..255: stoker erases uint8 "
                             f"pixels before Normalize and cannot write it")
        return tuple(px), {}

    # The result.

    def check_geometry(self) -> None:
        """The first op is the geometry (one RandomResizedCrop, or Resize
        and/or CenterCrop, or RandomCrop, a Pad before or after a RandomCrop
        or CenterCrop), fused into the decode; no geometry op later."""
        pre = 0  # RandomPhotometricDistort before the geometry: on the image, before a Resize((h, w))
        while pre < len(self.ops) and self.ops[pre][1] == "RandomPhotometricDistort":
            pre += 1
        m = pre  # and ColorJitter, right before a Resize((h, w)) (not then cropped): the image jittered at its own size
        while m < len(self.ops) and self.ops[m][1] in ("ColorJitter", "RandomPhotometricDistort"):
            m += 1
        if m > pre and m < len(self.ops) and self.ops[m][1] == "Resize" and not isinstance(self.ops[m][2].size, int) and \
                not (m + 1 < len(self.ops) and self.ops[m + 1][1] == "CenterCrop"):
            pre = m
        if pre and pre < len(self.ops):
            ops, geo = self.ops, [name for _, name, _ in self.ops[pre:pre + 2]]
            resize = next((op for _, name, op in self.ops[pre:] if name == "Resize"), None)
            # A RandomIoUCrop (after a RandomZoomOut) without a Resize: each
            # crop its own size, under the job's bound (Loader(max_size=...)).
            bounded = resize is None and (geo[0] == "RandomIoUCrop" or geo == ["RandomZoomOut", "RandomIoUCrop"])
            if geo[0] not in ("RandomZoomOut", "RandomIoUCrop", "Resize") or (resize is None and not bounded) or \
                    (resize is not None and isinstance(resize.size, int)) or (geo[0] == "RandomZoomOut" and geo[1:] == ["RandomCrop"]) or \
                    (geo[0] == "RandomZoomOut" and geo[1:] == ["CenterCrop"]) or \
                    (geo[0] == "Resize" and geo[1:] == ["CenterCrop"]):
                raise ValueError(f"{self.ops[0][0]}: RandomPhotometricDistort before the geometry needs a geometry "
                                 f"that ends in Resize((h, w)) (after a RandomZoomOut or RandomIoUCrop, if any); move "
                                 f"it after the geometry")
            self.ops = ops[pre:]
            try:
                self.check_geometry()
            finally:
                self.ops = ops
            return
        if not self.ops:
            raise ValueError("no op stoker runs: a batch needs a fixed size; start the pipeline with "
                             "RandomResizedCrop, Resize((h, w)), or Resize then CenterCrop")
        where, name, op = self.ops[0]
        if not any(n in _GEOMETRY for _, n, _ in self.ops):
            return  # no geometry: each image at its own size, under the job's bound (Loader(max_size=...))
        if name not in _GEOMETRY:
            raise ValueError(f"{where} comes before the geometry: stoker's first op is RandomResizedCrop, Resize "
                             f"or CenterCrop (fused into the decode); move it after")
        n = 1
        if name in ("Resize", "RandomShortestSize", "RandomResize") and len(self.ops) > 1 and \
                self.ops[1][1] == "CenterCrop":
            n = 2
        elif name == "RandomResize" and len(self.ops) > 1 and \
                self.ops[1][1] in ("RandomHorizontalFlip", "PadIfSmaller", "RandomCrop"):
            n = self._seg_geometry()
        elif name == "Pad":
            if len(self.ops) < 2 or self.ops[1][1] not in ("RandomCrop", "CenterCrop"):
                raise ValueError(f"{where}: Pad needs a RandomCrop or CenterCrop right after it (stoker's Pad is part "
                                 f"of the geometry; alone its size would vary per image)")
            n = 2
        elif name == "RandomZoomOut" and len(self.ops) > 1 and self.ops[1][1] == "RandomIoUCrop":
            n = self._iou_crop(1)
        elif name == "RandomIoUCrop":
            n = self._iou_crop(0)
        elif name == "ScaleJitter":
            if len(self.ops) < 2 or self.ops[1][1] != "FixedSizeCrop":
                raise ValueError(f"{where}: ScaleJitter needs FixedSizeCrop right after it (stoker's ScaleJitter is part "
                                 f"of the geometry; alone its size would vary per image)")
            n = 2
        elif name == "RandomZoomOut":
            nxt = self.ops[1] if len(self.ops) > 1 else None
            if nxt is None or nxt[1] not in ("Resize", "RandomCrop", "CenterCrop") or \
                    (nxt[1] == "Resize" and isinstance(nxt[2].size, int)):
                raise ValueError(f"{where}: RandomZoomOut needs Resize((h, w)), a RandomCrop, a CenterCrop or a "
                                 f"RandomIoUCrop right after it (stoker's RandomZoomOut is part of the geometry; alone "
                                 f"its size would vary per image)")
            n = 2
        elif name == "Resize" and isinstance(op.size, int):
            raise ValueError(f"{where}: Resize({op.size}) of the shorter side gives a size that varies per image: "
                             f"add CenterCrop right after it, or give Resize both sides")
        # A Pad right after an unresized RandomCrop or CenterCrop pads the crop.
        if self.ops[n - 1][1] in ("RandomCrop", "CenterCrop") and (n == 1 or self.ops[0][1] in ("Pad", "RandomZoomOut")) \
                and len(self.ops) > n and self.ops[n][1] == "Pad":
            n += 1
        for where, name, _ in self.ops[n:]:
            if name in _GEOMETRY:
                raise ValueError(f"{where}: a geometry op after other ops: stoker's geometry is the first op (one "
                                 f"RandomResizedCrop, or Resize then CenterCrop), fused into the decode")

    def _seg_geometry(self) -> int:
        """The segmentation references' geometry from the RandomResize:
        a RandomHorizontalFlip, a PadIfSmaller (each if any), then the
        RandomCrop; returns how many ops it has (1: the RandomResize
        alone, which the ops after it are checked against)."""
        j = 1
        if self.ops[j][1] == "RandomHorizontalFlip":
            j += 1
        pad = j < len(self.ops) and self.ops[j][1] == "PadIfSmaller"
        if pad:
            j += 1
        if j < len(self.ops) and self.ops[j][1] == "RandomCrop":
            return j + 1
        if pad:
            raise ValueError(f"{self.ops[j - 1][0]}: PadIfSmaller needs a RandomCrop right after it (stoker's "
                             f"PadIfSmaller is part of the geometry; alone its size would vary per image)")
        return 1

    def _iou_crop(self, i: int) -> int:
        """The geometry's ops from the RandomIoUCrop at i to the Resize((h,
        w)) it needs (SanitizeBoundingBoxes and one RandomHorizontalFlip
        between them); returns how many ops the geometry has."""
        j, flip = i + 1, False
        while j < len(self.ops) and (self.ops[j][1] == "SanitizeBoundingBoxes" or
                                     (self.ops[j][1] == "RandomHorizontalFlip" and not flip)):
            flip = flip or self.ops[j][1] == "RandomHorizontalFlip"
            j += 1
        if j < len(self.ops) and self.ops[j][1] == "Resize" and not isinstance(self.ops[j][2].size, int):
            return j + 1
        if any(name in _GEOMETRY for _, name, _ in self.ops[j:]):
            raise ValueError(f"{self.ops[i][0]}: RandomIoUCrop needs Resize((h, w)) after it (after "
                             f"SanitizeBoundingBoxes and one RandomHorizontalFlip, if any): its crop's size varies "
                             f"per sample; or nothing of the geometry, each crop its own size under the job's "
                             f"bound (Loader(max_size=(h, w)))")
        return j  # each crop its own size, under the job's bound (Loader(max_size=...))

    def result(self) -> C.Compose:
        self.check_geometry()
        out = C.Compose([op for _, _, op in self.ops])
        if self.norm is not None:
            out.normalize_mean, out.normalize_std = self.norm  # type: ignore[assignment]
        return out


_MIXES = ("MixUp", "CutMix")


def _short(v: Any) -> Any:
    """Values of a float32 tensor (timm's Normalize holds torch.tensor(mean))
    as the shortest decimals that are those float32 values: 0.485, not
    0.48500001430511475."""
    if getattr(v, "dtype", None) is None or str(v.dtype) != "torch.float32":
        return v
    out = []
    for x in v.tolist():
        f32 = struct.unpack("f", struct.pack("f", x))[0]
        for digits in range(1, 10):
            y = float(f"{f32:.{digits}g}")
            if struct.unpack("f", struct.pack("f", y))[0] == f32:
                break
        out.append(y)
    return out


def _unsupported(where: str, name: Optional[str] = None) -> ValueError:
    """The refusal of an op, in one line, with what to do instead."""
    own = where.rsplit("(", 1)[-1].rstrip(")")
    if name in _MIXES:
        return ValueError(f"{where} mixes samples of a batch: stoker's batches are mixed on the GPU, with "
                          f"stoker.gpu.{name} (leave it out here)")
    if "Lambda" in where or "rgb" in own.lower():
        return ValueError(f"{where} is not supported by stoker: stoker decodes every image to 3-channel RGB, so leave "
                          f"out a conversion to RGB")
    return ValueError(f"{where} is not supported by stoker: stoker.transforms.TORCHVISION_SUPPORTED lists what "
                      f"from_torchvision converts; write the step with stoker.transforms' ops or leave it out")


def _random_choice(cv: "_Converter", t: Any, where: str) -> Transform:
    names = [_tv_name(x)[0] for x in t.transforms]
    if names and all(n in _MIXES for n in names):
        raise ValueError(f"{where} of {', '.join(str(n) for n in names)} mixes samples of a batch: stoker's batches "
                         f"are mixed on the GPU, with stoker.gpu.RandomChoice([stoker.gpu.MixUp(...), "
                         f"stoker.gpu.CutMix(...)]) (leave it out here)")
    return C.RandomChoice(cv.inner(t.transforms, where + " > "), _weights(t.p))


def _resize_aa(cv: _Converter, t: Any) -> bool:
    # PIL always antialiases; on tensors, torchvision's None means False.
    a = getattr(t, "antialias", True)
    return True if cv.pil else bool(a)


def _rrc(cv: _Converter, t: Any, where: str) -> Transform:
    return O.RandomResizedCrop(t.size, t.scale, t.ratio, t.interpolation, _resize_aa(cv, t))


def _resize(cv: _Converter, t: Any, where: str) -> Transform:
    if t.size is None:
        raise ValueError(f"Resize(size=None, max_size={t.max_size}): the size would vary per image")
    return O.Resize(t.size, t.interpolation, t.max_size, _resize_aa(cv, t))


def _random_crop(t: Any) -> Transform:
    """RandomCrop, v1 (padding as given: torchvision's pad forms) or v2
    (padding parsed to [left, right, top, bottom])."""
    pad = t.padding
    if pad is not None and type(t).__module__.startswith("torchvision.transforms.v2"):
        pad = (pad[0], pad[2], pad[1], pad[3])  # to pad's (left, top, right, bottom)
    return O.RandomCrop(t.size, pad, t.pad_if_needed, t.fill, t.padding_mode)


def _erasing(cv: _Converter, t: Any, where: str) -> Transform:
    value, noise = cv.erase_value(t.value)
    return O.RandomErasing(t.p, t.scale, t.ratio, value, **noise)


def _timm_rrc(cv: _Converter, t: Any, where: str) -> Transform:
    """timm's RandomResizedCropAndInterpolation: torchvision's crop
    sampling (in Python's random), resized on PIL (antialiased)."""
    interp = t.interpolation
    if isinstance(interp, (list, tuple)):  # interpolation="random": random.choice of these per image
        names = [getattr(i, "value", i) for i in interp]
        if sorted(str(n).lower() for n in names) != ["bicubic", "bilinear"]:
            raise ValueError(f"{where}: a random choice of {names}: stoker draws bilinear or bicubic only")
        interp = "random"
    return O.RandomResizedCrop(t.size, t.scale, t.ratio, interp, _resize_aa(cv, t))


#: timm's RandAugment op lists (timm.data.auto_augment): _RAND_TRANSFORMS,
#: and _RAND_INCREASING_TRANSFORMS (inc1).
_TIMM_RAND = ("AutoContrast", "Equalize", "Invert", "Rotate", "Posterize", "Solarize", "SolarizeAdd", "Color",
              "Contrast", "Brightness", "Sharpness", "ShearX", "ShearY", "TranslateXRel", "TranslateYRel")
_TIMM_INC = {"Posterize", "Solarize", "Color", "Contrast", "Brightness", "Sharpness"}
_TIMM_RAND_INC = tuple(n + "Increasing" if n in _TIMM_INC else n for n in _TIMM_RAND)
#: The hparams timm's create_transform passes, and their values that
#: stoker's TimmRandAugment runs (others refused).
_TIMM_HPARAMS = ("translate_const", "img_mean", "interpolation", "magnitude_std", "magnitude_max", "translate_pct")


def _num(x: float) -> str:
    return str(int(x)) if float(x) == int(x) else repr(float(x))


def _timm_rand_augment(cv: _Converter, t: Any, where: str) -> Transform:
    """timm's RandAugment object as the config string that made it:
    "rand-m{m}[-n..][-mstd..][-mmax..][-p..][-inc1]"."""
    if getattr(t, "choice_weights", None) is not None:
        raise ValueError(f"{where}: a weighted op choice (a 'w' or weighted 't' section) is not supported by "
                         f"stoker's TimmRandAugment: use timm's default op choice")
    ops = list(t.ops)
    names = tuple(op.name for op in ops)
    if names not in (_TIMM_RAND, _TIMM_RAND_INC):
        raise ValueError(f"{where}: the op set {list(names)} is not timm's default RandAugment set (with or without "
                         f"inc1): stoker's TimmRandAugment runs those two only")
    first = ops[0]
    for op in ops:
        if (op.magnitude, op.prob, op.hparams) != (first.magnitude, first.prob, first.hparams):
            raise ValueError(f"{where}: ops with different magnitudes, probabilities or hparams: stoker's "
                             f"TimmRandAugment is one config string for all its ops")
    hp = first.hparams
    extra = sorted(set(hp) - set(_TIMM_HPARAMS))
    if extra or hp.get("translate_pct", 0.45) != 0.45:
        raise ValueError(f"{where}: hparams {extra or ['translate_pct']} are not supported by stoker's "
                         f"TimmRandAugment (it takes img_mean, interpolation, magnitude_std, magnitude_max)")
    cfg = f"rand-m{_num(first.magnitude)}" + (f"-n{int(t.num_layers)}" if int(t.num_layers) != 2 else "")
    mstd = float(hp.get("magnitude_std", 0))
    if mstd > 0:
        cfg += "-mstd101" if mstd == float("inf") else f"-mstd{_num(mstd)}"
    if hp.get("magnitude_max") is not None:
        cfg += f"-mmax{_num(hp['magnitude_max'])}"
    if float(first.prob) != 0.5:
        cfg += f"-p{_num(first.prob)}"
    if names == _TIMM_RAND_INC:
        cfg += "-inc1"
    interp = hp.get("interpolation")  # none: bilinear or bicubic drawn per op
    if isinstance(interp, (list, tuple)):
        interp = None
    fill = hp.get("img_mean", (128, 128, 128))
    try:
        return P.TimmRandAugment(cfg, interpolation=interp, fill=fill)
    except (ValueError, TypeError) as e:
        raise type(e)(f"{where}: {str(e).removeprefix('TimmRandAugment: ')}") from None


def _timm_auto_augment(cv: _Converter, t: Any, where: str) -> Transform:
    """timm's AutoAugment object as the config string that made it
    ("original", "originalr", "v0", "v0r" or "3a", "-mstd.." with magnitude
    noise): its sub-policies compared with timm's own (timm is importable
    where its object is)."""
    from timm.data import auto_augment as taa

    ops = [op for sub in t.policy for op in sub]
    if not ops:
        raise ValueError(f"{where}: an AutoAugment without sub-policies")
    first = ops[0]
    for op in ops:
        if (op.hparams, op.magnitude_std, op.magnitude_max) != (first.hparams, first.magnitude_std, first.magnitude_max):
            raise ValueError(f"{where}: ops with different hparams: stoker's TimmAutoAugment is one config string "
                             f"for all its ops")
    hp = first.hparams
    extra = sorted(set(hp) - {"translate_const", "img_mean", "interpolation", "magnitude_std"})
    if extra or first.magnitude_max is not None:
        raise ValueError(f"{where}: hparams {extra or ['magnitude_max']} are not supported by stoker's "
                         f"TimmAutoAugment (it takes img_mean, interpolation, magnitude_std)")
    mine = [[(op.name, float(op.prob), float(op.magnitude)) for op in sub] for sub in t.policy]
    name = None
    for cand in P.TIMM_AA_POLICIES:
        theirs = [[(op.name, float(op.prob), float(op.magnitude)) for op in sub]
                  for sub in taa.auto_augment_policy(cand, dict(hp))]
        if mine == theirs:
            name = cand
            break
    if name is None:
        raise ValueError(f"{where}: sub-policies that are none of timm's {', '.join(P.TIMM_AA_POLICIES)}: stoker's "
                         f"TimmAutoAugment runs those")
    mstd = float(first.magnitude_std or 0)
    if mstd == float("inf"):
        raise ValueError(f"{where}: magnitude_std inf (uniform magnitudes) is not a timm AutoAugment config; stoker's "
                         f"TimmAutoAugment takes a finite mstd")
    cfg = name + (f"-mstd{_num(mstd)}" if mstd > 0 else "")
    interp = hp.get("interpolation")  # none: bilinear or bicubic drawn per op
    if isinstance(interp, (list, tuple)):
        interp = None
    try:
        return P.TimmAutoAugment(cfg, interpolation=interp, fill=hp.get("img_mean", (128, 128, 128)))
    except (ValueError, TypeError) as e:
        raise type(e)(f"{where}: {str(e).removeprefix('TimmAutoAugment: ')}") from None


#: timm's _AUGMIX_TRANSFORMS.
_TIMM_AUGMIX = ("AutoContrast", "ColorIncreasing", "ContrastIncreasing", "BrightnessIncreasing", "SharpnessIncreasing",
                "Equalize", "Rotate", "PosterizeIncreasing", "SolarizeIncreasing", "ShearX", "ShearY", "TranslateXRel",
                "TranslateYRel")


def _timm_aug_mix(cv: _Converter, t: Any, where: str) -> Transform:
    """timm's AugMixAugment object as the config string that made it
    ("augmix-m{severity}-w{width}[-d{depth}][-a{alpha}][-mstd..]")."""
    ops = list(t.ops)
    if tuple(op.name for op in ops) != _TIMM_AUGMIX:
        raise ValueError(f"{where}: the op set {[op.name for op in ops]} is not timm's AugMix set: stoker's "
                         f"TimmAugMix runs that one")
    first = ops[0]
    for op in ops:
        if (op.magnitude, op.prob, op.hparams) != (first.magnitude, 1.0, first.hparams):
            raise ValueError(f"{where}: ops with different magnitudes, probabilities or hparams: stoker's TimmAugMix "
                             f"is one config string for all its ops")
    hp = first.hparams
    extra = sorted(set(hp) - {"translate_const", "img_mean", "interpolation", "magnitude_std", "translate_pct"})
    if first.magnitude_max is not None:
        extra = extra or ["magnitude_max"]
    if extra or hp.get("translate_pct", 0.45) != 0.3:
        raise ValueError(f"{where}: hparams {extra or ['translate_pct']} are not supported by stoker's TimmAugMix "
                         f"(it takes img_mean, interpolation, magnitude_std, and create_transform's translate_pct "
                         f"0.3)")
    if int(first.magnitude) != first.magnitude:
        raise ValueError(f"{where}: magnitude {first.magnitude}: timm's AugMix config takes an integer severity")
    cfg = f"augmix-m{int(first.magnitude)}-w{int(t.width)}" + (f"-d{int(t.depth)}" if t.depth > 0 else "")
    if float(t.alpha) != 1.0:
        cfg += f"-a{_num(t.alpha)}"
    if t.blended:
        cfg += "-b1"
    mstd = float(first.magnitude_std)
    if mstd != float("inf"):
        cfg += f"-mstd{_num(mstd)}"
    interp = hp.get("interpolation")  # none: bilinear or bicubic drawn per op
    if isinstance(interp, (list, tuple)):
        interp = None
    try:
        return P.TimmAugMix(cfg, interpolation=interp, fill=hp.get("img_mean", (128, 128, 128)))
    except (ValueError, TypeError) as e:
        raise type(e)(f"{where}: {str(e).removeprefix('TimmAugMix: ')}") from None


def _timm_erasing(cv: _Converter, t: Any, where: str) -> Transform:
    """timm's RandomErasing: torchvision's box sampling (in Python's
    random) after Normalize; mode 'const' erases with 0, 'pixel' with
    per-pixel normal noise and 'rand' with one normal colour per box;
    re_count boxes (or a uniform number of min_count..max_count), each
    box's area divided by the count. num_splits skips a batch's first
    images only: on the one image create_transform's pipeline gives it
    (a 3-D tensor), timm ignores it, and so does stoker."""
    if t.mode not in ("const", "pixel", "rand"):
        raise ValueError(f"{where}: mode {t.mode!r}: want 'const', 'pixel' or 'rand'")
    lo, hi = int(t.min_count), int(t.max_count)
    if not 1 <= lo <= hi <= 16:
        raise ValueError(f"{where}: count ({lo}, {hi}): stoker erases 1 <= min_count <= max_count <= 16 boxes")
    value, noise = cv.erase_value("random" if t.mode in ("pixel", "rand") else 0)
    # timm keeps log(min_aspect), log(max_aspect or 1 / min_aspect): the
    # ratios it was given, to the last bit where exp(log(x)) is not x.
    lo_r = float(f"{math.exp(t.log_aspect_ratio[0]):.12g}")
    hi_r = math.exp(t.log_aspect_ratio[1])
    hi_r = 1 / lo_r if math.isclose(hi_r, 1 / lo_r, rel_tol=1e-12) else float(f"{hi_r:.12g}")
    return O.RandomErasing(t.probability, (t.min_area, t.max_area), (lo_r, hi_r), value, per_box=t.mode == "rand",
                           count=(lo, hi), **noise)


def _weights(p: Any) -> Any:
    """RandomChoice's p: v2 keeps it normalized, so equal weights are
    v1's None (uniform)."""
    return None if p is None or len(set(p)) == 1 else p


def _p(cls: Callable[..., Transform]) -> Callable[[_Converter, Any, str], Transform]:
    return lambda cv, t, where: cls(t.p)


def _zoom_out(cv: _Converter, t: Any) -> Transform:
    """v2.RandomZoomOut: its fill (a fill per type kept: the pixels' and
    the masks'; none is 0, as F.pad's), side_range and p."""
    fill = _fill_typed(cv, t)
    return O.RandomZoomOut(0 if fill is None else fill, tuple(t.side_range), t.p)


def _fixed_size_crop(cv: _Converter, t: Any) -> Transform:
    """FixedSizeCrop (the detection references' or the prototype's): its
    size, fill (of a fill per type, the Image's or "others"; none is 0)
    and padding mode."""
    fill = cv.pixels(_fill_of(t))
    return O.FixedSizeCrop((t.crop_height, t.crop_width), 0 if fill is None else fill,
                           getattr(t, "padding_mode", "constant"))


def _pad_if_smaller(cv: _Converter, t: Any) -> Transform:
    """PadIfSmaller (the segmentation references'): its size and fill (a
    fill per type kept: the pixels' and the masks'; none is 0, as
    F.pad's)."""
    fill = _fill_typed(cv, t)
    return O.PadIfSmaller(t.size, 0 if fill is None else fill)


def _sanitize(t: Any, where: str) -> Transform:
    """v2.SanitizeBoundingBoxes: its bounds; the labels are always the
    targets' own (labels_getter "default"), dropped with their boxes."""
    lg = getattr(t, "labels_getter", "default")
    if not (isinstance(lg, str) and lg == "default"):
        raise ValueError(f"{where}: labels_getter={lg!r}: stoker's targets drop each box's label with it "
                         f"(labels_getter='default')")
    return O.SanitizeBoundingBoxes(t.min_size, t.min_area)


def _sanitize_points(t: Any, where: str) -> Transform:
    """v2.SanitizeKeyPoints: an instance with a keypoint off the canvas
    goes whole (stoker's SanitizeKeyPoints); labels_getter None or
    "default", a callable refused."""
    lg = getattr(t, "labels_getter", None)
    if not (lg is None or (isinstance(lg, str) and lg == "default")):
        raise ValueError(f"{where}: labels_getter={lg!r}: stoker's targets drop an instance whole (keypoints, box, "
                         f"label, crowd flag, visibilities); give None or 'default'")
    return O.SanitizeKeyPoints(lg)


_CONVERT: Dict[str, Callable[[_Converter, Any, str], Transform]] = {
    "RandomResizedCrop": _rrc,
    "Resize": _resize,
    "CenterCrop": lambda cv, t, where: O.CenterCrop(t.size),
    "RandomCrop": lambda cv, t, where: _random_crop(t),
    # v1 and v2 keep Pad's padding as given (torchvision's pad forms)
    "Pad": lambda cv, t, where: O.Pad(t.padding, t.fill, t.padding_mode),
    "RandomZoomOut": lambda cv, t, where: _zoom_out(cv, t),
    "ConvertBoundingBoxFormat": lambda cv, t, where: O.ConvertBoundingBoxFormat(t.format),
    "RandomPhotometricDistort": lambda cv, t, where: O.RandomPhotometricDistort(t.brightness, t.contrast, t.saturation,
                                                                                t.hue, t.p),
    "ScaleJitter": lambda cv, t, where: O.ScaleJitter(t.target_size, t.scale_range, t.interpolation, _resize_aa(cv, t)),
    "FixedSizeCrop": lambda cv, t, where: _fixed_size_crop(cv, t),
    "PadIfSmaller": lambda cv, t, where: _pad_if_smaller(cv, t),
    "RandomShortestSize": lambda cv, t, where: O.RandomShortestSize(t.min_size, t.max_size, t.interpolation,
                                                                    _resize_aa(cv, t)),
    "RandomResize": lambda cv, t, where: O.RandomResize(t.min_size, t.max_size, t.interpolation, _resize_aa(cv, t)),
    "RandomIoUCrop": lambda cv, t, where: O.RandomIoUCrop(t.min_scale, t.max_scale, t.min_aspect_ratio,
                                                          t.max_aspect_ratio, t.options, t.trials),
    "DETR.RandomIoUCrop": lambda cv, t, where: O.RandomIoUCrop(t.min_scale, t.max_scale, t.min_aspect_ratio,
                                                               t.max_aspect_ratio, t.options, t.trials, p=t.p),
    "RandomHorizontalFlip": _p(O.RandomHorizontalFlip),
    "RandomVerticalFlip": _p(O.RandomVerticalFlip),
    "SanitizeBoundingBoxes": lambda cv, t, where: _sanitize(t, where),
    "ClampBoundingBoxes": lambda cv, t, where: O.ClampBoundingBoxes(t.clamping_mode),
    "ClampKeyPoints": lambda cv, t, where: O.ClampKeyPoints(),
    "SanitizeKeyPoints": lambda cv, t, where: _sanitize_points(t, where),
    "ColorJitter": lambda cv, t, where: O.ColorJitter(t.brightness, t.contrast, t.saturation, t.hue),
    "Grayscale": lambda cv, t, where: O.Grayscale(t.num_output_channels),
    "RandomGrayscale": _p(O.RandomGrayscale),
    "GaussianBlur": lambda cv, t, where: O.GaussianBlur(t.kernel_size, t.sigma),
    "RandomSolarize": lambda cv, t, where: O.RandomSolarize(cv.pixels(t.threshold), t.p),
    "RandomPosterize": lambda cv, t, where: O.RandomPosterize(t.bits, t.p),
    "RandomInvert": _p(O.RandomInvert),
    "RandomEqualize": _p(O.RandomEqualize),
    "RandomAutocontrast": _p(O.RandomAutocontrast),
    "RandomAdjustSharpness": lambda cv, t, where: O.RandomAdjustSharpness(t.sharpness_factor, t.p),
    "RandomRotation": lambda cv, t, where: O.RandomRotation(t.degrees, t.interpolation, t.expand, t.center,
                                                            _fill_typed(cv, t)),
    "RandomAffine": lambda cv, t, where: O.RandomAffine(t.degrees, t.translate, t.scale, t.shear, t.interpolation,
                                                        _fill_typed(cv, t), t.center),
    "RandomPerspective": lambda cv, t, where: O.RandomPerspective(t.distortion_scale, t.p, t.interpolation,
                                                                  _fill_typed(cv, t)),
    "RandomErasing": _erasing,
    "timm.RandomResizedCropAndInterpolation": _timm_rrc,
    "timm.RandAugment": _timm_rand_augment,
    "timm.AutoAugment": _timm_auto_augment,
    "timm.AugMixAugment": _timm_aug_mix,
    "timm.RandomErasing": _timm_erasing,
    "open_clip.color_jitter": lambda cv, t, where: C.RandomApply([_CONVERT["ColorJitter"](cv, t.transf, where)], t.p),
    "open_clip.gray_scale": lambda cv, t, where: O.RandomGrayscale(t.p),
    "RandomApply": lambda cv, t, where: C.RandomApply(cv.inner(t.transforms, where + " > "), t.p),
    "RandomChoice": _random_choice,
    "RandomOrder": lambda cv, t, where: C.RandomOrder(cv.inner(t.transforms, where + " > ")),
    "TrivialAugmentWide": lambda cv, t, where: P.TrivialAugmentWide(t.num_magnitude_bins, t.interpolation,
                                                                    cv.pixels(_fill_of(t))),
    "RandAugment": lambda cv, t, where: P.RandAugment(t.num_ops, t.magnitude, t.num_magnitude_bins, t.interpolation,
                                                      cv.pixels(_fill_of(t))),
    "AutoAugment": lambda cv, t, where: P.AutoAugment(t.policy, t.interpolation, cv.pixels(_fill_of(t))),
    "AugMix": lambda cv, t, where: P.AugMix(t.severity, t.mixture_width, t.chain_depth, t.alpha, t.all_ops,
                                            t.interpolation, cv.pixels(_fill_of(t))),
}



def _named(cls: Any) -> Callable[[_Converter, Any, str], Transform]:
    """A named op's converter: torchvision's object's attributes of the
    op's argument names, as its class keeps them."""
    return lambda cv, t, where: cls(**{p.name: getattr(t, p.name) for p in cls._params if hasattr(t, p.name)})


# The named ops (generated from the server's op registry) convert by their
# schema's argument names.
for _name, _cls in NAMED.items():
    _CONVERT.setdefault(_name, _named(_cls))

#: torchvision's classes from_torchvision converts (Normalize is kept on
#: the result, for stoker.normalize).
SUPPORTED = ("Compose", *(n for n in _CONVERT if "." not in n), "Normalize")

#: Objects that hold their pipeline as ``.transforms`` and call it:
#: torchvision's references/classification/presets.py and
#: references/segmentation/presets.py.
_HOLDERS = ("ClassificationPresetTrain", "ClassificationPresetEval", "SegmentationPresetTrain")
#: DataAugmentationDINO's attributes (dinov2/data/augmentations.py): the
#: global crops' geometry and each one's ops, the local crops'.
_DINO = ("geometric_augmentation_global", "global_transfo1", "global_transfo2", "geometric_augmentation_local",
         "local_transfo", "local_crops_number")


def _dino(t: Any) -> Any:
    """DINOv2's DataAugmentationDINO as the MultiView of its crops: two
    global views (each its own ops) and local_crops_number local ones, in
    the order its __call__ makes them (global_crops, then local_crops)."""
    from stoker._views import MultiView

    views = []
    norms = set()
    for name, geom, ops, count in (("global", t.geometric_augmentation_global, t.global_transfo1, 1),
                                   ("global", t.geometric_augmentation_global, t.global_transfo2, 1),
                                   ("local", t.geometric_augmentation_local, t.local_transfo, t.local_crops_number)):
        where = f"{type(t).__name__}'s {name} crop > "
        cv = _Converter()
        cv.top(_members(geom) + _members(ops), where)
        view = cv.result()
        norms.add((view.normalize_mean, view.normalize_std))
        if count > 0:
            views.append((name, int(count), view))
    out = MultiView(views)
    # The views share one Normalize (DINOv2's make_normalize_transform).
    if len(norms) == 1:
        out.normalize_mean, out.normalize_std = norms.pop()  # type: ignore[attr-defined]
    return out



def from_torchvision(tv_transform: Any) -> Any:
    """Returns a torchvision pipeline as a stoker :class:`Compose` (a
    :class:`MultiView` for DINOv2's DataAugmentationDINO).

    ``tv_transform`` is a torchvision.transforms (v1) or
    torchvision.transforms.v2 Compose (nested ones are flattened), an
    ``nn.Sequential`` or a list of them, or a single transform, of the ops
    stoker supports, with their arguments (defaults included) read as each
    version stores them. Also taken as they are: timm's
    ``create_transform(...)`` output, open_clip's ``image_transform(...)``
    output, torchvision's references' ``ClassificationPresetTrain`` and
    ``ClassificationPresetEval`` objects, and DINOv2's
    ``DataAugmentationDINO``.

    The first op stoker cannot run is refused in one line, by its position
    and name and with what to do instead: ``ValueError("op 3 (Lambda) is
    not supported by stoker: ...")`` (inside a nested Compose or a
    container: ``"op 1 (Compose) > op 2 (...)"``); MixUp and CutMix point
    to :mod:`stoker.gpu`. So is an argument it cannot honour
    (``Grayscale(1)``, a bicubic
    RandomRotation or RandomAffine, timm's RandAugment ``t3a``).

    ToTensor, PILToTensor, ToImage, ToDtype, ConvertImageDtype,
    ToPureTensor and RGB (and timm's, open_clip's and DINOv2's
    MaybeToTensor, open_clip's convert to RGB) are dropped: the Loader
    decodes to RGB uint8 and hands over tensors. A Normalize is dropped
    too, and its mean and std, in [0, 1] units, are kept as the result's
    ``normalize_mean`` and ``normalize_std``: pass them to
    :func:`stoker.normalize` on the GPU. A Normalize on pixels (a PIL or
    uint8 image: no ToTensor or ToDtype(float, scale=True) before it) is
    refused, as torchvision refuses it. Only RandomErasing may follow the
    Normalize: its value ``v`` becomes the pixel ``round(255 * (mean +
    std * v))`` per channel, and ``value="random"`` noise drawn for that
    Normalize. Fills and solarize thresholds given on float images
    ([0, 1]) are scaled to pixels.
    """
    cls = type(tv_transform).__name__
    if cls in _HOLDERS and hasattr(tv_transform, "transforms"):
        return from_torchvision(tv_transform.transforms)
    if cls == "DataAugmentationDINO" and all(hasattr(tv_transform, a) for a in _DINO):
        return _dino(tv_transform)
    name, own = _tv_name(tv_transform)
    if name == "Compose" or isinstance(tv_transform, (list, tuple)):
        items = _members(tv_transform)
    else:
        items = [tv_transform]
    cv = _Converter()
    cv.top(items, "")
    return cv.result()
