#!/usr/bin/env python3
"""The Qwen2-VL processor's image side: stoker (``transform="qwen2-vl"``,
SmartResize in the server, ``Batch.vision_inputs`` after) against
transformers' default Qwen2-VL image processor (``Qwen2VLImageProcessor``,
its torchvision back-end, at its defaults: 56*56 to 28*28*1280 pixels), on
the same photos, in images per CPU-second.

Sides, each over the same ``--n`` photos of ``--data`` (COCO-sized), in
batches of ``--batch``:

- ``hf-tv``: the processor on ``torchvision.io.decode_jpeg``'s tensors (the
  decode counted), torch on one thread: the whole image side in the
  trainer's process;
- ``hf-pil``: the same on ``PIL.Image.open(...).convert("RGB")``, the usual
  way a trainer's dataset hands it images;
- ``stoker``: ``stoker serve --workers 1`` pinned to one core (taskset), an
  epoch a round of one Loader's job (shared memory, or ``--transport grpc``),
  after a warm-up epoch; the server's CPU seconds
  (/proc/PID/stat) alone, what the trainer's host spends when vision_inputs
  runs on its GPU;
- ``stoker+cpu``: those plus the client process's CPU seconds over the epoch
  with ``vision_inputs()`` run on the CPU (one thread): the bound when there
  is no GPU to do the rescale, normalize and patchify.

A round runs each side once, the order alternated round by round; each
figure is the median over ``--rounds`` rounds. Prints each side's images per
CPU-second and stoker's ratios to ``hf-tv`` (the processor's default).

    nice .venv/bin/python bench/vlm_qwen.py --data PHOTOS --n 256 --rounds 3

``--family internvl`` measures InternVL's tiles the same way: the preset
``"internvl"`` (TileResize and the thumbnail, two views of one decode)
against ``GotOcr2ImageProcessor`` as InternVL3's checkpoints configure it
(crop_to_patches, 1 to 12 tiles of 448, bicubic, ImageNet's mean and std).
``--family llava-onevision``: the preset ``"llava-onevision"`` (AnyResResize
and the base image) against ``LlavaOnevisionImageProcessor`` as its
checkpoints configure it (mean and std 0.5).

``--jitter`` puts torchvision's ``ColorJitter(0.4, 0.4, 0.4, 0.1)`` before
the processor on each decoded image (the trainer's augmentation), and
stoker's ``from_hf(proc, before=[ColorJitter(...)])`` in place of the
preset: the jitter on the image at its own size, once an image whatever
its views.

``--records K`` serves the photos as a conversation file of records of K
consecutive photos each (``--batch`` then counts records) and gives the
processor each batch's images nested by record: OneVision's records of
several, each image padded to a square and not patched (the server makes
every image's three views where the data has such records).
"""
from __future__ import annotations

import argparse
import glob
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "python"))

_TICK = os.sysconf("SC_CLK_TCK")


def self_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def proc_cpu(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True, help="a folder of COCO-sized JPEG photos (searched recursively)")
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--core", type=int, default=0, help="the core the server is pinned to")
    ap.add_argument("--max-size", type=int, nargs=2, default=None, metavar=("H", "W"),
                    help="the job's bound on a sample (default: SmartResize's own, 1428x1428 for qwen2-vl)")
    ap.add_argument("--transport", default="shm", choices=["shm", "grpc"])
    ap.add_argument("--family", default="qwen2-vl", choices=["qwen2-vl", "internvl", "llava-onevision"],
                    help="the processor and stoker's preset of the same name")
    ap.add_argument("--records", type=int, default=0, metavar="K",
                    help="serve the photos as records of K images each (a conversation file); 0: an ImageFolder")
    ap.add_argument("--jitter", action="store_true",
                    help="torchvision's ColorJitter(0.4, 0.4, 0.4, 0.1) on each image before the processor "
                         "(stoker: from_hf(proc, before=[ColorJitter(...)]))")
    ap.add_argument("--stoker-bin", default=os.path.join(REPO, "bin", "stoker"))
    args = ap.parse_args()

    import torch
    from PIL import Image
    from torchvision.io import ImageReadMode, decode_jpeg
    from transformers.models.qwen2_vl.image_processing_qwen2_vl import Qwen2VLImageProcessor

    import stoker
    from stoker._local import LocalServer

    torch.set_num_threads(1)
    files = sorted(glob.glob(os.path.join(args.data, "**", "*.jpg"), recursive=True))[: args.n]
    if len(files) < args.n:
        sys.exit(f"vlm_qwen: {len(files)} photos under {args.data}, want {args.n}")
    tmp = tempfile.mkdtemp(prefix="vlm-bench-")
    cls = os.path.join(tmp, "ds", "photos")
    os.makedirs(cls)
    for i, f in enumerate(files):
        shutil.copyfile(f, os.path.join(cls, f"{i:05d}.jpg"))
    paths = sorted(glob.glob(os.path.join(cls, "*.jpg")))
    blobs = [open(p, "rb").read() for p in paths]  # both sides read the same bytes from the page cache
    if args.family == "internvl":
        from transformers.models.got_ocr2.image_processing_got_ocr2 import GotOcr2ImageProcessor

        proc = GotOcr2ImageProcessor(crop_to_patches=True, min_patches=1, max_patches=12, size={"height": 448, "width": 448},
                                     resample=3, image_mean=[0.485, 0.456, 0.406], image_std=[0.229, 0.224, 0.225])
        count = "num_patches"
    elif args.family == "llava-onevision":
        from transformers.models.llava_onevision.image_processing_llava_onevision import LlavaOnevisionImageProcessor

        proc = LlavaOnevisionImageProcessor(image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5])
        count = "image_sizes"
    else:
        proc = Qwen2VLImageProcessor()
        count = "image_grid_thw"

    jitter, transform = None, args.family
    if args.jitter:
        from torchvision.transforms import v2

        from stoker import transforms as T

        jitter = v2.ColorJitter(0.4, 0.4, 0.4, 0.1)
        transform = T.from_hf(proc, before=[T.ColorJitter(0.4, 0.4, 0.4, 0.1)])
    k = max(args.records, 1)
    step = args.batch * k  # images a batch
    srv_args = []
    if args.records:
        import json

        if len(paths) % k:
            sys.exit(f"vlm_qwen: {len(paths)} photos are not records of {k}")
        conv = [{"id": str(r), "image": [os.path.relpath(p, os.path.join(tmp, "ds")) for p in paths[r * k:(r + 1) * k]],
                 "conversations": [{"from": "human", "value": "<image>" * k}]} for r in range(len(paths) // k)]
        ann = os.path.join(tmp, "records.json")
        with open(ann, "w") as f:
            json.dump(conv, f)
        srv_args = ["--annotations", f"vlm={ann}"]

    def hf(pil: bool) -> float:
        t0 = self_cpu()
        for s in range(0, len(paths), step):
            if pil:
                imgs = [Image.open(p).convert("RGB") for p in paths[s:s + step]]
            else:
                imgs = [decode_jpeg(torch.frombuffer(bytearray(b), dtype=torch.uint8), mode=ImageReadMode.RGB)
                        for b in blobs[s:s + step]]
            if jitter is not None:
                imgs = [jitter(img) for img in imgs]
            if args.records:  # nested by record: the processor's batch_num_images
                imgs = [imgs[r:r + k] for r in range(0, len(imgs), k)]
            out = proc(images=imgs, return_tensors="pt")
            assert out["pixel_values"].dtype == torch.float32
        return self_cpu() - t0

    srv = LocalServer(args.stoker_bin, {"vlm": os.path.join(tmp, "ds")}, workers=1, args=srv_args,
                      prefix=["taskset", "-c", str(args.core)])

    loader: list = []

    def st() -> tuple:
        # One job for the whole run, an epoch a round (a trainer's job runs
        # many epochs: its buffers are warm after the first).
        if not loader:
            loader.append(stoker.Loader(srv.addr, "vlm", transform=transform, batch_size=args.batch, shuffle=False,
                                        pin_memory=False, timeout=300, transport=args.transport,
                                        max_size=tuple(args.max_size) if args.max_size else None))
        s0, c0, n = proc_cpu(srv.proc.pid), self_cpu(), 0
        for b in loader[0]:
            out = b.vision_inputs()
            n += len(out[count])
        assert n == len(paths) and not list(loader[0].sample_errors), (n, list(loader[0].sample_errors)[:3])
        return proc_cpu(srv.proc.pid) - s0, self_cpu() - c0

    sides = {"hf-tv": [], "hf-pil": [], "stoker": [], "stoker+cpu": []}
    try:
        with srv:
            st()  # a warm-up epoch: the page cache, the job's buffers
            for r in range(args.rounds):
                order = ["hf-tv", "hf-pil", "stoker"]
                if r % 2:
                    order.reverse()
                for side in order:
                    if side == "stoker":
                        server, client = st()
                        sides["stoker"].append(len(paths) / server)
                        sides["stoker+cpu"].append(len(paths) / (server + client))
                    else:
                        sides[side].append(len(paths) / hf(side == "hf-pil"))
                print(f"round {r}: " + ", ".join(f"{k} {v[-1]:.1f}" for k, v in sides.items()), flush=True)
    finally:
        for ld in loader:
            ld.close()
        shutil.rmtree(tmp, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in sides.items()}
    what = f"records of {k}, batch {args.batch} records" if args.records else f"batch {args.batch}"
    what += ", ColorJitter before the processor" if args.jitter else ""
    print(f"{args.family}: {len(paths)} photos of {args.data}, {what}, {args.rounds} rounds, medians, images per CPU-second:")
    for k, v in med.items():
        print(f"  {k:11s} {v:8.1f}  ({1000 / v:.2f} ms of CPU an image)  x{v / med['hf-tv']:.2f} of hf-tv")


if __name__ == "__main__":
    main()
