#!/usr/bin/env python3
"""Detection on a GPU: the same model, seeds and pipeline trained from
torchvision's DataLoader and from stoker's Loader, and the two mAPs side by
side, each loader run with several seeds so that the difference can be read
against the run-to-run noise.

    make gpuhost
    PYTHONPATH=python python3 bench/det_map.py --stoker bin/stoker-gpuhost --workdir /tmp/dm \\
        --seeds 1,2 --budget 150 --results /tmp/dm/results.jsonl

What it does:
- `stoker mkdata --coco` makes a training set (--train-n images, shapes of five
  classes pasted on the committed photos, exact boxes) and a validation set of
  other images (another seed);
- one `stoker serve` over the training set with its annotations, its
  crowds left out (both loaders read that file);
- for each seed and each loader, one trainer process (all at once, on one
  GPU): torchvision's `fasterrcnn_mobilenet_v3_large_320_fpn`, no weights,
  SGD, fed through the same torchvision.transforms.v2 pipeline
  (RandomPhotometricDistort, RandomZoomOut, RandomIoUCrop,
  SanitizeBoundingBoxes, RandomHorizontalFlip, Resize((320, 320)),
  SanitizeBoundingBoxes): by a `torch.utils.data.DataLoader` over
  `CocoDetection` (wrapped for transforms.v2) with --tv-workers processes,
  or by `stoker.Loader(transform=from_torchvision(that pipeline),
  targets=True)`. The model's initial weights depend on the seed alone, so a
  seed's two runs start from the same weights;
- the number of steps is the same for every run: each trainer reports its
  rate after a warm-up, and the slowest rate times --budget seconds sets it
  (or --steps);
- each trained model is scored on the validation set (its images resized to
  320x320, the boxes scaled back) with pycocotools' COCOeval: AP and AP50.

The runs share the GPU and the host's cores, so their speeds are not a
benchmark: only their mAPs are compared. Without a GPU, `--device cpu
--train-n 64 --val-n 16 --steps 4 --batch 4` checks the harness.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import signal
import socket
import statistics
import subprocess
import sys
import time

PIPELINE_DOC = ("RandomPhotometricDistort(p=0.5), RandomZoomOut(fill=0), RandomIoUCrop(), "
                "SanitizeBoundingBoxes(min_size=1), RandomHorizontalFlip(), Resize((320, 320)), "
                "SanitizeBoundingBoxes()")
SIZE = 320


def v2_pipeline():
    from torchvision.transforms import v2
    return [v2.RandomPhotometricDistort(p=0.5), v2.RandomZoomOut(fill=0), v2.RandomIoUCrop(),
            v2.SanitizeBoundingBoxes(min_size=1), v2.RandomHorizontalFlip(), v2.Resize((SIZE, SIZE)),
            v2.SanitizeBoundingBoxes()]


def categories(ann_file):
    with open(ann_file) as f:
        cats = sorted(c["id"] for c in json.load(f)["categories"])
    return cats  # label L (1..len) is the category cats[L-1]; 0 is the background


def make_model(num_classes, seed):
    import torch
    from torchvision.models.detection import fasterrcnn_mobilenet_v3_large_320_fpn
    torch.manual_seed(seed)
    return fasterrcnn_mobilenet_v3_large_320_fpn(weights=None, weights_backbone=None, num_classes=num_classes,
                                                 min_size=SIZE, max_size=SIZE)


def tv_batches(a, cats, seed):
    """torchvision's loader: CocoDetection wrapped for transforms.v2, the
    pipeline applied in DataLoader workers, epoch after epoch."""
    import torch
    from torchvision import datasets
    from torchvision.transforms import v2
    tf = v2.Compose([v2.ToImage()] + v2_pipeline())
    with contextlib.redirect_stdout(io.StringIO()):  # pycocotools prints its timings
        ds = datasets.CocoDetection(os.path.join(a.workdir, "train", "images", "train"),
                                    train_annotations(a), transforms=tf)
    ds = datasets.wrap_dataset_for_transforms_v2(ds, target_keys=("boxes", "labels"))
    label_of = {c: i + 1 for i, c in enumerate(cats)}
    g = torch.Generator()
    g.manual_seed(seed)
    dl = torch.utils.data.DataLoader(ds, batch_size=a.batch, shuffle=True, drop_last=True, num_workers=a.tv_workers,
                                     collate_fn=lambda b: tuple(zip(*b)), generator=g, persistent_workers=a.tv_workers > 0,
                                     prefetch_factor=4 if a.tv_workers else None)
    while True:
        for images, targets in dl:
            out = []
            for im, t in zip(images, targets):
                labels = torch.tensor([label_of[int(c)] for c in t["labels"]], dtype=torch.int64)
                out.append((im, t["boxes"].as_subclass(torch.Tensor), labels))
            yield out


def stoker_batches(a, cats, seed):
    """stoker's loader: the same pipeline, from_torchvision, served."""
    import torch
    import stoker
    from torchvision.transforms import v2
    tf = stoker.transforms.from_torchvision(v2.Compose(v2_pipeline()))
    loader = stoker.Loader(a.target, "det", transform=tf, batch_size=a.batch, seed=seed, drop_last=True, targets=True)
    with loader:
        while True:
            for images, targets in loader:
                out = []
                for im, t in zip(images, targets):
                    # stoker's labels are the categories' ranks from 0.
                    out.append((im, t["boxes"].as_subclass(torch.Tensor), t["labels"].to(torch.int64) + 1))
                yield out


def train_annotations(a):
    """The training set's annotations without its crowds (mkdata puts one
    in every fifth image), which both loaders read: the detection
    references drop crowds before the model, and SanitizeBoundingBoxes
    would not drop an `iscrowd` beside the labels."""
    return os.path.join(a.workdir, "train", "annotations", "instances-nocrowd.json")


def write_train_annotations(a):
    with open(os.path.join(a.workdir, "train", "annotations", "instances.json")) as f:
        d = json.load(f)
    d["annotations"] = [x for x in d["annotations"] if not x.get("iscrowd")]
    with open(train_annotations(a), "w") as f:
        json.dump(d, f)


def evaluate(model, a, cats, device):
    """COCOeval of the model on the validation set: each image resized to
    320x320 as in training, the boxes scaled back to the file's pixels."""
    import torch
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval
    from torchvision.io import decode_jpeg, read_file
    from torchvision.transforms.v2 import functional as F
    root = os.path.join(a.workdir, "val")
    with contextlib.redirect_stdout(io.StringIO()):
        gt = COCO(os.path.join(root, "annotations", "instances.json"))
    model.eval()
    dets = []
    ids = sorted(gt.getImgIds())
    with torch.no_grad():
        for i in range(0, len(ids), 32):
            chunk = ids[i:i + 32]
            ims, scales = [], []
            for iid in chunk:
                info = gt.loadImgs(iid)[0]
                im = decode_jpeg(read_file(os.path.join(root, "images", "train", info["file_name"])))
                ims.append((F.resize(im, [SIZE, SIZE], antialias=True).float() / 255).to(device))
                scales.append((info["width"] / SIZE, info["height"] / SIZE))
            for iid, (sx, sy), o in zip(chunk, scales, model(ims)):
                for (x0, y0, x1, y1), s, l in zip(o["boxes"].tolist(), o["scores"].tolist(), o["labels"].tolist()):
                    dets.append({"image_id": iid, "category_id": cats[l - 1], "score": s,
                                 "bbox": [x0 * sx, y0 * sy, (x1 - x0) * sx, (y1 - y0) * sy]})
    if not dets:
        return 0.0, 0.0
    with contextlib.redirect_stdout(io.StringIO()):
        ev = COCOeval(gt, gt.loadRes(dets), "bbox")
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    return float(ev.stats[0]), float(ev.stats[1])


def wait_file(path, what, deadline):
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what} ({path})")
        time.sleep(0.2)
    with open(path) as f:
        return f.read()


def train(a):
    import torch
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    device = torch.device(a.device)
    if device.type == "cpu":
        torch.set_num_threads(1)  # the harness's check: several trainers share the cores
    cats = categories(os.path.join(a.workdir, "train", "annotations", "instances.json"))
    model = make_model(len(cats) + 1, a.seed).to(device)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.SGD(params, lr=a.lr, momentum=0.9, weight_decay=4e-5)
    batches = (tv_batches if a.loader == "tv" else stoker_batches)(a, cats, a.seed)
    name = f"{a.loader}-s{a.seed}"
    steps, t0, warm, losses = a.steps, None, min(10, a.probe // 2), []
    step = 0
    deadline = time.monotonic() + a.wait
    while steps is None or step < steps:
        if step == a.probe:
            # The rate after the warm-up, for the orchestrator's one step
            # count (and its cue that every run is training).
            rate = (a.probe - warm) / (time.monotonic() - t0)
            with open(os.path.join(a.workdir, f"rate-{name}"), "w") as f:
                f.write(f"{rate}\n")
            if steps is None:
                steps = int(wait_file(os.path.join(a.workdir, "steps"), "the step count", deadline))
        if step == warm:
            t0 = time.monotonic()
        warmup = 100
        total = steps or 10 ** 9
        lr = a.lr * (step + 1) / warmup if step < warmup else \
            a.lr * 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, total - warmup)))
        for grp in opt.param_groups:
            grp["lr"] = lr
        batch = next(batches)
        ims = [im.to(device, non_blocking=True).float() / 255 for im, _, _ in batch]
        tgs = [{"boxes": b.to(device), "labels": l.to(device)} for _, b, l in batch]
        loss_dict = model(ims, tgs)
        loss = sum(loss_dict.values())
        value = float(loss.detach())
        if not math.isfinite(value):
            raise SystemExit(f"{name} step {step}: loss {value}")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 10.0)
        opt.step()
        losses.append(value)
        if step % a.log_every == 0:
            print(f"{name} step {step}: loss {value:.3f} lr {lr:.4f}", flush=True)
        step += 1
    ap, ap50 = evaluate(model, a, cats, device)
    res = {"loader": a.loader, "seed": a.seed, "steps": steps, "batch": a.batch, "lr": a.lr,
           "AP": round(ap, 4), "AP50": round(ap50, 4), "final_loss": round(statistics.mean(losses[-50:]), 4),
           "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
           "torch": torch.__version__, "torchvision": __import__("torchvision").__version__}
    print(json.dumps(res), flush=True)
    with open(os.path.join(a.workdir, f"result-{name}.json"), "w") as f:
        json.dump(res, f)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def orchestrate(a):
    if a.steps and a.steps <= a.probe:
        raise SystemExit(f"--steps {a.steps}: more than --probe ({a.probe}) steps, at which each run reports its rate")
    os.makedirs(a.workdir, exist_ok=True)
    for f in os.listdir(a.workdir):
        if f.startswith(("rate-", "result-")) or f == "steps":
            os.remove(os.path.join(a.workdir, f))
    for split, n, seed in (("train", a.train_n, 1), ("val", a.val_n, 1001)):
        if not os.path.exists(os.path.join(a.workdir, split, "annotations", "instances.json")):
            t = time.monotonic()
            subprocess.run([a.stoker, "mkdata", "--coco", "--out", os.path.join(a.workdir, split), "--n", str(n),
                            "--seed", str(seed), "--backgrounds", a.backgrounds], check=True, stdout=subprocess.DEVNULL)
            print(f"mkdata {split}: {n} images in {time.monotonic() - t:.1f} s", flush=True)
    write_train_annotations(a)
    port = free_port()
    target = f"127.0.0.1:{port}"
    srv = subprocess.Popen([a.stoker, "serve", "--listen", target, "--workers", str(a.stoker_workers),
                            "--dataset", "det=" + os.path.join(a.workdir, "train", "images", "train"),
                            "--annotations", "det=" + train_annotations(a)],
                           stdout=open(os.path.join(a.workdir, "serve.log"), "w"), stderr=subprocess.STDOUT,
                           start_new_session=True)
    procs = {}
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                break
            if srv.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"stoker serve did not start: see {a.workdir}/serve.log")
            time.sleep(0.2)
        common = [sys.executable, __file__, "--role", "train", "--workdir", a.workdir, "--target", target,
                  "--device", a.device, "--batch", str(a.batch), "--lr", str(a.lr), "--tv-workers", str(a.tv_workers),
                  "--probe", str(a.probe), "--wait", str(a.wait), "--log-every", str(a.log_every)]
        if a.steps:
            common += ["--steps", str(a.steps)]
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        for seed in a.seeds:
            for loader in ("tv", "stoker"):
                procs[(loader, seed)] = subprocess.Popen(common + ["--loader", loader, "--seed", str(seed)], env=env)
        # Every run reports its rate at --probe steps.
        names = [f"rate-{lo}-s{s}" for lo, s in procs]
        deadline = time.monotonic() + a.wait
        rates = {}
        while len(rates) < len(names):
            for n in names:
                p = os.path.join(a.workdir, n)
                if n not in rates and os.path.exists(p) and open(p).read().endswith("\n"):
                    rates[n] = float(open(p).read())
            if any(p.poll() not in (None, 0) for p in procs.values()):
                raise SystemExit("a trainer failed before its rate")
            if time.monotonic() > deadline:
                raise SystemExit("timed out waiting for the trainers' rates")
            time.sleep(0.2)
        steps = a.steps or max(a.probe + 1, int(min(rates.values()) * a.budget))
        print(f"rates (steps/s): {rates}; every run trains {steps} steps", flush=True)
        with open(os.path.join(a.workdir, "steps.tmp"), "w") as f:
            f.write(str(steps))
        os.replace(os.path.join(a.workdir, "steps.tmp"), os.path.join(a.workdir, "steps"))
        # The server's view of the jobs while they train: its NVML monitor's
        # GPU idle beside the trainers' waits.
        st = subprocess.run([a.stoker, "status", target], capture_output=True, text=True, timeout=30)
        print(f"stoker status during training:\n{st.stdout}{st.stderr}", flush=True)
        bad = [k for k, p in procs.items() if p.wait() != 0]
        if bad:
            raise SystemExit(f"trainers failed: {bad}")
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
        os.killpg(srv.pid, signal.SIGTERM)
        srv.wait(timeout=30)
    rows = []
    for loader, seed in procs:
        with open(os.path.join(a.workdir, f"result-{loader}-s{seed}.json")) as f:
            rows.append(json.load(f))
    if a.results:
        with open(a.results, "a") as f:
            for r in rows:
                f.write(json.dumps(dict(r, train_n=a.train_n, val_n=a.val_n, pipeline=PIPELINE_DOC)) + "\n")
    print(f"\n{rows[0]['device']}, torch {rows[0]['torch']}, torchvision {rows[0]['torchvision']}; "
          f"{a.train_n} training images, {a.val_n} validation; {rows[0]['steps']} steps of {a.batch}")
    print("| loader | seed | AP | AP50 | loss (last 50 steps) |\n|---|---:|---:|---:|---:|")
    for r in sorted(rows, key=lambda r: (r["loader"], r["seed"])):
        print(f"| {r['loader']} | {r['seed']} | {r['AP']:.4f} | {r['AP50']:.4f} | {r['final_loss']:.3f} |")
    for lo in ("tv", "stoker"):
        aps = [r["AP"] for r in rows if r["loader"] == lo]
        print(f"{lo}: AP mean {statistics.mean(aps):.4f}, spread {max(aps) - min(aps):.4f}")
    by = {(r["loader"], r["seed"]): r["AP"] for r in rows}
    seed_noise = [abs(by[("tv", s)] - by[("tv", t)]) for s in a.seeds for t in a.seeds if s < t]
    diffs = [by[("stoker", s)] - by[("tv", s)] for s in a.seeds]
    print(f"stoker - tv per seed: {[round(d, 4) for d in diffs]}; tv's own seed-to-seed differences: "
          f"{[round(d, 4) for d in seed_noise]}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--role", choices=("all", "train"), default="all")
    ap.add_argument("--stoker", default="bin/stoker")
    ap.add_argument("--workdir", default="/tmp/det_map")
    ap.add_argument("--backgrounds", default="testdata/photos")
    ap.add_argument("--train-n", type=int, default=3000)
    ap.add_argument("--val-n", type=int, default=400)
    ap.add_argument("--seeds", default="1,2")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=0.04)
    ap.add_argument("--steps", type=int, help="steps of every run (default: from the rates and --budget)")
    ap.add_argument("--budget", type=float, default=150, help="seconds of training for the slowest run")
    ap.add_argument("--probe", type=int, default=40, help="the step at which a run reports its rate")
    ap.add_argument("--wait", type=float, default=300, help="seconds a wait for another process may take")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tv-workers", type=int, default=3)
    ap.add_argument("--stoker-workers", type=int, default=6)
    ap.add_argument("--results")
    ap.add_argument("--log-every", type=int, default=100)
    # a trainer's own
    ap.add_argument("--loader", choices=("tv", "stoker"))
    ap.add_argument("--seed", type=int)
    ap.add_argument("--target")
    a = ap.parse_args()
    if a.role == "train":
        train(a)
    else:
        a.seeds = [int(s) for s in a.seeds.split(",")]
        orchestrate(a)


if __name__ == "__main__":
    main()
