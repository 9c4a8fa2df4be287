"""stoker.gpu: MixUp, CutMix, RandomChoice of them and RandomErasing, drawn
per sample. Each op is run as a user runs it, on whole batches, and what it
did is read back from its output (each sample's lambda from its targets,
its box from the pixels that changed); those draws' distributions are held
to torchvision.transforms.v2's own (its ops drawn as often, RandomErasing
run on each image alone) by the harness's two-sample tests (stats.py:
0.01 <= p <= 0.99, retried with other seeds). The pixels and targets each
draw makes are checked exactly. On CPU tensors; the CUDA test runs where a
GPU is at hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torchvision.transforms.v2 as T2

from stats import Checks, chi2_goodness, chi2_homogeneity, compare_values, in_band
from stoker import _gpu_kernels, gpu

K = 10  # classes
N = 3000  # draws a side


def batch(b: int = 200, h: int = 24, w: int = 32, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand((b, 3, h, w), generator=g)
    y = torch.arange(b) % K  # each sample's neighbour another class
    return x, y


def own_share(targets: torch.Tensor, y: torch.Tensor) -> np.ndarray:
    """Each sample's share of its own class in its targets (its lambda)."""
    return targets[torch.arange(len(y)), y].cpu().numpy()


def changed_boxes(out: torch.Tensor, x: torch.Tensor) -> np.ndarray:
    """Per sample the bounding box (x1, y1, x2, y2) of the pixels that
    differ from x, all 0 where none does."""
    inside = (out != x).any(1).cpu().numpy()  # [B, H, W]
    rows, cols = inside.any(2), inside.any(1)
    h, w = rows.shape[1], cols.shape[1]
    any_ = rows.any(1)
    y1, x1 = rows.argmax(1), cols.argmax(1)
    y2, x2 = h - rows[:, ::-1].argmax(1), w - cols[:, ::-1].argmax(1)
    boxes = np.stack([x1, y1, x2, y2], axis=1)
    boxes[~any_] = 0
    return boxes


def test_mixup_per_sample() -> None:
    """Sample i is lam_i of itself and 1 - lam_i of sample i - 1, targets
    alike, a lambda per sample; the same key draws the same."""
    x, y = batch()
    out, t = gpu.MixUp(alpha=0.4, num_classes=K)(x, y, key=(3, 7))
    lam = torch.as_tensor(own_share(t, y))
    want = lam[:, None, None, None] * x + (1 - lam[:, None, None, None]) * x.roll(1, 0)
    assert torch.allclose(out, want, atol=1e-6)
    assert torch.allclose(t.sum(1), torch.ones(len(y)))
    assert len(set(np.round(lam.numpy(), 6))) > 150, "the samples share lambdas: not drawn per sample"
    again, t2 = gpu.MixUp(alpha=0.4, num_classes=K)(x, y, key=(3, 7))
    other, _ = gpu.MixUp(alpha=0.4, num_classes=K)(x, y, key=(3, 8))
    assert torch.equal(out, again) and torch.equal(t, t2) and not torch.equal(out, other)


@pytest.mark.parametrize("alpha", [0.2, 1.0])
def test_mixup_lambda_is_torchvisions(alpha: float) -> None:
    """The per-sample lambdas are distributed as torchvision's MixUp's
    (Beta(alpha, alpha)), by a KS test against its draws."""

    def run(seed: int) -> Checks:
        x, y = batch(300)
        op = gpu.MixUp(alpha=alpha, num_classes=K, seed=seed)
        ours = np.concatenate([own_share(op(x, y, key=(0, k))[1], y) for k in range(N // 300)])
        torch.manual_seed(seed)
        tv = T2.MixUp(alpha=alpha, num_classes=K)
        theirs = [tv.make_params([x])["lam"] for _ in range(N)]
        c = Checks()
        compare_values(c, f"MixUp(alpha={alpha}) lambda", list(ours), theirs)
        return c

    in_band(run)


def test_cutmix_per_sample() -> None:
    """Sample i is itself outside its box and sample i - 1 inside, its
    targets mixed by the share of its pixels left (1 - box area / image
    area); boxes per sample."""
    x, y = batch()
    out, t = gpu.CutMix(alpha=1.0, num_classes=K)(x, y, key=(0, 1))
    lam = own_share(t, y)
    prev = x.roll(1, 0)
    boxes = changed_boxes(out, x)
    for i, (x1, y1, x2, y2) in enumerate(boxes):
        inside = torch.zeros(24, 32, dtype=torch.bool)
        inside[y1:y2, x1:x2] = True
        assert torch.equal(out[i][:, inside], prev[i][:, inside]), f"sample {i}: its box is not its partner's"
        assert torch.equal(out[i][:, ~inside], x[i][:, ~inside]), f"sample {i}: changed outside a box"
        assert math.isclose(lam[i], 1 - (y2 - y1) * (x2 - x1) / (24 * 32), abs_tol=1e-6), f"sample {i}: lambda"
    assert torch.allclose(t.sum(1), torch.ones(len(y)))
    assert len({tuple(b) for b in boxes}) > 100, "the samples share boxes: not drawn per sample"


def test_cutmix_boxes_are_torchvisions() -> None:
    """Boxes (corners) and adjusted lambdas, read from CutMix's output, are
    distributed as torchvision's CutMix draws them."""
    h, w = 24, 32

    def run(seed: int) -> Checks:
        x, y = batch(300, h, w)
        op = gpu.CutMix(alpha=1.0, num_classes=K, seed=seed)
        lam, boxes = [], []
        for k in range(N // 300):
            out, t = op(x, y, key=(0, k))
            lam.append(own_share(t, y))
            boxes.append(changed_boxes(out, x))
        lam_a, boxes_a = np.concatenate(lam), np.concatenate(boxes)
        boxes_a = boxes_a[(boxes_a[:, 2] > boxes_a[:, 0]) & (boxes_a[:, 3] > boxes_a[:, 1])]
        torch.manual_seed(seed)
        tv = T2.CutMix(alpha=1.0, num_classes=K)
        theirs = [tv.make_params([x]) for _ in range(N)]
        c = Checks()
        compare_values(c, "CutMix lambda", list(lam_a), [p["lam_adjusted"] for p in theirs])
        their_boxes = [p["box"] for p in theirs if p["box"][2] > p["box"][0] and p["box"][3] > p["box"][1]]
        for k, name in enumerate(("x1", "y1", "x2", "y2")):
            compare_values(c, f"CutMix {name}", list(boxes_a[:, k]), [b[k] for b in their_boxes])
        return c

    in_band(run)


def test_random_choice_per_sample() -> None:
    """Each sample takes MixUp or CutMix by p, and that op's draw: a box of
    the neighbour's pixels (CutMix) or a blend (MixUp); the choice's
    frequencies are p's."""
    x, y = batch(400)
    op = gpu.RandomChoice([gpu.MixUp(alpha=1.0, num_classes=K), gpu.CutMix(alpha=1.0, num_classes=K)], p=[1, 3])
    counts = {"mixup": 0, "cutmix": 0}
    prev = x.roll(1, 0)
    for k in range(5):
        out, t = op(x, y, key=(1, k))
        assert torch.allclose(t.sum(1), torch.ones(len(y)))
        lam = own_share(t, y)
        for i in range(len(y)):
            if lam[i] == 1.0:
                continue  # a CutMix box of nothing, or a lambda of exactly 1: neither tells
            mixed = torch.allclose(out[i], lam[i] * x[i] + (1 - lam[i]) * prev[i], atol=1e-6)
            boxed = bool(((out[i] == x[i]) | (out[i] == prev[i])).all())
            assert mixed != boxed, f"sample {i}: neither a blend nor a box"
            counts["mixup" if mixed else "cutmix"] += 1
    _, p, _ = chi2_goodness(counts, {"mixup": 0.25, "cutmix": 0.75})
    assert p > 0.001, f"choices {counts} for p = (0.25, 0.75): p-value {p:.3g}"


@pytest.mark.parametrize("make", [
    lambda: gpu.MixUp(alpha=1.0, num_classes=K, p=0.3, label_smoothing=0.1),
    lambda: gpu.CutMix(alpha=1.0, num_classes=K, p=0.3, label_smoothing=0.1),
    lambda: gpu.RandomChoice([gpu.MixUp(num_classes=K, p=0.3, label_smoothing=0.1),
                              gpu.CutMix(num_classes=K, p=0.3, label_smoothing=0.1)]),
], ids=["MixUp", "CutMix", "RandomChoice"])
def test_mix_p_and_label_smoothing(make) -> None:
    """p: each sample is mixed with probability p, the others untouched;
    label smoothing spreads smoothing / K over the classes, as timm's; the
    soft targets sum to 1."""
    x, y = batch(1000)
    out, t = make()(x, y, key=(0, 0))
    untouched = (out == x).flatten(1).all(1)
    share = 1 - float(untouched.float().mean())
    # A CutMix box may be empty (a lambda near 1): mixed, but untouched.
    assert 0.3 - 5 * math.sqrt(0.3 * 0.7 / 1000) - 0.03 < share < 0.3 + 5 * math.sqrt(0.3 * 0.7 / 1000), \
        f"{share:.3f} of the samples mixed, p = 0.3"
    plain = t[untouched]
    assert torch.allclose(plain.max(1).values, torch.full((len(plain),), 0.9 + 0.01))
    assert torch.allclose(plain.min(1).values, torch.full((len(plain),), 0.01))
    assert torch.allclose(t.sum(1), torch.ones(1000))
    assert float(t.min()) >= 0.01 - 1e-6


def test_erasing_per_sample() -> None:
    """Each sample is erased with probability p in a box of its own, filled
    with the value; the rest of it untouched; in place writes the same into
    the input."""
    x, _ = batch(1000)
    out = gpu.RandomErasing(p=0.4, value=(0.5, -1.0, 2.0))(x, key=(2, 3))
    boxes = changed_boxes(out, x)
    erased = boxes[:, 2] > 0
    share = float(erased.mean())
    assert abs(share - 0.4) < 5 * math.sqrt(0.4 * 0.6 / 1000), f"{share:.3f} of the samples erased, p = 0.4"
    for i in np.nonzero(erased)[0]:
        x1, y1, x2, y2 = boxes[i]
        sub = out[i][:, y1:y2, x1:x2]
        assert torch.equal(sub, torch.tensor([0.5, -1.0, 2.0]).view(3, 1, 1).expand_as(sub)), f"sample {i}"
    assert len({tuple(b) for b in boxes[erased]}) > 200, "the samples share boxes: not drawn per sample"
    y = x.clone()
    same = gpu.RandomErasing(p=0.4, value=(0.5, -1.0, 2.0), inplace=True)(y, key=(2, 3))
    assert same is y and torch.equal(y, out)
    noisy = gpu.RandomErasing(p=1, value="random")(x, key=(0, 0))
    inside = noisy[noisy != x]
    assert len(inside) > 10000 and abs(float(inside.mean())) < 0.05 and abs(float(inside.std()) - 1) < 0.05, \
        "the noise is not standard normal"


@pytest.mark.parametrize("p", [0.05, 1.0])
def test_erasing_strategies_agree(p: float, monkeypatch: pytest.MonkeyPatch) -> None:
    """The three ways of writing the erased pixels (a slice write per box,
    CPU's; the boxes' rows and the batch's mask, vectorized, for other
    devices) write the same boxes with the same values, and standard
    normal noise."""
    x, _ = batch(400, 40, 60)
    got = {}
    for strategy in ("loop", "rows", "mask"):
        monkeypatch.setattr(_gpu_kernels, "STRATEGY", strategy)
        got[strategy] = (gpu.RandomErasing(p=p, value=(0.5, -1.0, 2.0))(x, key=(0, 4)),
                         gpu.RandomErasing(p=p, value="random", inplace=True)(x.clone(), key=(0, 4)))
    boxes = changed_boxes(got["loop"][0], x)
    assert (boxes[:, 2] > 0).any()
    for strategy, (const, noisy) in got.items():
        assert torch.equal(const, got["loop"][0]), strategy
        assert np.array_equal(changed_boxes(noisy, x), boxes), strategy
        inside = noisy[noisy != x]
        assert len(inside) > 1000 and abs(float(inside.mean())) < 0.1 and abs(float(inside.std()) - 1) < 0.1, \
            strategy
    monkeypatch.setattr(_gpu_kernels, "STRATEGY", None)
    assert _gpu_kernels.erase_strategy(x, np.array([[0, 0, 4, 4]]), False) == "loop"


def test_erasing_is_torchvisions() -> None:
    """Which samples are erased, and the boxes' corners, sides and areas,
    read from the output, are distributed as torchvision's RandomErasing
    erases each image run through it alone."""
    h, w = 40, 60
    args = dict(p=0.5, scale=(0.02, 0.6), ratio=(0.2, 5), value=-1.0)

    def run(seed: int) -> Checks:
        x, _ = batch(300, h, w)
        op = gpu.RandomErasing(**args, seed=seed)
        ours = np.concatenate([changed_boxes(op(x, key=(0, k)), x) for k in range(N // 300)])
        torch.manual_seed(seed)
        tv = T2.RandomErasing(**args)
        theirs = np.concatenate([changed_boxes(torch.stack([tv(img) for img in x]), x) for _ in range(N // 300)])
        c = Checks()
        boxed = ours[ours[:, 2] > 0]
        assert {0} <= set(boxed[:, 0]) and {0} <= set(boxed[:, 1]) and w in set(boxed[:, 2]) and \
            h in set(boxed[:, 3]), "no box touches an edge: the corners' range is short"
        _, p, _ = chi2_homogeneity(ours[:, 2] > 0, theirs[:, 2] > 0)
        c.p("RandomErasing erased or not", p)
        ours, theirs = ours[ours[:, 2] > 0], theirs[theirs[:, 2] > 0]
        for k, name in enumerate(("j", "i")):
            compare_values(c, f"RandomErasing {name}", list(ours[:, k]), list(theirs[:, k]))
        for name, f in (("w", lambda b: b[:, 2] - b[:, 0]), ("h", lambda b: b[:, 3] - b[:, 1]),
                        ("area", lambda b: (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1]))):
            compare_values(c, f"RandomErasing {name}", list(f(ours)), list(f(theirs)))
        return c

    in_band(run)


def test_uint8() -> None:
    """uint8 batches: MixUp blends in float and rounds, CutMix and
    RandomErasing copy pixels exactly."""
    x, y = batch(64)
    u8 = (x * 255).round().to(torch.uint8)
    out, t = gpu.MixUp(num_classes=K)(u8, y, key=(0, 0))
    lam = torch.as_tensor(own_share(t, y))[:, None, None, None]
    want = (lam * u8.float() + (1 - lam) * u8.roll(1, 0).float()).round()
    assert out.dtype == torch.uint8 and (out.float() - want).abs().max() <= 1
    cut, _ = gpu.CutMix(num_classes=K)(u8, y, key=(0, 0))
    flo, _ = gpu.CutMix(num_classes=K)(x, y, key=(0, 0))
    assert cut.dtype == torch.uint8 and np.array_equal(changed_boxes(cut, u8), changed_boxes(flo, x))
    er = gpu.RandomErasing(p=1, value=(255, 0, 7))(u8, key=(0, 0))
    assert er.dtype == torch.uint8 and set(er[0][er[0] != u8[0]].tolist()) <= {255, 0, 7}


def test_soft_labels_and_edge_batches() -> None:
    """Soft targets in give what class indices give; batches of 0 and 1
    samples (one sample's partner is itself)."""
    x, y = batch(16)
    soft = torch.nn.functional.one_hot(y, K).float()
    want = gpu.CutMix(num_classes=K)(x, y, key=(0, 0))[1]
    assert torch.equal(gpu.CutMix(num_classes=K)(x, soft, key=(0, 0))[1], want)
    assert torch.equal(gpu.CutMix()(x, soft, key=(0, 0))[1], want)
    for op in (gpu.MixUp(num_classes=K), gpu.CutMix(num_classes=K)):
        out, t = op(x[:1], y[:1], key=(0, 0))
        assert torch.allclose(out, x[:1]) and torch.allclose(t, soft[:1])
        out, t = op(x[:0], y[:0], key=(0, 0))
        assert out.shape == x[:0].shape and t.shape == (0, K)
    assert gpu.RandomErasing(p=1)(x[:0], key=(0, 0)).shape == x[:0].shape


BAD = [
    (lambda: gpu.MixUp(alpha=0), ValueError, "alpha must be > 0"),
    (lambda: gpu.MixUp(alpha=float("inf")), ValueError, "alpha must be finite"),
    (lambda: gpu.MixUp(p=2), ValueError, r"p must be in \[0, 1\]"),
    (lambda: gpu.CutMix(label_smoothing=-0.1), ValueError, "label_smoothing must be in"),
    (lambda: gpu.MixUp(num_classes=0), ValueError, "num_classes must be in"),
    (lambda: gpu.MixUp(seed=-1), ValueError, "seed must be in"),
    (lambda: gpu.MixUp(seed=1.5), TypeError, "seed must be an int"),
    (lambda: gpu.RandomChoice([gpu.MixUp(num_classes=K), gpu.CutMix(num_classes=5)]), ValueError, "must agree"),
    (lambda: gpu.RandomChoice([gpu.MixUp(), gpu.CutMix()], p=[1]), ValueError, "2 weights"),
    (lambda: gpu.RandomChoice([gpu.MixUp(), gpu.CutMix()], p=[0, 0]), ValueError, "not all 0"),
    (lambda: gpu.RandomChoice([]), TypeError, "non-empty list"),
    (lambda: gpu.RandomErasing(value="noise"), ValueError, "'random'"),
    (lambda: gpu.RandomErasing(scale=(0.5, 0.1)), ValueError, "scale must be"),
    (lambda: gpu.RandomErasing(ratio=(0, 1)), ValueError, "0 < min"),
    (lambda: gpu.RandomErasing(p=-0.1), ValueError, r"p must be in \[0, 1\]"),
    (lambda: gpu.RandomErasing(inplace=1), TypeError, "inplace must be a bool"),
]


@pytest.mark.parametrize("bad,exc,match", BAD, ids=[m for _, _, m in BAD])
def test_bad_arguments(bad, exc, match) -> None:
    with pytest.raises(exc, match=match):
        bad()


def test_bad_inputs() -> None:
    x, y = batch(16)
    u8 = (x * 255).to(torch.uint8)
    for bad, exc, match in [
        (lambda: gpu.MixUp()(x, y), ValueError, "give num_classes"),
        (lambda: gpu.MixUp(num_classes=K)(x[0], y), TypeError, r"\[B, C, H, W\]"),
        (lambda: gpu.MixUp(num_classes=K)(x, y[:3]), ValueError, "3 labels for 16 images"),
        (lambda: gpu.MixUp(num_classes=3)(x, y), ValueError, "labels outside 0..2"),
        (lambda: gpu.MixUp(num_classes=K)(x, y.float()), TypeError, "class indices"),
        (lambda: gpu.MixUp(num_classes=K)(x.to(torch.int32), y), TypeError, "float or uint8"),
        (lambda: gpu.MixUp(num_classes=K)(x, y, key=(0, 0), batch=object()), TypeError, "not both"),
        (lambda: gpu.MixUp(num_classes=K)(x, y, batch=object()), ValueError, "no epoch and number"),
        (lambda: gpu.MixUp(num_classes=K)(x, y, key=3), TypeError, "a pair"),
        (lambda: gpu.RandomErasing(value="random")(u8, key=(0, 0)), TypeError, "normalized float"),
        (lambda: gpu.RandomErasing(p=1, value=0.5)(u8, key=(0, 0)), ValueError, "whole numbers in 0..255"),
        (lambda: gpu.RandomErasing(p=1, value=(1, 2))(x, key=(0, 0)), ValueError, "2 numbers for 3 channels"),
    ]:
        with pytest.raises(exc, match=match):
            bad()


def test_resumed_epoch_draws_the_same() -> None:
    """Keyed by the batch's (epoch, number): batch 5 draws what it drew,
    whatever the op did before (a resumed epoch starts there)."""

    class B:
        epoch, number = 2, 5

    x, y = batch()
    first = gpu.RandomChoice([gpu.MixUp(num_classes=K), gpu.CutMix(num_classes=K)], seed=4)
    for k in range(5):
        first(x, y, key=(2, k))
    a = first(x, y, batch=B())
    b = gpu.RandomChoice([gpu.MixUp(num_classes=K), gpu.CutMix(num_classes=K)], seed=4)(x, y, batch=B())
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    c = gpu.RandomChoice([gpu.MixUp(num_classes=K), gpu.CutMix(num_classes=K)], seed=5)(x, y, batch=B())
    assert not torch.equal(a[1], c[1]), "another seed drew the same"
    e1 = gpu.RandomErasing(p=0.5, value="random", seed=1)
    e1(x, key=(0, 0))
    assert torch.equal(e1(x, batch=B()), gpu.RandomErasing(p=0.5, value="random", seed=1)(x, batch=B()))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: the ops run on CPU tensors above")
def test_cuda_draws_what_cpu_draws() -> None:
    """On CUDA tensors: the same per-sample draws as on CPU (the parameters
    are drawn on the host), the pixels alike; the noise seeded on the
    device."""
    x, y = batch(64)
    xc, yc = x.cuda(), y.cuda()
    op = gpu.RandomChoice([gpu.MixUp(num_classes=K), gpu.CutMix(num_classes=K)], seed=3)
    out, t = op(x, y, key=(1, 2))
    outc, tc = op(xc, yc, key=(1, 2))
    assert outc.is_cuda and tc.is_cuda
    assert torch.allclose(outc.cpu(), out, atol=1e-6) and torch.allclose(tc.cpu(), t, atol=1e-6)
    er = gpu.RandomErasing(p=0.5, value=(1.0, 2.0, 3.0), seed=3)
    assert torch.equal(er(xc, key=(0, 1)).cpu(), er(x, key=(0, 1)))
    noise = gpu.RandomErasing(p=0.5, value="random", seed=3)
    a, b = noise(xc, key=(0, 1)), noise(xc, key=(0, 1))
    assert torch.equal(a, b) and np.array_equal(changed_boxes(a, xc), changed_boxes(er(x, key=(0, 1)), x))


def test_channels_last_refused() -> None:
    """A channels-last batch ([B, H, W, 3], what Loader(layout="NHWC")
    yields) is refused by every op, naming the layout and the permute that
    fixes it, not mixed over its rows; the permuted view gives what the
    NCHW batch gives."""
    x, y = batch(16)
    nhwc = x.permute(0, 2, 3, 1).contiguous()
    ops = [
        lambda im: gpu.MixUp(alpha=0.8, num_classes=K)(im, y, key=(0, 3)),
        lambda im: gpu.CutMix(alpha=1.0, num_classes=K)(im, y, key=(0, 3)),
        lambda im: gpu.RandomChoice([gpu.MixUp(num_classes=K), gpu.CutMix(num_classes=K)])(im, y, key=(0, 3)),
        lambda im: gpu.RandomErasing(p=1.0, value=0.5)(im, key=(0, 3)),
    ]
    for op in ops:
        for im in (nhwc, (nhwc * 255).to(torch.uint8)):
            with pytest.raises(ValueError, match=r"channels-last \[B, H, W, 3\].*permute\(0, 3, 1, 2\)"):
                op(im)
        got, want = op(nhwc.permute(0, 3, 1, 2)), op(x)
        for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
            assert torch.equal(g, w)


def test_random_choice_many_ops_normalized_in_linear_time() -> None:
    """p is normalized in one pass: 300,000 ops build in a second (the
    quadratic normalization took 11.8 s for 30,000, so about 20 minutes
    for these; the subprocess's timeout turns that into a failure), and p
    is torchvision's normalization (each weight over their sum)."""
    import os
    import subprocess
    import sys

    code = """
from stoker import gpu
n = 300_000
w = [float(i % 7 + 1) for i in range(n)]
rc = gpu.RandomChoice([gpu.MixUp(num_classes=10)] * n, p=w)
total = sum(w)
assert rc.p == [x / total for x in w], "p is not each weight over the sum"
print("ok", len(rc.p))
"""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0 and r.stdout.strip() == "ok 300000", r.stderr
