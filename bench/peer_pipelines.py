#!/usr/bin/env python3
"""The peers of `make bench-peers` that are not torchvision: NVIDIA DALI's
CPU pipeline and Meta's SPDL, on one thread each, on an ImageFolder's files,
for --seconds. Prints the same JSON line as baselines.py (images_per_sec,
images_per_cpu_sec: CPU time of this process, every thread, and its
children, over the measured interval).

  dali: fn.readers.file (shuffled) -> the decoder -> the recipe's ops ->
        uint8 CHW (fn.crop_mirror_normalize), in a pipeline with
        device_id=None (CPU only: no GPU is used or needed) and
        num_threads=1. RandomResizedCrop is DALI's fused decoder,
        fn.decoders.image_random_crop (torchvision's area and ratio ranges
        by default; libjpeg-turbo decodes only the crop's region) and
        fn.resize, as DALI's own ResNet-50 training example does it; the
        other recipes decode whole with fn.decoders.image.
  spdl: spdl.io.demux_image -> spdl.io.decode_packets with an FFmpeg filter
        graph doing the recipe's crop, scale and flip -> rgb24 numpy (HWC),
        on the calling thread (SPDL decodes single-threaded by default).

The recipes each peer has the ops for (RECIPES): imagenet-train
(RandomResizedCrop 224 + horizontal flip) and imagenet-eval (resize the
shorter side to 256, center crop 224) for both; tv-resnet50-v2
(RandomResizedCrop 176 + flip + TrivialAugmentWide) for DALI through its
auto_aug.trivial_augment_wide, without the recipe's RandomErasing(p=0.1).
Exit status 3 with a reason on stderr: this peer cannot run the recipe.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import resource
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from baselines import list_images  # noqa: E402

RECIPES = {
    "dali": ("imagenet-train", "imagenet-eval", "tv-resnet50-v2"),
    "spdl": ("imagenet-train", "imagenet-eval"),
}
#: What a peer's recipe leaves out of the recipe stoker and torchvision run.
NOTES = {("dali", "tv-resnet50-v2"): "no RandomErasing(p=0.1)"}


def cpu_time() -> float:
    """CPU seconds of this process (all its threads) and its waited-for
    children."""
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def rrc_params(w: int, h: int, rng: random.Random, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3)):
    """torchvision's RandomResizedCrop.get_params: (x, y, cw, ch)."""
    area = w * h
    lr = (math.log(ratio[0]), math.log(ratio[1]))
    for _ in range(10):
        target = area * rng.uniform(*scale)
        ar = math.exp(rng.uniform(*lr))
        cw = int(round(math.sqrt(target * ar)))
        ch = int(round(math.sqrt(target / ar)))
        if 0 < cw <= w and 0 < ch <= h:
            return rng.randint(0, w - cw), rng.randint(0, h - ch), cw, ch
    r = w / h
    if r < ratio[0]:
        cw, ch = w, int(round(w / ratio[0]))
    elif r > ratio[1]:
        ch, cw = h, int(round(h * ratio[1]))
    else:
        cw, ch = w, h
    return (w - cw) // 2, (h - ch) // 2, cw, ch


def spdl_fn(transform: str, seed: int):
    import spdl.io as io

    rng = random.Random(seed)

    def fn(path: str):
        packets = io.demux_image(path)
        w, h = packets.codec.width, packets.codec.height
        if transform == "imagenet-train":
            x, y, cw, ch = rrc_params(w, h, rng)
            desc = f"crop={cw}:{ch}:{x}:{y},scale=224:224:flags=bilinear"
            if rng.random() < 0.5:
                desc += ",hflip"
        else:  # imagenet-eval
            s = 256 / min(w, h)
            sw, sh = max(224, round(w * s)), max(224, round(h * s))
            desc = f"scale={sw}:{sh}:flags=bilinear,crop=224:224"
        frames = io.decode_packets(packets, filter_desc=desc + ",format=rgb24")
        return io.to_numpy(io.convert_frames(frames))

    return fn


def run_spdl(files: list[str], transform: str, seconds: float, seed: int) -> tuple[int, float, float]:
    fn = spdl_fn(transform, seed)
    order = files[:]
    random.Random(seed).shuffle(order)
    for p in order[:8]:  # warm up: imports, FFmpeg's first codec
        fn(p)
    n, i = 0, 0
    t0, c0 = time.perf_counter(), cpu_time()
    deadline = t0 + seconds
    while True:
        for _ in range(16):
            fn(order[i % len(order)])
            i += 1
            n += 1
        if time.perf_counter() >= deadline:
            break
    return n, time.perf_counter() - t0, cpu_time() - c0


def dali_pipeline(files: list[str], transform: str, batch: int, seed: int):
    from nvidia.dali import fn, pipeline_def, types

    conditionals = transform == "tv-resnet50-v2"

    # device_id=None: a CPU-only pipeline, which builds and runs on a
    # machine without a GPU or a CUDA driver.
    @pipeline_def(batch_size=batch, num_threads=1, device_id=None, seed=seed, prefetch_queue_depth=1,
                  enable_conditionals=conditionals)
    def pipe():
        jpegs, _ = fn.readers.file(files=files, random_shuffle=True, name="reader")
        if transform == "imagenet-eval":
            images = fn.decoders.image(jpegs, device="cpu", output_type=types.RGB)
            images = fn.resize(images, resize_shorter=256)
            return fn.crop_mirror_normalize(images, dtype=types.UINT8, output_layout="CHW", crop=(224, 224))
        # RandomResizedCrop the way DALI's ResNet-50 example does it: the
        # crop drawn and decoded by the decoder (a region of interest, not
        # the whole image), then resized. Its defaults are torchvision's
        # scale (0.08, 1) and ratio (3/4, 4/3), 10 attempts.
        images = fn.decoders.image_random_crop(jpegs, device="cpu", output_type=types.RGB)
        if transform == "imagenet-train":
            images = fn.resize(images, size=(224, 224))
            return fn.crop_mirror_normalize(images, dtype=types.UINT8, output_layout="CHW",
                                            mirror=fn.random.coin_flip())
        from nvidia.dali.auto_aug import trivial_augment

        images = fn.resize(images, size=(176, 176))
        images = fn.flip(images, horizontal=fn.random.coin_flip())
        images = trivial_augment.trivial_augment_wide(images)
        return fn.crop_mirror_normalize(images, dtype=types.UINT8, output_layout="CHW")

    p = pipe()
    p.build()
    return p


def run_dali(files: list[str], transform: str, seconds: float, seed: int, batch: int) -> tuple[int, float, float]:
    p = dali_pipeline(files, transform, batch, seed)
    for _ in range(2):  # warm up: the first batches, the prefetch queue full
        p.run()
    n = 0
    t0, c0 = time.perf_counter(), cpu_time()
    deadline = t0 + seconds
    while time.perf_counter() < deadline:
        (out,) = p.run()
        n += len(out)
    return n, time.perf_counter() - t0, cpu_time() - c0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--impl", required=True, choices=sorted(RECIPES))
    ap.add_argument("--data", required=True, help="ImageFolder directory")
    ap.add_argument("--transform", default="imagenet-train")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--threads", type=int, default=1, help="only 1: one core each")
    ap.add_argument("--batch", type=int, default=16, help="DALI's batch size")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if a.threads != 1:
        sys.exit("peer_pipelines: --threads 1 only")
    if a.transform not in RECIPES[a.impl]:
        print(f"{a.impl} has no ops for {a.transform} here (it runs {', '.join(RECIPES[a.impl])})", file=sys.stderr)
        sys.exit(3)
    files = list_images(a.data)
    if a.impl == "dali":
        images, seconds, cpu = run_dali(files, a.transform, a.seconds, a.seed, a.batch)
    else:
        images, seconds, cpu = run_spdl(files, a.transform, a.seconds, a.seed)
    r = {
        "impl": a.impl,
        "dataset": a.data,
        "transform": a.transform,
        "threads": 1,
        "images": images,
        "seconds": seconds,
        "images_per_sec": images / seconds,
        "cpu_seconds": cpu,
        "images_per_cpu_sec": images / cpu,
        "note": NOTES.get((a.impl, a.transform), ""),
    }
    print(f"{a.impl}: {images} images in {seconds:.2f}s = {r['images_per_sec']:.1f} images/s, "
          f"{r['images_per_cpu_sec']:.1f} images per CPU-second")
    if a.json:
        print(json.dumps(r))


if __name__ == "__main__":
    main()
