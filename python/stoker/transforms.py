"""Transform specs with torchvision's names and semantics.

These classes do no image work in Python: each one describes an op, and the
server runs the whole chain fused into one decode call. A transform is either
a preset name (``"imagenet-train"``, ``"imagenet-eval"``) or a
:class:`Compose` of ops::

    from stoker import transforms as T
    T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip()])

The server accepts the geometry op first (one RandomResizedCrop, or Resize
and/or CenterCrop in that order), then RandomHorizontalFlip, ColorJitter and
Normalize, each at most once and in that order; the output size must be
fixed. Anything else is refused by the server with INVALID_ARGUMENT.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Iterable, Sequence, Tuple, Union

from stoker.v1 import stoker_pb2 as pb

if TYPE_CHECKING:  # pragma: no cover
    import torch

__all__ = [
    "Transform",
    "Compose",
    "RandomResizedCrop",
    "Resize",
    "CenterCrop",
    "RandomHorizontalFlip",
    "ColorJitter",
    "Normalize",
    "PRESETS",
    "to_spec",
    "normalize",
    "IMAGENET_MEAN",
    "IMAGENET_STD",
]

#: Preset names the server knows.
PRESETS = ("imagenet-train", "imagenet-eval")

Size = Union[int, Sequence[int]]


def _hw(size: Size, name: str) -> Tuple[int, int]:
    """Returns (height, width) of a torchvision size: an int is square."""
    if isinstance(size, int):
        h, w = size, size
    else:
        s = tuple(size)
        if len(s) == 1:
            h, w = s[0], s[0]
        elif len(s) == 2:
            h, w = s
        else:
            raise ValueError(f"{name}: size must be an int or (h, w), got {size!r}")
    if not (isinstance(h, int) and isinstance(w, int)) or h <= 0 or w <= 0:
        raise ValueError(f"{name}: size must be positive integers, got {size!r}")
    return h, w


class Transform:
    """One op of a transform chain."""

    def to_proto(self) -> pb.Op:
        """Returns the op as the wire's Op message."""
        raise NotImplementedError

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({args})"

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and vars(self) == vars(other)


class RandomResizedCrop(Transform):
    """A random crop of area ``scale`` and aspect ``ratio``, resized to ``size``."""

    def __init__(
        self,
        size: Size,
        scale: Tuple[float, float] = (0.08, 1.0),
        ratio: Tuple[float, float] = (3.0 / 4.0, 4.0 / 3.0),
    ) -> None:
        self.size = _hw(size, "RandomResizedCrop")
        self.scale = (float(scale[0]), float(scale[1]))
        self.ratio = (float(ratio[0]), float(ratio[1]))
        if not all(math.isfinite(v) for v in self.scale + self.ratio):
            raise ValueError(f"RandomResizedCrop: scale and ratio must be finite, got {self.scale} and {self.ratio}")

    def to_proto(self) -> pb.Op:
        h, w = self.size
        return pb.Op(
            random_resized_crop=pb.RandomResizedCrop(
                height=h,
                width=w,
                scale_min=self.scale[0],
                scale_max=self.scale[1],
                ratio_min=self.ratio[0],
                ratio_max=self.ratio[1],
            )
        )


class Resize(Transform):
    """Resize to (h, w), or the shorter side to ``size`` when it is an int.

    Resizing is antialiased bilinear, as torchvision's on PIL images and
    tensors with ``antialias=True``.
    """

    def __init__(self, size: Size) -> None:
        if isinstance(size, int) or (not isinstance(size, int) and len(tuple(size)) == 1):
            s = size if isinstance(size, int) else tuple(size)[0]
            if not isinstance(s, int) or s <= 0:
                raise ValueError(f"Resize: size must be a positive int, got {size!r}")
            self.size: Union[int, Tuple[int, int]] = s
        else:
            self.size = _hw(size, "Resize")

    def to_proto(self) -> pb.Op:
        if isinstance(self.size, int):
            return pb.Op(resize=pb.Resize(height=self.size, width=0))
        h, w = self.size
        return pb.Op(resize=pb.Resize(height=h, width=w))


class CenterCrop(Transform):
    """The central (h, w) crop; an int size is square."""

    def __init__(self, size: Size) -> None:
        self.size = _hw(size, "CenterCrop")

    def to_proto(self) -> pb.Op:
        h, w = self.size
        return pb.Op(center_crop=pb.CenterCrop(height=h, width=w))


class RandomHorizontalFlip(Transform):
    """Flip left-right with probability ``p``."""

    def __init__(self, p: float = 0.5) -> None:
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"RandomHorizontalFlip: p must be in [0, 1], got {p!r}")
        self.p = float(p)

    def to_proto(self) -> pb.Op:
        return pb.Op(random_horizontal_flip=pb.RandomHorizontalFlip(p=self.p))


class ColorJitter(Transform):
    """Random brightness, contrast and saturation, each factor drawn from
    ``[max(0, 1 - x), 1 + x]`` and applied in a random order.

    Only torchvision's single-number form is supported, and no hue.
    """

    def __init__(self, brightness: float = 0, contrast: float = 0, saturation: float = 0) -> None:
        for name, v in (("brightness", brightness), ("contrast", contrast), ("saturation", saturation)):
            if isinstance(v, (tuple, list)):
                raise ValueError(f"ColorJitter: {name} must be a single number (a (min, max) pair is not supported)")
            if not (v >= 0 and math.isfinite(v)):
                raise ValueError(f"ColorJitter: {name} must be a finite number >= 0, got {v!r}")
        self.brightness = float(brightness)
        self.contrast = float(contrast)
        self.saturation = float(saturation)

    def to_proto(self) -> pb.Op:
        return pb.Op(
            color_jitter=pb.ColorJitter(
                brightness=self.brightness, contrast=self.contrast, saturation=self.saturation
            )
        )


class Normalize(Transform):
    """``(pixel / 255 - mean) / std`` per channel; the output becomes float32.

    Four times the bytes on the wire: prefer uint8 batches and
    :func:`stoker.normalize` on the GPU.
    """

    def __init__(self, mean: Sequence[float], std: Sequence[float]) -> None:
        mean, std = [float(m) for m in mean], [float(s) for s in std]
        if len(mean) != 3 or len(std) != 3:
            raise ValueError("Normalize: mean and std need 3 values (RGB)")
        if not all(s > 0 and math.isfinite(s) for s in std) or not all(math.isfinite(m) for m in mean):
            raise ValueError(f"Normalize: mean must be finite and std finite and > 0, got {mean!r} and {std!r}")
        self.mean = tuple(mean)
        self.std = tuple(std)

    def to_proto(self) -> pb.Op:
        return pb.Op(normalize=pb.Normalize(mean=self.mean, std=self.std))


class Compose(Transform):
    """A chain of ops, applied in order."""

    def __init__(self, transforms: Iterable[Transform]) -> None:
        self.transforms = list(transforms)
        for t in self.transforms:
            if not isinstance(t, Transform) or isinstance(t, Compose):
                raise TypeError(f"Compose takes stoker.transforms ops, got {t!r}")

    def to_proto(self) -> pb.Op:
        raise TypeError("Compose is a list of ops; use to_spec()")

    def __repr__(self) -> str:
        inner = "".join(f"\n    {t!r}," for t in self.transforms)
        return f"Compose([{inner}\n])"

    @property
    def ends_in_normalize(self) -> bool:
        """Whether the output is float32."""
        return bool(self.transforms) and isinstance(self.transforms[-1], Normalize)


TransformLike = Union[str, Compose, Transform, Sequence[Transform]]


def to_spec(transform: TransformLike) -> pb.TransformSpec:
    """Returns the wire's TransformSpec for a preset name, a Compose, one op
    or a list of ops."""
    if isinstance(transform, str):
        return pb.TransformSpec(preset=transform)
    if isinstance(transform, Compose):
        ops = transform.transforms
    elif isinstance(transform, Transform):
        ops = [transform]
    elif isinstance(transform, (list, tuple)):
        ops = Compose(transform).transforms
    else:
        raise TypeError(f"transform must be a preset name or stoker.transforms ops, got {transform!r}")
    return pb.TransformSpec(ops=[op.to_proto() for op in ops])


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
    The input is never modified.
    """
    import torch

    layout = layout.upper()
    if layout not in ("NCHW", "NHWC"):
        raise ValueError(f"layout must be 'NCHW' or 'NHWC', got {layout!r}")
    key = (tuple(float(m) for m in mean), tuple(float(s) for s in std), layout, images.device)
    consts = _norm_cache.get(key)
    if consts is None:
        m = torch.tensor(key[0], dtype=torch.float32)
        s = torch.tensor(key[1], dtype=torch.float32)
        if m.numel() != 3 or s.numel() != 3:
            raise ValueError("mean and std need 3 values (RGB)")
        shape = (3, 1, 1) if layout == "NCHW" else (3,)
        # (x/255 - m) / s == (x - 255 m) * (1 / (255 s))
        consts = ((m * 255).view(shape).to(images.device), (1.0 / (s * 255)).view(shape).to(images.device))
        _norm_cache[key] = consts
    sub, mul = consts
    c = images.shape[-3] if layout == "NCHW" else images.shape[-1]
    if images.dim() < 3 or c != 3:
        raise ValueError(f"images of shape {tuple(images.shape)} have no 3-channel axis for layout {layout}")
    # A fresh float32 tensor (a copy even when images already are float32),
    # then two in-place ops: one allocation for the whole batch.
    return images.to(torch.float32, copy=True).sub_(sub).mul_(mul)
