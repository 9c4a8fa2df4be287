#!/usr/bin/env python3
"""Issue 17 on a real GPU: ResNet-50 (bf16 autocast, channels_last, SGD) fed
by stoker, and the advisor's recommendation checked by running with it.

Runs on a GPU host with a plain python3 that has torch, torchvision and
grpcio, and the stoker package from this repository (PYTHONPATH=python); no
virtualenv, no network. Build the server first (`make gpuhost`):

    PYTHONPATH=python python3 bench/gpu_train.py --stoker bin/stoker-gpuhost \\
        --sequence ceiling,w2,p1,p2,p4,p6,rec --results out/gpu_train.jsonl

Each configuration of --sequence starts its own processes, all on loopback:

  ceiling  no stoker: one batch already on the GPU, trained on repeatedly
           (what the GPU does when input costs nothing)
  wK       a coordinator `stoker serve --workers K` pinned to K cores of its
           own: its local executor is one maker
  pN       N workers `stoker serve --workers C`, each pinned to C cores of its
           own (--peer-cores, 2), and a coordinator `--workers 0 --peers ...`
           on --coord-cores cores: N makers
  rec      for every distinct recommendation the runs so far gave (this
           invocation's, and those already in --results), the run pR with
           that many makers: does the recommended count saturate the GPU?

The trainer (this process) is pinned to the first --trainer-cores cores. It
takes uint8 batches from stoker.Loader (shared memory with --shm, gRPC
chunks without), moves them to the GPU and normalizes them there, and
trains for --warmup seconds, then measures for --seconds: images/s, the
share of wall time it waited in next() (the trainer's wait share), the GPU's
utilization from `nvidia-smi -lms 100` (or torch.cuda.utilization()), and,
every second from the coordinator's Status, stoker_workers_recommended, the
advice, the signal it rests on and the coordinator's own GPU idle ratio. The
coordinator runs with --advise-window 10s (the measurement is 60 s: the
published figure follows the steady state, not the start) unless
--advise-window says otherwise.

It prints the issue's table and, with --results, appends one JSON line per
configuration (so that a run cut short keeps what it measured, and a later
`--sequence rec` can use earlier recommendations).

On a machine without a GPU it runs in a reduced mode for checking
(--device cpu --model tiny --batch 16 --size 64 --warmup 3 --seconds 8
--no-pin): the same processes and measurements, no NVML.
"""
from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from typing import Dict, List, Optional, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

# ---------------------------------------------------------------- processes


def serve(procs: dict, name: str, binary: str, args: Sequence[str], cores: Optional[Sequence[int]], logdir: str):
    """One `stoker serve` on 127.0.0.1:0, under taskset when given cores,
    logging to logdir, added to procs by name; it has its address when this
    returns."""
    from stoker._local import LocalServer

    srv = LocalServer(binary, {}, args=["--log-level", "warn", "--grace", "5s", *args],
                      log_path=os.path.join(logdir, name.replace(" ", "-") + ".log"), start_timeout=60,
                      prefix=["taskset", "-c", ",".join(map(str, cores))] if cores else ())
    procs[name] = srv
    return srv


def scrape(addr: str) -> Dict[str, float]:
    """Every sample of a server's /metrics, by series."""
    out: Dict[str, float] = {}
    with urllib.request.urlopen(f"http://{addr}/metrics", timeout=5) as r:
        for line in r.read().decode().splitlines():
            if not line or line.startswith("#"):
                continue
            key, _, val = line.rpartition(" ")
            try:
                out[key] = float(val)
            except ValueError:
                pass
    return out


def free_addr() -> str:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


# ---------------------------------------------------------------- GPU utilization


class GPUUtil:
    """GPU utilization (percent) sampled every 100 ms while running: from
    `nvidia-smi --query-gpu=utilization.gpu -lms 100`, else from
    torch.cuda.utilization() (pynvml), else nothing."""

    def __init__(self, device_index: int, cuda: bool) -> None:
        self.samples: List[float] = []
        self.source = "none"
        self._stop = threading.Event()
        self._proc: Optional[subprocess.Popen] = None
        self._thread: Optional[threading.Thread] = None
        if not cuda:
            return
        smi = shutil.which("nvidia-smi")
        if smi:
            # CUDA's index is not NVML's when CUDA_VISIBLE_DEVICES reorders
            # or hides devices; the PCI bus id names the same device for both
            # (tried once: an older torch has no PCI ids, or nvidia-smi may
            # spell them otherwise; then the index).
            query = ["-i", str(device_index)]
            try:
                import torch

                p = torch.cuda.get_device_properties(device_index)
                bus = ["-i", f"{p.pci_domain_id:08x}:{p.pci_bus_id:02x}:{p.pci_device_id:02x}.0"]
                probe = subprocess.run([smi, "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits", *bus],
                                       capture_output=True, text=True, timeout=20)
                if probe.returncode == 0 and probe.stdout.strip():
                    query = bus
            except Exception:  # noqa: BLE001 - the index, then
                pass
            self._proc = subprocess.Popen([smi, "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits", "-lms", "100", *query],
                                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            self.source = "nvidia-smi"
            self._thread = threading.Thread(target=self._read_smi, daemon=True)
        else:
            try:
                import torch

                torch.cuda.utilization(device_index)
                self.source = "torch.cuda.utilization"
                self._thread = threading.Thread(target=self._poll_torch, args=(device_index,), daemon=True)
            except Exception:
                return
        self._recording = False
        self._thread.start()

    def _read_smi(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        for line in self._proc.stdout:
            if self._stop.is_set():
                return
            try:
                v = float(line.strip())
            except ValueError:
                continue
            if self._recording:
                self.samples.append(v)

    def _poll_torch(self, idx: int) -> None:
        import torch

        while not self._stop.wait(0.1):
            if self._recording:
                self.samples.append(float(torch.cuda.utilization(idx)))

    def record(self) -> None:
        self.samples = []
        self._recording = True

    def close(self) -> None:
        self._stop.set()
        self._recording = False
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()

    def idle(self) -> Optional[float]:
        if not self.samples:
            return None
        return 1 - statistics.fmean(self.samples) / 100


# ---------------------------------------------------------------- the coordinator's view


class Watch:
    """Polls the coordinator's Status every second: the job's recommendation,
    advice, signal, starvation, GPU idle, and its makers."""

    def __init__(self, addr: str) -> None:
        import grpc
        from stoker.v1 import stoker_pb2, stoker_pb2_grpc

        self._pb = stoker_pb2
        self._channel = grpc.insecure_channel(addr)
        self._stub = stoker_pb2_grpc.FeedServiceStub(self._channel)
        self.samples: List[dict] = []
        self._recording = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            if not self._recording:
                continue
            try:
                resp = self._stub.Status(self._pb.StatusRequest(), timeout=5)
            except Exception as e:  # noqa: BLE001 - a missed sample, said in the results
                self.samples.append({"t": time.perf_counter(), "error": str(e)[:200]})
                continue
            for js in resp.jobs:
                self.samples.append({
                    "t": time.perf_counter(),
                    "recommended": js.workers_recommended,
                    "advice": js.advice,
                    "signal": js.starvation_signal,
                    "starvation": js.starvation,
                    "gpu_idle": js.gpu_idle_ratio,
                    "stall": js.input_stall_ratio,
                    "window": js.window,
                    "makers": [(m.name, round(m.batches_per_second, 3), round(m.busy_batches_per_second, 3), round(m.busy_ratio, 3))
                               for m in js.makers],
                })

    def record(self) -> None:
        self.samples = []
        self._recording = True

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self._channel.close()


# ---------------------------------------------------------------- the trainer


def tiny_cnn(classes: int):
    """A few convolutions: for checking this script on a CPU, not for timing."""
    import torch.nn as nn

    return nn.Sequential(
        nn.Conv2d(3, 16, 5, stride=4, padding=2), nn.ReLU(),
        nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, classes),
    )


def build_model(name: str, device, classes: int = 1000):
    import torch

    if name == "tiny":
        model = tiny_cnn(classes)
    else:
        import torchvision

        model = getattr(torchvision.models, name)(num_classes=classes)
    model = model.to(device).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    return model, opt


def train_step(model, opt, images, labels, device, amp_dtype) -> None:
    import torch
    import torch.nn.functional as F
    import stoker

    images = images.to(device, non_blocking=True)
    labels = labels.to(device, non_blocking=True)
    x = stoker.normalize(images).contiguous(memory_format=torch.channels_last)
    with torch.autocast(device_type=device.type, dtype=amp_dtype):
        loss = F.cross_entropy(model(x), labels)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure_ceiling(a, model, opt, device, amp_dtype, util: GPUUtil) -> dict:
    """The GPU's rate with the input already there: one batch, over and over."""
    import torch

    images = torch.randint(0, 256, (a.batch, 3, a.size, a.size), dtype=torch.uint8, device=device)
    labels = torch.randint(0, 1000, (a.batch,), device=device)
    t_end = time.perf_counter() + a.warmup
    while time.perf_counter() < t_end:
        train_step(model, opt, images, labels, device, amp_dtype)
    sync(device)
    util.record()
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < a.seconds:
        train_step(model, opt, images, labels, device, amp_dtype)
        n += a.batch
    sync(device)
    secs = time.perf_counter() - t0
    return {"images_per_sec": n / secs, "seconds": secs, "wait_share": 0.0, "nvml_idle": util.idle()}


def measure_stoker(a, addr: str, model, opt, device, amp_dtype, util: GPUUtil, watch: Watch) -> dict:
    import stoker
    from stoker import transforms as T

    transform = a.transform if a.size == 224 else T.Compose([T.RandomResizedCrop(a.size), T.RandomHorizontalFlip()])
    loader = stoker.Loader(addr, "train", transform=transform, batch_size=a.batch, shuffle=True, seed=0, prefetch=a.prefetch,
                           drop_last=True, transport="shm" if a.shm else "grpc", pin_memory=device.type == "cuda")
    try:
        def batches():
            for epoch in itertools.count():
                loader.set_epoch(epoch)
                yield from loader

        it = batches()
        t_end = time.perf_counter() + a.warmup
        while time.perf_counter() < t_end:
            images, labels = next(it)
            train_step(model, opt, images, labels, device, amp_dtype)
        sync(device)
        util.record()
        watch.record()
        w0, n, t0 = loader.stats.wait_seconds, 0, time.perf_counter()
        while time.perf_counter() - t0 < a.seconds:
            images, labels = next(it)
            train_step(model, opt, images, labels, device, amp_dtype)
            n += int(images.shape[0])
        sync(device)
        secs = time.perf_counter() - t0
        wait = loader.stats.wait_seconds - w0
        transport = loader.transport
    finally:
        loader.close()
    return {"images_per_sec": n / secs, "seconds": secs, "wait_share": wait / secs, "nvml_idle": util.idle(), "transport": transport}


def summarize_watch(samples: List[dict], t_from: float) -> dict:
    """The coordinator's figures over the measurement's second half: the
    median recommendation, the last advice, the signal."""
    good = [s for s in samples if "error" not in s]
    late = [s for s in good if s["t"] >= t_from] or good
    out: dict = {"status_samples": len(good), "status_errors": len(samples) - len(good)}
    if not late:
        return out
    recs = [s["recommended"] for s in late if s["recommended"] == s["recommended"]]  # not NaN
    out["recommended"] = statistics.median(recs) if recs else None
    out["recommended_min"] = min(recs) if recs else None
    out["recommended_max"] = max(recs) if recs else None
    out["advice"] = late[-1]["advice"]
    out["signal"] = late[-1]["signal"]
    out["starvation"] = statistics.median(s["starvation"] for s in late)
    idles = [s["gpu_idle"] for s in late if s["gpu_idle"] >= 0]
    out["server_gpu_idle"] = statistics.median(idles) if idles else None
    out["server_stall"] = statistics.median(s["stall"] for s in late)
    out["maker_status"] = late[-1]["makers"]
    return out


# ---------------------------------------------------------------- configurations


def parse_config(s: str) -> tuple:
    s = s.strip()
    if s in ("ceiling", "rec"):
        return (s, 0)
    if s[:1] in ("w", "p") and s[1:].isdigit() and int(s[1:]) >= (1 if s[0] == "p" else 0):
        return (s[0], int(s[1:]))
    raise SystemExit(f"gpu_train: --sequence item {s!r}: want ceiling, wK, pN or rec")


class Layout:
    """Which cores each process gets: the trainer first, then the
    coordinator, then each peer."""

    def __init__(self, a) -> None:
        self.cores = sorted(os.sched_getaffinity(0))
        self.pin = not a.no_pin
        self.a = a

    def trainer(self) -> List[int]:
        return self.cores[: self.a.trainer_cores]

    def plan(self, kind: str, n: int) -> tuple:
        """(coordinator cores, [peer cores...]) or raises if they do not fit."""
        a, rest = self.a, self.cores[self.a.trainer_cores:]
        if not self.pin:
            return None, [None] * (n if kind == "p" else 0)
        if kind == "w":
            need = max(n, 1)
            if need > len(rest):
                raise ValueError(f"--workers {n} needs {need} cores, {len(rest)} left after the trainer's")
            return rest[:need], []
        need = a.coord_cores + n * a.peer_cores
        if need > len(rest):
            raise ValueError(f"{n} peers of {a.peer_cores} cores and a coordinator of {a.coord_cores} need {need} cores, {len(rest)} left after the trainer's")
        peers = [rest[a.coord_cores + i * a.peer_cores: a.coord_cores + (i + 1) * a.peer_cores] for i in range(n)]
        return rest[: a.coord_cores], peers


def run_config(a, label: str, kind: str, n: int, layout: Layout, data: str, model, opt, device, amp_dtype, logdir: str) -> dict:
    res: dict = {"config": label, "kind": kind, "n": n, "makers": None, "batch": a.batch, "size": a.size, "shm": a.shm,
                 "model": a.model, "device": str(device)}
    cuda = device.type == "cuda"
    util = GPUUtil(device.index or 0, cuda)
    res["util_source"] = util.source
    procs: dict = {}  # name: stoker._local.LocalServer
    watch: Optional[Watch] = None
    logdir = tempfile.mkdtemp(prefix=kind + str(n) + "-", dir=logdir)  # its own: no stale address files
    try:
        if kind == "ceiling":
            res.update(measure_ceiling(a, model, opt, device, amp_dtype, util))
            return res
        coord_cores, peer_cores = layout.plan(kind, n)
        ds = f"train={data}"
        gpus = a.nvml_gpus if cuda else "none"
        common = ["--dataset", ds, "--stall-target", str(a.stall_target), "--advise-window", a.advise_window]
        peers = []
        for i, cores in enumerate(peer_cores):
            p = serve(procs, f"peer {i}", a.stoker, ["--workers", str(a.peer_cores), "--gpus", "none", "--dataset", ds], cores, logdir)
            peers.append(p)
        metrics = free_addr()
        cargs = ["--workers", str(n if kind == "w" else 0), "--gpus", gpus, "--metrics", metrics, f"--shm={'true' if a.shm else 'false'}", *common]
        if peers:
            cargs += ["--peers", ",".join(p.addr for p in peers)]
        coord = serve(procs, "coordinator", a.stoker, cargs, coord_cores, logdir)
        addr = coord.addr
        res["coordinator_args"] = cargs
        res["cores"] = {"trainer": layout.trainer() if layout.pin else None, "coordinator": coord_cores, "peers": peer_cores}
        res["makers"] = n if kind == "p" else (1 if n > 0 else 0)
        deadline = time.monotonic() + 60
        while peers:
            try:
                if scrape(metrics).get("stoker_peers_ready", 0) >= len(peers):
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{len(peers)} peers not ready after 60 s: {coord.log_tail()}")
            time.sleep(0.2)
        watch = Watch(addr)
        m = measure_stoker(a, addr, model, opt, device, amp_dtype, util, watch)
        res.update(m)
        res.update(summarize_watch(watch.samples, time.perf_counter() - m["seconds"] / 2))
        return res
    except Exception as e:  # noqa: BLE001 - one configuration failing must not lose the others
        res["error"] = f"{type(e).__name__}: {e}"
        for name, p in procs.items():
            res.setdefault("logs", {})[name] = p.log_tail(1500)
        return res
    finally:
        if watch is not None:
            watch.close()
        util.close()
        for p in reversed(procs.values()):
            p.stop()


# ---------------------------------------------------------------- the table


def fmt(v, f: str = "{:.3f}") -> str:
    return "-" if v is None else f.format(v)


def print_table(results: List[dict], ceiling: Optional[float]) -> None:
    print()
    print("| situation | makers | images/s | of ceiling | trainer wait share | GPU idle (NVML, trainer) | GPU idle (coordinator) | recommended (median, min-max) | signal | advice |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|---|")
    for r in results:
        if "error" in r:
            print(f"| {r['config']} | | **error**: {r['error'][:120]} | | | | | | | |")
            continue
        of = r["images_per_sec"] / ceiling if ceiling else None
        rec = r.get("recommended")
        rng = f" ({fmt(r.get('recommended_min'), '{:g}')}-{fmt(r.get('recommended_max'), '{:g}')})" if rec is not None else ""
        print(f"| {r['config']} | {fmt(r.get('makers'), '{}')} | {r['images_per_sec']:,.0f} | {fmt(of, '{:.2f}')} | {r['wait_share']:.3f} | "
              f"{fmt(r.get('nvml_idle'))} | {fmt(r.get('server_gpu_idle'))} | {fmt(rec, '{:g}')}{rng} | {r.get('signal', '')} | {r.get('advice', '')} |")
    # What saturates: the fewest makers whose GPU idled at most 5% (NVML), or
    # without NVML whose images/s were within 3% of the ceiling.
    sat = []
    for r in results:
        if "error" in r or r.get("kind") != "p":
            continue
        idle = r.get("nvml_idle")
        if idle is not None and idle <= 0.05 or idle is None and ceiling and r["images_per_sec"] >= 0.97 * ceiling:
            sat.append(r["makers"])
    needed = min(sat) if sat else None
    print()
    print(f"ceiling: {fmt(ceiling, '{:,.0f}')} images/s; fewest peers that saturated the GPU (NVML idle <= 0.05, or within 3% of the ceiling): {fmt(needed, '{}')}")
    for r in results:
        if "error" in r or r.get("recommended") is None or r.get("kind") == "ceiling":
            continue
        verdict = ""
        if needed is not None:
            d = r["recommended"] - needed
            verdict = "within one maker" if abs(d) <= 1 else f"off by {d:+g}"
        print(f"  {r['config']}: recommended {r['recommended']:g} vs needed {fmt(needed, '{}')}: {verdict or 'no saturating run to compare'}")


# ---------------------------------------------------------------- main


def repeat_dataset(root: str, k: int, workdir: str) -> str:
    """An ImageFolder listing root's images k times, so that an epoch has
    many batches: a coordinator leases at most about two epochs ahead, and
    1,200 photos are under five batches of 256. Each image is linked (or
    copied) in once, the other k-1 names are symbolic links to it inside the
    new root (stoker follows no link out of a dataset's root)."""
    out = os.path.join(workdir, f"repeat{k}-" + os.path.basename(os.path.normpath(root)))
    if os.path.isdir(out):
        return out
    tmp = out + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    n = 0
    for cls in sorted(os.listdir(root)):
        src = os.path.join(root, cls)
        if not os.path.isdir(src):
            continue
        os.makedirs(os.path.join(tmp, cls))
        for name in sorted(os.listdir(src)):
            stem, ext = os.path.splitext(name)
            first = f"{stem}-0{ext}"
            try:
                os.link(os.path.join(src, name), os.path.join(tmp, cls, first))
            except OSError:
                shutil.copyfile(os.path.join(src, name), os.path.join(tmp, cls, first))
            for i in range(1, k):
                os.symlink(first, os.path.join(tmp, cls, f"{stem}-{i}{ext}"))
            n += k
    os.rename(tmp, out)
    print(f"gpu_train: {out}: {n} images ({k} times {root}'s)", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stoker", default=os.path.join(REPO, "bin", "stoker-gpuhost"), help="the stoker binary (make gpuhost)")
    ap.add_argument("--data", help="an ImageFolder; default: --mkdata-n synthetic images made with `stoker mkdata` (kept in --workdir)")
    ap.add_argument("--mkdata-n", type=int, default=10000, help="images of the synthetic dataset (enough that an epoch is many batches)")
    ap.add_argument("--data-repeat", type=int, default=1, help="list --data's images this many times (symlinks in --workdir): a small set of real photos as an epoch of many batches")
    ap.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "stoker-gpu-train"), help="logs and the synthetic dataset")
    ap.add_argument("--sequence", default="ceiling,w2,p1,p2,p4,p6,rec", help="configurations, in order: ceiling, wK, pN, rec")
    ap.add_argument("--model", default="resnet50", help="a torchvision.models name, or tiny (a small CNN, for checking on a CPU)")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--size", type=int, default=224, help="the crop: 224 uses --transform's preset; another size RandomResizedCrop(size)+flip")
    ap.add_argument("--transform", default="imagenet-train")
    ap.add_argument("--prefetch", type=int, default=4)
    ap.add_argument("--shm", action=argparse.BooleanOptionalAction, default=True, help="the trainer takes batches through the coordinator's shared-memory ring")
    ap.add_argument("--warmup", type=float, default=15, help="seconds trained before measuring (cudnn autotuning, the pipeline filling)")
    ap.add_argument("--seconds", type=float, default=40, help="seconds measured per configuration")
    ap.add_argument("--device", default="cuda", help="cuda, cuda:N or cpu (cpu: the reduced check, bf16 autocast on the CPU)")
    ap.add_argument("--trainer-cores", type=int, default=2)
    ap.add_argument("--coord-cores", type=int, default=2, help="the coordinator's cores when it has peers")
    ap.add_argument("--peer-cores", type=int, default=2, help="each peer's cores, and its --workers")
    ap.add_argument("--max-peers", type=int, default=0, help="bound on rec's peers (0: as many as the cores allow)")
    ap.add_argument("--no-pin", action="store_true", help="no taskset, no affinity (a machine with too few cores to give each its own)")
    ap.add_argument("--nvml-gpus", default="all", help="the coordinator's --gpus (NVML indices of the trainer's GPU)")
    ap.add_argument("--stall-target", type=float, default=0.02)
    ap.add_argument("--advise-window", default="10s", help="the coordinator's --advise-window")
    ap.add_argument("--results", help="append one JSON line per configuration here (rec also reads earlier ones)")
    a = ap.parse_args()

    # A SIGTERM (a timeout) unwinds like Ctrl-C: each configuration's
    # finally stops the servers it started.
    def on_term(*_: object) -> None:
        raise KeyboardInterrupt("SIGTERM")

    signal.signal(signal.SIGTERM, on_term)
    seq = [parse_config(s) for s in a.sequence.split(",") if s.strip()]
    if not os.access(a.stoker, os.X_OK):
        sys.exit(f"gpu_train: {a.stoker} is not an executable stoker (make gpuhost, or --stoker bin/stoker)")
    if not a.no_pin and not shutil.which("taskset"):
        sys.exit("gpu_train: taskset not found (util-linux); pass --no-pin to run unpinned")
    os.makedirs(a.workdir, exist_ok=True)
    data = a.data
    if not data:
        data = os.path.join(a.workdir, f"data-{a.mkdata_n}")
        if not os.path.isdir(data):
            print(f"gpu_train: writing {a.mkdata_n} synthetic images to {data}", flush=True)
            subprocess.run([a.stoker, "mkdata", "--out", data + ".tmp", "--n", str(a.mkdata_n)], check=True)
            os.rename(data + ".tmp", data)

    if a.data_repeat > 1:
        data = repeat_dataset(data, a.data_repeat, a.workdir)

    import torch

    layout = Layout(a)
    if layout.pin:
        os.sched_setaffinity(0, layout.trainer())
        torch.set_num_threads(max(1, a.trainer_cores))
    device = torch.device(a.device)
    amp_dtype = torch.bfloat16
    if device.type == "cuda":
        if not torch.cuda.is_available():
            sys.exit("gpu_train: no CUDA device (use --device cpu for the reduced check)")
        if device.index is None:
            # torch.cuda.set_device refuses a device without an index
            # (torch 2.11); plain "cuda" means the current one.
            device = torch.device("cuda", torch.cuda.current_device())
        torch.backends.cudnn.benchmark = True
        torch.cuda.set_device(device)
    model, opt = build_model(a.model, device)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(f"gpu_train: {a.model} on {name}, batch {a.batch} of {a.size} px, bf16 autocast, channels_last, SGD; "
          f"{len(layout.cores)} cores, trainer on {layout.trainer() if layout.pin else 'any'}; torch {torch.__version__}", flush=True)

    earlier: List[dict] = []
    if a.results and os.path.exists(a.results):
        with open(a.results) as f:
            earlier = [json.loads(line) for line in f if line.strip()]
    results: List[dict] = []
    logdir = tempfile.mkdtemp(prefix="logs-", dir=a.workdir)

    def record(r: dict) -> None:
        results.append(r)
        if a.results:
            with open(a.results, "a") as f:
                f.write(json.dumps(r) + "\n")
        brief = {k: r.get(k) for k in ("config", "images_per_sec", "wait_share", "nvml_idle", "server_gpu_idle", "recommended", "signal", "advice", "error")}
        print("gpu_train:", json.dumps(brief), flush=True)

    def run(label: str, kind: str, n: int) -> None:
        print(f"gpu_train: {label} ...", flush=True)
        record(run_config(a, label, kind, n, layout, data, model, opt, device, amp_dtype, logdir))

    try:
        run_sequence(a, seq, run, earlier, results)
    except KeyboardInterrupt as e:
        print(f"gpu_train: interrupted ({e or 'Ctrl-C'}); the configurations measured so far:", flush=True)
    finally:
        # The table: this invocation's runs and the earlier ones of --results
        # with the same model and batch (a sequence run in several commands).
        same = [r for r in earlier + results if r.get("batch") == a.batch and r.get("model") == a.model and r.get("size") == a.size]
        ceilings = [r["images_per_sec"] for r in same if r.get("kind") == "ceiling" and "error" not in r]
        print_table(same, max(ceilings) if ceilings else None)
        shutil.rmtree(logdir, ignore_errors=True)


def run_sequence(a, seq, run, earlier: List[dict], results: List[dict]) -> None:
    for kind, n in seq:
        if kind == "ceiling":
            run("ceiling (data on the GPU)", "ceiling", 0)
        elif kind == "w":
            run(f"--workers {n}, no peers", "w", n)
        elif kind == "p":
            run(f"--workers 0, {n} peer(s) of {a.peer_cores} cores", "p", n)
        else:  # rec: every distinct recommendation so far
            recs = sorted({math.ceil(r["recommended"]) for r in earlier + results
                           if r.get("recommended") is not None and r.get("kind") in ("w", "p") and "error" not in r
                           and r.get("batch") == a.batch and r.get("model") == a.model})
            if not recs:
                print("gpu_train: rec: no recommendation yet (run wK or pN first, or give --results with earlier runs)", flush=True)
            for n_rec in recs:
                if a.max_peers and n_rec > a.max_peers:
                    print(f"gpu_train: rec: {n_rec} peers is over --max-peers {a.max_peers}: skipped", flush=True)
                    continue
                run(f"recommended {n_rec}: --workers 0, {n_rec} peer(s) of {a.peer_cores} cores", "p", n_rec)


if __name__ == "__main__":
    main()
