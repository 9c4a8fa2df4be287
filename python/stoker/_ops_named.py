"""The base of the named ops' classes (stoker._ops_generated, made from the
server's op registry): ops with no hand-written class, sent (as every op
is) as a NamedOp of their torchvision name and arguments, which the server reads
through the same registry. Each argument is checked here against its
schema's type and bounds, as the server checks it again."""

from __future__ import annotations

import math
from typing import Any, Dict, NamedTuple, Optional, Tuple

from stoker._ops_base import Transform
from stoker.v1 import stoker_pb2 as pb


class Param(NamedTuple):
    """One argument of an op's schema (ops.ParamSchema): its name, its
    type, its default as Python writes it (None: required), whether it is
    keyword-only, and the bounds of its numbers (None: none)."""

    name: str
    type: str
    default: Optional[str] = None
    keyword_only: bool = False
    min: Optional[float] = None
    max: Optional[float] = None


def _number(cls: str, p: Param, v: Any, integral: bool) -> float:
    if isinstance(v, (bool, str, bytes)) or v is None:
        raise TypeError(f"{cls}: {p.name} should be a number, got {v!r}")
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise TypeError(f"{cls}: {p.name} should be a number, got {v!r}") from None
    if not math.isfinite(f):
        raise ValueError(f"{cls}: {p.name} should be finite, got {v!r}")
    if integral and f != int(f):
        raise TypeError(f"{cls}: {p.name} should be an integer, got {v!r}")
    if p.min is not None and p.max is not None and not p.min <= f <= p.max:
        raise ValueError(f"{cls}: {p.name} should be in {p.min}..{p.max}, got {v!r}")
    return f


def _arg(cls: str, p: Param, v: Any) -> pb.NamedArg:
    """``v`` as the wire's NamedArg for ``p``, checked against its type."""
    if p.type in ("float", "int"):
        return pb.NamedArg(name=p.name, number=_number(cls, p, v, p.type == "int"))
    if p.type == "bool":
        if not isinstance(v, bool):
            raise TypeError(f"{cls}: {p.name} should be a bool, got {v!r}")
        return pb.NamedArg(name=p.name, flag=v)
    if p.type in ("str", "interpolation"):
        if not isinstance(v, str):
            raise TypeError(f"{cls}: {p.name} should be a string, got {v!r}")
        return pb.NamedArg(name=p.name, text=v)
    if isinstance(v, (str, bytes)) or not hasattr(v, "__iter__"):
        v = [v]
    vals = [_number(cls, p, x, p.type == "ints") for x in v]
    return pb.NamedArg(name=p.name, numbers=pb.Numbers(values=vals))


class NamedOp(Transform):
    """An op of the server's registry with no hand-written class: its
    class (generated) names it and its schema's arguments."""

    _name = ""
    _params: Tuple[Param, ...] = ()

    def __init__(self, **args: Any) -> None:
        known = {p.name: p for p in self._params}
        self._given: Dict[str, pb.NamedArg] = {}
        for name, v in args.items():
            p = known.get(name)
            if p is None:
                raise TypeError(f"{self._name}: unknown argument {name!r}")
            setattr(self, name, v)
            if p.default is not None and repr(v) == p.default:
                continue  # the default: the server's own
            self._given[name] = _arg(self._name, p, v)

    def to_proto(self) -> pb.Op:
        return pb.Op(named=pb.NamedOp(name=self._name, args=list(self._given.values())))
