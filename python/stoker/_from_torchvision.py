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
as the pixel that normalizes to it)."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

from stoker import _ops as O
from stoker import _ops_containers as C
from stoker import _ops_policies as P
from stoker._ops_base import Transform

_BEHAVIOUR = ("forward", "__call__", "transform", "_transform", "make_params", "_get_params", "get_params",
              "_apply_image_or_video_transform")
_GEOMETRY = ("RandomResizedCrop", "Resize", "CenterCrop", "RandomCrop")
#: Conversions the Loader already does (decode to RGB uint8): dropped.
_DROPPED = ("ToTensor", "PILToTensor", "ToImage", "ToDtype", "ConvertImageDtype", "ToPureTensor", "ToPILImage",
            "RGB", "Identity")


def _tv_name(t: Any) -> Tuple[Optional[str], str]:
    """(the torchvision class t is, or None; the name to call it by)."""
    if t is None or isinstance(t, (str, bytes, int, float)):
        return None, repr(t)
    cls = type(t)
    own = cls.__name__ if cls.__name__ != "function" else getattr(t, "__name__", "function")
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


def _members(t: Any) -> List[Any]:
    return list(t.transforms) if hasattr(t, "transforms") else list(t)


def _dtype(d: Any) -> Any:
    """ToDtype's dtype for images: a dict's entry for Image, or "others"."""
    if isinstance(d, dict):
        for k, v in d.items():
            if getattr(k, "__name__", k) in ("Image", "others"):
                return v
        return None
    return d


def _fill_of(t: Any) -> Any:
    f = getattr(t, "fill", None)
    return _dtype(f)  # a fill per type: the Image's (or "others")


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
                raise _unsupported(where)
            if self.norm is not None and name not in ("RandomErasing", "ToPureTensor", "Identity"):
                raise ValueError(f"{where} comes after Normalize: stoker normalizes last, on the GPU "
                                 f"(stoker.normalize), so only RandomErasing may follow it")
            if name in _DROPPED:
                self.drop(name, t, where)
            elif name == "Normalize":
                self.normalize(t, where)
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
                raise _unsupported(where)
            else:
                out.append(self.convert(name, t, where))
        return out

    def convert(self, name: str, t: Any, where: str) -> Transform:
        try:
            return _CONVERT[name](self, t, where)
        except (ValueError, TypeError) as e:
            msg = str(e)
            if msg.startswith(where + " > "):  # a container's op, located already
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
        try:
            n = O.Normalize(t.mean, t.std)
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
        and/or CenterCrop), fused into the decode; no geometry op later."""
        if not self.ops:
            raise ValueError("no op stoker runs: a batch needs a fixed size; start the pipeline with "
                             "RandomResizedCrop, Resize((h, w)), or Resize then CenterCrop")
        where, name, op = self.ops[0]
        if name not in _GEOMETRY:
            raise ValueError(f"{where} comes before the geometry: stoker's first op is RandomResizedCrop, Resize "
                             f"or CenterCrop (fused into the decode); move it after")
        n = 1
        if name == "Resize" and len(self.ops) > 1 and self.ops[1][1] == "CenterCrop":
            n = 2
        elif name == "Resize" and isinstance(op.size, int):
            raise ValueError(f"{where}: Resize({op.size}) of the shorter side gives a size that varies per image: "
                             f"add CenterCrop right after it, or give Resize both sides")
        for where, name, _ in self.ops[n:]:
            if name in _GEOMETRY:
                raise ValueError(f"{where}: a geometry op after other ops: stoker's geometry is the first op (one "
                                 f"RandomResizedCrop, or Resize then CenterCrop), fused into the decode")

    def result(self) -> C.Compose:
        self.check_geometry()
        out = C.Compose([op for _, _, op in self.ops])
        if self.norm is not None:
            out.normalize_mean, out.normalize_std = self.norm  # type: ignore[assignment]
        return out


def _unsupported(where: str) -> ValueError:
    hint = ""
    if "Lambda" in where or "rgb" in where.lower():
        hint = " (stoker decodes every image to 3-channel RGB: leave out a conversion to RGB)"
    return ValueError(f"{where} is not supported by stoker{hint}; supported: {', '.join(SUPPORTED)}; dropped "
                      f"(the Loader does them): {', '.join(_DROPPED)}")


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


def _weights(p: Any) -> Any:
    """RandomChoice's p: v2 keeps it normalized, so equal weights are
    v1's None (uniform)."""
    return None if p is None or len(set(p)) == 1 else p


def _p(cls: Callable[..., Transform]) -> Callable[[_Converter, Any, str], Transform]:
    return lambda cv, t, where: cls(t.p)


_CONVERT: Dict[str, Callable[[_Converter, Any, str], Transform]] = {
    "RandomResizedCrop": _rrc,
    "Resize": _resize,
    "CenterCrop": lambda cv, t, where: O.CenterCrop(t.size),
    "RandomCrop": lambda cv, t, where: _random_crop(t),
    "RandomHorizontalFlip": _p(O.RandomHorizontalFlip),
    "RandomVerticalFlip": _p(O.RandomVerticalFlip),
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
                                                            cv.pixels(_fill_of(t))),
    "RandomAffine": lambda cv, t, where: O.RandomAffine(t.degrees, t.translate, t.scale, t.shear, t.interpolation,
                                                        cv.pixels(_fill_of(t)), t.center),
    "RandomErasing": _erasing,
    "RandomApply": lambda cv, t, where: C.RandomApply(cv.inner(t.transforms, where + " > "), t.p),
    "RandomChoice": lambda cv, t, where: C.RandomChoice(cv.inner(t.transforms, where + " > "), _weights(t.p)),
    "RandomOrder": lambda cv, t, where: C.RandomOrder(cv.inner(t.transforms, where + " > ")),
    "TrivialAugmentWide": lambda cv, t, where: P.TrivialAugmentWide(t.num_magnitude_bins, t.interpolation,
                                                                    cv.pixels(_fill_of(t))),
    "RandAugment": lambda cv, t, where: P.RandAugment(t.num_ops, t.magnitude, t.num_magnitude_bins, t.interpolation,
                                                      cv.pixels(_fill_of(t))),
    "AutoAugment": lambda cv, t, where: P.AutoAugment(t.policy, t.interpolation, cv.pixels(_fill_of(t))),
    "AugMix": lambda cv, t, where: P.AugMix(t.severity, t.mixture_width, t.chain_depth, t.alpha, t.all_ops,
                                            t.interpolation, cv.pixels(_fill_of(t))),
}

#: torchvision's classes from_torchvision converts (Normalize is kept on
#: the result, for stoker.normalize).
SUPPORTED = ("Compose", *_CONVERT, "Normalize")


def from_torchvision(tv_transform: Any) -> C.Compose:
    """Returns a torchvision pipeline as a stoker :class:`Compose`.

    ``tv_transform`` is a torchvision.transforms (v1) or
    torchvision.transforms.v2 Compose (nested ones are flattened), an
    ``nn.Sequential`` or a list of them, or a single transform, of the ops
    stoker supports, with their arguments (defaults included) read as each
    version stores them. The first op stoker cannot run is refused by its
    position and name, ``ValueError("op 3 (Lambda) is not supported by
    stoker; supported: ...")`` (inside a nested Compose or a container:
    ``"op 1 (Compose) > op 2 (...)"``), and so is an argument it cannot
    honour (``RandomRotation(expand=True)``, ``Grayscale(1)``, a bicubic
    rotation, a policy that resamples with bicubic).

    ToTensor, PILToTensor, ToImage, ToDtype, ConvertImageDtype,
    ToPureTensor and RGB are dropped: the Loader decodes to RGB uint8 and
    hands over tensors. A Normalize is dropped too, and its mean and std,
    in [0, 1] units, are kept as the result's ``normalize_mean`` and
    ``normalize_std``: pass them to :func:`stoker.normalize` on the GPU.
    Only RandomErasing may follow the Normalize: its value ``v`` becomes
    the pixel ``round(255 * (mean + std * v))`` per channel, and
    ``value="random"`` noise drawn for that Normalize. Fills and solarize
    thresholds given on float images ([0, 1]) are scaled to pixels.
    """
    name, own = _tv_name(tv_transform)
    if name == "Compose" or isinstance(tv_transform, (list, tuple)):
        items = _members(tv_transform)
    else:
        items = [tv_transform]
    cv = _Converter()
    cv.top(items, "")
    return cv.result()
