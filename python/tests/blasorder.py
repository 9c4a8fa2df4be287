"""torch's float32 sums of three products, in the order stoker follows.

torchvision moves a grid (rotate, affine, perspective: a bmm of the
output's N points [X, Y, 1] by a 3 x C matrix) and boxes and keypoints
(torch.matmul of the N corners [x, y, 1] by one) with float32 sums of
three products whose order is the BLAS's. torch 2.15 on x86-64 with MKL
taking its AVX-512 path (Intel's CPUs) orders them by size:

- bmm: while contraction x rows x columns (3 x N x C) is below 400, its
  own loop, (p0*m0 + p1*m1) + p2*m2; from there on MKL's sgemm, which
  fuses the second and third products: fma(p2, m2, fma(p1, m1, p0*m0));
- matmul: one row p0*m0 + (p1*m1 + p2*m2); below 16 rows (p0*m0 + p2*m2)
  + p1*m1; from 16 on MKL's fused order above.

That is the order stoker computes in on every CPU (pipeline/kernels/
affine.go, perspective.go, pipeline/targets/affine.go, points.go), and the
order of the golden files made from torchvision. MKL on another CPU (AMD's
EPYC, whatever its vector width, and Intel's without AVX-512) sums every
one of these plainly, (p0*m0 + p1*m1) + p2*m2, each step rounded: the two
differ by an ulp on about a third of the points, which moves a nearest
pixel on a pixel edge, a bilinear one by a level, a box's corner by an ulp.

So that a parity test holds stoker to torchvision's bits on any host, the
session (conftest.py's autouse fixture) runs torchvision with those sums in
stoker's order where this torch sums otherwise (`substitute`): torch.matmul
and Tensor.bmm, for float32 operands of that one shape only (contraction
3, at most 2 columns), every other call untouched. `host_order` says which
order this torch sums in, and test_blasorder.py holds the emulation to the
golden files, to torch itself where torch sums as MKL's AVX-512 path, and
fails on a torch that sums in an order this module does not know.
"""

from __future__ import annotations

import contextlib
from typing import Dict, Iterator

import numpy as np
import torch

#: bmm's own loop below this contraction x rows x columns (aten's
#: bmm_out_or_baddbmm_); MKL's sgemm from it on.
BMM_BLAS_WORK = 400
#: matmul's rows from which MKL's sgemm sums (torch's own gemm below).
MM_BLAS_ROWS = 16


def fma32(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """a*b + c in float32 with one rounding (a float32 FMA): the product is
    exact in float64, the sum rounded to odd there (TwoSum), then once to
    float32."""
    p = a.astype(np.float64) * b.astype(np.float64)
    cc = c.astype(np.float64)
    s = p + cc
    bb = s - p
    e = (p - (s - bb)) + (cc - bb)
    odd = (e != 0) & ((s.view(np.uint64) & 1) == 0) & np.isfinite(s)
    s = np.where(odd, np.nextafter(s, np.where(e > 0, np.inf, -np.inf)), s)
    return s.astype(np.float32)


def orders(p: np.ndarray, m: np.ndarray) -> Dict[str, np.ndarray]:
    """p (N x 3) times m (3 x C), float32, in each order torch may sum."""
    p, m = p.astype(np.float32), m.astype(np.float32)
    t = [(p[:, k:k + 1] * m[k:k + 1, :]).astype(np.float32) for k in range(3)]
    shape = t[0].shape
    col = lambda k: np.broadcast_to(p[:, k:k + 1], shape)  # noqa: E731
    row = lambda k: np.broadcast_to(m[k:k + 1, :], shape)  # noqa: E731
    return {
        "plain": ((t[0] + t[1]).astype(np.float32) + t[2]).astype(np.float32),
        "fused": fma32(col(2), row(2), fma32(col(1), row(1), t[0])),
        "small": ((t[0] + t[2]).astype(np.float32) + t[1]).astype(np.float32),
        "one": (t[0] + (t[1] + t[2]).astype(np.float32)).astype(np.float32),
    }


def _stokers(p: np.ndarray, m: np.ndarray, bmm: bool) -> np.ndarray:
    n, c = p.shape[0], m.shape[1]
    o = orders(p, m)
    if bmm:
        return o["plain"] if 3 * n * c < BMM_BLAS_WORK else o["fused"]
    if n == 1:
        return o["one"]
    return o["small"] if n < MM_BLAS_ROWS else o["fused"]


def _ours(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether a product is one this module orders: float32, plain
    tensors without grad, contraction 3, one or two columns."""
    return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.dtype == torch.float32 \
        and b.dtype == torch.float32 and a.device.type == "cpu" and b.device.type == "cpu" \
        and not (a.requires_grad or b.requires_grad) and a.shape[-1] == 3 and b.shape[-2] == 3 and b.shape[-1] <= 2


def stokers_mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """torch.matmul of a (N x 3) by b (3 x C) in stoker's order."""
    return torch.from_numpy(_stokers(a.detach().numpy(), b.detach().numpy(), bmm=False))


def stokers_bmm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a.bmm(b), (B x N x 3) by (B x 3 x C), in stoker's order."""
    an, bn = a.detach().numpy(), b.detach().numpy()
    return torch.from_numpy(np.stack([_stokers(an[i], bn[i], bmm=True) for i in range(an.shape[0])]))


def host_order() -> str:
    """How this torch sums a large grid and many points: "fused" (MKL's
    AVX-512 path: stoker's order), "plain" (every other path), or "other"."""
    with torch.random.fork_rng():
        g = torch.Generator().manual_seed(7)
        grid = torch.cat([torch.rand(1, 4096, 2, generator=g) * 600 - 300, torch.ones(1, 4096, 1)], -1)
        theta = torch.rand(1, 3, 2, generator=g) * 4 - 2
        pts = torch.cat([torch.rand(64, 2, generator=g) * 600 - 300, torch.ones(64, 1)], -1)
        mat = torch.rand(3, 2, generator=g) * 4 - 2
    got_b = _orig_bmm(grid, theta)[0].numpy()
    got_m = _orig_matmul(pts, mat).numpy()
    ob, om = orders(grid[0].numpy(), theta[0].numpy()), orders(pts.numpy(), mat.numpy())
    for name in ("fused", "plain"):
        if np.array_equal(got_b, ob[name]) and np.array_equal(got_m, om[name]):
            return name
    return "other"


_orig_matmul = torch.matmul
_orig_bmm = torch.Tensor.bmm


def _matmul(a, b, *args, **kwargs):  # type: ignore[no-untyped-def]
    if not args and not kwargs and a.dim() == 2 and b.dim() == 2 and _ours(a, b):
        return stokers_mm(a, b)
    return _orig_matmul(a, b, *args, **kwargs)


def _bmm(self, other, *args, **kwargs):  # type: ignore[no-untyped-def]
    if not args and not kwargs and self.dim() == 3 and other.dim() == 3 and _ours(self, other):
        return stokers_bmm(self, other)
    return _orig_bmm(self, other, *args, **kwargs)


@contextlib.contextmanager
def substitute() -> Iterator[str]:
    """torch.matmul and Tensor.bmm in stoker's order while inside, where
    this torch sums otherwise; yields this torch's order. A torch that sums
    in an order this module does not know fails here."""
    order = host_order()
    if order == "other":
        raise AssertionError(f"torch {torch.__version__} sums its float32 matmuls in an order stoker does not know "
                             "(neither MKL's AVX-512 path nor the plain one): see python/tests/blasorder.py")
    if order == "fused":
        yield order
        return
    torch.matmul, torch.Tensor.bmm = _matmul, _bmm  # type: ignore[assignment]
    try:
        yield order
    finally:
        torch.matmul, torch.Tensor.bmm = _orig_matmul, _orig_bmm  # type: ignore[assignment]
