"""How much of a photo one decode of several views' crops must cover,
against one view's crop alone: the floor that decoding the views' union
once puts under a job of several views' decode cost (BENCHMARKS.md, "Many
views from one decode").

For each photo, pairs (or more) of torchvision's RandomResizedCrop draws
(its own get_params, so the same distribution stoker draws from), each
rounded out to the 16-px MCU grid of a 4:2:0 JPEG; it prints the mean
area, as a share of the photo, of one crop, of the views' union and of
their bounding box (what a region decode covers). The decode of a region
costs about its MCUs, so union / one is the least the decode of the
views' union can cost over one view's."""
import argparse
import glob
import os

import torch
from PIL import Image
from torchvision.transforms import RandomResizedCrop


def mcu_box(top, left, h, w, m=16):
    return (left // m * m, top // m * m, -(-(left + w) // m) * m, -(-(top + h) // m) * m)


def union_area(boxes):
    """Area of the union of boxes (x0, y0, x1, y1), by a sweep over their columns."""
    xs = sorted({b[0] for b in boxes} | {b[2] for b in boxes})
    area = 0
    for x0, x1 in zip(xs, xs[1:]):
        spans = sorted((b[1], b[3]) for b in boxes if b[0] <= x0 and b[2] >= x1)
        covered, end = 0, None
        for y0, y1 in spans:
            if end is None or y0 > end:
                covered += y1 - y0
                end = y1
            elif y1 > end:
                covered += y1 - end
                end = y1
        area += covered * (x1 - x0)
    return area


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, help="a folder of JPEGs (searched recursively)")
    ap.add_argument("--views", type=int, default=2, help="crops a sample (simclr: 2)")
    ap.add_argument("--scale", type=float, nargs=2, default=(0.08, 1.0), help="RandomResizedCrop's scale")
    ap.add_argument("--draws", type=int, default=20, help="samples drawn a photo")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    torch.manual_seed(a.seed)
    paths = sorted(p for p in glob.glob(os.path.join(a.data, "**", "*"), recursive=True)
                   if p.lower().endswith((".jpg", ".jpeg")))
    if not paths:
        raise SystemExit(f"no JPEGs under {a.data}")
    one = union = bbox = 0.0
    n = 0
    for p in paths:
        with Image.open(p) as im:
            w, h = im.size
        for _ in range(a.draws):
            boxes = []
            for _ in range(a.views):
                top, left, ch, cw = RandomResizedCrop.get_params(torch.empty(3, h, w), list(a.scale), [3 / 4, 4 / 3])
                boxes.append(mcu_box(top, left, ch, cw))
            full = w * h
            one += sum((b[2] - b[0]) * (b[3] - b[1]) for b in boxes) / len(boxes) / full
            union += union_area(boxes) / full
            bbox += (max(b[2] for b in boxes) - min(b[0] for b in boxes)) * (
                max(b[3] for b in boxes) - min(b[1] for b in boxes)) / full
            n += 1
    print(f"{len(paths)} photos, {n} samples of {a.views} views, scale {tuple(a.scale)}, MCU-rounded areas as a share of the photo:")
    print(f"one view {one / n:.3f}   union {union / n:.3f}   bounding box {bbox / n:.3f}")
    print(f"union / one {union / one:.3f}   bounding box / one {bbox / one:.3f}")


if __name__ == "__main__":
    main()
