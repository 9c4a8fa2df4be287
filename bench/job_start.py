"""What a job's start costs: wall time from `stoker.Loader(...)` to its first
batch in the trainer, and the server's CPU time for the whole job, with a
batch of one sample (so the job's own set-up shows, not its decodes) and of
32 (issue 48, BENCHMARKS.md "A job that starts at once").

The trainer imports torch before it times anything, as a training script
does before it makes a loader: the first loader's first batch otherwise pays
torch's import (about 1 s), which the client defers until a batch needs it.

The server's CPU is the sum of its threads' run time from
/proc/PID/task/*/schedstat (nanoseconds; /proc/PID/stat counts 10 ms ticks),
read before the Loader and again after close() once the server is idle.

    .venv/bin/python bench/job_start.py --stoker bin/stoker --data PHOTOS
"""
import argparse
import glob
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

import torch  # noqa: F401,E402  (a trainer has it imported before its loader)

import stoker  # noqa: E402
from stoker._local import LocalServer  # noqa: E402


def server_cpu_ns(pid: int) -> int:
    total = 0
    for f in glob.glob(f"/proc/{pid}/task/*/schedstat"):
        try:
            with open(f) as fh:
                total += int(fh.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass  # a thread that ended between the listing and the read
    return total


def settle(pid: int, quiet_ns: int = 2_000_000, step: float = 0.05, tries: int = 100) -> int:
    """The server's CPU once it is idle: read until a step adds < quiet_ns."""
    last = server_cpu_ns(pid)
    for _ in range(tries):
        time.sleep(step)
        now = server_cpu_ns(pid)
        if now - last < quiet_ns:
            return now
        last = now
    return last


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stoker", default=os.path.join(HERE, "..", "bin", "stoker"))
    ap.add_argument("--data", required=True, help="an ImageFolder")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--transform", default="imagenet-train")
    a = ap.parse_args()
    with LocalServer(a.stoker, {"d": a.data}, args=["--log-level", "warn"]) as srv:
        pid = srv.proc.pid
        for transport in ("auto", "grpc"):
            for bs in (1, 32):
                walls, cpus = [], []
                for r in range(a.rounds):
                    c0 = settle(pid)
                    t0 = time.perf_counter()
                    loader = stoker.Loader(srv.addr, "d", transform=a.transform, batch_size=bs, seed=r,
                                           prefetch=1, transport=transport)
                    next(iter(loader))
                    walls.append(time.perf_counter() - t0)
                    loader.close()
                    cpus.append(settle(pid) - c0)
                print(f"transport={transport:5s} batch={bs:3d}: first batch {1e3 * statistics.median(walls):6.1f} ms wall "
                      f"(max {1e3 * max(walls):6.1f}), server CPU for the job {1e-6 * statistics.median(cpus):6.1f} ms "
                      f"(max {1e-6 * max(cpus):6.1f}), medians of {a.rounds}", flush=True)


if __name__ == "__main__":
    main()
