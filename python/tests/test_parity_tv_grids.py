"""torchvision's own correctness grids, run against stoker.

The grids are transcribed from torchvision's test/test_transforms_v2.py
(github.com/pytorch/vision, commit 20610ed3f8d79c8d1b414ffd6f317951b43dabfb,
the one version of that file this project's reference store holds; the
pinned torchvision 0.29.2 was built from f12281517f1b2f6255904639b027c9436f3e5008,
whose copy of the file could not be fetched): the parameters of the
``test_image_correctness`` / ``test_functional_image_correctness`` /
``test_correctness_*`` / ``test_transform_image_correctness`` tests of each
kernel stoker implements, with the tolerance that test uses. torchvision
compares its tensor kernel with its PIL kernel there; here stoker is compared
with torchvision.transforms.v2.functional on the same uint8 tensor, at that
tolerance, never a looser one:

- exact (torchvision's ``assert_equal``, or ``assert_close`` on uint8, whose
  default tolerance is 0): adjust_brightness, adjust_sharpness, posterize,
  solarize, invert, equalize, horizontal_flip, vertical_flip, erase, crop,
  center_crop, pad, RandomCrop, RandomErasing;
- ``atol=1``: adjust_contrast, adjust_saturation, autocontrast,
  rgb_to_grayscale, gaussian_blur (against OpenCV there), resize and
  resized_crop (against PIL there; RandomResizedCrop's v1 check too), the
  AutoAugment TranslateX/TranslateY affine;
- mean |diff| below a bound: adjust_hue 2, ColorJitter 2, rotate and
  RandomRotation 1 (nearest) / 6 (bilinear), affine and RandomAffine 2 / 8,
  the AutoAugment ShearX/ShearY affine 12 / 5. (torchvision writes the rotate
  and affine bounds as ``assert mae < 2 if nearest else 8``, which Python
  reads as ``assert (mae < 2) if nearest else 8``: its bilinear bound checks
  nothing. The bound meant, 8 or 6, is held here.)

The images are torchvision's: ``make_image`` of common_utils.py (uniform
uint8 noise from torch.testing.make_tensor, 17x11 unless the test says
otherwise, seed 0), and, for the kernels through ``stoker ops apply``, also
a 97x131 crop of a real photo (testdata/photos). Type variants of one value
(``17``, ``[17]``, ``(17,)``; a functional and its transform class) are one
point here: stoker's trace has one form.

How each point runs:

- kernels after the decode (colour ops, flips, rotate, affine, erase, blur):
  one ``stoker ops apply`` per test, every point of the test on its stdin;
- geometry fused into the decode (resize, resized_crop, center_crop, crop,
  pad, RandomCrop, RandomResizedCrop), which ``ops apply`` refuses (it is no
  kernel after the decode): the image written as a PNG (lossless, decoded by
  libpng as torchvision's decode_image does) and decoded by the pipeline
  package's test binary (conftest.py's driver fixture; its "transform"
  job runs the pipeline's ops for one sample and returns the trace; F.crop at
  a grid point is the RandomCrop of the same padding drawn at that position);
- the transforms whose draws torchvision's tests check (ColorJitter,
  RandomErasing, RandomAffine, RandomRotation): torchvision's transform
  objects of the grid converted by ``stoker.transforms.from_torchvision``,
  their samples drawn by ``stoker ops draw`` (indices 0..4 for torchvision's
  seeds 0..4), each traced argument checked against the transform's range,
  and the pixels replayed through ``ops apply`` against torchvision's
  functional at the traced arguments;
- the bounds torchvision's ``test_transform_get_params_bounds`` and
  ``test__get_params`` assert (RandomAffine, RandomRotation, GaussianBlur):
  every draw of samples 0..9 of every transform of their grids.

A point stoker does not support (adjust_gamma, NEAREST_EXACT, max_size,
num_output_channels=1, padding modes other than constant, a
RandomErasing value that is no pixel or is noise on a uint8 image) must be
refused with an error that names the argument; each test prints its
refusals. Each test prints, per kernel, its points, how many are identical
to torchvision, and the worst max and mean |diff| (``pytest -s`` shows it).
"""

from __future__ import annotations

import base64
import json
import math
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import pytest
import torch
import torchvision
from google.protobuf import json_format
from torchvision.io import ImageReadMode, decode_jpeg, read_file
from torchvision.transforms import InterpolationMode
from torchvision.transforms import v2 as T
from torchvision.transforms.v2 import functional as F

from helpers import wire_args
from stoker.transforms import from_torchvision, to_spec
from stoker.v1 import stoker_pb2 as pb

pytestmark = pytest.mark.filterwarnings("ignore:The image decoding:DeprecationWarning")

TORCHVISION = "0.29.2"
TV_FILE = "test/test_transforms_v2.py"
TV_COMMIT = "20610ed3f8d79c8d1b414ffd6f317951b43dabfb"
PHOTOS = Path(__file__).resolve().parents[2] / "testdata" / "photos"

Tol = Tuple[str, float]  # ("exact", 0), ("atol", k) or ("mae", bound)
EXACT: Tol = ("exact", 0)
ATOL1: Tol = ("atol", 1)

#: common_utils.py's CORRECTNESS_FILLS through adapt_fill(dtype=uint8):
#: None, 0.5, [1, 0, 1], [0.1, 0.2, 0.3] in [0, 1] units, as uint8 values.
FILLS: List[Any] = [None, 127, [255, 0, 255], [25, 51, 76]]


def setup_module() -> None:
    assert torchvision.__version__.split("+")[0] == TORCHVISION, (
        f"these grids and tolerances are torchvision {TORCHVISION}'s; this is {torchvision.__version__}")
    torch.set_num_threads(1)


def make_image(size: Tuple[int, int] = (17, 11), low: int = 0, high: int = 255, seed: int = 0) -> torch.Tensor:
    """common_utils.make_image(size, dtype=torch.uint8) after set_rng_seed(seed):
    torch.testing.make_tensor's uniform values in [low, high)."""
    torch.manual_seed(seed)
    return torch.testing.make_tensor((3, *size), dtype=torch.uint8, device="cpu", low=low, high=high)


def photo() -> torch.Tensor:
    files = sorted(PHOTOS.glob("*/*.jpg"))
    assert len(files) > 3, f"no photos in {PHOTOS}"
    return decode_jpeg(read_file(str(files[3])), mode=ImageReadMode.RGB)[:, 101:198, 57:188].contiguous()


def images() -> Dict[str, torch.Tensor]:
    return {"make_image 17x11": make_image(), "photo 97x131": photo()}


def fill3(fill: Any) -> Optional[List[float]]:
    """A fill as stoker's trace has it: None, or a value per channel."""
    if fill is None:
        return None
    return [float(v) for v in (fill if isinstance(fill, (list, tuple)) else [fill] * 3)]


# -- points, their results, their tally --------------------------------------

@dataclass
class Point:
    """One grid point on one image: stoker's result (pixels or an error)
    against want() (torchvision's) at tol, or a refusal naming `refuse`."""
    kernel: str
    label: str
    tol: Tol = EXACT
    want: Optional[Callable[[], torch.Tensor]] = None
    refuse: Sequence[str] = ()
    got: Optional[torch.Tensor] = None
    error: str = ""


@dataclass
class Tally:
    points: int = 0
    identical: int = 0
    refused: int = 0
    worst_max: int = 0
    worst_mean: float = 0.0
    worst: str = ""
    refusals: List[str] = field(default_factory=list)


def settle(points: Sequence[Point], title: str) -> Dict[str, Tally]:
    """Checks every point; prints the tally per kernel and the refusals;
    fails listing every point out of tolerance and every refusal that is
    missing or does not name its argument."""
    tally: Dict[str, Tally] = {}
    bad: List[str] = []
    for p in points:
        t = tally.setdefault(p.kernel, Tally())
        t.points += 1
        if p.refuse:
            msg = p.error.lower()
            if not p.error or not all(s.lower() in msg for s in p.refuse):
                bad.append(f"{p.kernel} {p.label}: want a refusal naming {list(p.refuse)}, got "
                           + (repr(p.error) if p.error else "a result"))
            t.refused += 1
            if len(t.refusals) < 3:
                t.refusals.append(f"{p.label}: {p.error}")
            continue
        if p.error:
            bad.append(f"{p.kernel} {p.label}: refused: {p.error}")
            continue
        want = p.want()
        if p.got.shape != want.shape:
            bad.append(f"{p.kernel} {p.label}: shape {tuple(p.got.shape)}, torchvision's {tuple(want.shape)}")
            continue
        d = (p.got.int() - want.int()).abs()
        mx, mean = int(d.max()) if d.numel() else 0, float(d.float().mean()) if d.numel() else 0.0
        t.identical += mx == 0
        if mx > t.worst_max or (mx == t.worst_max and mean > t.worst_mean):
            t.worst = p.label
        t.worst_max, t.worst_mean = max(t.worst_max, mx), max(t.worst_mean, mean)
        kind, bound = p.tol
        if (kind == "exact" and mx) or (kind == "atol" and mx > bound) or (kind == "mae" and not mean < bound):
            bad.append(f"{p.kernel} {p.label}: max |diff| {mx}, mean {mean:.4f}, tolerance {kind} {bound}")
    lines = [f"{title}: torchvision's grids ({TV_FILE} at {TV_COMMIT[:12]})"]
    for k, t in tally.items():
        lines.append(f"  {k}: {t.points} points, {t.identical} identical, {t.refused} refused; worst max |diff| "
                     f"{t.worst_max}, worst mean {t.worst_mean:.3g}" + (f" ({t.worst})" if t.worst_max else ""))
        lines += [f"    refused: {r}" for r in t.refusals]
    report = "\n".join(lines)
    print(report)
    assert not bad, f"{len(bad)} of {len(points)} points failed:\n  " + "\n  ".join(bad[:30]) + "\n" + report
    return tally


# -- stoker ops apply ----------------------------------------------------------

@dataclass
class Applied(Point):
    img: Optional[torch.Tensor] = None
    trace: List[Any] = field(default_factory=list)


def apply_all(stoker_bin: Path, points: Sequence[Applied]) -> None:
    """Runs every point's trace on its image in one `stoker ops apply`."""
    lines = []
    for p in points:
        _, h, w = p.img.shape
        lines.append(json.dumps({"w": w, "h": h, "pix": base64.b64encode(p.img.contiguous().numpy().tobytes()).decode(),
                                 "trace": p.trace}))
    r = subprocess.run([str(stoker_bin), "ops", "apply"], input="\n".join(lines) + "\n", capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, f"stoker ops apply exited {r.returncode}: {r.stderr}"
    out = r.stdout.splitlines()
    assert len(out) == len(points), f"{len(out)} results for {len(points)} cases: {r.stderr}"
    for p, line in zip(points, out):
        res = json.loads(line)
        if "error" in res:
            p.error = res["error"]
        else:
            shape = (3, res["h"], res["w"]) if "w" in res else p.img.shape  # rotate's expand: its own size
            p.got = torch.from_numpy(np.frombuffer(base64.b64decode(res["pix"]), np.uint8).reshape(shape).copy())


def step(kernel: str, label: str, img: torch.Tensor, name: str, args: Dict[str, Any], tol: Tol,
         want: Optional[Callable[[], torch.Tensor]] = None, refuse: Sequence[str] = ()) -> Applied:
    """A one-step point; want defaults to F.<name>(img, **args)."""
    if want is None and not refuse:
        want = lambda: getattr(F, name)(img, **args)  # noqa: E731
    return Applied(kernel, label, tol, want, refuse, img=img, trace=[[name, args]])


# -- the colour kernels ---------------------------------------------------------

def test_colour_kernels(stoker_bin: Path) -> None:
    """TestAdjustBrightness/Contrast/Saturation/Hue/Sharpness/Gamma,
    TestPosterize, TestSolarize, TestAutocontrast, TestInvert, TestEqualize,
    TestRgbToGrayscale, TestGaussianBlur: their correctness parameters."""
    pts: List[Applied] = []
    for iname, img in images().items():
        def add(kernel: str, name: str, arg: str, values: Sequence[Any], tol: Tol) -> None:
            for v in values:
                pts.append(step(kernel, f"{arg}={v} on {iname}", img, name, {arg: v}, tol))

        add("adjust_brightness", "adjust_brightness", "brightness_factor", [0.5, 0.0, 1.0, 5.0], EXACT)
        add("adjust_contrast", "adjust_contrast", "contrast_factor", [0.1, 0.5, 1.0], ATOL1)
        add("adjust_saturation", "adjust_saturation", "saturation_factor", [0.1, 0.5, 1.0], ATOL1)
        add("adjust_hue", "adjust_hue", "hue_factor", [-0.5, -0.3, 0.0, 0.2, 0.5], ("mae", 2))
        add("adjust_sharpness", "adjust_sharpness", "sharpness_factor", [0.1, 0.5, 1.0], EXACT)
        add("posterize", "posterize", "bits", [1, 4, 8], EXACT)
        # TestSolarize: int(255 * factor) for uint8
        add("solarize", "solarize", "threshold", [float(int(255 * f)) for f in (0.0, 0.1, 0.5, 0.9, 1.0)], EXACT)
        pts.append(step("autocontrast", f"on {iname}", img, "autocontrast", {}, ATOL1))
        pts.append(step("invert", f"on {iname}", img, "invert", {}, EXACT))
        pts.append(step("rgb_to_grayscale", f"num_output_channels=3 on {iname}", img, "rgb_to_grayscale",
                        {"num_output_channels": 3}, ATOL1))
        pts.append(step("rgb_to_grayscale", f"num_output_channels=1 on {iname}", img, "rgb_to_grayscale",
                        {"num_output_channels": 1}, ATOL1, refuse=("num_output_channels",)))
        for gamma in (0.1, 0.5, 1.0):
            for gain in (0.1, 1.0, 2.0):
                pts.append(step("adjust_gamma", f"gamma={gamma} gain={gain} on {iname}", img, "adjust_gamma",
                                {"gamma": gamma, "gain": gain}, EXACT, refuse=("adjust_gamma",)))
    # TestEqualize: torch.testing.make_tensor((3, 117, 253), low, high) images
    for low, high in ((0, 64), (64, 192), (192, 256), (0, 1), (127, 128), (255, 256)):
        img = make_image((117, 253), low=low, high=high)
        pts.append(step("equalize", f"values in [{low}, {high})", img, "equalize", {}, EXACT))
    # TestGaussianBlur: arange images, (kernel_size, sigma); torchvision's
    # one-channel 26x28 image is the three channels here (stoker's samples
    # have three)
    for (c, h, w), ks, sigma in (((3, 10, 12), (3, 3), 0.8), ((3, 10, 12), (3, 3), 0.5), ((3, 10, 12), (3, 5), 0.8),
                                 ((3, 10, 12), (3, 5), 0.5), ((1, 26, 28), (23, 23), 1.7)):
        img = torch.arange(c * h * w, dtype=torch.uint8).reshape(h, w, c).permute(2, 0, 1).expand(3, h, w).contiguous()
        args = {"kernel_size": list(ks), "sigma": [sigma, sigma]}
        pts.append(step("gaussian_blur", f"{c}x{h}x{w} kernel_size={list(ks)} sigma={sigma}", img, "gaussian_blur",
                        args, ATOL1))
    apply_all(stoker_bin, pts)
    settle(pts, "colour kernels")


# -- flips, rotate, affine, erase (kernels after the decode) ---------------------

def aa_affine(transform_id: str, magnitude: float) -> Dict[str, Any]:
    """The affine that AutoAugment._apply_image_or_video_transform runs for
    ShearX/ShearY/TranslateX/TranslateY, as a trace's arguments."""
    shear, translate, center = [0.0, 0.0], [0.0, 0.0], None
    if transform_id == "ShearX":
        shear, center = [math.degrees(math.atan(magnitude)), 0.0], [0.0, 0.0]
    elif transform_id == "ShearY":
        shear, center = [0.0, math.degrees(math.atan(magnitude))], [0.0, 0.0]
    elif transform_id == "TranslateX":
        translate = [float(int(magnitude)), 0.0]
    else:
        translate = [0.0, float(int(magnitude))]
    return {"angle": 0.0, "translate": translate, "scale": 1.0, "shear": shear, "center": center}


def test_geometry_kernels(stoker_bin: Path) -> None:
    """TestHorizontalFlip, TestVerticalFlip, TestRotate, TestAffine,
    TestAutoAugmentTransforms.test_correctness_shear_translate and
    TestErase.test_functional_image_correctness."""
    pts: List[Applied] = []
    interps = ("nearest", "bilinear")
    for iname, img in images().items():
        for op in ("horizontal_flip", "vertical_flip"):
            pts.append(step(op, f"on {iname}", img, op, {}, EXACT))
        # TestRotate: angle [-10.9], center [None, [1.2, 4.9], [-3, 1]] (the
        # float and list values of its exhaustive grid), expand, fill
        for center in (None, [1.2, 4.9], [-3.0, 1.0]):
            for interp in interps:
                for expand in (False, True):
                    for fill in FILLS:
                        args = {"angle": -10.9, "interpolation": interp, "expand": expand, "center": center,
                                "fill": fill3(fill)}
                        want = (lambda img=img, center=center, interp=interp, fill=fill, expand=expand: F.rotate(
                            img, angle=-10.9, center=center, interpolation=InterpolationMode(interp), fill=fill,
                            expand=expand))
                        pts.append(step("rotate", f"center={center} {interp} expand={expand} fill={fill} on {iname}",
                                        img, "rotate", args, ("mae", 1 if interp == "nearest" else 6), want))
        # TestAffine: angle [-10.9], translate [[6.3, -0.6], [1, -3]],
        # scale [0.5], shear [35.6, [5.4, 21.8], [-47, 51]], center [None,
        # [1.2, 4.9], [-3, 1]], interpolation, fill
        for translate in ([6.3, -0.6], [1, -3]):
            for shear in (35.6, [5.4, 21.8], [-47, 51]):
                for center in (None, [1.2, 4.9], [-3, 1]):
                    for interp in interps:
                        for fill in FILLS:
                            args = {"angle": -10.9, "translate": [float(v) for v in translate], "scale": 0.5,
                                    "shear": [float(v) for v in (shear if isinstance(shear, list) else [shear, 0.0])],
                                    "interpolation": interp, "fill": fill3(fill),
                                    "center": None if center is None else [float(v) for v in center]}
                            want = (lambda img=img, translate=translate, shear=shear, center=center, interp=interp,
                                    fill=fill: F.affine(img, angle=-10.9, translate=translate, scale=0.5, shear=shear,
                                                        center=center, interpolation=InterpolationMode(interp),
                                                        fill=fill))
                            pts.append(step("affine", f"translate={translate} shear={shear} center={center} {interp} "
                                            f"fill={fill} on {iname}", img, "affine", args,
                                            ("mae", 2 if interp == "nearest" else 8), want))
        # TestAutoAugmentTransforms.test_correctness_shear_translate: the
        # fills are CORRECTNESS_FILLS as they are (not adapted to uint8)
        aa = T.AutoAugment()
        for tid in ("ShearX", "ShearY", "TranslateX", "TranslateY"):
            for magnitude in (0.3, -0.2, 0.0):
                mag = magnitude * min(img.shape[-2:]) if "Translate" in tid else magnitude
                for interp in interps:
                    for fill in (None, 0.5, [1, 0, 1], [0.1, 0.2, 0.3]):
                        args = {**aa_affine(tid, mag), "interpolation": interp, "fill": fill3(fill)}
                        want = (lambda img=img, tid=tid, mag=mag, interp=interp, fill=fill:
                                aa._apply_image_or_video_transform(img, transform_id=tid, magnitude=mag,
                                                                   interpolation=InterpolationMode(interp),
                                                                   fill={type(img): fill}))
                        tol: Tol = ("mae", 12 if interp == "nearest" else 5) if "Shear" in tid else ATOL1
                        pts.append(step(f"AutoAugment {tid[:-1]}", f"{tid} magnitude={mag:g} {interp} fill={fill} on "
                                        f"{iname}", img, "affine", args, tol, want))
    # TestErase: i=2, j=2, h=10, w=8, v=0 on make_image()
    img = make_image()
    pts.append(step("erase", "i=2 j=2 h=10 w=8 v=0", img, "erase", {"i": 2, "j": 2, "h": 10, "w": 8, "v": [0.0] * 3},
                    EXACT, lambda: F.erase(img, 2, 2, 10, 8, torch.tensor(0.0).reshape(-1, 1, 1))))
    apply_all(stoker_bin, pts)
    settle(pts, "flips, rotate, affine, erase")


# -- the geometry fused into the decode ---------------------------------------------

#: kernels.Interpolation's values, by name.
INTERP = {"nearest": 1, "bilinear": 0, "bicubic": 2}


def _four(padding: Sequence[float]) -> List[int]:
    p = [int(v) for v in padding]
    return {0: [0] * 4, 1: p * 4, 2: p * 2, 4: p}[len(p)]


def _fill(fill: Sequence[float]) -> List[float]:
    return [float(v) for v in fill] * (3 if len(fill) == 1 else 1) if fill else [0.0] * 3


def _hw(v: Any) -> List[int]:
    return [int(v), int(v)] if not isinstance(v, list) else [int(x) for x in v] * (2 if len(v) == 1 else 1)


def pipeline_ops(spec: pb.TransformSpec) -> List[Dict[str, Any]]:
    """The pipeline package's Ops (the driver's JSON) of a TransformSpec's
    geometry, argument for argument as its ops' FromArgs read them."""
    ops = []
    for o in spec.ops:
        kind, m = o.named.name, wire_args(o)
        noaa = m.get("antialias", True) is False
        resampling = {"Interp": INTERP[m.get("interpolation", "bilinear")], "NoAntialias": noaa}
        if kind == "RandomResizedCrop":
            ops.append({"Kind": kind, "Size": _hw(m["size"]),
                        "Args": {"Scale": m.get("scale", [0.08, 1.0]), "Ratio": m.get("ratio", [3 / 4, 4 / 3]), **resampling}})
        elif kind == "Resize":
            size = [int(m["size"]), 0] if not isinstance(m["size"], list) else _hw(m["size"])
            ops.append({"Kind": kind, "Size": size, "Args": resampling})
        elif kind == "CenterCrop":
            ops.append({"Kind": kind, "Size": _hw(m["size"])})
        elif kind == "Pad":
            ops.append({"Kind": kind, "Args": {"Padding": _four(m["padding"]), "Fill": _fill(m.get("fill") or [])}})
        elif kind == "RandomCrop":
            ops.append({"Kind": kind, "Size": _hw(m["size"]),
                        "Args": {"Padding": _four(m.get("padding") or []), "PadIfNeeded": m.get("pad_if_needed", False),
                                 "Fill": _fill(m.get("fill") or [])}})
        else:
            raise AssertionError(f"no geometry: {kind}")
    return ops


@dataclass
class Decoded(Point):
    img: Optional[torch.Tensor] = None
    tv: Any = None  # the torchvision transform of the point
    ops: List[Dict[str, Any]] = field(default_factory=list)
    index: int = 0
    want_crop: Optional[List[int]] = None
    trace: List[Any] = field(default_factory=list)


def convert(tv: Any) -> Tuple[Optional[pb.TransformSpec], str]:
    """from_torchvision's spec of a torchvision transform on a uint8 tensor
    (ToImage first: without it the converter takes the input for PIL, on
    which torchvision always antialiases), or its refusal."""
    try:
        return to_spec(from_torchvision(T.Compose([T.ToImage(), tv]))), ""
    except (ValueError, TypeError) as e:
        return None, str(e)


def run_driver(driver: Path, jobs: List[Dict[str, Any]], tmp: Path) -> List[Tuple[dict, Optional[torch.Tensor]]]:
    """Runs the geometry driver's jobs: each one's report and sample (CHW;
    None where the report is an error)."""
    (tmp / "jobs.json").write_text(json.dumps(jobs))
    env = dict(os.environ, STOKER_GEOMETRY_JOBS=str(tmp / "jobs.json"), STOKER_GEOMETRY_OUT=str(tmp / "out.bin"))
    r = subprocess.run([str(driver)], env=env, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, f"geometry driver failed:\n{r.stderr}"
    reports = [json.loads(line) for line in r.stdout.splitlines()]
    assert len(reports) == len(jobs)
    raw, off, out = (tmp / "out.bin").read_bytes(), 0, []
    for rep in reports:
        if rep.get("error"):
            out.append((rep, None))
            continue
        n = rep["h"] * rep["w"] * 3
        out.append((rep, torch.from_numpy(np.frombuffer(raw, np.uint8, n, off).copy()).reshape(rep["h"], rep["w"], 3)
                    .permute(2, 0, 1)))
        off += n
    assert off == len(raw)
    return out


def png(img: torch.Tensor, path: Path) -> str:
    from PIL import Image

    Image.fromarray(img.permute(1, 2, 0).contiguous().numpy()).save(path)
    return str(path)


def decode_all(driver: Path, points: Sequence[Decoded], tmp: Path) -> None:
    """Runs the points through the pipeline's decode (the geometry driver):
    each image a PNG, each point a "transform" job of its ops (a point
    refused by from_torchvision is not run)."""
    files: Dict[int, str] = {}
    jobs, run = [], []
    for p in points:
        if p.error:
            continue
        if id(p.img) not in files:
            files[id(p.img)] = png(p.img, tmp / f"img{len(files)}.png")
        job = {"file": files[id(p.img)], "op": "transform", "interpolation": "bilinear", "antialias": True,
               "ops": p.ops, "index": p.index, "scaling": "off"}
        if p.want_crop is not None:
            job["want_crop"] = p.want_crop
        jobs.append(job)
        run.append(p)
    for p, (rep, got) in zip(run, run_driver(driver, jobs, tmp)):
        p.error, p.got, p.trace = rep.get("error", ""), got, rep.get("trace", [])


def replay(img: torch.Tensor, trace: List[Any]) -> torch.Tensor:
    """torchvision's functional of each traced step, in order."""
    for name, args in trace:
        a = dict(args)
        if "interpolation" in a:
            a["interpolation"] = InterpolationMode(a["interpolation"])
        if name == "erase":
            a["v"] = torch.tensor(a["v"], dtype=torch.float32)[:, None, None]
        img = getattr(F, name)(img, **a)
    return img


def decoded(kernel: str, label: str, img: torch.Tensor, tv: Any, tol: Tol,
            want: Optional[Callable[[], torch.Tensor]] = None, refuse: Sequence[str] = (), index: int = 0,
            want_crop: Optional[List[int]] = None, extra: Sequence[Dict[str, Any]] = ()) -> Decoded:
    """A point decoded with the geometry from_torchvision makes of tv (and
    `extra` ops after it); want defaults to tv(img) under torch.manual_seed
    (unused: geometry points pass want)."""
    spec, err = convert(tv)
    p = Decoded(kernel, label, tol, want, refuse, img=img, tv=tv, index=index, want_crop=want_crop)
    if spec is None:
        p.error = err
    else:
        p.ops = pipeline_ops(spec) + list(extra)
    return p


def test_geometry_decode(driver: Path, tmp_path: Path) -> None:
    """TestResize, TestResizedCrop, TestCenterCrop, TestCrop, TestPad:
    their correctness parameters (and, for resize and resized_crop, the
    interpolations and antialias of test_kernel_image), decoded by the
    pipeline from a PNG of torchvision's image."""
    pts: List[Decoded] = []
    NE = InterpolationMode.NEAREST_EXACT
    modes = [InterpolationMode.NEAREST, NE, InterpolationMode.BILINEAR, InterpolationMode.BICUBIC]
    img = make_image((17, 11))
    # TestResize: OUTPUT_SIZES 17 and [12, 13] (the type variants are one
    # point), max_size = size + 1 for a single size, antialias. stoker's
    # batches have one size: Resize(17) of the shorter side is followed by
    # a CenterCrop of its own output size (26x17 here), which crops nothing
    for size in (17, [12, 13]):
        for max_size in ((None, 18) if size == 17 else (None,)):
            for mode in modes:
                for aa in (True, False):
                    refuse = ["max_size"] if max_size else ["nearest-exact"] if mode is NE else []
                    tv = T.Resize(size, interpolation=mode, max_size=max_size, antialias=aa)
                    if size == 17:
                        tv = T.Compose([tv, T.CenterCrop((26, 17))])
                    pts.append(decoded("resize", f"size={size} max_size={max_size} {mode.value} antialias={aa}", img,
                                       tv, ATOL1, lambda tv=tv: tv(img), refuse))
    # TestResizedCrop: top=2 left=2 height=5 width=7 to (19, 32); the box
    # is given to the driver's resized_crop job (below), the interpolation
    # checked by from_torchvision's RandomResizedCrop of it
    for mode in modes:
        for aa in (True, False):
            tv = T.RandomResizedCrop((19, 32), interpolation=mode, antialias=aa)
            p = decoded("resized_crop", f"{mode.value} antialias={aa}", img, tv, ATOL1,
                        lambda mode=mode, aa=aa: F.resized_crop(img, 2, 2, 5, 7, [19, 32], interpolation=mode,
                                                                antialias=aa), ["nearest-exact"] if mode is NE else [])
            p.ops = []  # not a "transform" job
            pts.append(p)
    # TestCenterCrop: OUTPUT_SIZES on 17x11
    for size in ([3, 5], [5, 3], [4, 4], [21, 9], [13, 15], [19, 14], 3, [4], [5], [17, 11]):
        tv = T.CenterCrop(size)
        pts.append(decoded("center_crop", f"output_size={size}", img, tv, EXACT, lambda tv=tv: tv(img)))
    # TestCrop: CORRECTNESS_CROP_KWARGS on 21x11: F.crop pads with zeros
    # where the box leaves the image; stoker's RandomCrop of that padding at
    # that position
    img21 = make_image((21, 11))
    for top, left, h, w in ((5, 5, 10, 5), (-5, -5, 30, 20), (-5, -5, 30, 10), (-5, 5, 30, 10), (-5, -5, 20, 20),
                            (5, -5, 20, 20), (-5, -5, 20, 10), (-5, 5, 20, 10), (5, -5, 20, 10), (5, 5, 20, 10)):
        pad = [max(0, -left), max(0, -top), max(0, left + w - 11), max(0, top + h - 21)]
        tv = T.RandomCrop((h, w), padding=pad)
        pts.append(decoded("crop", f"top={top} left={left} height={h} width={w}", img21, tv, EXACT,
                           lambda top=top, left=left, h=h, w=w: F.crop(img21, top, left, h, w),
                           want_crop=[top + pad[1], left + pad[0]]))
    # TestPad: CORRECTNESS_PADDINGS x (constant with each fill, or
    # symmetric / edge / reflect); stoker pads only before a crop, so each
    # is Pad then a CenterCrop of the padded size (which crops nothing)
    for padding in (1, [1, 2], [1, 2, 3, 4]):
        l, t, r, b = _four([padding] if isinstance(padding, int) else padding)
        for mode, fill in [("constant", f) for f in FILLS] + [(m, None) for m in ("symmetric", "edge", "reflect")]:
            tv = T.Compose([T.Pad(padding, fill=0 if fill is None else fill, padding_mode=mode),
                            T.CenterCrop((17 + t + b, 11 + l + r))])
            pts.append(decoded("pad", f"padding={padding} {mode} fill={fill}", img, tv, EXACT,
                               lambda padding=padding, mode=mode, fill=fill: F.pad(img, padding, fill=fill,
                                                                                   padding_mode=mode),
                               ["padding_mode"] if mode != "constant" else []))
    decode_all(driver, [p for p in pts if p.kernel != "resized_crop"], tmp_path)
    rc = [p for p in pts if p.kernel == "resized_crop" and not p.error]
    _resized_crop_jobs(driver, rc, tmp_path)
    settle(pts, "geometry (decode)")


def _resized_crop_jobs(driver: Path, points: List[Decoded], tmp: Path) -> None:
    """resized_crop at TestResizedCrop's box: the driver's explicit job."""
    path = png(points[0].img, tmp / "rc.png")
    jobs = [{"file": path, "op": "resized_crop", "top": 2, "left": 2, "height": 5, "width": 7, "size": [19, 32],
             "interpolation": p.tv.interpolation.value, "antialias": p.tv.antialias, "scaling": "off"} for p in points]
    for p, (rep, got) in zip(points, run_driver(driver, jobs, tmp)):
        p.error, p.got = rep.get("error", ""), got


# -- the draws torchvision's tests check -------------------------------------------

SEEDS = 5  # torchvision's seeds 0..4: stoker's samples 0..4


def draws(stoker_bin: Path, tv: Any, size: Tuple[int, int] = (17, 11), n: int = SEEDS) -> Tuple[List[List[Any]], str]:
    """stoker's traces of samples 0..n-1 (``stoker ops draw``) of
    from_torchvision(CenterCrop(size) then tv) on a size image, the
    CenterCrop (which crops nothing: stoker's batches need a geometry op
    first) left out; or the converter's refusal."""
    spec, err = convert(T.Compose([T.CenterCrop(size), tv]))
    if spec is None:
        return [], err
    js = json_format.MessageToJson(spec, indent=None)
    r = subprocess.run([str(stoker_bin), "ops", "draw", "--spec", js, "--n", str(n), "--source",
                        f"{size[1]}x{size[0]}"], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        return [], r.stderr.strip()
    return [[s for s in json.loads(line) if s[0] != "center_crop"] for line in r.stdout.splitlines()], ""


def in_range(v: float, lo_hi: Sequence[float]) -> bool:
    return lo_hi[0] - 1e-9 <= v <= lo_hi[1] + 1e-9


def test_sampling(stoker_bin: Path) -> None:
    """TestColorJitter.test_transform_correctness, TestErase.
    test_transform_image_correctness, TestAffine and TestRotate.
    test_transform_image_correctness: torchvision's transforms converted by
    from_torchvision; each of stoker's draws in the transform's range, and
    its pixels torchvision's at the drawn arguments."""
    pts: List[Applied] = []
    off: List[str] = []  # draws out of range
    img = make_image()

    def replayed(kernel: str, label: str, trace: List[Any], tol: Tol) -> None:
        pts.append(Applied(kernel, label, tol, lambda: replay(img, trace), img=img, trace=trace))

    def refused(kernel: str, label: str, err: str, names: Sequence[str]) -> None:
        for k in range(SEEDS):
            pts.append(Applied(kernel, f"{label} seed {k}", EXACT, None, names, error=err, img=img))

    # ColorJitter: brightness, contrast, saturation, hue each None, a number
    # or a range (81 transforms); mean |diff| < 2
    names = {"adjust_brightness": "brightness", "adjust_contrast": "contrast", "adjust_saturation": "saturation",
             "adjust_hue": "hue"}
    for b in (None, 0.1, (0.2, 0.3)):
        for c in (None, 0.4, (0.5, 0.6)):
            for s in (None, 0.7, (0.8, 0.9)):
                for h in (None, 0.3, (-0.1, 0.2)):
                    tv = T.ColorJitter(brightness=b, contrast=c, saturation=s, hue=h)
                    label = f"brightness={b} contrast={c} saturation={s} hue={h}"
                    traces, err = draws(stoker_bin, tv)
                    assert not err, f"ColorJitter {label}: {err}"
                    want = {n for n, a in names.items() if getattr(tv, a) is not None}
                    for k, tr in enumerate(traces):
                        got = [n for n, _ in tr]
                        if sorted(got) != sorted(want):
                            off.append(f"ColorJitter {label} seed {k}: steps {got}, want each of {sorted(want)} once")
                        for n, a in tr:
                            (v,) = a.values()
                            if not in_range(v, getattr(tv, names[n])):
                                off.append(f"ColorJitter {label} seed {k}: {n} {v} outside {getattr(tv, names[n])}")
                        replayed("ColorJitter", f"{label} seed {k}", tr, ("mae", 2))
    # RandomErasing(p=1): scale, ratio, value each alone; exact
    for param, values in (("scale", [(0.1, 0.2), [0.0, 1.0]]), ("ratio", [(0.3, 0.7), [0.1, 5.0]]),
                          ("value", [0, 0.5, (0, 1, 0), [-0.2, 0.0, 1.3], "random"])):
        for value in values:
            tv = T.RandomErasing(p=1, **{param: value})
            label = f"{param}={value}"
            traces, err = draws(stoker_bin, tv)
            if err:
                refused("RandomErasing", label, err, ["random"] if value == "random" else ["value"])
                continue
            for k, tr in enumerate(traces):
                for n, a in tr:
                    i, j, eh, ew = a["i"], a["j"], a["h"], a["w"]
                    area, (lo, hi), (rlo, rhi) = 17 * 11, tv.scale, tv.ratio
                    # torchvision: h = round(sqrt(A r)), w = round(sqrt(A / r)), A in area * scale, r in ratio,
                    # h < 17 and w < 11
                    fits = (0 < eh < 17 and 0 < ew < 11 and i + eh <= 17 and j + ew <= 11 and i >= 0 and j >= 0
                            and (eh - .5) * (ew - .5) <= hi * area and (eh + .5) * (ew + .5) >= lo * area
                            and (eh - .5) / (ew + .5) <= rhi and (eh + .5) / (ew - .5) >= rlo)
                    if n != "erase" or not fits:
                        off.append(f"RandomErasing {label} seed {k}: {n} {a} is no box torchvision draws")
                v = torch.tensor(tv.value, dtype=torch.float32)[:, None, None]
                want = (lambda tr=tr, v=v: img if not tr else F.erase(img, *[tr[0][1][x] for x in "ijhw"], v=v))
                pts.append(Applied("RandomErasing", f"{label} seed {k}", EXACT, want, img=img, trace=tr))
    # RandomAffine(degrees=30, translate=(0.5, 0.5), scale=(0.75, 1.25),
    # shear=(12, 30, -17, 5)) and RandomRotation(degrees=30): center,
    # interpolation, (expand,) fill
    for center in (None, [1.2, 4.9], [-3, 1]):
        for mode in (InterpolationMode.NEAREST, InterpolationMode.BILINEAR):
            for fill in FILLS:
                tv = T.RandomAffine(degrees=30, translate=(0.5, 0.5), scale=(0.75, 1.25), shear=(12, 30, -17, 5),
                                    center=center, interpolation=mode, fill=fill)
                label = f"center={center} {mode.value} fill={fill}"
                traces, err = draws(stoker_bin, tv)
                assert not err, f"RandomAffine {label}: {err}"
                for k, tr in enumerate(traces):
                    (n, a), = tr
                    if not (n == "affine" and in_range(a["angle"], (-30, 30)) and abs(a["translate"][0]) <= 6
                            and abs(a["translate"][1]) <= 9 and in_range(a["scale"], (0.75, 1.25))
                            and in_range(a["shear"][0], (12, 30)) and in_range(a["shear"][1], (-17, 5))
                            and a["interpolation"] == mode.value and a["center"] == center
                            and a["fill"] == fill3(fill)):
                        off.append(f"RandomAffine {label} seed {k}: {n} {a} is not a draw of {tv}")
                    replayed("RandomAffine", f"{label} seed {k}", tr, ("mae", 2 if mode.value == "nearest" else 8))
                for expand in (False, True):
                    tv = T.RandomRotation(degrees=30, center=center, interpolation=mode, expand=expand, fill=fill)
                    label = f"center={center} {mode.value} expand={expand} fill={fill}"
                    traces, err = draws(stoker_bin, tv)
                    if err:
                        refused("RandomRotation", label, err, ["expand"])
                        continue
                    for k, tr in enumerate(traces):
                        (n, a), = tr
                        if not (n == "rotate" and in_range(a["angle"], (-30, 30)) and a["center"] == center
                                and a["interpolation"] == mode.value and a["fill"] == fill3(fill)):
                            off.append(f"RandomRotation {label} seed {k}: {n} {a} is not a draw of {tv}")
                        replayed("RandomRotation", f"{label} seed {k}", tr,
                                 ("mae", 1 if mode.value == "nearest" else 6))
    apply_all(stoker_bin, [p for p in pts if not p.error])
    assert not off, f"{len(off)} draws out of range:\n  " + "\n  ".join(off[:30])
    settle(pts, "sampling (draws replayed)")


def test_sampling_decode(driver: Path, tmp_path: Path) -> None:
    """TestResizedCrop.test_transform (scale, ratio; v1's tolerance, atol
    1) and TestCrop.test_transform_image_correctness (size, fill,
    padding_mode with pad_if_needed; exact), seeds 0..4 as samples 0..4:
    each crop inside the (padded) image, the pixels torchvision's
    functional at the traced arguments."""
    pts: List[Decoded] = []
    img = make_image((17, 11))
    for param, value in (("scale", (0.1, 0.2)), ("scale", [0.0, 1.0]), ("ratio", (0.3, 0.7)), ("ratio", [0.1, 5.0])):
        tv = T.RandomResizedCrop((19, 32), antialias=True, **{param: value})
        for k in range(SEEDS):
            pts.append(decoded("RandomResizedCrop", f"{param}={value} seed {k}", img, tv, ATOL1, index=k))
    img21 = make_image((21, 11))
    for param, value in ([("size", s) for s in ((10, 5), (25, 15), (25, 5), (10, 15))] + [("fill", f) for f in FILLS]
                         + [("padding_mode", m) for m in ("constant", "edge", "reflect", "symmetric")]):
        kw: Dict[str, Any] = {"size": (25, 15), param: value}
        tv = T.RandomCrop(pad_if_needed=True, **kw)
        for k in range(SEEDS):
            pts.append(decoded("RandomCrop", f"{param}={value} seed {k}", img21, tv, EXACT, index=k,
                               refuse=["padding_mode"] if param == "padding_mode" and value != "constant" else []))
    decode_all(driver, pts, tmp_path)
    off = []
    for p in pts:
        if p.error:
            continue
        p.want = lambda p=p: replay(p.img, p.trace)
        _, h, w = p.img.shape
        for n, a in p.trace:
            if n == "resized_crop":
                ok = (a["top"] >= 0 and a["left"] >= 0 and a["height"] >= 1 and a["width"] >= 1
                      and a["top"] + a["height"] <= h and a["left"] + a["width"] <= w and a["size"] == [19, 32])
            elif n == "pad":
                # pad_if_needed: each side short of the crop by d, padded by d on both ends
                dw, dh = max(0, p.tv.size[1] - w), max(0, p.tv.size[0] - h)
                ok = a["padding"] == [dw, dh, dw, dh]
                h, w = h + a["padding"][1] + a["padding"][3], w + a["padding"][0] + a["padding"][2]
            else:
                ok = (n == "crop" and [a["height"], a["width"]] == list(p.tv.size) and 0 <= a["top"] <= h - a["height"]
                      and 0 <= a["left"] <= w - a["width"])
            if not ok:
                off.append(f"{p.kernel} {p.label}: {n} {a} is not a draw of {p.tv}")
    assert not off, f"{len(off)} draws out of range:\n  " + "\n  ".join(off[:30])
    settle(pts, "sampling (decoded)")


def test_draw_bounds(stoker_bin: Path) -> None:
    """TestAffine and TestRotate.test_transform_get_params_bounds (seeds
    0..9: samples 0..9) and TestGaussianBlur.test__get_params: every draw
    within the bounds those tests assert, for every transform of their
    grids."""
    off: List[str] = []
    n_draws = 0
    img_w = 11  # make_image(): 17x11
    for degrees in (30, (-15, 20)):
        lo_hi = (-degrees, degrees) if isinstance(degrees, int) else degrees
        for translate in (None, (0.5, 0.5)):
            for scale in (None, (0.75, 1.25)):
                for shear in (None, (12, 30, -17, 5), 10, (-5, 12)):
                    tv = T.RandomAffine(degrees=degrees, translate=translate, scale=scale, shear=shear)
                    traces, err = draws(stoker_bin, tv, n=10)
                    assert not err, f"{tv}: {err}"
                    for k, tr in enumerate(traces):
                        n_draws += 1
                        (name, a), = tr
                        tx, ty = a["translate"]
                        sx, sy = a["shear"]
                        ok = name == "affine" and in_range(a["angle"], lo_hi)
                        if translate is not None:
                            wm, hm = int(round(translate[0] * img_w)), int(round(translate[1] * 17))
                            ok = ok and -wm <= tx <= wm and -hm <= ty <= hm
                        else:
                            ok = ok and (tx, ty) == (0, 0)
                        ok = ok and (in_range(a["scale"], scale) if scale else a["scale"] == 1.0)
                        if shear is None:
                            ok = ok and (sx, sy) == (0, 0)
                        elif isinstance(shear, int):
                            ok = ok and in_range(sx, (-shear, shear)) and sy == 0
                        elif len(shear) == 2:
                            ok = ok and in_range(sx, shear) and sy == 0
                        else:
                            ok = ok and in_range(sx, shear[:2]) and in_range(sy, shear[2:])
                        if not ok:
                            off.append(f"{tv} seed {k}: {a}")
        tv = T.RandomRotation(degrees=degrees)
        traces, err = draws(stoker_bin, tv, n=10)
        assert not err, f"{tv}: {err}"
        for k, tr in enumerate(traces):
            n_draws += 1
            (name, a), = tr
            if not (name == "rotate" and in_range(a["angle"], lo_hi)):
                off.append(f"{tv} seed {k}: {a}")
    for sigma in (10.0, [10.0, 12.0], (10, 12.0), [10]):
        tv = T.GaussianBlur(3, sigma=sigma)
        traces, err = draws(stoker_bin, tv, n=10)
        assert not err, f"{tv}: {err}"
        for k, tr in enumerate(traces):
            n_draws += 1
            (name, a), = tr
            s0, s1 = a["sigma"]
            if isinstance(sigma, float) or len(sigma) == 1:
                ok = s0 == s1 == float(sigma if isinstance(sigma, float) else sigma[0])
            else:
                ok = in_range(s0, sigma) and in_range(s1, sigma) and s0 == s1
            if not (ok and name == "gaussian_blur" and a["kernel_size"] == [3, 3]):
                off.append(f"{tv} seed {k}: {a}")
    print(f"draw bounds: {n_draws} draws of {32 + 2 + 4} transforms, {len(off)} out of bounds")
    assert not off, f"{len(off)} draws out of torchvision's bounds:\n  " + "\n  ".join(off[:30])
