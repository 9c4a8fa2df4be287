#!/usr/bin/env python3
"""Large photos for `make bench-peers LARGE=1`, made from the committed
photos (testdata/photos), so that a clone can run it: each image is a camera
or wallpaper size of 8 to 20 MP (SIZES), tiled with upscaled crops of the
committed photos (bicubic, 1.5-3x) and sensor-like noise, so that its bytes
per pixel are a real photo's, not a smooth upscale's. Every second image is
progressive (PIL's progressive JPEG), the others baseline; 4:2:0 at quality
90-97 (0.2-0.5 bytes a pixel, as a phone's photos). An ImageFolder:
OUT/<class>/<n>.jpg, the class that of the photo the first tile came from.
Deterministic given --seed (the same bytes from the same Pillow).

With --coco, COCO's sizes instead (640 x 480 and kin, COCOSIZES), every
image baseline: the COCO-sized photos the vision-language targets name.

usage: bench/mklarge.py OUT [--n 12] [--seed 0] [--src testdata/photos] [--coco]
       (Pillow and numpy: .venv has them)
"""
from __future__ import annotations

import argparse
import os
import random

import numpy as np
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
#: Camera and wallpaper sizes (width, height), all >= 8 MP.
SIZES = [(4000, 3000), (3840, 2400), (3024, 4032), (5472, 3648), (3456, 2592), (2400, 3840), (4608, 3456),
         (4032, 3024)]
MIN_PIXELS = 8_000_000
#: COCO's commonest sizes (width, height), for --coco.
COCOSIZES = [(640, 480), (480, 640), (640, 427), (427, 640), (640, 424), (612, 612), (640, 512), (500, 375)]


def sources(src: str) -> list[tuple[str, str]]:
    """(class, path) of every JPEG under the ImageFolder src, sorted."""
    out = []
    for c in sorted(os.listdir(src)):
        d = os.path.join(src, c)
        if os.path.isdir(d):
            out += [(c, os.path.join(d, f)) for f in sorted(os.listdir(d)) if f.lower().endswith((".jpg", ".jpeg"))]
    if not out:
        raise SystemExit(f"mklarge: no JPEGs under {src}")
    return out


def make(photos: list[tuple[str, Image.Image]], w: int, h: int, rnd: random.Random, rng) -> tuple[str, Image.Image]:
    """One w x h image tiled with upscaled crops of photos, rows of tiles of
    random widths; returns the first tile's class and the image."""
    canvas = Image.new("RGB", (w, h))
    first = None
    y = 0
    while y < h:
        th = min(h - y, rnd.randint(h // 4, h // 2))
        x = 0
        while x < w:
            tw = min(w - x, rnd.randint(w // 4, w // 2))
            cls, im = photos[rnd.randrange(len(photos))]
            first = first or cls
            # A crop of the photo 1.5-3x smaller than the tile, upscaled.
            f = rnd.uniform(1.5, 3)
            cw, ch = max(8, min(im.width, round(tw / f))), max(8, min(im.height, round(th / f)))
            cx, cy = rnd.randint(0, im.width - cw), rnd.randint(0, im.height - ch)
            tile = im.crop((cx, cy, cx + cw, cy + ch)).resize((tw, th), Image.BICUBIC)
            if rnd.random() < 0.5:
                tile = tile.transpose(Image.FLIP_LEFT_RIGHT)
            canvas.paste(tile, (x, y))
            x += tw
        y += th
    a = np.asarray(canvas, dtype=np.int16)
    noise = rng.normal(0, rnd.uniform(4, 10), a.shape).astype(np.int16)
    return first, Image.fromarray(np.clip(a + noise, 0, 255).astype(np.uint8))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--n", type=int, default=12, help="how many images (every second one progressive)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--src", default=os.path.join(HERE, "..", "testdata", "photos"))
    ap.add_argument("--coco", action="store_true", help="COCO's sizes (COCOSIZES), all baseline")
    a = ap.parse_args()
    rnd = random.Random(a.seed)
    rng = np.random.default_rng(a.seed)
    photos = [(c, Image.open(p).convert("RGB")) for c, p in sources(a.src)]
    total = 0
    for i in range(a.n):
        w, h = (COCOSIZES if a.coco else SIZES)[i % len(COCOSIZES if a.coco else SIZES)]
        assert a.coco or w * h >= MIN_PIXELS
        cls, im = make(photos, w, h, rnd, rng)
        d = os.path.join(a.out, cls)
        os.makedirs(d, exist_ok=True)
        progressive = i % 2 == 1 and not a.coco
        p = os.path.join(d, f"{i:04d}{'-progressive' if progressive else ''}.jpg")
        im.save(p, "JPEG", quality=rnd.randint(90, 97), subsampling=2, progressive=progressive, optimize=progressive)
        total += os.path.getsize(p)
        print(f"{p}: {w}x{h} ({w * h / 1e6:.1f} MP), {'progressive' if progressive else 'baseline'}, "
              f"{os.path.getsize(p) / 1e6:.1f} MB")
    print(f"{a.n} images, {total / 1e6:.0f} MB in {a.out}")


if __name__ == "__main__":
    main()
