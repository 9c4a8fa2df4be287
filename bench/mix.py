"""Mixing two datasets against one of the same total size (issue 39's
target: images/s of the mix >= 0.95x the one dataset's).

The class folders of --data are split in two halves, A and B (copied:
an ImageFolder follows no symlinks); one `stoker serve` (1 worker) serves A, B and the whole
(ALL). Each round times one epoch of each, in alternating order: ALL, and
Mix({A: len(A), B: len(B)}), whose epoch draws every sample of A and B once
(the same images as ALL's epoch). Epochs after the first are timed, --epochs of them a round (the
coefficient cache warm, as in training); the figure is the median of the
rounds, and the ratio mix / one.

    .venv/bin/python bench/mix.py --stoker bin/stoker --data PHOTOS --rounds 7
"""

import argparse
import os
import shutil
import statistics
import tempfile
import time

import stoker
from stoker._local import LocalServer


def split(data: str, into: str) -> tuple:
    classes = sorted(d for d in os.listdir(data) if os.path.isdir(os.path.join(data, d)))
    halves = (classes[: len(classes) // 2], classes[len(classes) // 2:])
    out = []
    for name, cls in zip(("A", "B"), halves):
        root = os.path.join(into, name)
        os.makedirs(root)
        for c in cls:
            shutil.copytree(os.path.join(data, c), os.path.join(root, c))
        out.append(root)
    return tuple(out)


def count(root: str) -> int:
    return sum(len(files) for _, _, files in os.walk(root))


def epoch(addr: str, dataset, transform: str, batch_size: int, e: int, epochs: int = 1) -> tuple:
    """Images and seconds of epochs e, e+1, ... (epochs of them) of one Loader."""
    with stoker.Loader(addr, dataset, transform=transform, batch_size=batch_size, pin_memory=False,
                       seed=1, timeout=600) as ld:
        t0, n = time.perf_counter(), 0
        for k in range(epochs):
            ld.set_epoch(e + k)
            for images, _ in ld:
                n += images.shape[0]
        return n, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--stoker", default="bin/stoker")
    ap.add_argument("--data", required=True)
    ap.add_argument("--transform", default="imagenet-train")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--epochs", type=int, default=3, help="epochs timed together in each round")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        a, b = split(args.data, tmp)
        na, nb = count(a), count(b)
        mix = stoker.Mix({"A": na, "B": nb})
        log = os.path.join(tmp, "server.log")
        with LocalServer(args.stoker, {"A": a, "B": b, "ALL": args.data}, workers=1, log_path=log) as srv:
            for ds in ("ALL", mix):  # warm: each one's first epoch fills the caches
                epoch(srv.addr, ds, args.transform, args.batch_size, 0)
            rates = {"one": [], "mix": []}
            for r in range(args.rounds):
                order = [("one", "ALL"), ("mix", mix)]
                if r % 2:
                    order.reverse()
                for name, ds in order:
                    n, t = epoch(srv.addr, ds, args.transform, args.batch_size, 1 + r * args.epochs, args.epochs)
                    if n != (na + nb) * args.epochs:
                        raise SystemExit(f"{name}: {n} images in {args.epochs} epochs, want {(na + nb) * args.epochs}")
                    rates[name].append(n / t)
                print(f"round {r}: one {rates['one'][-1]:.0f} images/s, mix {rates['mix'][-1]:.0f}", flush=True)
    one, mixed = statistics.median(rates["one"]), statistics.median(rates["mix"])
    paired = statistics.median(m / o for m, o in zip(rates["mix"], rates["one"]))
    print(f"{na} + {nb} images; medians of {args.rounds} rounds: one dataset {one:.0f} images/s, "
          f"the mix {mixed:.0f}: mix / one {mixed / one:.3f} (median of the rounds' ratios {paired:.3f}); target >= 0.95")


if __name__ == "__main__":
    main()
