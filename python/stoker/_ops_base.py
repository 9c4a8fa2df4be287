"""The base of stoker.transforms' op classes and the argument checks they
share: numbers, probabilities, ranges, interpolations and fills, checked
the way torchvision.transforms.v2 checks them (ValueError or TypeError, with
torchvision's wording where it has one), plus the bounds stoker's server
puts on them (a uint8 image: fills and thresholds in 0..255)."""

from __future__ import annotations

import math
from typing import Any, Dict, Optional, Sequence, Tuple, Union

from stoker.v1 import stoker_pb2 as pb

Size = Union[int, Sequence[int]]
#: A fill: None (0), one value for every channel, or one per channel.
Fill = Union[None, float, Sequence[float]]


class Transform:
    """One op of a transform chain: a description the server runs; no image
    work happens in Python."""

    def to_proto(self) -> pb.Op:
        """Returns the op as the wire's Op message."""
        raise NotImplementedError

    def _public(self) -> Dict[str, Any]:
        return {k: v for k, v in vars(self).items() if not k.startswith("_")}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self._public().items())
        return f"{type(self).__name__}({args})"

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self._public() == other._public()  # type: ignore[attr-defined]


def real(cls: str, name: str, v: Any) -> float:
    """``v`` as a finite float: a Python or NumPy number, or a 0-d tensor."""
    if isinstance(v, (bool, str, bytes)) or v is None:
        raise TypeError(f"{cls}: {name} should be a number, got {v!r}")
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise TypeError(f"{cls}: {name} should be a number, got {v!r}") from None
    if not math.isfinite(f):
        raise ValueError(f"{cls}: {name} should be finite, got {v!r}")
    return f


def integer(cls: str, name: str, v: Any, lo: int, hi: int) -> int:
    """``v`` as an int in lo..hi (an integral float is not an int: torchvision
    would fail on it later)."""
    if isinstance(v, bool) or not hasattr(v, "__index__"):
        raise TypeError(f"{cls}: {name} should be an integer, got {v!r}")
    i = int(v.__index__())
    if not lo <= i <= hi:
        raise ValueError(f"{cls}: {name} should be in {lo}..{hi}, got {i}")
    return i


def prob(cls: str, p: Any, name: str = "p") -> float:
    """A probability in [0, 1]."""
    f = real(cls, name, p)
    if not 0.0 <= f <= 1.0:
        raise ValueError(f"{cls}: `{name}` should be a floating point value in the interval [0.0, 1.0], got {p!r}")
    return f


def seq(cls: str, name: str, v: Any, sizes: Tuple[int, ...]) -> Tuple[float, ...]:
    """A sequence of finite numbers of one of ``sizes`` lengths."""
    want = " or ".join(str(s) for s in sizes)
    if isinstance(v, (str, bytes, dict)) or not hasattr(v, "__len__") or not hasattr(v, "__iter__"):
        raise TypeError(f"{cls}: {name} should be a sequence of length {want}, got {v!r}")
    if len(v) not in sizes:
        raise ValueError(f"{cls}: {name} should be a sequence of length {want}, got {v!r}")
    return tuple(real(cls, name, x) for x in v)


#: The largest ``(1 + |mean|) / std`` a Normalize takes, the server's
#: bound: its float32 outputs stay finite (a std of 1e-300 makes them all
#: inf).
MAX_NORMALIZED = 1e38


def mean_std(cls: str, mean: Any, std: Any, sizes: Tuple[int, ...] = (1, 3)) -> Tuple[Tuple[float, ...], Tuple[float, ...]]:
    """Normalize's mean and std, three of each, refused as the server
    refuses them: not finite, a std of 0 or less, or one so small that
    ``(1 + |mean|) / std`` is over :data:`MAX_NORMALIZED`."""
    m, s = list(seq(cls, "mean", mean, sizes)), list(seq(cls, "std", std, sizes))
    if not all(x > 0 for x in s):
        raise ValueError(f"{cls}: std evaluated to zero or less, leading to division by zero: {std!r}")
    m, s = (m * 3 if len(m) == 1 else m), (s * 3 if len(s) == 1 else s)
    if len(m) != len(s):
        raise ValueError(f"{cls}: mean and std need as many values, got {mean!r} and {std!r}")
    if not all((1 + abs(a)) / b <= MAX_NORMALIZED for a, b in zip(m, s)):
        raise ValueError(f"{cls}: std {std!r} with mean {mean!r}: (1 + |mean|) / std is over {MAX_NORMALIZED:g}, so "
                         f"every float32 output would be inf or NaN (the server refuses it too)")
    return tuple(m), tuple(s)


def min_max(cls: str, name: str, v: Any, lo: float = -math.inf, hi: float = math.inf) -> Tuple[float, float]:
    """A (min, max) pair with lo <= min <= max <= hi."""
    a, b = seq(cls, name, v, (2,))
    if not lo <= a <= b <= hi:
        bounds = f" within [{lo}, {hi}]" if math.isfinite(lo) or math.isfinite(hi) else ""
        raise ValueError(f"{cls}: {name} should be of the form (min, max){bounds}, got {v!r}")
    return a, b


def angle(cls: str, name: str, v: Any, sizes: Tuple[int, ...] = (2,)) -> Tuple[float, ...]:
    """torchvision's _setup_angle: a number x >= 0 is (-x, x); else a
    sequence of one of ``sizes`` lengths whose pairs are (min, max)."""
    if not hasattr(v, "__len__") or isinstance(v, (str, bytes)):
        x = real(cls, name, v)
        if x < 0:
            raise ValueError(f"{cls}: If {name} is a single number, it must be positive, got {v!r}")
        return 0.0 - x, x  # not -0.0 for 0
    out = seq(cls, name, v, sizes)
    for i in range(0, len(out), 2):
        if out[i] > out[i + 1]:
            raise ValueError(f"{cls}: {name} should be (min, max) pairs, got {v!r}")
    return out


def hw(cls: str, size: Any, name: str = "size") -> Tuple[int, int]:
    """(height, width) of a torchvision size: an int is square."""
    if isinstance(size, bool):
        raise TypeError(f"{cls}: {name} should be an int or (h, w), got {size!r}")
    if hasattr(size, "__index__"):
        h = w = size
    elif hasattr(size, "__len__") and not isinstance(size, (str, bytes)):
        s = tuple(size)
        if len(s) == 1:
            h = w = s[0]
        elif len(s) == 2:
            h, w = s
        else:
            raise ValueError(f"{cls}: Please provide only two dimensions (h, w) for {name}, got {size!r}")
    else:
        raise TypeError(f"{cls}: {name} should be an int or (h, w), got {size!r}")
    h, w = integer(cls, name, h, 1, 1 << 30), integer(cls, name, w, 1, 1 << 30)
    return h, w


#: PIL's integer codes that torchvision accepts for its interpolations.
_PIL_CODES = {0: "nearest", 2: "bilinear", 3: "bicubic", 1: "lanczos", 4: "box", 5: "hamming"}


def interp_name(cls: str, v: Any, allowed: Sequence[str]) -> str:
    """torchvision's interpolation argument (a str, an InterpolationMode or a
    PIL integer code) as its name, one of ``allowed``."""
    if isinstance(v, bool):
        raise TypeError(f"{cls}: interpolation should be a str or InterpolationMode, got {v!r}")
    name: Any = getattr(v, "value", v)  # InterpolationMode is an Enum of str values
    if isinstance(name, int):
        name = _PIL_CODES.get(name, name)
    if not isinstance(name, str):
        raise TypeError(f"{cls}: interpolation should be a str or InterpolationMode, got {v!r}")
    name = name.lower()
    if name not in allowed:
        raise ValueError(f"{cls}: interpolation {name!r} is not supported by stoker here: use "
                         f"{' or '.join(repr(a) for a in allowed)}")
    return name


def fill_values(cls: str, v: Any, name: str = "fill") -> Optional[Tuple[float, ...]]:
    """A fill in uint8 pixel units: None, one value, or one per channel."""
    if v is None:
        return None
    if isinstance(v, dict):
        raise TypeError(f"{cls}: a {name} per input type (a dict) is not supported: give one value, or three "
                        f"(R, G, B)")
    vals = seq(cls, name, v, (1, 3)) if hasattr(v, "__len__") else (real(cls, name, v),)
    for x in vals:
        if not 0 <= x <= 255:
            raise ValueError(f"{cls}: {name} {v!r}: stoker's images are uint8, so each value should be in 0..255")
    return vals


def fill_by_type(cls: str, v: Any) -> Tuple[Any, Optional[float]]:
    """torchvision's fill per type, ``{tv_tensors.Image: v, tv_tensors.Mask:
    m, "others": o}``, as (the pixels' fill, the masks'), each looked up as
    torchvision's ``_get_fill`` looks it up (its type's, else "others",
    else None: the pixels' None, the masks' 0); a fill that is no dict is
    every type's: ``(v, None)``. BoundingBoxes and KeyPoints take no fill
    (torchvision ignores theirs); other keys are refused, stoker's pixels
    being a tv_tensors.Image."""
    if not isinstance(v, dict):
        return v, None
    from torchvision import tv_tensors

    known = {tv_tensors.Image, tv_tensors.Mask, tv_tensors.BoundingBoxes, getattr(tv_tensors, "KeyPoints", None),
             "others"}
    for k in v:
        if k is None or k not in known:
            name = getattr(k, "__name__", repr(k))
            raise TypeError(f"{cls}: fill per type: key {name}: stoker fills its pixels (a tv_tensors.Image) and "
                            f"masks (tv_tensors.Mask): give those, or \"others\"")
    image = v[tv_tensors.Image] if tv_tensors.Image in v else v.get("others")
    mask = v[tv_tensors.Mask] if tv_tensors.Mask in v else v.get("others")
    if mask is None:
        return image, 0.0
    m = seq(cls, "the Mask's fill", mask, (1,))[0] if hasattr(mask, "__len__") else real(cls, "the Mask's fill", mask)
    if not 0 <= m <= 255 or m != int(m):
        raise ValueError(f"{cls}: the Mask's fill {mask!r}: masks are uint8, so an integer in 0..255")
    return image, m


def named_op(name: str, **args: Any) -> pb.Op:
    """The wire's Op for the op ``name`` with ``args`` by torchvision's
    names: each a number, a sequence of numbers, a str, a bool, None, a
    :class:`pb.OpList` (a container's ops) or a :class:`pb.TypedFill`. The
    server reads them through the op's schema (``stoker ops list``)."""
    return pb.Op(named=pb.NamedOp(name=name, args=[wire_arg(k, v) for k, v in args.items()]))


def wire_arg(name: str, v: Any) -> pb.NamedArg:
    """One argument as the wire's NamedArg."""
    if v is None:
        return pb.NamedArg(name=name, none=True)
    if isinstance(v, bool):
        return pb.NamedArg(name=name, flag=v)
    if isinstance(v, str):
        return pb.NamedArg(name=name, text=v)
    if isinstance(v, pb.TypedFill):
        return pb.NamedArg(name=name, typed_fill=v)
    if isinstance(v, pb.OpList):
        return pb.NamedArg(name=name, ops=v)
    if hasattr(v, "__len__"):
        return pb.NamedArg(name=name, numbers=pb.Numbers(values=[float(x) for x in v]))
    return pb.NamedArg(name=name, number=float(v))


def typed_fill(op: Transform, fill: Optional[Sequence[float]]) -> Any:
    """An op's fill for the wire: with a fill per type (``op.mask_fill``
    set), the pixels' and the masks' as a :class:`pb.TypedFill`; else the
    fill (None or its values)."""
    mask = vars(op).get("mask_fill")
    if mask is None:
        return fill
    t = pb.TypedFill(mask=mask)
    if fill is not None:
        t.image.values.extend(fill)
    return t
