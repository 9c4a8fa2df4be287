"""blasorder.py's model of torch's float32 sums, held to torch and to the
golden files.

The session runs torchvision with its grids', boxes' and keypoints' sums in
stoker's order (MKL's AVX-512 path) where this host's torch sums plainly
(conftest.py's torch_in_stokers_order). That substitution is only as good
as the model, so:

- this torch is one of the two the model knows: over every size on both
  sides of both thresholds, its bmm and matmul are the model's fused
  order (stoker's: the substitution is then not made) or the plain order
  throughout (then it is);
- the golden files of torchvision's boxes and keypoints through rotate,
  affine and perspective (made on a host whose torch sums in MKL's
  AVX-512 order, and held to the server's arithmetic by the Go tests) are
  torchvision's bits here, with the session's substitution in place.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import blasorder
import test_targets_affine
import test_targets_kpts

ROWS = [1, 2, 3, 4, 15, 16, 17, 40, 66, 67, 133, 134, 200, 1000]


def cases():
    rng = np.random.default_rng(5)
    for n in ROWS:
        for c in (1, 2):
            p = np.concatenate([rng.uniform(-400, 400, (n, 2)), np.ones((n, 1))], 1).astype(np.float32)
            m = rng.uniform(-2, 2, (3, c)).astype(np.float32)
            yield n, c, torch.from_numpy(p), torch.from_numpy(m)


def test_this_torch_is_a_known_order(torch_in_stokers_order: str) -> None:
    order = blasorder.host_order()
    assert order == torch_in_stokers_order
    print(f"\ntorch {torch.__version__}: {order}; the session substitutes stoker's order: {order != 'fused'}")
    bad = []
    for n, c, p, m in cases():
        got_m = blasorder._orig_matmul(p, m).numpy()
        got_b = blasorder._orig_bmm(p[None], m[None])[0].numpy()
        if order == "fused":
            want_m, want_b = blasorder.stokers_mm(p, m).numpy(), blasorder.stokers_bmm(p[None], m[None])[0].numpy()
        else:
            want_m = want_b = blasorder.orders(p.numpy(), m.numpy())["plain"]
        if not np.array_equal(got_m, want_m):
            bad.append(f"matmul {n}x3 by 3x{c}")
        if not np.array_equal(got_b, want_b):
            bad.append(f"bmm {n}x3 by 3x{c}")
    assert not bad, f"torch {torch.__version__} ({order}) is not blasorder's model: {bad}"


def test_the_orders_differ() -> None:
    """The emulation changes something on the sizes MKL's sgemm sums (else
    the substitution would prove nothing), and nothing below them for bmm."""
    differ = {}
    for n, c, p, m in cases():
        o = blasorder.orders(p.numpy(), m.numpy())
        fused = not np.array_equal(blasorder.stokers_bmm(p[None], m[None])[0].numpy(), o["plain"])
        differ[(n, c)] = fused
        if 3 * n * c < blasorder.BMM_BLAS_WORK:
            assert not fused, (n, c)
    assert differ[(1000, 2)] and differ[(200, 2)], differ


@pytest.mark.parametrize("module", [test_targets_affine, test_targets_kpts], ids=["boxes", "keypoints"])
def test_golden_files_are_torchvisions_bits(module) -> None:  # type: ignore[no-untyped-def]
    doc = json.loads(module.GOLDEN.read_text())
    if module is test_targets_affine:
        got = [test_targets_affine.torchvision_boxes(c) for c in doc["cases"]]
    else:
        got = [test_targets_kpts.torchvision_points(c)[0] for c in doc["cases"]]
    wants = [torch.tensor(c["want"], dtype=torch.float32) for c in doc["cases"]]
    bad = [i for i, (g, w) in enumerate(zip(got, wants)) if not torch.equal(g, w)]
    assert not bad, f"{len(bad)} of {len(doc['cases'])} cases not the file's bits: {bad[:10]}"
