"""The client's per-batch targets decode: a batch's ragged arrays
(BatchHeader.targets) into its per-sample dicts of tv_tensors, against the
per-sample decode it replaced (each sample's field "targets" parsed into its
own tensors, copied; the client's _targets.py at --baseline, taken from git)
on the same batch's targets, re-encoded per sample as the server sent them
before (BENCHMARKS.md "Per core: detection").

A real server serves `stoker mkdata --coco --instances 7` (COCO's density,
COCO-sized images) with Loader(targets=...): the batch's BatchTargets is
taken as the client receives it. Both decoders must give the same dicts
(same keys, tensors and canvases). Then --rounds rounds, each timing
--iters decodes of one then of the other (interleaved, which goes first
alternating), in wall and in the process' CPU time; medians a batch.

    bin/stoker mkdata --coco --instances 7 --max-side 640 --n 64 --out out/det-coco7
    .venv/bin/python bench/targets_decode.py --stoker bin/stoker --data out/det-coco7
"""
import argparse
import os
import statistics
import struct
import subprocess
import sys
import time
import types
from typing import Any, Dict, List

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402
import torch  # noqa: E402

import stoker  # noqa: E402
import stoker._buffers as buffers  # noqa: E402
from stoker import transforms as T  # noqa: E402
from stoker._local import LocalServer  # noqa: E402
from stoker._targets import targets_of  # noqa: E402

MASKS = 1 << 31


def per_sample(bt: Any) -> List[bytes]:
    """The batch's targets as the server sent them before: each sample's
    bytes (24-byte header, boxes, labels, keypoints, crowd flags,
    visibilities; with masks, zeros to 4, run counts, runs)."""
    off = list(bt.offsets)
    ps = list(bt.keypoints_per_instance) or [0] * (len(off) - 1)
    moff = np.frombuffer(bt.mask_offsets, dtype="<u4") if bt.masks else None
    out, po = [], 0
    for i in range(len(off) - 1):
        a, b, p = off[i], off[i + 1], ps[i]
        k = b - a
        word = bt.box_format | p << 8 | (MASKS if bt.masks else 0)
        v = struct.pack("<IIqII", bt.canvas[2 * i], bt.canvas[2 * i + 1], bt.image_ids[i], k, word)
        v += bt.boxes[16 * a:16 * b] + bt.labels[8 * a:8 * b] + bt.keypoints[8 * po:8 * (po + k * p)]
        v += bt.iscrowd[a:b] + bt.keypoints_visibility[po:po + k * p]
        po += k * p
        if moff is not None:
            v += b"\0" * (-len(v) % 4)
            v += np.diff(moff[a:b + 1]).astype("<u4").tobytes() + bt.mask_runs[4 * int(moff[a]):4 * int(moff[b])]
        out.append(v)
    return out


def baseline(rev: str) -> types.ModuleType:
    """The client's _targets.py at rev (the per-sample decoder)."""
    src = subprocess.run(["git", "show", f"{rev}:python/stoker/_targets.py"], cwd=os.path.join(HERE, ".."),
                         capture_output=True, text=True, check=True).stdout
    mod = types.ModuleType("targets_before")
    exec(compile(src, f"{rev}:python/stoker/_targets.py", "exec"), mod.__dict__)
    return mod


def same(a: List[Dict[str, Any]], b: List[Dict[str, Any]]) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert list(x) == list(y), (list(x), list(y))
        for key in x:
            if isinstance(x[key], torch.Tensor):
                assert x[key].dtype == y[key].dtype and torch.equal(x[key], y[key]), key
                assert type(x[key]) is type(y[key]), key
                if hasattr(x[key], "canvas_size"):
                    assert tuple(x[key].canvas_size) == tuple(y[key].canvas_size), key
            else:
                assert x[key] == y[key], key


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--stoker", default="bin/stoker")
    ap.add_argument("--data", required=True, help="stoker mkdata --coco's directory")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--baseline", default="0c1a689", help="the commit whose client decoded per sample")
    ap.add_argument("--masks", action="store_true", help="ask for the masks too")
    a = ap.parse_args()
    names: Any = ("boxes", "labels", "iscrowd", "image_id", "keypoints", "keypoints_visibility", "masks") if a.masks else True
    old = baseline(a.baseline)
    got: List[Any] = []
    real = buffers.targets_of

    def tap(bt: Any, *args: Any, **kw: Any) -> Any:
        got.append(bt)
        return real(bt, *args, **kw)

    buffers.targets_of = tap
    images = os.path.join(a.data, "images", "train")
    srv = LocalServer(a.stoker, {"coco": images}, workers=2,
                      args=["--annotations", f"coco={os.path.join(a.data, 'annotations', 'instances.json')}"])
    with srv, stoker.Loader(srv.addr, "coco", batch_size=a.batch_size, transform=T.Compose([T.Resize((512, 512))]),
                            targets=names, pin_memory=False, timeout=120, drop_last=True) as ld:
        _, targets = next(iter(ld))
    buffers.targets_of = real
    bt = got[0]
    n = len(targets)
    sel = () if names is True else names
    vals = per_sample(bt)
    same(targets_of(bt, n, torch, sel), old.targets_of(vals, torch, sel))
    k = len(bt.labels) // 8
    print(f"batch: {n} samples, {k} instances ({k / n:.1f} a sample), P {max(bt.keypoints_per_instance, default=0)}, "
          f"masks {bt.masks}; {sum(len(v) for v in vals)} bytes of targets")

    def run(f: Any) -> Any:
        w0, c0 = time.perf_counter(), time.process_time()
        for _ in range(a.iters):
            f()
        return (time.perf_counter() - w0) / a.iters, (time.process_time() - c0) / a.iters

    new_f = lambda: targets_of(bt, n, torch, sel)  # noqa: E731
    old_f = lambda: old.targets_of(vals, torch, sel)  # noqa: E731
    res: Dict[str, List[Any]] = {"per-sample (before)": [], "ragged (now)": []}
    for r in range(a.rounds):
        order = [("per-sample (before)", old_f), ("ragged (now)", new_f)]
        for name, f in order if r % 2 == 0 else order[::-1]:
            res[name].append(run(f))
    for name, rs in res.items():
        wall = statistics.median(x[0] for x in rs) * 1e6
        cpu = statistics.median(x[1] for x in rs) * 1e6
        print(f"{name:22s} {wall:8.1f} us a batch wall, {cpu:8.1f} us CPU ({wall / n:.2f} us a sample)")
    (bw, bc), (nw, nc) = ((statistics.median(x[0] for x in res[k]), statistics.median(x[1] for x in res[k])) for k in res)
    print(f"before / now: {bc / nc:.2f}x in CPU, {bw / nw:.2f}x in wall (medians of {a.rounds} rounds of {a.iters})")


if __name__ == "__main__":
    main()
