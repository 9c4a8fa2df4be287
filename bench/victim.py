#!/usr/bin/env python3
"""A victim trainer's rate beside CPU-heavy attackers on one `stoker serve`
(issue 66's proof), and the cost model's prediction against what the
server measures, per preset.

The victim is a stoker.Loader (imagenet-train, batch 32) in this process,
on its own connection. Each attack runs on a fresh server (--workers 2,
--memory-budget 1 GB, the default --max-sample-cpu): the victim alone
(after a warm-up: its first epoch's files read, the decoder's caches),
then beside the attacking clients (each a process of its own, so a
connection and a client of its own, with its jobs as threads), then in
the first seconds after they leave, then again later. Rates are the
victim's images per wall second in each phase; ratios are over its rate
alone. Each attacker says how many batches each of its jobs got, or the
error it was refused or failed with.

    go build -o bin/stoker ./cmd/stoker
    STOKER_BIN=bin/stoker .venv/bin/python bench/victim.py --data PHOTOS/train
    .venv/bin/python bench/victim.py --data PHOTOS/train --attacks blur,augmix8 --clients 3
    .venv/bin/python bench/victim.py --data PHOTOS/train --factors

Attacks (--attacks, comma-separated; default all but the N-client one):
  blur, blur4      RandomResizedCrop(1200) + GaussianBlur(1023, sigma 1000),
                   batch 1 (issue 66's: predicted under the default limit),
                   one job, four jobs (one client)
  augmix, augmix4, augmix8
                   RandomResizedCrop(px) + AugMix(10, 16, 14), batch 1, at
                   the largest px the server opens (found by DescribeJob),
                   1, 4, 8 jobs (one client)
  masks            issue 66's masks job: four 2000 x 2000 photos of 1,024
                   whole-image polygon instances, lsj + masks (written to a
                   temporary directory), one job
  clients          --clients clients, each one blur job
The issue's bar: during >= 0.45x (>= 0.9/(N+1) beside N clients), the first
seconds after >= 0.9x.

--factors: on one server, each preset's job (batch 32) for --factor-batches
batches; the server's stoker_predicted_cpu_seconds_per_sample and
stoker_cpu_seconds_per_sample for it, and their ratio (measured over
predicted: the model's factor).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from typing import Dict, List, Optional, Tuple

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))


def attack_transform(kind: str, px: int):
    from stoker import transforms as T

    if kind == "blur":
        return T.Compose([T.RandomResizedCrop(1200), T.GaussianBlur(1023, sigma=1000.0)])
    if kind == "augmix":
        return T.Compose([T.RandomResizedCrop(px), T.AugMix(severity=10, mixture_width=16, chain_depth=14)])
    raise ValueError(kind)


def attacker(addr: str, kind: str, px: int, jobs: int, seconds: float) -> None:
    """One attacking client (this process: one connection): jobs jobs of
    the attack, batch 1, for seconds; prints what each job got."""
    import stoker

    end = time.monotonic() + seconds
    out: List[str] = []

    def run() -> None:
        n = 0
        try:
            if kind == "masks":
                loader = stoker.Loader(addr, "masks", transform="lsj", batch_size=2, targets=("boxes", "labels", "masks"), prefetch=4)
            else:
                loader = stoker.Loader(addr, "photos", transform=attack_transform(kind, px), batch_size=1, prefetch=4)
            while time.monotonic() < end:
                for _ in loader:
                    n += 1
                    if time.monotonic() >= end:
                        break
            out.append(f"{n} batches")
        except Exception as e:  # refused at open, or failed: reported
            out.append(f"{n} batches, then {type(e).__name__}: {str(e)[:300]}")

    ts = [threading.Thread(target=run, daemon=True) for _ in range(jobs)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=max(end - time.monotonic(), 0) + 5)
    print(f"{kind} x{jobs}: " + "; ".join(out), flush=True)
    os._exit(0)  # the connection closes with the process: the jobs end


def masks_data(root: str) -> Tuple[str, str]:
    """Issue 66's masks data under root: four 2000 x 2000 JPEGs, each with
    1,024 polygon instances covering the whole image, and its COCO file."""
    import numpy as np
    from PIL import Image

    side, images, instances = 2000, 4, 1024
    d = os.path.join(root, "masks")
    os.makedirs(d, exist_ok=True)
    y, x = np.mgrid[0:side, 0:side]
    img = np.stack([x % 256, y % 256, (x + y) % 256], axis=-1).astype(np.uint8)
    doc: Dict[str, list] = {"images": [], "annotations": [], "categories": [{"id": 1, "name": "thing"}]}
    for i in range(images):
        name = f"big-{i:02d}.jpg"
        Image.fromarray(img).save(os.path.join(d, name), quality=50)
        doc["images"].append({"id": i + 1, "file_name": name, "width": side, "height": side})
        for k in range(instances):
            o = float(k % 7)
            doc["annotations"].append({"id": i * instances + k + 1, "image_id": i + 1, "category_id": 1, "iscrowd": 0,
                                       "bbox": [0, 0, side, side], "area": float(side * side),
                                       "segmentation": [[o, o, side - o, o, side - o, side - o, o, side - o]]})
    ann = os.path.join(root, "instances_masks.json")
    with open(ann, "w") as f:
        json.dump(doc, f)
    return d, ann


class Server:
    """A `stoker serve` of the photos (and the masks set), its log in a
    temporary directory."""

    def __init__(self, bin_: str, data: str, workers: int, tmp: str, masks: Optional[Tuple[str, str]]):
        self.dir = tempfile.mkdtemp(dir=tmp)
        self.log_path = os.path.join(self.dir, "serve.log")
        addr_file = os.path.join(self.dir, "addr")
        args = [bin_, "serve", "--listen", "127.0.0.1:0", "--addr-file", addr_file, "--workers", str(workers),
                "--metrics", "127.0.0.1:0", "--dataset", f"photos={data}", "--memory-budget", "1000000000"]
        if masks:
            args += ["--dataset", f"masks={masks[0]}", "--annotations", f"masks={masks[1]}"]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=open(self.log_path, "w"))
        while not os.path.exists(addr_file) or not open(addr_file).read().strip():
            if self.proc.poll() is not None:
                raise RuntimeError("stoker serve exited:\n" + self.log())
            time.sleep(0.05)
        self.addr = open(addr_file).read().strip()
        m = re.search(r'msg=metrics addr=(\S+)', self.log())
        self.metrics_addr = m.group(1) if m else ""

    def log(self) -> str:
        return open(self.log_path).read()

    def metrics(self) -> Dict[str, float]:
        out = {}
        with urllib.request.urlopen(f"http://{self.metrics_addr}/metrics", timeout=10) as r:
            for line in r.read().decode().splitlines():
                if line and not line.startswith("#"):
                    k, _, v = line.rpartition(" ")
                    try:
                        out[k] = float(v)
                    except ValueError:
                        pass
        return out

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def largest_augmix(addr: str) -> int:
    """The largest crop side of the AugMix attack the server opens
    (DescribeJob: nothing is made)."""
    import stoker

    def opens(px: int) -> bool:
        try:
            len(stoker.Loader(addr, "photos", transform=attack_transform("augmix", px), batch_size=1))
            return True
        except Exception:
            return False

    lo, hi = 16, 4096
    if not opens(lo):
        return lo
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if opens(mid) else (lo, mid)
    return lo


class Victim:
    """The victim trainer: imagenet-train, batch 32, in this process."""

    def __init__(self, addr: str):
        import stoker

        self.loader = stoker.Loader(addr, "photos", transform="imagenet-train", batch_size=32)
        self.it = iter(())

    def rate(self, seconds: float) -> float:
        n, t0 = 0, time.monotonic()
        while time.monotonic() - t0 < seconds:
            try:
                images = next(self.it)[0]
            except StopIteration:
                self.it = iter(self.loader)
                continue
            n += images.shape[0]
        return n / (time.monotonic() - t0)


ATTACKS = {  # name: (kind, jobs a client)
    "blur": ("blur", 1), "blur4": ("blur", 4),
    "augmix": ("augmix", 1), "augmix4": ("augmix", 4), "augmix8": ("augmix", 8),
    "masks": ("masks", 1), "clients": ("blur", 1),
}


def run_attack(a, name: str, masks: Tuple[str, str]) -> str:
    kind, jobs = ATTACKS[name]
    clients = a.clients if name == "clients" else 1
    srv = Server(a.bin, a.data, a.workers, a.tmp, masks)
    try:
        px = largest_augmix(srv.addr) if kind == "augmix" else 0
        v = Victim(srv.addr)
        v.rate(a.alone)  # warm
        alone = v.rate(a.alone)
        before = srv.log().count('msg="job ')
        procs = [subprocess.Popen([sys.executable, __file__, "--attacker", srv.addr, "--kind", kind, "--px", str(px),
                                   "--jobs", str(jobs), "--during", str(a.during + a.settle + 3)],
                                  stdout=subprocess.PIPE, text=True)
                 for _ in range(clients)]
        t0, want = time.monotonic(), before + clients * jobs
        while srv.log().count('msg="job ') < want and time.monotonic() - t0 < 60:
            time.sleep(0.1)  # the attackers start (torch's import) and open (or are refused) their jobs
        time.sleep(a.settle)
        during = v.rate(a.during)
        msgs = [p.communicate()[0].strip() for p in procs]
        after = v.rate(a.after)
        later = v.rate(a.alone)
        log = srv.log()
        bar = 0.45 if clients == 1 else 0.9 / (clients + 1)
        what = f"{name} ({kind} x{jobs} jobs x{clients} clients" + (f", px {px}" if px else "") + ")"
        lines = [f"{what}: victim alone {alone:.0f} img/s, during {during:.0f} ({during / alone:.2f}x, bar {bar:.2f}), "
                 f"first {a.after:g} s after {after:.0f} ({after / alone:.2f}x), then {later:.0f} ({later / alone:.2f}x)"]
        lines += ["    attacker " + m[:400] for m in sorted(msgs)]
        opened, refused, errors = log.count('msg="job open"'), log.count('msg="job refused"'), log.count("level=ERROR")
        lines.append(f"    server log: {opened} jobs opened, {refused} refused, {errors} errors")
        return "\n".join(lines)
    finally:
        srv.close()


PRESETS = ["imagenet-train", "imagenet-eval", "tv-resnet50-v2", "deit", "simclr-view", "dino-global", "dino-local", "clip",
           "simclr", "dino", "dinov2"]


def factors(a) -> List[str]:
    """Each preset's predicted and measured CPU per sample on one server:
    the job's gauges once it has made --factor-batches batches (and the
    controller has published them: every 500 ms)."""
    import stoker

    srv = Server(a.bin, a.data, a.workers, a.tmp, None)
    out = [f"{'preset':<16} {'predicted ms':>12} {'measured ms':>12} {'factor':>7}"]
    seen: set = set()
    try:
        for p in PRESETS:
            loader = stoker.Loader(srv.addr, "photos", transform=p, batch_size=32)
            n, pred, meas, job = 0, float("nan"), float("nan"), ""
            t0 = time.monotonic()
            while not job and time.monotonic() - t0 < 60:
                for _ in loader:
                    n += 1
                    if n < a.factor_batches or n % 5:
                        continue
                    ms = srv.metrics()
                    for k, v in ms.items():
                        if k.startswith("stoker_cpu_seconds_per_sample{") and k not in seen and v > 0:
                            job, meas = k, v
                            pk = "stoker_predicted_cpu_seconds_per_sample{" + k.split("{", 1)[1]
                            pred = ms.get(pk, float("nan"))
                    if job:
                        break
            seen.add(job)
            loader.close()
            out.append(f"{p:<16} {pred * 1e3:>12.3f} {meas * 1e3:>12.3f} {meas / pred:>7.2f}")
    finally:
        srv.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.environ.get("STOKER_BIN", "bin/stoker"))
    ap.add_argument("--data", help="an ImageFolder of photos (the victim's and the attackers' dataset)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--attacks", default="blur,blur4,augmix,augmix4,augmix8,masks")
    ap.add_argument("--clients", type=int, default=3, help="attacking clients of the 'clients' attack")
    ap.add_argument("--alone", type=float, default=8)
    ap.add_argument("--during", type=float, default=15)
    ap.add_argument("--after", type=float, default=2)
    ap.add_argument("--settle", type=float, default=2)
    ap.add_argument("--factors", action="store_true", help="report the cost model's factor per preset instead")
    ap.add_argument("--factor-batches", type=int, default=20)
    ap.add_argument("--attacker", help=argparse.SUPPRESS)
    ap.add_argument("--kind", help=argparse.SUPPRESS)
    ap.add_argument("--px", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--jobs", type=int, default=1, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.attacker:
        attacker(a.attacker, a.kind, a.px, a.jobs, a.during)
        return 0
    if not a.data:
        ap.error("--data is required (an ImageFolder of photos)")
    with tempfile.TemporaryDirectory() as tmp:
        a.tmp = tmp
        if a.factors:
            print("\n".join(factors(a)), flush=True)
            return 0
        names = [n for n in a.attacks.split(",") if n]
        for n in names:
            if n not in ATTACKS:
                ap.error(f"unknown attack {n!r}: want some of {', '.join(ATTACKS)}")
        masks = masks_data(tmp) if "masks" in names else None
        for n in names:
            print(run_attack(a, n, masks), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
