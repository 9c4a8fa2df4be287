"""Kernel parity: stoker's photometric kernels against torchvision's.

Each op runs with explicit arguments (no randomness) over a grid, on a corpus
of uint8 images, through `stoker ops apply` (one process per test, all of the
test's cases on its stdin), and is compared with
torchvision.transforms.v2.functional on the same uint8 tensor. The reference
is torchvision 0.29.2 (pinned below). Tolerances are issue 35's: point and LUT
ops exact; brightness, contrast, saturation and sharpness within 1; hue within
2; blur mean |diff| <= 0.5 and max <= 2, over the whole image, borders
included (both pad by reflection; where torch refuses a kernel half as wide
as the image, the reference is numpy's reflect padding, which mirrors again,
as stoker does). A failure lists every case out of tolerance and each op's
worst case.

The corpus: crops of real photos (testdata/photos, decoded by
torchvision.io.decode_jpeg) at odd sizes (HxW 224x224, 97x131, 1x7, 7x1,
3x5), a constant image, a constant colour, one channel constant, 0/255
extremes, random noise; for hue 65536 random colours; and for grayscale,
saturation and hue every 24-bit colour once (a 4096x4096 image) at some
arguments.
"""

from __future__ import annotations

import base64
import json
import subprocess
from functools import lru_cache
from pathlib import Path
from typing import Callable, Dict, List, Sequence, Tuple

import numpy as np
import pytest
import torch
import torchvision
import torchvision.transforms.v2.functional as F
from torchvision.io import ImageReadMode, decode_jpeg, read_file

pytestmark = pytest.mark.filterwarnings("ignore:The image decoding:DeprecationWarning")  # decode_jpeg's

TORCHVISION = "0.29.2"
PHOTOS = Path(__file__).resolve().parents[2] / "testdata" / "photos"

Image = Tuple[str, np.ndarray]  # a name and a [3, H, W] uint8 array
Case = Tuple[str, Image, List]  # an op's label, its image and its trace


def test_reference_is_pinned() -> None:
    assert torchvision.__version__.split("+")[0] == TORCHVISION


@lru_cache(maxsize=None)
def photo(i: int) -> np.ndarray:
    files = sorted(PHOTOS.glob("*/*.jpg"))
    assert len(files) > 10, f"no photos in {PHOTOS}"
    return decode_jpeg(read_file(str(files[i])), mode=ImageReadMode.RGB).numpy()


@lru_cache(maxsize=None)
def corpus() -> Tuple[Image, ...]:
    rng = np.random.default_rng(35)
    one_constant = photo(7)[:, 40:104, 30:78].copy()
    one_constant[1] = 128
    colour = np.empty((3, 9, 11), np.uint8)
    colour[:] = np.array([200, 30, 100], np.uint8)[:, None, None]
    return (
        ("photo 224x224", photo(0)[:, 30:254, 50:274]),
        ("photo 97x131", photo(3)[:, 101:198, 57:188]),
        ("photo 1x7", photo(5)[:, 200:201, 100:107]),
        ("photo 7x1", photo(9)[:, 100:107, 200:201]),
        ("photo 3x5", photo(11)[:, 50:53, 60:65]),
        ("constant 17x23", np.full((3, 17, 23), 90, np.uint8)),
        ("constant colour 9x11", colour),
        ("one channel constant 64x48", one_constant),
        ("extremes 31x37", rng.choice(np.array([0, 255], np.uint8), size=(3, 31, 37))),
        ("noise 45x61", rng.integers(0, 256, size=(3, 45, 61), dtype=np.uint8)),
    )


@lru_cache(maxsize=None)
def every_colour() -> Image:
    """Each of the 2**24 colours once: r, g, b are the index's bytes."""
    v = np.arange(1 << 24, dtype=np.uint32)
    pix = np.stack([(v >> 16) & 255, (v >> 8) & 255, v & 255]).astype(np.uint8)
    return ("every colour 4096x4096", pix.reshape(3, 4096, 4096))


@lru_cache(maxsize=None)
def random_colours() -> Image:
    rng = np.random.default_rng(6)
    return ("random colours 256x256", rng.integers(0, 256, size=(3, 256, 256), dtype=np.uint8))


def run_ops(stoker_bin: Path, cases: Sequence[Case]) -> List[np.ndarray]:
    """Runs every case's trace on its image in one `stoker ops apply`."""
    lines = []
    for _, (_, img), trace in cases:
        _, h, w = img.shape
        pix = base64.b64encode(np.ascontiguousarray(img).tobytes()).decode()
        lines.append(json.dumps({"w": w, "h": h, "pix": pix, "trace": trace}))
    r = subprocess.run([str(stoker_bin), "ops", "apply"], input="\n".join(lines).encode(), capture_output=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr.decode()
    results = [json.loads(line) for line in r.stdout.decode().splitlines()]
    assert len(results) == len(cases)
    out = []
    for (label, (name, img), _), res in zip(cases, results):
        assert "error" not in res, f"{label} on {name}: {res['error']}"
        out.append(np.frombuffer(base64.b64decode(res["pix"]), np.uint8).reshape(img.shape))
    return out


def check(stoker_bin: Path, cases: Sequence[Case], reference: Callable[[torch.Tensor, List], torch.Tensor],
          max_diff: int, mean_diff: float = 255.0) -> Dict[str, Tuple[int, float]]:
    """Runs the cases and compares each with reference(image, trace); fails
    listing every case out of tolerance and each op's worst case. Returns
    {op: (max |diff|, largest mean |diff|)}."""
    got = run_ops(stoker_bin, cases)
    worst: Dict[str, Tuple[int, float, str]] = {}
    bad = []
    for (label, (name, img), trace), out in zip(cases, got):
        want = reference(torch.from_numpy(img.copy()), trace).numpy()
        assert want.shape == out.shape and want.dtype == np.uint8
        diff = np.abs(out.astype(np.int16) - want.astype(np.int16))
        mx, mean = int(diff.max()), float(diff.mean())
        where = ""
        if mx:
            c, y, x = np.unravel_index(int(diff.argmax()), diff.shape)
            where = (f" at c={c} y={y} x={x}: input {img[:, y, x].tolist()}, stoker {out[:, y, x].tolist()}, "
                     f"torchvision {want[:, y, x].tolist()}")
        args = json.dumps(trace[0][1], separators=(",", ":"))
        desc = f"{label} {args} on {name}: max {mx}, mean {mean:.4f}{where}"
        if mx > worst.get(label, (-1, 0.0, ""))[0]:
            worst[label] = (mx, max(mean, worst.get(label, (0, 0.0, ""))[1]), desc)
        elif label in worst:
            worst[label] = (worst[label][0], max(mean, worst[label][1]), worst[label][2])
        if mx > max_diff or mean > mean_diff:
            bad.append(desc)
    summary = "\n".join(f"  worst {op}: {d}" for op, (_, _, d) in sorted(worst.items()))
    limits = f"max {max_diff}" + (f", mean {mean_diff}" if mean_diff < 255 else "")
    assert not bad, (f"{len(bad)} of {len(cases)} cases out of tolerance ({limits}):\n  "
                     + "\n  ".join(bad[:20]) + "\n" + summary)
    return {op: (m, mean) for op, (m, mean, _) in worst.items()}


def replay(img: torch.Tensor, trace: List) -> torch.Tensor:
    """torchvision.transforms.v2.functional.<name>(img, **args), in order."""
    for name, args in trace:
        img = getattr(F, name)(img, **args)
    return img


def grid(op: str, arg: str, values: Sequence, images: Sequence[Image]) -> List[Case]:
    return [(op, img, [[op, {arg: v}]]) for v in values for img in images]


FACTORS = [0.0, 0.1, 0.5, 0.9, 1.0, 1.5, 2.0, 5.0]


def test_brightness_contrast_saturation_within_1(stoker_bin: Path) -> None:
    cases = []
    for op, arg in (("adjust_brightness", "brightness_factor"), ("adjust_contrast", "contrast_factor"),
                    ("adjust_saturation", "saturation_factor")):
        cases += grid(op, arg, FACTORS + [0.37, 1.234567], corpus())
    cases += grid("adjust_saturation", "saturation_factor", [0.6, 2.0], [every_colour()])
    check(stoker_bin, cases, replay, max_diff=1)


def test_sharpness_within_1(stoker_bin: Path) -> None:
    cases = grid("adjust_sharpness", "sharpness_factor", FACTORS + [0.37, 1.234567, 20.0], corpus())
    check(stoker_bin, cases, replay, max_diff=1)


def test_hue_within_2(stoker_bin: Path) -> None:
    hues = [-0.5, -0.4, -0.25, -0.1, -0.01, 0.0, 0.001, 0.05, 1 / 6, 0.2, 1 / 3, 0.45, 0.5]
    cases = grid("adjust_hue", "hue_factor", hues, list(corpus()) + [random_colours()])
    cases += grid("adjust_hue", "hue_factor", [0.1], [every_colour()])
    check(stoker_bin, cases, replay, max_diff=2)


def test_grayscale_exact(stoker_bin: Path) -> None:
    cases = grid("rgb_to_grayscale", "num_output_channels", [3], list(corpus()) + [every_colour()])
    check(stoker_bin, cases, replay, max_diff=0)


def test_point_ops_exact(stoker_bin: Path) -> None:
    # 128.000001 is 128.0 in float32, where torch compares: 128 inverts.
    thresholds = [0.0, 0.5, 1.0, 64.0, 127.5, 128.0, 128.000001, 200.0, 254.9, 255.0]
    cases = grid("solarize", "threshold", thresholds, corpus())
    cases += grid("posterize", "bits", list(range(9)), corpus())
    cases += [("invert", img, [["invert", {}]]) for img in corpus()]
    cases += [("equalize", img, [["equalize", {}]]) for img in corpus()]
    cases += [("autocontrast", img, [["autocontrast", {}]]) for img in corpus()]
    check(stoker_bin, cases, replay, max_diff=0)


def test_equalize_step_zero_and_sparse_histograms_exact(stoker_bin: Path) -> None:
    """torchvision's equalize leaves a plane alone when at most 255 pixels
    differ from its largest value (step == 0), and its table can exceed 255
    (clamped) on sparse histograms."""
    rng = np.random.default_rng(3)
    imgs = []
    for n_other in (0, 1, 254, 255, 256, 300, 510, 511):
        img = np.full((3, 40, 40), 200, np.uint8)
        flat = img.reshape(3, -1)
        for c in range(3):
            idx = rng.choice(flat.shape[1], n_other, replace=False)
            flat[c, idx] = rng.integers(0, 200, size=n_other)
        imgs.append((f"{n_other} below the max", img))
    two = np.zeros((3, 16, 32), np.uint8)
    two[:, :, 16:] = 255
    imgs.append(("two values", two))
    imgs.append(("zeros and one 255", np.pad(np.zeros((3, 20, 20), np.uint8), ((0, 0), (0, 0), (0, 1)),
                                            constant_values=255)))
    check(stoker_bin, [("equalize", img, [["equalize", {}]]) for img in imgs], replay, max_diff=0)


def solarize_add_timm(img: torch.Tensor, trace: List) -> torch.Tensor:
    """timm's solarize_add (timm/data/auto_augment.py) transcribed: a PIL
    point table, below the threshold min(255, v + add), PIL clipping the
    table to 0..255."""
    (_, args), = trace
    add, thresh = args["addition"], args["threshold"]
    lut = np.array([min(255, i + add) if i < thresh else i for i in range(256)])
    return torch.from_numpy(np.clip(lut, 0, 255).astype(np.uint8)[img.numpy()])


def test_solarize_add_exact(stoker_bin: Path) -> None:
    cases = [("solarize_add", img, [["solarize_add", {"addition": a, "threshold": t}]])
             for a in (0, 1, 30, 110, 300, -20) for t in (0.0, 64.0, 127.5, 128.0, 256.0) for img in corpus()]
    check(stoker_bin, cases, solarize_add_timm, max_diff=0)


def test_solarize_add_reference_is_pil() -> None:
    """The transcription above is what PIL's Image.point does with timm's
    table (timm is not a dependency)."""
    from PIL import Image as PILImage

    img = corpus()[1][1]
    for add, thresh in ((30, 128), (110, 200), (-20, 64)):
        lut = [min(255, i + add) if i < thresh else i for i in range(256)]
        pil = PILImage.fromarray(np.ascontiguousarray(img.transpose(1, 2, 0))).point(lut * 3)
        want = solarize_add_timm(torch.from_numpy(img), [["solarize_add", {"addition": add, "threshold": thresh}]])
        assert np.array_equal(np.asarray(pil).transpose(2, 0, 1), want.numpy())


def blur_reference(img: torch.Tensor, trace: List) -> torch.Tensor:
    """torchvision's gaussian_blur, or where it refuses (a kernel's half at
    least the image's side: torch's reflect padding needs less), the same
    blur in float64 with numpy's reflect padding, which mirrors again."""
    (_, args), = trace
    (kx, ky), (sx, sy) = args["kernel_size"], args["sigma"]
    _, h, w = img.shape
    if kx // 2 < w and ky // 2 < h:
        return F.gaussian_blur(img, **args)
    with pytest.raises(RuntimeError):
        F.gaussian_blur(img, **args)

    def kernel(k: int, s: float) -> np.ndarray:
        t = np.arange(k) - k // 2
        e = np.exp(-(t * t) / (2 * s * s))
        return e / e.sum()

    x = np.pad(img.numpy().astype(np.float64), ((0, 0), (ky // 2, ky // 2), (kx // 2, kx // 2)), mode="reflect")
    gx, gy = kernel(kx, sx), kernel(ky, sy)
    x = np.stack([np.convolve(row, gx, mode="valid") for row in x.reshape(-1, x.shape[-1])]).reshape(3, -1, w)
    x = np.stack([np.convolve(col, gy, mode="valid") for col in x.transpose(0, 2, 1).reshape(-1, x.shape[1])])
    return torch.from_numpy(np.round(x.reshape(3, w, h).transpose(0, 2, 1)).astype(np.uint8))


def test_gaussian_blur_within_tolerance(stoker_bin: Path) -> None:
    sigmas = [0.1, 0.5, 1.0, 2.0, 5.0]
    sizes = list(range(3, 24, 2))
    cases = []
    for img in corpus():
        _, h, w = img[1].shape
        ks = sizes if h * w <= 97 * 131 else [3, 9, 23]  # the 224x224 crop: a few
        for k in ks:
            for s in sigmas:
                cases.append(("gaussian_blur", img, [["gaussian_blur", {"kernel_size": [k, k], "sigma": [s, s]}]]))
        for (kx, ky), (sx, sy) in (((3, 23), (0.3, 4.0)), ((21, 5), (3.0, 0.8)), ((1, 9), (1.0, 2.0))):
            cases.append(("gaussian_blur", img,
                          [["gaussian_blur", {"kernel_size": [kx, ky], "sigma": [sx, sy]}]]))
    check(stoker_bin, cases, blur_reference, max_diff=2, mean_diff=0.5)
