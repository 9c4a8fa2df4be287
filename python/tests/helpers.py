"""Helpers the server tests share (imported as ``helpers``: pytest puts this
directory on sys.path)."""

from __future__ import annotations

from typing import List, Tuple

import torch

import stoker
from stoker import transforms as T

TINY_N = 48
#: The ``odd`` dataset's size: a prime, so no world size or batch size
#: divides it.
ODD_N = 37
#: A cheap transform for the ``odd`` dataset's 40 px images.
SMALL = T.Compose([T.Resize((16, 16))])


def collect(loader) -> List[Tuple[torch.Tensor, ...]]:
    return [tuple(t.clone() for t in batch) for batch in loader]


def loader(server: str, dataset: str = "tiny", **kw) -> stoker.Loader:
    kw.setdefault("batch_size", 5)
    kw.setdefault("pin_memory", False)
    kw.setdefault("timeout", 60)
    if dataset in ("odd", "shards", "clip"):
        kw.setdefault("transform", SMALL)
    return stoker.Loader(server, dataset, **kw)


def assert_same_batches(a, b) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert len(x) == len(y)
        for s, t in zip(x, y):
            assert s.dtype == t.dtype and s.shape == t.shape
            assert torch.equal(s, t)


def indices(batches) -> List[int]:
    """The dataset indices of batches yielded with return_indices, in order."""
    return [i for b in batches for i in b[2].tolist()]


def wire_args(op) -> dict:
    """A wire op's (a NamedOp's) arguments by name: a number, a list of
    numbers, a str, a bool, None, a container's ops (a list of wire ops) or
    a typed fill (the pb.TypedFill)."""
    out = {}
    for a in op.named.args:
        k = a.WhichOneof("value")
        out[a.name] = {"number": lambda: a.number, "numbers": lambda: list(a.numbers.values), "text": lambda: a.text,
                       "flag": lambda: a.flag, "none": lambda: None, "ops": lambda: list(a.ops.ops),
                       "typed_fill": lambda: a.typed_fill}[k]()
    return out
