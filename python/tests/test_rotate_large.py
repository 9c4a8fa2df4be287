"""rotate and affine on canvases of 224 to 640 px, pixel for pixel against
torchvision (nearest and bilinear, expand, center given or not).

torchvision's grid (_affine_grid) is a float32 bmm of the output's N
points [X, Y, 1] by the rescaled 3x2 matrix, and torch 2.15 sums it in one
of two orders on x86-64: below 67 points in its own loop, (X*r0 + Y*r1) +
r2; from 67 on in MKL's sgemm, whose AVX-512 path fuses the second
product, fma(Y, r1, X*r0) + r2, where its AVX2, AVX and SSE4.2 paths (and
MKL_CBWR=COMPATIBLE) do not. stoker follows the AVX-512 path (and the
small loop below 67 points), on every CPU (pipeline/kernels/affine.go's
affineGrid). The two orders differ by one ulp of the grid on about a third
of the points; a nearest pixel moves only where its point is within an ulp
of a pixel edge (about one pixel in two 400 px images), a bilinear one by
a level on about 100 pixels of a 400 px image.

So the tests first find which order this torch sums in (probe_order;
in this process that is MKL's AVX-512 order on every host, as the
session's blasorder.substitute puts torch's sums in it where the host's
MKL sums plainly):

- test_kernels_large: stoker's kernels (`stoker ops apply`) against
  torchvision in this process: identical where torch sums as MKL's
  AVX-512 path; where it sums otherwise, the bound below;
- test_kernels_bound: against torchvision in a process whose MKL is held
  to its AVX2 path (MKL_ENABLE_INSTRUCTIONS=AVX2), i.e. torch on a CPU
  without AVX-512: nearest pixels differ only where the sampling point is
  within 1e-4 px of a pixel edge, bilinear ones by at most one level; the
  counts are printed (`pytest -s`);
- test_served_is_torchvisions: a real `stoker serve`, RandomRotation and
  RandomAffine after Resize((300, 300)), Resize((480, 360)) and Pad then
  CenterCrop, each sample's traced step replayed by torchvision on the
  sample made with the geometry alone (the same seed), identical (or the
  bound).

The earlier kernels summed the large grid unfused (MKL's AVX2 order): on
this machine's torch about 0.45 nearest pixels per 224-640 px image
differed (18 in 40 rotations), and about 90 bilinear ones.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Tuple

import numpy as np
import pytest
import torch
from torchvision.transforms import InterpolationMode
from torchvision.transforms.v2 import functional as F
from torchvision.transforms.v2.functional._geometry import _affine_grid

from blasorder import fma32
from helpers import loader
from opsapply import ops_apply
from stoker import transforms as T
from stoker.v1 import stoker_pb2 as pb

#: (width, height) of the canvases: 224 to 640, square and not.
SIZES = [(224, 224), (300, 300), (333, 480), (480, 480), (640, 427), (517, 611)]


def grid_orders(w: int, h: int, theta: torch.Tensor) -> Dict[str, np.ndarray]:
    """The grid of a w x h output in the two orders (x and y stacked)."""
    r = (theta.clone().transpose(1, 2) / torch.tensor([0.5 * w, 0.5 * h])).numpy()[0]
    X = np.broadcast_to(np.linspace((1 - w) * 0.5, (w - 1) * 0.5, w, dtype=np.float32)[None, :], (h, w))
    Y = np.broadcast_to(np.linspace((1 - h) * 0.5, (h - 1) * 0.5, h, dtype=np.float32)[:, None], (h, w))
    f32 = np.float32
    out: Dict[str, np.ndarray] = {}
    for k in range(2):
        xa = (X * r[0, k]).astype(f32)
        out.setdefault("unfused", []).append(((xa + (Y * r[1, k]).astype(f32)).astype(f32) + r[2, k]).astype(f32))
        out.setdefault("fused", []).append((fma32(Y, np.full_like(Y, r[1, k]), xa) + r[2, k]).astype(f32))
    return {k: np.stack(v, -1) for k, v in out.items()}


def probe_order() -> str:
    """How this torch sums a large affine grid: "fused" (MKL's AVX-512
    path), "unfused" (its AVX2 path, and the small loop), or "other"."""
    torch.set_num_threads(1)
    theta = torch.tensor([[[0.873, -0.4877, 0.1234], [0.4877, 0.873, -0.0567]]], dtype=torch.float32)
    w, h = 300, 300
    got = _affine_grid(theta.clone(), w=w, h=h, ow=w, oh=h)[0].numpy()
    for name, g in grid_orders(w, h, theta).items():
        if np.array_equal(g, got):
            return name
    return "other"


def test_grid_orders_are_torchs() -> None:
    """One of the two orders is this torch's; small grids (below 67
    points) are summed unfused whatever the BLAS."""
    theta = torch.tensor([[[0.9, -0.31, 0.21], [0.33, 1.07, -0.11]]], dtype=torch.float32)
    for w, h in [(1, 7), (6, 11), (8, 8), (67, 1), (13, 13)]:
        got = _affine_grid(theta.clone(), w=w, h=h, ow=w, oh=h)[0].numpy()
        orders = grid_orders(w, h, theta)
        if w * h < 67:
            assert np.array_equal(orders["unfused"], got), (w, h)
        else:
            assert any(np.array_equal(g, got) for g in orders.values()), (w, h)
    order = probe_order()
    print(f"torch {torch.__version__} sums a large affine grid {order}")
    assert order in ("fused", "unfused"), f"torch {torch.__version__} sums its affine grid in an order stoker does not know"


def cases() -> List[Tuple[np.ndarray, list]]:
    """Noise images (every moved pixel shows) with rotate and affine steps
    drawn from a fixed seed."""
    rng = np.random.default_rng(2026)
    out = []
    for w, h in SIZES:
        img = rng.integers(0, 256, (3, h, w), dtype=np.uint8)
        for interp in ("nearest", "bilinear"):
            for k in range(4):
                center = None if k % 2 == 0 else [float(rng.uniform(0, w)), float(rng.uniform(0, h))]
                angle = float(np.float32(rng.uniform(-30, 30)))
                out.append((img, [["rotate", {"angle": angle, "interpolation": interp, "expand": k >= 2,
                                              "center": center, "fill": None if k != 1 else [255.0, 0.0, 128.0]}]]))
                out.append((img, [["affine", {"angle": angle, "translate": [int(rng.integers(-30, 30)), int(rng.integers(-30, 30))],
                                              "scale": float(rng.uniform(0.8, 1.25)),
                                              "shear": [float(rng.uniform(-12, 12)), float(rng.uniform(-12, 12))],
                                              "interpolation": interp, "center": center, "fill": None}]]))
    return out


def tv(img: torch.Tensor, name: str, args: Dict[str, Any]) -> torch.Tensor:
    a = dict(args)
    a["interpolation"] = InterpolationMode(a["interpolation"])
    return getattr(F, name)(img, **a)


def sample_points(img: np.ndarray, name: str, args: Dict[str, Any], oh: int, ow: int) -> np.ndarray:
    """Where torchvision samples each output pixel, in input pixels
    (float64, [oh, ow, 2])."""
    from test_parity_geometry_kernels import matrix

    _, h, w = img.shape
    theta = torch.tensor(matrix(torch.from_numpy(img), name, args), dtype=torch.float64).reshape(1, 2, 3)
    g = _affine_grid(theta, w=w, h=h, ow=ow, oh=oh)[0].numpy()
    return ((g + 1) * np.array([w, h]) - 1) / 2


def compare(img: np.ndarray, step: list, got: np.ndarray, want: np.ndarray, exact: bool) -> Tuple[int, List[str]]:
    """The pixels that differ, and what breaks the rule: none where exact;
    else nearest only on a pixel edge, bilinear by one level."""
    name, args = step
    where = f"{img.shape} {name} {json.dumps(args)}"
    if got.shape != want.shape:
        return 0, [f"{where}: {got.shape}, torchvision's {want.shape}"]
    d = np.abs(got.astype(np.int32) - want.astype(np.int32))
    differ = d.max(0) > 0
    n = int(differ.sum())
    if n == 0:
        return 0, []
    if exact:
        return n, [f"{where}: {n} pixels differ (max {d.max()})"]
    if args["interpolation"] == "bilinear":
        return n, [] if d.max() <= 1 else [f"{where}: max |diff| {d.max()}"]
    p = sample_points(img, name, args, *want.shape[1:])
    edge = (np.abs(p - np.floor(p) - 0.5) < 1e-4).any(-1)
    off = int((differ & ~edge).sum())
    return n, [] if off == 0 else [f"{where}: {off} pixels differ with their point off a pixel edge"]


def test_kernels_large(stoker_bin: Path) -> None:
    torch.set_num_threads(1)
    order = probe_order()
    cs = cases()
    got = ops_apply(stoker_bin, cs)
    bad, total = [], {"nearest": 0, "bilinear": 0}
    for (img, trace), g in zip(cs, got):
        (name, args), = trace
        want = tv(torch.from_numpy(img), name, args).numpy()
        n, b = compare(img, trace[0], g, want, exact=order == "fused")
        total[args["interpolation"]] += n
        bad += b
    print(f"torch's order {order}: {len(cs)} cases, pixels differing {total}")
    assert not bad, f"{len(bad)} of {len(cs)} cases (torch's grid order: {order}):\n" + "\n".join(bad[:20])


REFERENCE = """
import sys, numpy as np, torch
from torchvision.transforms import InterpolationMode
from torchvision.transforms.v2 import functional as F
torch.set_num_threads(1)
d = np.load(sys.argv[1], allow_pickle=True)
out = {}
for k, (img, name, args) in enumerate(d["cases"]):
    a = dict(args); a["interpolation"] = InterpolationMode(a["interpolation"])
    out[str(k)] = getattr(F, name)(torch.from_numpy(img), **a).numpy()
np.savez(sys.argv[2], **out)
"""


def test_kernels_bound(stoker_bin: Path, tmp_path: Path) -> None:
    """Against torch summing as MKL's AVX2 path does: the bound."""
    cs = cases()
    got = ops_apply(stoker_bin, cs)
    src, dst = tmp_path / "cases.npz", tmp_path / "want.npz"
    arr = np.empty(len(cs), dtype=object)
    arr[:] = [(img, t[0][0], t[0][1]) for img, t in cs]
    np.savez(src, cases=arr)
    env = dict(os.environ, MKL_ENABLE_INSTRUCTIONS="AVX2")
    r = subprocess.run([sys.executable, "-c", REFERENCE, str(src), str(dst)], env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr
    want = np.load(dst)
    bad, total, cases_differing = [], {"nearest": 0, "bilinear": 0}, 0
    for k, ((img, trace), g) in enumerate(zip(cs, got)):
        n, b = compare(img, trace[0], g, want[str(k)], exact=False)
        total[trace[0][1]["interpolation"]] += n
        cases_differing += n > 0
        bad += b
    print(f"against MKL's AVX2 order: {cases_differing} of {len(cs)} cases differ, pixels {total}")
    assert not bad, f"{len(bad)} of {len(cs)} cases out of the bound:\n" + "\n".join(bad[:20])


#: The served transforms: geometry (a fixed size), then the warp.
SERVED: Dict[str, List[pb.Op]] = {
    "resize300-rotation-nearest": [T.Resize((300, 300)).to_proto(), T.RandomRotation((-30, 30)).to_proto()],
    "resize300-rotation-center-nearest": [T.Resize((300, 300)).to_proto(),
                                          T.RandomRotation((-45, 45), center=[100.5, 210]).to_proto()],
    "pad-centercrop-rotation-nearest": [T.Pad(40).to_proto(), T.CenterCrop((440, 480)).to_proto(),
                                        T.RandomRotation((-20, 20)).to_proto()],
    "resize480x360-affine-nearest": [T.Resize((480, 360)).to_proto(), T.RandomAffine(
        (-25, 25), translate=[0.1, 0.1], scale=(0.8, 1.2), shear=[-10, 10]).to_proto()],
    "resize300-affine-bilinear": [T.Resize((300, 300)).to_proto(), T.RandomAffine(
        (-25, 25), shear=[-10, 10, -5, 5], interpolation="bilinear", fill=[128]).to_proto()],
}


def make(server: str, ops: List[pb.Op], trace: bool) -> List[Any]:
    with loader(server, "eval", batch_size=5, shuffle=False, seed=23, trace=trace) as ld:
        ld._spec = pb.TransformSpec(ops=ops)
        ld.set_epoch(1)
        return [b for b in ld]


@pytest.mark.parametrize("name", sorted(SERVED))
def test_served_is_torchvisions(server: str, name: str) -> None:
    torch.set_num_threads(1)
    order = probe_order()
    ops = SERVED[name]
    full, geo = make(server, ops, True), make(server, ops[:-1], False)
    bad, seen, total = [], 0, 0
    for bf, bg in zip(full, geo):
        assert torch.equal(bf.indices, bg.indices)
        for i in range(len(bf.indices)):
            steps = [s for s in bf.trace[i] if s[0] in ("rotate", "affine")]
            assert len(steps) == 1, bf.trace[i]
            before = bg.images[i].numpy()
            want = tv(torch.from_numpy(before.copy()), *steps[0]).numpy()
            n, b = compare(before, steps[0], bf.images[i].numpy(), want, exact=order == "fused")
            total += n
            bad += b
            seen += 1
    print(f"{name}: {seen} samples, {total} pixels differ (torch's order {order})")
    assert seen >= 10
    assert not bad, f"{name}: {len(bad)} of {seen} samples:\n" + "\n".join(bad[:10])
