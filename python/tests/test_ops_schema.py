"""The op registry, one table for both sides: the server's
(pipeline/op_*.go, as `stoker ops list --json` prints it) and the client's
(stoker.transforms' classes).

1. The generated module (stoker._ops_generated) is the binary's table.
2. Every op of the table has a class in stoker.transforms of its name, and
   every op class there an entry: none on one side alone.
3. Each class takes the table's arguments: the same names, in the same
   order, keyword-only where the table says, with the same defaults as
   Python writes them.
4. RandomChannelPermutation, the op defined by its Go file alone (its class
   generated, sent as a NamedOp): every served sample is torchvision's
   permute_channels of the same sample without it, by the permutation its
   trace names; from_torchvision converts v2's; the six permutations drawn
   about equally (chi-square).
"""

from __future__ import annotations

import inspect
import json
import subprocess
from collections import Counter
from pathlib import Path

import pytest
import torch
from torchvision.transforms import v2 as tv2
from torchvision.transforms.v2 import functional as F

from helpers import loader
from stoker import transforms as T
from stoker._ops_base import Transform
from stoker._ops_named import NamedOp

# Classes of stoker.transforms that are no op of the table: the chain and
# the views.
NOT_OPS = {"Compose", "MultiView", "Transform", "VisionCompose"}


def op_classes():
    out = {}
    for name in T.__all__:
        obj = getattr(T, name)
        if inspect.isclass(obj) and issubclass(obj, Transform) and name not in NOT_OPS:
            out[name] = obj
    return out


def test_generated_is_the_binarys(stoker_bin: Path) -> None:
    out = subprocess.run([str(stoker_bin), "ops", "list", "--json"], capture_output=True, text=True, timeout=60,
                         check=True).stdout
    ops = json.loads(out)
    assert {o["name"] for o in ops} == set(T.OP_SCHEMA)
    for o in ops:
        params = T.OP_SCHEMA[o["name"]]
        assert [p["name"] for p in o["params"]] == [p.name for p in params], o["name"]
        for p, q in zip(o["params"], params):
            assert p.get("default") == q.default and p["type"] == q.type, (o["name"], p, q)
            assert p.get("keyword_only", False) == q.keyword_only, (o["name"], p, q)


def test_every_op_has_its_class() -> None:
    classes = op_classes()
    assert set(classes) == set(T.OP_SCHEMA), (set(classes) ^ set(T.OP_SCHEMA))


@pytest.mark.parametrize("name", sorted(T.OP_SCHEMA))
def test_signature_is_the_tables(name: str) -> None:
    cls = getattr(T, name)
    params = [p for p in inspect.signature(cls.__init__).parameters.values()
              if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    want = T.OP_SCHEMA[name]
    assert [p.name for p in params] == [p.name for p in want], name
    for got, w in zip(params, want):
        if w.default is None:
            assert got.default is inspect.Parameter.empty, f"{name}.{got.name} has a default; the table's is required"
        else:
            assert got.default is not inspect.Parameter.empty, f"{name}.{got.name} is required; the table's is {w.default}"
            assert repr(got.default) == w.default, f"{name}.{got.name}={got.default!r}, the table's {w.default}"
        assert (got.kind == got.KEYWORD_ONLY) == w.keyword_only, f"{name}.{got.name}"


def test_channel_permutation_is_torchvisions(server: str) -> None:
    assert issubclass(T.RandomChannelPermutation, NamedOp)
    assert T.RandomChannelPermutation().to_proto().named.name == "RandomChannelPermutation"
    conv = T.from_torchvision(tv2.Compose([tv2.Resize((32, 32)), tv2.RandomChannelPermutation()]))
    assert conv == T.Compose([T.Resize((32, 32)), T.RandomChannelPermutation()])
    runs = []
    for ops in ([T.Resize((32, 32))], [T.Resize((32, 32)), T.RandomChannelPermutation()]):
        with loader(server, batch_size=16, shuffle=False, transform=T.Compose(ops), trace=True) as ld:
            runs.append([(b.images.clone(), b.trace) for b in ld])
    perms: Counter = Counter()
    n = 0
    for (plain, _), (permuted, trace) in zip(*runs):
        for i, steps in enumerate(trace):
            names = [s for s, _ in steps]
            assert names == ["resize", "permute_channels"], names
            perm = steps[1][1]["permutation"]
            perms[tuple(perm)] += 1
            want = F.permute_channels(plain[i], perm)
            assert torch.equal(permuted[i], want), (i, perm)
            n += 1
    assert n >= 48 and len(perms) == 6, perms
    expected = n / 6
    chi2 = sum((c - expected) ** 2 / expected for c in perms.values())
    assert chi2 < 20.5, perms  # 5 degrees of freedom, p = 0.001
