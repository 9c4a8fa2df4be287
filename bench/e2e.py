#!/usr/bin/env python3
"""End to end into Python: images/s delivered to a training loop as torch
tensors, stoker against a tuned PyTorch DataLoader, on the same images.

  stoker:     this script starts `stoker serve --listen 127.0.0.1:0
              --workers N --dataset bench=DIR` and iterates
              stoker.Loader(addr, "bench", "imagenet-train", batch_size=B).
  dataloader: torch.utils.data.DataLoader(ImageFolder(DIR,
              Compose([RandomResizedCrop(224), RandomHorizontalFlip(),
              PILToTensor()])), batch_size=B, shuffle=True, num_workers=N,
              pin_memory=<cuda available>, persistent_workers=True).

Rounds are interleaved (stoker, dataloader, stoker, ...) so that the
machine's noise lands on both alike. Each round takes two warm-up batches,
then counts the images delivered for --seconds; the loop only looks at each
batch's shape (and copies it to the GPU when there is one). Epochs follow one
another inside a round, for both.

CPU is reported per 1000 images, by process:
  trainer:  this process (getrusage RUSAGE_SELF over the timed window): the
            cost that lands on the GPU host's trainer, for both impls.
  dataloader workers: the DataLoader's worker processes, read from
            /proc/PID/stat over each timed window; and, as a cross-check,
            getrusage RUSAGE_CHILDREN once the workers have exited (all
            rounds together, warm-up and prefetch included).
  stoker server: the `stoker serve` process, from /proc/PID/stat over each
            timed window.
With --json the last line is one JSON object with these numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Dict, Iterator, List

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "python"))

_TICK = os.sysconf("SC_CLK_TCK")


def self_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def proc_cpu(pids: List[int]) -> float:
    """CPU seconds (user + system) of live processes, from /proc."""
    total = 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime
        except (OSError, IndexError, ValueError):
            pass
    return total


def build_stoker(tmp: str) -> str:
    out = os.path.join(tmp, "stoker")
    r = subprocess.run(["go", "build", "-o", out, "./cmd/stoker"], cwd=REPO, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"e2e: go build ./cmd/stoker failed (give --stoker-bin):\n{r.stderr}")
    return out


def forever(make_iter: Callable[[], Iterator]) -> Iterator:
    """Batches across epoch boundaries."""
    while True:
        n, it = 0, make_iter()
        try:
            for b in it:
                n += 1
                yield b
        finally:
            close = getattr(it, "close", None)  # a stoker stream ends when closed
            if close is not None:
                close()
        if n == 0:
            raise RuntimeError("an epoch with no batches")


def timed_round(batches: Iterator, seconds: float, cuda: bool, other_pids: Callable[[], List[int]]) -> Dict[str, float]:
    """Two warm-up batches, then images delivered for `seconds`."""
    import torch

    def touch(images: "torch.Tensor") -> int:
        if cuda:
            images.cuda(non_blocking=True)
        return images.shape[0]

    for _ in range(2):
        touch(next(batches)[0])
    if cuda:
        torch.cuda.synchronize()
    pids = other_pids()
    c0, o0, t0 = self_cpu(), proc_cpu(pids), time.perf_counter()
    n, deadline = 0, t0 + seconds
    while time.perf_counter() < deadline:
        n += touch(next(batches)[0])
    if cuda:
        torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    return {
        "images": n,
        "seconds": wall,
        "images_per_sec": n / wall,
        "trainer_cpu_s": self_cpu() - c0,
        "other_cpu_s": proc_cpu(pids) - o0,
    }


def per1000(cpu: float, images: int) -> float:
    return 1000.0 * cpu / images if images else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help="ImageFolder directory")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                    help="stoker serve --workers and DataLoader num_workers (default: all cores)")
    ap.add_argument("--seconds", type=float, default=10.0, help="timed seconds per round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--prefetch", type=int, default=4, help="stoker.Loader prefetch (credits)")
    ap.add_argument("--stoker-bin", help="a built stoker binary (default: go build into a temporary directory)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()

    import torch
    import torchvision
    from torchvision import transforms as tvt

    import stoker
    from stoker._local import LocalServer

    cuda = torch.cuda.is_available()
    tmp = tempfile.mkdtemp(prefix="stoker-e2e-")
    binary = a.stoker_bin or build_stoker(tmp)
    children0 = children_cpu()  # go build and the like, before the workers exist

    dataset = torchvision.datasets.ImageFolder(
        a.data, transform=tvt.Compose([tvt.RandomResizedCrop(224), tvt.RandomHorizontalFlip(), tvt.PILToTensor()]))
    dl = torch.utils.data.DataLoader(dataset, batch_size=a.batch_size, shuffle=True, num_workers=a.workers,
                                     pin_memory=cuda, persistent_workers=a.workers > 0)
    dl_state: Dict[str, Any] = {"iter": None}

    def dl_iter() -> Iterator:
        it = iter(dl)
        dl_state["iter"] = it
        return it

    def dl_pids() -> List[int]:
        it = dl_state["iter"]
        return [w.pid for w in getattr(it, "_workers", [])]

    try:
        # Indexing a large tree takes a while: wait up to 60 s.
        srv = LocalServer(binary, {"bench": a.data}, workers=a.workers,
                          log_path=os.path.join(tmp, "server.log"), start_timeout=60)
    except RuntimeError as e:
        sys.exit(f"e2e: {e}")
    server, addr = srv.proc, srv.addr
    rounds: Dict[str, List[Dict[str, float]]] = {"stoker": [], "dataloader": []}
    dl_batches = forever(dl_iter)
    try:
        loader = stoker.Loader(addr, "bench", transform="imagenet-train", batch_size=a.batch_size,
                               shuffle=True, prefetch=a.prefetch, timeout=120)
        for r in range(a.rounds):
            # A fresh stream per round, closed after it, so the server idles
            # while the DataLoader runs.
            st_batches = forever(lambda: iter(loader))
            rounds["stoker"].append(timed_round(st_batches, a.seconds, cuda, lambda: [server.pid]))
            st_batches.close()
            rounds["dataloader"].append(timed_round(dl_batches, a.seconds, cuda, dl_pids))
            print(f"round {r + 1}/{a.rounds}: stoker {rounds['stoker'][-1]['images_per_sec']:.0f} images/s, "
                  f"dataloader {rounds['dataloader'][-1]['images_per_sec']:.0f} images/s", file=sys.stderr)
        stall = loader.stats.wait_seconds
    finally:
        # Shut the DataLoader's workers down, so RUSAGE_CHILDREN counts them.
        dl_batches.close()
        it = dl_state["iter"]
        if it is not None and hasattr(it, "_shutdown_workers"):
            it._shutdown_workers()
        del it
        dl_state["iter"] = None
        workers_total = children_cpu() - children0
        srv.stop(timeout=15)

    def med(impl: str, key: str) -> float:
        return statistics.median(x[key] for x in rounds[impl])

    def med_per1000(impl: str, key: str) -> float:
        return statistics.median(per1000(x[key], x["images"]) for x in rounds[impl])

    dl_images_all = sum(x["images"] for x in rounds["dataloader"])
    res = {
        "data": a.data,
        "batch_size": a.batch_size,
        "workers": a.workers,
        "cpus": os.cpu_count(),
        "cuda": cuda,
        "rounds": a.rounds,
        "seconds_per_round": a.seconds,
        "images_per_sec": {"stoker": med("stoker", "images_per_sec"), "dataloader": med("dataloader", "images_per_sec")},
        "ratio": med("stoker", "images_per_sec") / med("dataloader", "images_per_sec"),
        # This process (the trainer), RUSAGE_SELF over each timed window.
        "trainer_cpu_s_per_1000": {"stoker": med_per1000("stoker", "trainer_cpu_s"),
                                   "dataloader": med_per1000("dataloader", "trainer_cpu_s")},
        # The DataLoader's worker processes, /proc/PID/stat over each timed window.
        "dataloader_workers_cpu_s_per_1000": med_per1000("dataloader", "other_cpu_s"),
        # The same workers, RUSAGE_CHILDREN after they exited: every round,
        # warm-up and prefetched batches included, over the timed images.
        "dataloader_workers_cpu_s_per_1000_rusage_children": per1000(workers_total, dl_images_all),
        # The stoker server process, /proc/PID/stat over each timed window.
        "stoker_server_cpu_s_per_1000": med_per1000("stoker", "other_cpu_s"),
        # The design's target: stoker's trainer-process CPU per image against
        # all the CPU a DataLoader spends on the trainer's host (its main
        # process and its workers), as when stoker's work runs on peers.
        "stoker_trainer_cpu_vs_dataloader_host_cpu": med_per1000("stoker", "trainer_cpu_s")
        / (med_per1000("dataloader", "trainer_cpu_s") + med_per1000("dataloader", "other_cpu_s")),
        "stoker_trainer_wait_s": stall,
        "runs": rounds,
    }
    ips, t, w = res["images_per_sec"], res["trainer_cpu_s_per_1000"], res["dataloader_workers_cpu_s_per_1000"]
    print(f"\nbatch {a.batch_size}, {a.workers} workers, {os.cpu_count()} CPUs, cuda={cuda}; "
          f"median of {a.rounds} interleaved rounds of {a.seconds:g}s on {a.data}")
    print(f"{'impl':11} {'images/s':>9} {'trainer CPU s/1000':>19} {'producer CPU s/1000':>20}")
    print(f"{'stoker':11} {ips['stoker']:9.0f} {t['stoker']:19.3f} {res['stoker_server_cpu_s_per_1000']:20.3f}  (producer: stoker serve)")
    print(f"{'dataloader':11} {ips['dataloader']:9.0f} {t['dataloader']:19.3f} {w:20.3f}  (producer: DataLoader workers; "
          f"RUSAGE_CHILDREN cross-check {res['dataloader_workers_cpu_s_per_1000_rusage_children']:.3f})")
    print(f"stoker/dataloader: {res['ratio']:.2f}x images/s; stoker's trainer CPU per image is "
          f"{t['stoker'] / t['dataloader']:.0%} of the DataLoader's main process and "
          f"{res['stoker_trainer_cpu_vs_dataloader_host_cpu']:.1%} of the DataLoader's main process + workers")
    if a.json:
        print(json.dumps(res))


if __name__ == "__main__":
    main()
