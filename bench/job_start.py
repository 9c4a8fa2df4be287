"""What a job's start costs: wall time from `stoker.Loader(...)` to its first
batch in the trainer, and the server's CPU time from the Loader to that
batch and for the whole job (the first batch, what the server made ahead
for the trainer's credits, the stream's close), with a batch of one sample
(so the job's own set-up shows, not its decodes), and of 32 and the demo's
64 (BENCHMARKS.md "A job that starts at once").

The trainer imports torch before it times anything, as a training script
does before it makes a loader: the first loader's first batch otherwise pays
torch's import (about 1 s), which the client defers until a batch needs it.

The server's CPU is the sum of its threads' run time from
/proc/PID/task/*/schedstat (nanoseconds; /proc/PID/stat counts 10 ms ticks),
read before the Loader (once the server is idle), as the first batch
arrives, and again after close() once the server is idle. Medians (and the
worst) of --rounds rounds, each with its own seed, so that no round
repeats the last one's samples.

    bin/stoker mkdata --out out/demo-data      # the demo's data, as make demo makes it
    .venv/bin/python bench/job_start.py --stoker bin/stoker --data out/demo-data
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
    ap.add_argument("--batch-sizes", default="1,32,64", help="comma-separated")
    ap.add_argument("--prefetch", type=int, default=1, help="the Loader's prefetch (credits)")
    a = ap.parse_args()
    sizes = [int(b) for b in a.batch_sizes.split(",")]
    with LocalServer(a.stoker, {"d": a.data}, args=["--log-level", "warn"]) as srv:
        pid = srv.proc.pid
        configs = [(t, bs) for t in ("auto", "grpc") for bs in sizes]
        walls, firsts, cpus = ({c: [] for c in configs} for _ in range(3))
        # Interleaved: each round runs every configuration once, so a
        # change in the machine's load falls on all of them alike.
        for r in range(a.rounds):
            for transport, bs in configs:
                c0 = settle(pid)
                t0 = time.perf_counter()
                loader = stoker.Loader(srv.addr, "d", transform=a.transform, batch_size=bs, seed=r,
                                       prefetch=a.prefetch, transport=transport)
                next(iter(loader))
                walls[transport, bs].append(time.perf_counter() - t0)
                firsts[transport, bs].append(1e-9 * (server_cpu_ns(pid) - c0))
                loader.close()
                cpus[transport, bs].append(1e-9 * (settle(pid) - c0))

        def ms(v):
            return f"{1e3 * statistics.median(v):6.1f} (max {1e3 * max(v):6.1f})"

        for c in configs:
            print(f"transport={c[0]:5s} batch={c[1]:3d}: first batch {ms(walls[c])} ms wall; "
                  f"server CPU to it {ms(firsts[c])} ms, for the job {ms(cpus[c])} ms; medians of {a.rounds}")

if __name__ == "__main__":
    main()
