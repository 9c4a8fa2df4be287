"""How far stoker's timm RandAugment geometric ops are from timm's own.

timm's Rotate, ShearX/Y and TranslateXRel/YRel (timm.data.auto_augment)
are PIL affine transforms; stoker runs them as torchvision's functional
rotate and affine (the trace its TimmRandAugment draws: see
pipeline/policy/timm.go). This applies both to the same pixels: the committed
photos (testdata/photos), centre-cropped to 224 x 224, at timm's
arguments for a magnitude (DeiT's m9 by default: 27 degrees, shear 0.27,
translation 0.405 of the side), both signs, with the fill timm's
create_transform passes, bilinear and bicubic; stoker's side through
`stoker ops apply` (no decode, no randomness). It prints, per op and
interpolation, the share of pixels with a channel off by more than 2 and
by more than 16 levels (and that share on the worst photo), the mean
absolute difference, the largest, and the largest away from the edge of
the fill (more than 2 px from any pixel that PIL's own warp of a white
image mixes with the fill).

    go build -o bin/stoker ./cmd/stoker
    .venv/bin/python bench/timm_geometry.py [--magnitude 9] [--stoker bin/stoker]

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

REPO = Path(__file__).resolve().parent.parent
FILL = (124, 116, 104)  # timm's IMAGENET_DEFAULT_MEAN as create_transform passes it
SIZE = 224


def photos() -> list:
    out = []
    for f in sorted((REPO / "testdata" / "photos").glob("*/*.jpg")):
        im = Image.open(f).convert("RGB")
        w, h = im.size
        left, top = (w - SIZE) // 2, (h - SIZE) // 2
        out.append(im.crop((left, top, left + SIZE, top + SIZE)))
    return out


def cases(m: float):
    """(name, timm's op and argument, stoker's trace step) for each op and
    sign at magnitude m, as timm's level functions and stoker's draw
    (pipeline/policy/timm.go) compute them."""
    deg = m / 10 * 30
    shear = m / 10 * 0.3
    pct = m / 10 * 0.45
    for s in (1, -1):
        yield "Rotate", (aa.rotate, s * deg), ("rotate", {"angle": s * deg, "expand": False, "center": None})
        sd = math.degrees(math.atan(s * shear))
        for name, fn, sh in (("ShearX", aa.shear_x, [sd, 0.0]), ("ShearY", aa.shear_y, [0.0, sd])):
            yield name, (fn, s * shear), ("affine", {"angle": 0.0, "translate": [0.0, 0.0], "scale": 1.0,
                                                      "shear": sh, "center": [0.0, 0.0]})
        for name, fn, tr in (("TranslateXRel", aa.translate_x_rel, [-s * pct * SIZE, 0.0]),
                             ("TranslateYRel", aa.translate_y_rel, [0.0, -s * pct * SIZE])):
            yield name, (fn, s * pct), ("affine", {"angle": 0.0, "translate": tr, "scale": 1.0,
                                                    "shear": [0.0, 0.0], "center": None})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--magnitude", type=float, default=9)
    ap.add_argument("--stoker", default=str(REPO / "bin" / "stoker"))
    a = ap.parse_args()
    imgs = photos()
    runs, lines = [], []
    for interp, resample in (("bilinear", Image.BILINEAR), ("bicubic", Image.BICUBIC)):
        for name, (fn, arg), (step, kw) in cases(a.magnitude):
            for im in imgs:
                want = np.asarray(fn(im, arg, fillcolor=FILL, resample=resample))
                kw = dict(kw, interpolation=interp, fill=[float(v) for v in FILL])
                chw = np.ascontiguousarray(np.asarray(im).transpose(2, 0, 1))
                lines.append(json.dumps({"w": SIZE, "h": SIZE, "pix": base64.b64encode(chw.tobytes()).decode(),
                                         "trace": [[step, kw]]}))
                white = np.asarray(fn(Image.new("RGB", im.size, (255, 255, 255)), arg, fillcolor=(0, 0, 0),
                                      resample=resample)).min(axis=2) < 255
                edge = np.zeros_like(white)
                for dy in range(-2, 3):
                    for dx in range(-2, 3):
                        edge |= np.roll(np.roll(white, dy, 0), dx, 1)
                runs.append((name, interp, want, edge))
    r = subprocess.run([a.stoker, "ops", "apply"], input="\n".join(lines) + "\n", capture_output=True, text=True,
                       check=True)
    got = r.stdout.splitlines()
    assert len(got) == len(runs), (len(got), len(runs), r.stderr)
    stats: dict = {}
    for (name, interp, want, edge), line in zip(runs, got):
        res = json.loads(line)
        if "error" in res:
            sys.exit(f"{name} {interp}: stoker: {res['error']}")
        px = np.frombuffer(base64.b64decode(res["pix"]), np.uint8).reshape(3, SIZE, SIZE).transpose(1, 2, 0)
        d = np.abs(px.astype(np.int16) - want.astype(np.int16))
        s = stats.setdefault((name, interp), {"n": 0, "gt2": 0, "gt16": 0, "sum": 0, "vals": 0, "max": 0,
                                              "worst": 0.0, "inner": 0})
        per_px = d.max(axis=2)
        s["n"] += per_px.size
        s["gt2"] += int((per_px > 2).sum())
        s["gt16"] += int((per_px > 16).sum())
        s["sum"] += int(d.sum())
        s["vals"] += d.size
        s["max"] = max(s["max"], int(d.max()))
        s["worst"] = max(s["worst"], float((per_px > 2).mean()))
        s["inner"] = max(s["inner"], int(per_px[~edge].max()))
    print(f"timm {getattr(sys.modules['timm'], '__version__', '?')}, PIL {Image.__version__}, "
          f"{len(imgs)} photos of testdata/photos at {SIZE}x{SIZE}, magnitude {a.magnitude:g}, both signs")
    print(f"{'op':<14} {'interp':<9} {'px >2':>7} {'worst':>7} {'px >16':>7} {'mean':>6} {'max':>4} {'inner max':>9}")
    for (name, interp), s in stats.items():
        print(f"{name:<14} {interp:<9} {100 * s['gt2'] / s['n']:6.2f}% {100 * s['worst']:6.2f}% "
              f"{100 * s['gt16'] / s['n']:6.2f}% {s['sum'] / s['vals']:6.3f} {s['max']:4d} {s['inner']:9d}")


if __name__ == "__main__":
    main()
