#!/usr/bin/env python3
"""PyTorch baselines for `stoker bench pipeline`: the same ops, done the two
ways PyTorch users do them.

  pil: torchvision's classic transforms on PIL images: Image.open + convert
       ("RGB"), the recipe's ops, PILToTensor().
  tv2: torchvision.io.decode_jpeg on the file's bytes (decode_image for
       PNG and WebP files), then torchvision.transforms.v2's ops
       (antialias=True) on uint8 CHW tensors.

--transform names the recipe, as stoker's presets do (docs/transforms.md):
imagenet-train, imagenet-eval, tv-resnet50-v2, deit, simclr-view, dino-global,
dino-local, clip, and the recipes of several views simclr, dino, dinov2 (the
image decoded once, then each view's ops: "images" counts samples, each
every view); each is the same ops in torchvision v1 (pil) and v2 (tv2). deit runs torchvision's RandAugment(9, bicubic) where timm would
run its own (timm is no dependency here): the same work, op for op. A
RandomErasing the recipes run after Normalize runs on the uint8 tensor.

--threads N runs N worker processes (each with torch.set_num_threads(1)), as
a DataLoader with num_workers=N would; with N=1 the work runs in this
process. With --json the last line is one JSON object with images_per_sec,
threads and images, the same shape `stoker bench pipeline --json` prints.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import time


def list_images(root: str) -> list[str]:
    exts = (".jpg", ".jpeg", ".png", ".webp")
    classes = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)) and not d.startswith("."))
    files = []
    for c in classes:
        for dirpath, _, names in sorted(os.walk(os.path.join(root, c))):
            files += [os.path.join(dirpath, n) for n in sorted(names) if n.lower().endswith(exts)]
    if not files:
        sys.exit(f"baselines: no images under {root} (want root/<class>/<image>)")
    return files


#: The recipes of several views: each view's recipe and count. The image is
#: decoded once and every view made from it, as a multi-crop Dataset's
#: __getitem__ does (DINO's DataAugmentationDINO, SimCLR's two views).
VIEW_RECIPES = {
    "simclr": [("simclr-view", 2)],
    "dino": [("dino-global", 1), ("dino-global2", 1), ("dino-local", 8)],
    "dinov2": [("dinov2-global1", 1), ("dinov2-global2", 1), ("dinov2-local", 8)],
}

RECIPES = ("imagenet-train", "imagenet-eval", "tv-resnet50-v2", "deit", "simclr-view", "dino-global", "dino-local",
           "clip") + tuple(VIEW_RECIPES)


def recipe(T, transform: str, tensor_ops: bool):
    """The recipe's ops from torchvision module T (v1 on PIL images, or v2
    on tensors): what stoker's preset of the same name runs."""
    bic, bil = T.InterpolationMode.BICUBIC, T.InterpolationMode.BILINEAR
    aa = {"antialias": True} if tensor_ops else {}
    jitter = [T.RandomHorizontalFlip(), T.RandomApply([T.ColorJitter(0.4, 0.4, 0.2, 0.1)], p=0.8), T.RandomGrayscale(0.2)]
    ops = {
        "imagenet-train": [T.RandomResizedCrop(224, **aa), T.RandomHorizontalFlip()],
        "imagenet-eval": [T.Resize(256, **aa), T.CenterCrop(224)],
        "tv-resnet50-v2": [T.RandomResizedCrop(176, interpolation=bil, **aa), T.RandomHorizontalFlip(),
                           T.TrivialAugmentWide(interpolation=bil)],
        "deit": [T.RandomResizedCrop(224, interpolation=bic, **aa), T.RandomHorizontalFlip(),
                 T.RandAugment(num_ops=2, magnitude=9, interpolation=bil, fill=[124, 116, 104])],
        "simclr-view": [T.RandomResizedCrop(224, **aa), T.RandomHorizontalFlip(),
                   T.RandomApply([T.ColorJitter(0.8, 0.8, 0.8, 0.2)], p=0.8), T.RandomGrayscale(0.2),
                   T.RandomApply([T.GaussianBlur(23, (0.1, 2.0))], p=0.5)],
        "dino-global": [T.RandomResizedCrop(224, scale=(0.4, 1), interpolation=bic, **aa), *jitter,
                        T.GaussianBlur(23, (0.1, 2.0))],
        "dino-local": [T.RandomResizedCrop(96, scale=(0.05, 0.4), interpolation=bic, **aa), *jitter,
                       T.RandomApply([T.GaussianBlur(9, (0.1, 2.0))], p=0.5)],
        "clip": [T.RandomResizedCrop(224, scale=(0.9, 1), interpolation=bic, **aa)],
        "dino-global2": [T.RandomResizedCrop(224, scale=(0.4, 1), interpolation=bic, **aa), *jitter,
                         T.RandomApply([T.GaussianBlur(23, (0.1, 2.0))], p=0.1), T.RandomSolarize(128, p=0.2)],
        # DINOv2's views as released (its GaussianBlur(p) applies with 1 - p).
        "dinov2-global1": [T.RandomResizedCrop(224, scale=(0.32, 1), interpolation=bic, **aa), *jitter],
        "dinov2-global2": [T.RandomResizedCrop(224, scale=(0.32, 1), interpolation=bic, **aa), *jitter,
                           T.RandomApply([T.GaussianBlur(9, (0.1, 2.0))], p=0.9), T.RandomSolarize(128, p=0.2)],
        "dinov2-local": [T.RandomResizedCrop(96, scale=(0.05, 0.32), interpolation=bic, **aa), *jitter,
                         T.RandomApply([T.GaussianBlur(9, (0.1, 2.0))], p=0.5)],
    }[transform]
    return ops


def tv_decoder():
    """torchvision's decode for a file's bytes as a tv2 user writes it:
    decode_jpeg for JPEG (what the JPEG figures have always used),
    decode_image for the rest (PNG, WebP), both to RGB (alpha dropped)."""
    from torchvision.io import ImageReadMode, decode_image, decode_jpeg, read_file

    def decode(path: str):
        data = read_file(path)
        if path.lower().endswith((".jpg", ".jpeg")):
            return decode_jpeg(data, mode=ImageReadMode.RGB)
        return decode_image(data, mode=ImageReadMode.RGB)

    return decode


def make_fn(impl: str, transform: str):
    import torch

    torch.set_num_threads(1)
    if transform in VIEW_RECIPES:
        return views_fn(impl, transform)
    erase = {"tv-resnet50-v2": 0.1, "deit": 0.25}.get(transform)
    if impl == "pil":
        from PIL import Image
        import torchvision.transforms as T

        tail = [T.PILToTensor()]
        if erase:  # on the uint8 tensor, as stoker erases pixels
            tail.append(T.RandomErasing(p=erase, value=0))
        tf = T.Compose(recipe(T, transform, False) + tail)

        def fn(path: str):
            with open(path, "rb") as f:
                img = Image.open(f).convert("RGB")
            return tf(img)

        return fn
    if impl == "tv2":
        import torchvision.transforms.v2 as T2

        decode = tv_decoder()
        ops = recipe(T2, transform, True)
        if erase:
            ops.append(T2.RandomErasing(p=erase, value=0))
        tf = T2.Compose(ops)

        def fn(path: str):
            return tf(decode(path))

        return fn
    sys.exit(f"baselines: unknown --impl {impl!r} (want pil or tv2)")


def views_fn(impl: str, transform: str):
    """A sample of several views: the file decoded once, then every view's
    ops on the decoded image (a multi-crop transform's __call__)."""
    views = [(name, n) for name, n in VIEW_RECIPES[transform]]
    if impl == "pil":
        from PIL import Image
        import torchvision.transforms as T

        tfs = [T.Compose(recipe(T, name, False) + [T.PILToTensor()]) for name, n in views for _ in range(n)]

        def fn(path: str):
            with open(path, "rb") as f:
                img = Image.open(f).convert("RGB")
            return [tf(img) for tf in tfs]

        return fn
    import torchvision.transforms.v2 as T2

    decode = tv_decoder()
    tfs = [T2.Compose(recipe(T2, name, True)) for name, n in views for _ in range(n)]

    def fn(path: str):
        img = decode(path)
        return [tf(img) for tf in tfs]

    return fn


def run(impl: str, transform: str, files: list[str], start: int, step: int, seconds: float, out) -> None:
    fn = make_fn(impl, transform)
    for p in files[start : start + 8 : 1]:  # warm up: imports, caches
        fn(p)
    n, i = 0, start
    t0, c0 = time.perf_counter(), time.process_time()
    deadline = t0 + seconds
    while True:
        for _ in range(16):
            fn(files[i % len(files)])
            i += step
            n += 1
        if time.perf_counter() >= deadline:
            break
    out.put((n, time.perf_counter() - t0, time.process_time() - c0))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--impl", required=True, choices=["pil", "tv2"])
    ap.add_argument("--data", required=True, help="ImageFolder directory")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--transform", default="imagenet-train", choices=RECIPES)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    files = list_images(a.data)
    if a.threads <= 1:
        q: "mp.Queue" = mp.Queue()
        run(a.impl, a.transform, files, 0, 1, a.seconds, q)
        results = [q.get()]
    else:
        ctx = mp.get_context("spawn")
        q = ctx.Queue()
        procs = [ctx.Process(target=run, args=(a.impl, a.transform, files, k, a.threads, a.seconds, q)) for k in range(a.threads)]
        for p in procs:
            p.start()
        results = [q.get() for _ in procs]
        for p in procs:
            p.join()
    images = sum(r[0] for r in results)
    seconds = max(r[1] for r in results)
    cpu = sum(r[2] for r in results)
    r = {
        "impl": a.impl,
        "dataset": a.data,
        "transform": a.transform,
        "threads": max(a.threads, 1),
        "images": images,
        "seconds": seconds,
        "images_per_sec": images / seconds,
        # CPU time of the measuring processes over the measured interval.
        "cpu_seconds": cpu,
        "images_per_cpu_sec": images / cpu,
    }
    print(f"baseline {a.impl}: {images} images in {seconds:.2f}s = {r['images_per_sec']:.1f} images/s on {r['threads']} thread(s), {r['images_per_cpu_sec']:.1f} images per CPU-second")
    if a.json:
        print(json.dumps(r))


if __name__ == "__main__":
    main()
