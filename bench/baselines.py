#!/usr/bin/env python3
"""PyTorch baselines for `stoker bench pipeline`: the same ops, done the two
ways PyTorch users do them.

  pil: torchvision's classic transforms on PIL images: Image.open + convert
       ("RGB"), RandomResizedCrop(224), RandomHorizontalFlip(), PILToTensor().
  tv2: torchvision.io.decode_jpeg on the file's bytes, then
       torchvision.transforms.v2 RandomResizedCrop(224, antialias=True) and
       RandomHorizontalFlip() on uint8 CHW tensors.

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
    exts = (".jpg", ".jpeg", ".png")
    classes = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)) and not d.startswith("."))
    files = []
    for c in classes:
        for dirpath, _, names in sorted(os.walk(os.path.join(root, c))):
            files += [os.path.join(dirpath, n) for n in sorted(names) if n.lower().endswith(exts)]
    if not files:
        sys.exit(f"baselines: no images under {root} (want root/<class>/<image>)")
    return files


def make_fn(impl: str, transform: str):
    import torch

    torch.set_num_threads(1)
    if impl == "pil":
        from PIL import Image
        import torchvision.transforms as T

        if transform == "imagenet-train":
            tf = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.PILToTensor()])
        else:
            tf = T.Compose([T.Resize(256), T.CenterCrop(224), T.PILToTensor()])

        def fn(path: str):
            with open(path, "rb") as f:
                img = Image.open(f).convert("RGB")
            return tf(img)

        return fn
    if impl == "tv2":
        from torchvision.io import ImageReadMode, decode_jpeg, read_file
        import torchvision.transforms.v2 as T2

        if transform == "imagenet-train":
            tf = T2.Compose([T2.RandomResizedCrop(224, antialias=True), T2.RandomHorizontalFlip()])
        else:
            tf = T2.Compose([T2.Resize(256, antialias=True), T2.CenterCrop(224)])

        def fn(path: str):
            return tf(decode_jpeg(read_file(path), mode=ImageReadMode.RGB))

        return fn
    sys.exit(f"baselines: unknown --impl {impl!r} (want pil or tv2)")


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
    ap.add_argument("--transform", default="imagenet-train", choices=["imagenet-train", "imagenet-eval"])
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
