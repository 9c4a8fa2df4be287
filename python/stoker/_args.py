"""Argument checks for the public API: each returns the value as the type
the rest of the package uses, or raises TypeError (wrong type) or
ValueError (right type, out of range), naming the argument.

Integers are Python ints or anything with ``__index__`` (numpy and 0-d
torch integers), never bools nor floats: ``batch_size=8.5`` is an error,
not 8. Bools are bools (Python's or numpy's), never 0/1 or strings.
"""

from __future__ import annotations

import math
import numbers
import operator
import os
from typing import Any, Optional, Union

import numpy as np

__all__ = ["integer", "boolean", "optional_boolean", "seconds", "string", "optional_path", "shuffle",
           "sample_error_limit", "fields", "MAX_FIELDS", "MAX_FIELD_NAME"]

#: The most fields a job asks for, and a field name's most bytes (the
#: server's bounds: dataset.MaxFields, MaxFieldName).
MAX_FIELDS = 16
MAX_FIELD_NAME = 64

_U64 = (1 << 64) - 1


def _bound(v: int) -> str:
    return "2**64-1" if v == _U64 else "2**32-1" if v == (1 << 32) - 1 else str(v)


def _what(value: Any) -> str:
    return f"{type(value).__name__} {value!r}"


def integer(name: str, value: Any, lo: int, hi: int) -> int:
    """``value`` as an int in ``lo..hi``."""
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be an int, got a bool ({value!r})")
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an int, got {_what(value)}") from None
    if not lo <= v <= hi:
        raise ValueError(f"{name} must be in {_bound(lo)}..{_bound(hi)}, got {v}")
    return v


def boolean(name: str, value: Any) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool, got {_what(value)}")
    return bool(value)


def optional_boolean(name: str, value: Any) -> Optional[bool]:
    return None if value is None else boolean(name, value)


def shuffle(value: Any) -> Union[bool, str]:
    """``shuffle`` as True (the global shuffle; ``"global"`` says the same),
    False, or ``"block"``."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if not isinstance(value, str):
        raise TypeError(f"shuffle must be a bool, 'global' or 'block', got {_what(value)}")
    if value == "global":
        return True
    if value != "block":
        raise ValueError(f"shuffle must be True, False, 'global' or 'block', got {value!r}")
    return value


def sample_error_limit(value: Any) -> Optional[Union[int, float]]:
    """``max_sample_errors``: None (the server's default), an int count
    (0..2**64-1) or a float fraction of the epoch's samples (0..1)."""
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"max_sample_errors must be an int (a count), a float (a fraction of the epoch) or None, got {_what(value)}")
    if isinstance(value, numbers.Integral):
        return integer("max_sample_errors", value, 0, _U64)
    if not isinstance(value, numbers.Real):
        raise TypeError(f"max_sample_errors must be an int (a count), a float (a fraction of the epoch) or None, got {_what(value)}")
    v = float(value)
    if not 0.0 <= v <= 1.0:  # NaN fails this too
        raise ValueError(f"max_sample_errors as a float is a fraction of the epoch's samples, 0..1; got {value!r} "
                         "(for a count, pass an int)")
    return v


def seconds(name: str, value: Any) -> Optional[float]:
    """A positive, finite number of seconds, or None."""
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number of seconds or None, got {_what(value)}")
    v = float(value)
    if not (math.isfinite(v) and v > 0):
        raise ValueError(f"{name} must be a positive, finite number of seconds or None, got {value!r}")
    return v


def weight(name: str, value: Any) -> float:
    """A positive, finite number (a share's weight)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number, got {_what(value)}")
    v = float(value)
    if not (math.isfinite(v) and v > 0):
        raise ValueError(f"{name} must be a positive, finite number, got {value!r}")
    return v


def string(name: str, value: Any, *, empty: bool = False) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, got {_what(value)}")
    if not empty and not value:
        raise ValueError(f"{name} must not be empty")
    return value


def optional_path(name: str, value: Any) -> Optional[str]:
    """A file path (str or os.PathLike), or None."""
    if value is None:
        return None
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"{name} must be a file path, got {_what(value)}")
    p = os.fspath(value)
    if not isinstance(p, str):
        raise TypeError(f"{name} must be a str path, got {_what(value)}")
    if not p:
        raise ValueError(f"{name} must not be empty")
    return p


def stop_ops(value: Any) -> "tuple[str, ...]":
    """``stop_ops``: the kinds of the ops a stop_epoch switches off, as a
    tuple of names: each a class name (``"RandomZoomOut"``) or a class
    (stoker's or torchvision's ``RandomZoomOut``: its ``__name__``), at
    most 32 of them."""
    if isinstance(value, (str, type)):
        value = (value,)
    try:
        items = tuple(value)
    except TypeError:
        raise TypeError(f"stop_ops must be a sequence of op names (e.g. ('RandomZoomOut', 'RandomIoUCrop')), got {_what(value)}") from None
    if not 1 <= len(items) <= 32:
        raise ValueError(f"stop_ops: {len(items)} ops: name 1 to 32 (None: the DETR family's)")
    names = []
    for v in items:
        n = v.__name__ if isinstance(v, type) else v
        if not isinstance(n, str) or not n or len(n) > 64:
            raise TypeError(f"stop_ops: each must be an op's class or its name (at most 64 bytes), got {_what(v)}")
        names.append(n)
    return tuple(names)


def fields(value: Any) -> "tuple[str, ...]":
    """``fields``: names of the fields to send with each sample, as a
    tuple (a str names one field): each non-empty, at most 64 bytes,
    named once, at most 16 of them."""
    if isinstance(value, str):
        value = (value,)
    try:
        names = tuple(value)
    except TypeError:
        raise TypeError(f"fields must be a sequence of field names (e.g. ('txt', 'json')), got {_what(value)}") from None
    if len(names) > MAX_FIELDS:
        raise ValueError(f"fields: {len(names)} fields, the limit is {MAX_FIELDS}")
    for n in names:
        if not isinstance(n, str):
            raise TypeError(f"fields must be names (str), got {_what(n)}")
        if not n or len(n.encode()) > MAX_FIELD_NAME:
            raise ValueError(f"fields: a field name must be 1..{MAX_FIELD_NAME} bytes, got {n!r}")
    if len(set(names)) != len(names):
        raise ValueError(f"fields: a field named twice in {names!r}")
    return names
