"""The containers of stoker.transforms: Compose, RandomApply, RandomChoice
and RandomOrder, with torchvision.transforms.v2's names and arguments.

A Compose inside another container means its ops in order: it is flattened
into a Compose or a RandomApply, and becomes RandomApply(ops, p=1) inside a
RandomChoice or a RandomOrder (the wire has no Compose of its own)."""

from __future__ import annotations

from typing import Any, Iterable, List, Optional, Sequence, Tuple

from stoker._ops import Normalize
from stoker._ops_base import Transform, named_op, prob, real
from stoker.v1 import stoker_pb2 as pb


def _check_ops(cls: str, transforms: Any) -> List[Transform]:
    if isinstance(transforms, (str, bytes)) or not hasattr(transforms, "__iter__"):
        raise TypeError(f"{cls}: Argument transforms should be a sequence of stoker.transforms ops, got "
                        f"{transforms!r}")
    ops = list(transforms)
    for t in ops:
        if not isinstance(t, Transform):
            hint = (" (for torchvision's, use stoker.transforms.from_torchvision)"
                    if type(t).__module__.startswith("torchvision") else "")
            raise TypeError(f"{cls} takes stoker.transforms ops, got {t!r}{hint}")
    return ops


def flatten(ops: Iterable[Transform]) -> List[Transform]:
    """The ops with every Compose replaced by its ops, recursively."""
    out: List[Transform] = []
    for t in ops:
        if isinstance(t, Compose):
            out.extend(flatten(t.transforms))
        else:
            out.append(t)
    return out


def _one(t: Transform) -> Transform:
    """One op standing for ``t``: a Compose of several ops is
    RandomApply(ops, p=1), which runs them all in order."""
    if not isinstance(t, Compose):
        return t
    ops = flatten([t])
    if len(ops) == 1:
        return ops[0]
    return RandomApply(ops, p=1.0)


class Compose(Transform):
    """A chain of ops, applied in order: the geometry first (one
    RandomResizedCrop, or Resize and/or CenterCrop), then any ops, and
    Normalize last if at all. A nested Compose is flattened.

    A Compose made by :func:`from_torchvision` from a pipeline with a
    Normalize has ``normalize_mean`` and ``normalize_std``: the Normalize it
    dropped, to pass to :func:`stoker.normalize` on the GPU (None when the
    pipeline had none).
    """

    def __init__(self, transforms: Iterable[Transform]) -> None:
        self.transforms = _check_ops("Compose", transforms)
        self.normalize_mean: Optional[Tuple[float, float, float]] = None
        self.normalize_std: Optional[Tuple[float, float, float]] = None

    def to_proto(self) -> pb.Op:
        raise TypeError("Compose is a list of ops; use to_spec()")

    def __repr__(self) -> str:
        inner = "".join(f"\n    {t!r}," for t in self.transforms)
        extra = ""
        if self.normalize_mean is not None:
            extra = f", normalize_mean={self.normalize_mean!r}, normalize_std={self.normalize_std!r}"
        return f"Compose([{inner}\n]{extra})"

    @property
    def ends_in_normalize(self) -> bool:
        """Whether the output is float32."""
        ops = flatten(self.transforms)
        return bool(ops) and isinstance(ops[-1], Normalize)


class RandomApply(Transform):
    """All of ``transforms``, in order, with probability ``p``; else none."""

    def __init__(self, transforms: Sequence[Transform], p: float = 0.5) -> None:
        self.transforms = _check_ops("RandomApply", transforms)
        if not self.transforms:
            raise ValueError("RandomApply: Pass at least one transform")
        self.p = prob("RandomApply", p)

    def to_proto(self) -> pb.Op:
        ops = [t.to_proto() for t in flatten(self.transforms)]
        return named_op("RandomApply", transforms=pb.OpList(ops=ops), p=self.p)


class RandomChoice(Transform):
    """One of ``transforms``, chosen with weights ``p`` (None: equal;
    normalized to sum to 1, as torchvision's)."""

    def __init__(self, transforms: Sequence[Transform], p: Optional[Sequence[float]] = None) -> None:
        cls = "RandomChoice"
        self.transforms = _check_ops(cls, transforms)
        if not self.transforms:
            raise ValueError(f"{cls}: Pass at least one transform")
        self.p: Optional[Tuple[float, ...]] = None
        if p is not None:
            if isinstance(p, (str, bytes)) or not hasattr(p, "__len__"):
                raise TypeError(f"{cls}: Argument p should be a sequence, got {p!r}")
            if len(p) != len(self.transforms):
                raise ValueError(f"{cls}: Length of p doesn't match the number of transforms: "
                                 f"{len(p)} != {len(self.transforms)}")
            self.p = tuple(real(cls, "p", x) for x in p)
            if any(x < 0 for x in self.p) or not sum(self.p) > 0:
                raise ValueError(f"{cls}: p should be weights >= 0 with a positive sum, got {p!r}")

    def to_proto(self) -> pb.Op:
        ops = [_one(t).to_proto() for t in self.transforms]
        return named_op("RandomChoice", transforms=pb.OpList(ops=ops), p=self.p)


class RandomOrder(Transform):
    """All of ``transforms``, in a random order."""

    def __init__(self, transforms: Sequence[Transform]) -> None:
        self.transforms = _check_ops("RandomOrder", transforms)
        if not self.transforms:
            raise ValueError("RandomOrder: Pass at least one transform")

    def to_proto(self) -> pb.Op:
        return named_op("RandomOrder", transforms=pb.OpList(ops=[_one(t).to_proto() for t in self.transforms]))
