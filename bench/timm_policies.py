"""How far stoker's timm AutoAugment and AugMix are from timm's own, on
the same draws.

stoker's TimmAutoAugment and TimmAugMix draw what timm's objects draw (in
distribution: python/tests/test_from_objects.py) and run each op as
torchvision's functional kernels, where timm runs PIL's. This takes the
traces stoker draws (`stoker ops draw`) for the committed photos
(testdata/photos) centre-cropped to 224 x 224, runs them with stoker's
kernels (`stoker ops apply`) and with timm's own op functions
(timm.data.auto_augment: each traced step as the PIL op timm applies for
it; AugMix's sum in float32 numpy and its PIL Image.blend, as timm's
AugMixAugment._apply_basic, or _apply_blended's blend per chain), and
prints per policy the share of pixels with
a channel off by more than 2 and by more than 16 levels (and that share
on the worst sample), the mean absolute difference and the largest.

    go build -o bin/stoker ./cmd/stoker
    .venv/bin/python bench/timm_policies.py [--samples 5] [--stoker bin/stoker]

timm is a test dependency (python/requirements-dev.txt); the numbers are in
docs/transforms.md ("Where stoker differs").
"""

from __future__ import annotations

import argparse
import base64
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
from PIL import Image
from timm.data import auto_augment as aa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))
from stoker import transforms as T  # noqa: E402
from stoker.v1 import stoker_pb2 as pb  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
FILL = (124, 116, 104)  # timm's IMAGENET_DEFAULT_MEAN as create_transform passes it
SIZE = 224
POLICIES = [("original", "bilinear"), ("v0r-mstd0.5", "bicubic"), ("3a", "bilinear"), ("augmix-m3-w3", "bilinear"),
            ("augmix-m5-w4-d2", "bicubic"), ("augmix-m3-w3-b1", "bilinear")]
RESAMPLE = {"bilinear": Image.BILINEAR, "bicubic": Image.BICUBIC}


def photos() -> list:
    out = []
    for f in sorted((REPO / "testdata" / "photos").glob("*/*.jpg")):
        im = Image.open(f).convert("RGB")
        w, h = im.size
        left, top = (w - SIZE) // 2, (h - SIZE) // 2
        out.append(im.crop((left, top, left + SIZE, top + SIZE)))
    return out


def timm_step(img: Image.Image, name: str, a: dict) -> Image.Image:
    """The PIL op timm applies for a traced step."""
    kw = dict(fillcolor=FILL, resample=RESAMPLE.get(a.get("interpolation"), Image.BILINEAR))
    if name == "rotate":
        return aa.rotate(img, a["angle"], **kw)
    if name == "affine":
        sx, sy = a["shear"]
        tx, ty = a["translate"]
        if sx:
            return aa.shear_x(img, math.tan(math.radians(sx)), **kw)
        if sy:
            return aa.shear_y(img, math.tan(math.radians(sy)), **kw)
        return aa.translate_x_abs(img, -tx, **kw) if tx else aa.translate_y_abs(img, -ty, **kw)
    simple = {"adjust_saturation": (aa.color, "saturation_factor"), "adjust_contrast": (aa.contrast, "contrast_factor"),
              "adjust_brightness": (aa.brightness, "brightness_factor"),
              "adjust_sharpness": (aa.sharpness, "sharpness_factor"), "posterize": (aa.posterize, "bits"),
              "solarize": (aa.solarize, "threshold")}
    if name in simple:
        fn, key = simple[name]
        return fn(img, a[key])
    if name == "gaussian_blur":  # 3a's GaussianBlurRand: PIL's GaussianBlur of that radius
        from PIL import ImageFilter
        return img.filter(ImageFilter.GaussianBlur(radius=a["sigma"][0]))
    if name == "solarize_add":
        return aa.solarize_add(img, a["addition"], thresh=a["threshold"])
    return {"autocontrast": aa.auto_contrast, "equalize": aa.equalize, "invert": aa.invert}[name](img)


def timm_replay(img: Image.Image, steps: list) -> np.ndarray:
    """A trace run with timm's ops and AugMix's arithmetic."""
    orig, mixed, weight, run = img, None, None, None
    for name, a in steps:
        if name == "augmix_begin":
            orig, mixed, weight, run = img, np.zeros((SIZE, SIZE, 3), np.float32), None, img
        elif name == "augmix_fold":  # blended: _apply_blended's Image.blend per chain
            run = img = Image.blend(run, img, np.float32(a["weight"]))
        elif name in ("augmix_chain", "augmix_end"):
            if weight is not None:
                mixed += weight * np.asarray(img, dtype=np.float32)
            weight = np.float32(a["weight"]) if name == "augmix_chain" else None
            if name == "augmix_chain":
                img = orig
            else:
                np.clip(mixed, 0, 255.0, out=mixed)
                img = Image.fromarray(mixed.astype(np.uint8))
        elif name == "augmix_blend":
            img = Image.blend(orig, img, np.float32(a["weight"]))
        else:
            img = timm_step(img, name, a)
    return np.asarray(img)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--samples", type=int, default=5, help="draws per photo and policy")
    ap.add_argument("--stoker", default=str(REPO / "bin" / "stoker"))
    args = ap.parse_args()
    imgs = photos()
    print(f"timm {getattr(sys.modules['timm'], '__version__', '?')}, PIL {Image.__version__}, {len(imgs)} photos "
          f"of testdata/photos at {SIZE}x{SIZE}, {args.samples} draws each")
    print(f"{'policy':<18} {'interp':<9} {'px >2':>7} {'median':>7} {'worst':>7} {'px >16':>7} {'mean':>6} {'max':>4} "
          f"{'same':>5}")
    for config, interp in POLICIES:
        op = (T.timm_aug_mix if config.startswith("augmix") else T.timm_auto_augment)(config, interpolation=interp)
        spec = pb.TransformSpec(ops=[pb.Op(center_crop=pb.CenterCrop(height=SIZE)), op.to_proto()])
        from google.protobuf import json_format
        n = len(imgs) * args.samples
        r = subprocess.run([args.stoker, "ops", "draw", "--spec", json_format.MessageToJson(spec, indent=None),
                            "--n", str(n), "--seed", "7", "--source", f"{SIZE}x{SIZE}"],
                           capture_output=True, text=True, check=True)
        traces = [[(s, a) for s, a in json.loads(line) if s != "center_crop"] for line in r.stdout.splitlines()]
        lines = []
        for k, steps in enumerate(traces):
            chw = np.ascontiguousarray(np.asarray(imgs[k % len(imgs)]).transpose(2, 0, 1))
            lines.append(json.dumps({"w": SIZE, "h": SIZE, "pix": base64.b64encode(chw.tobytes()).decode(),
                                     "trace": [list(s) for s in steps]}))
        r = subprocess.run([args.stoker, "ops", "apply"], input="\n".join(lines) + "\n", capture_output=True,
                           text=True, check=True)
        got = r.stdout.splitlines()
        assert len(got) == n, (len(got), n, r.stderr)
        gt2 = gt16 = total = 0
        dsum = dvals = dmax = 0
        shares = []
        for k, (steps, line) in enumerate(zip(traces, got)):
            res = json.loads(line)
            if "error" in res:
                sys.exit(f"{config}: stoker: {res['error']}")
            px = np.frombuffer(base64.b64decode(res["pix"]), np.uint8).reshape(3, SIZE, SIZE).transpose(1, 2, 0)
            want = timm_replay(imgs[k % len(imgs)], steps)
            d = np.abs(px.astype(np.int16) - want.astype(np.int16))
            per_px = d.max(axis=2)
            gt2 += int((per_px > 2).sum())
            gt16 += int((per_px > 16).sum())
            total += per_px.size
            dsum += int(d.sum())
            dvals += d.size
            dmax = max(dmax, int(d.max()))
            shares.append(float((per_px > 2).mean()))
        print(f"{config:<18} {interp:<9} {100 * gt2 / total:6.2f}% {100 * float(np.median(shares)):6.2f}% "
              f"{100 * max(shares):6.2f}% {100 * gt16 / total:6.2f}% {dsum / dvals:6.3f} {dmax:4d} "
              f"{100 * sum(x == 0 for x in shares) / len(shares):4.0f}%")

    # 3a's GaussianBlurRand alone: PIL's GaussianBlur (box blurs, edges
    # extended) against stoker's gaussian_blur (reflected edges).
    print(f"\n{'blur radius':<12} {'taps':>4} {'px >2':>7} {'max':>4} {'inside max':>10}")
    for radius in (0.1, 0.3, 0.5, 1.0, 1.5, 2.0):
        k = 2 * math.ceil(3 * radius) + 1
        lines = [json.dumps({"w": SIZE, "h": SIZE, "trace": [["gaussian_blur", {"kernel_size": [k, k],
                                                                                "sigma": [radius, radius]}]],
                             "pix": base64.b64encode(np.ascontiguousarray(np.asarray(im).transpose(2, 0, 1))
                                                     .tobytes()).decode()}) for im in imgs]
        r = subprocess.run([args.stoker, "ops", "apply"], input="\n".join(lines) + "\n", capture_output=True,
                           text=True, check=True)
        ds = []
        for im, line in zip(imgs, r.stdout.splitlines()):
            px = np.frombuffer(base64.b64decode(json.loads(line)["pix"]), np.uint8).reshape(3, SIZE, SIZE)
            want = np.asarray(timm_step(im, "gaussian_blur", {"sigma": [radius, radius]}))
            ds.append(np.abs(px.transpose(1, 2, 0).astype(np.int16) - want.astype(np.int16)).max(axis=2))
        d = np.stack(ds)
        print(f"{radius:<12g} {k:>4} {100 * (d > 2).mean():6.2f}% {int(d.max()):4d} {int(d[:, k:-k, k:-k].max()):10d}")


if __name__ == "__main__":
    main()
