#!/usr/bin/env python3
"""End to end into Python: images/s delivered to a training loop as torch
tensors, stoker against a tuned PyTorch DataLoader, on the same images.

  stoker-shm: this script starts `stoker serve --listen 127.0.0.1:0
              --workers N --dataset bench=DIR` and iterates
              stoker.Loader(addr, "bench", "imagenet-train", batch_size=B,
              transport="shm"): pixels in a shared-memory ring.
  stoker-grpc: the same with transport="grpc": pixels in gRPC chunks.
  dataloader: torch.utils.data.DataLoader(ImageFolder(DIR,
              Compose([RandomResizedCrop(224), RandomHorizontalFlip(),
              PILToTensor()])), batch_size=B, shuffle=True, num_workers=N,
              pin_memory=<cuda available>, persistent_workers=True).

Rounds are interleaved (stoker-shm, stoker-grpc, dataloader, stoker-shm,
...) so that the machine's noise lands on all alike. Each round takes two warm-up batches,
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

--receive measures delivery alone, in GB/s into Python: the server runs with
--bench-replay (each job's first batch made once, every later one a copy of
its pixels), and the DataLoader's dataset returns one preallocated image
(its workers still collate each batch and pass it through shared memory),
so the producers are not the limit; the trainer loop only touches each
batch's shape (and copies to the GPU when there is one).
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
    ap.add_argument("--receive", action="store_true",
                    help="delivery alone, in GB/s: stoker serve --bench-replay, a DataLoader over one cached image")
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

    dataset: Any = torchvision.datasets.ImageFolder(
        a.data, transform=tvt.Compose([tvt.RandomResizedCrop(224), tvt.RandomHorizontalFlip(), tvt.PILToTensor()]))
    if a.receive:
        dataset = _Cached(len(dataset))
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
        srv = LocalServer(binary, {"bench": a.data}, workers=a.workers, args=["--bench-replay"] if a.receive else [],
                          log_path=os.path.join(tmp, "server.log"), start_timeout=60)
    except RuntimeError as e:
        sys.exit(f"e2e: {e}")
    server, addr = srv.proc, srv.addr
    impls = ["stoker-shm", "stoker-grpc", "dataloader"]
    rounds: Dict[str, List[Dict[str, float]]] = {i: [] for i in impls}
    dl_batches = forever(dl_iter)
    try:
        loaders = {
            t: stoker.Loader(addr, "bench", transform="imagenet-train", batch_size=a.batch_size,
                             shuffle=True, prefetch=a.prefetch, timeout=120, transport=t)
            for t in ("shm", "grpc")
        }
        for r in range(a.rounds):
            for t, loader in loaders.items():
                # A fresh stream per round, closed after it, so the server
                # idles while the others run.
                st_batches = forever(lambda: iter(loader))
                rounds["stoker-" + t].append(timed_round(st_batches, a.seconds, cuda, lambda: [server.pid]))
                st_batches.close()
                if loader.transport != t:
                    sys.exit(f"e2e: transport={t!r} ran on {loader.transport!r}: {loader.transport_reason}")
            rounds["dataloader"].append(timed_round(dl_batches, a.seconds, cuda, dl_pids))
            print(f"round {r + 1}/{a.rounds}: " + ", ".join(
                f"{i} {rounds[i][-1]['images_per_sec']:.0f} images/s" for i in impls), file=sys.stderr)
        stall = {t: ld.stats.wait_seconds for t, ld in loaders.items()}
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
    image_bytes = 3 * 224 * 224
    res = {
        "mode": "receive" if a.receive else "end-to-end",
        "data": a.data,
        "batch_size": a.batch_size,
        "workers": a.workers,
        "cpus": os.cpu_count(),
        "cuda": cuda,
        "rounds": a.rounds,
        "seconds_per_round": a.seconds,
        "images_per_sec": {i: med(i, "images_per_sec") for i in impls},
        "gb_per_sec": {i: med(i, "images_per_sec") * image_bytes / 1e9 for i in impls},
        "ratio_vs_dataloader": {i: med(i, "images_per_sec") / med("dataloader", "images_per_sec") for i in impls},
        # This process (the trainer), RUSAGE_SELF over each timed window.
        "trainer_cpu_s_per_1000": {i: med_per1000(i, "trainer_cpu_s") for i in impls},
        # The producer: stoker serve, or the DataLoader's worker processes,
        # /proc/PID/stat over each timed window.
        "producer_cpu_s_per_1000": {i: med_per1000(i, "other_cpu_s") for i in impls},
        # The same workers, RUSAGE_CHILDREN after they exited: every round,
        # warm-up and prefetched batches included, over the timed images.
        "dataloader_workers_cpu_s_per_1000_rusage_children": per1000(workers_total, dl_images_all),
        "stoker_trainer_wait_s": stall,
        "runs": rounds,
    }
    ips, t, p = res["images_per_sec"], res["trainer_cpu_s_per_1000"], res["producer_cpu_s_per_1000"]
    print(f"\n{res['mode']}: batch {a.batch_size}, {a.workers} workers, {os.cpu_count()} CPUs, cuda={cuda}; "
          f"median of {a.rounds} interleaved rounds of {a.seconds:g}s on {a.data}")
    print(f"{'impl':12} {'images/s':>9} {'GB/s':>6} {'trainer CPU s/1000':>19} {'producer CPU s/1000':>20}")
    for i in impls:
        print(f"{i:12} {ips[i]:9.0f} {res['gb_per_sec'][i]:6.2f} {t[i]:19.3f} {p[i]:20.3f}")
    print(f"(producer: stoker serve, or the DataLoader's workers; RUSAGE_CHILDREN cross-check for the workers "
          f"{res['dataloader_workers_cpu_s_per_1000_rusage_children']:.3f})")
    for i in ("stoker-shm", "stoker-grpc"):
        print(f"{i}: {res['ratio_vs_dataloader'][i]:.2f}x the DataLoader's images/s; trainer CPU per image "
              f"{t[i] / t['dataloader']:.0%} of the DataLoader's main process")
    if a.json:
        print(json.dumps(res))


class _Cached:
    """A dataset of n samples that are all one preallocated image (--receive):
    the DataLoader's workers only collate and send."""

    def __init__(self, n: int) -> None:
        import torch

        self.n = n
        self.image = torch.randint(0, 256, (3, 224, 224), dtype=torch.uint8)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> Any:
        return self.image, 0


if __name__ == "__main__":
    main()
