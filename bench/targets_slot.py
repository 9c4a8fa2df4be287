"""The client's CPU a batch with detection targets over shared memory: the
targets' arrays in the slot after the pixels (BatchTargets.in_slot, read as
views of the slot) against in the header beside the slot (protobuf's bytes,
parsed with the header and copied once a batch), as a client that does not
ask for them in the slot (ShmRequest.targets_in_slot false) gets them.

A real server serves `stoker mkdata --coco --instances 7` (COCO's density)
with a preset (`detr` by default) and Loader(targets=...), over shared
memory, to one client process at a time: each round runs a client of each
kind in turn (which goes first alternating), each a fresh process that
iterates a warm-up epoch and then --epochs epochs, copying every sample's
targets (clone), and reports its process' CPU time (every thread of it:
gRPC's receive and protobuf's parse included; the server is another
process) over those epochs a batch; medians of the rounds. Each client
checks its targets came the way it asked, and the two kinds' targets must
be the same.

    bin/stoker mkdata --coco --instances 7 --max-side 640 --n 64 --out out/det-coco7
    .venv/bin/python bench/targets_slot.py --stoker bin/stoker --data out/det-coco7
"""
import argparse
import os
import pickle
import statistics
import subprocess
import sys
import time
from typing import Any, Dict, List

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

ARMS = ("header (before)", "slot (now)")


def client(a: Any) -> None:
    """One client: --arm's kind, --epochs measured after a warm-up one;
    prints a pickle of (CPU a batch, batches, targets of the last epoch)."""
    import torch

    import stoker
    import stoker._buffers as buffers
    import stoker.loader as loader_mod
    from stoker._shm import shm_request

    ask = a.arm == "slot"

    def request(transport: str) -> Any:
        r = shm_request(transport)
        if r is not None:
            r.targets_in_slot = ask
        return r

    loader_mod.shm_request = request
    seen: List[bool] = []
    real = buffers.targets_of

    def tap(bt: Any, *args: Any, **kw: Any) -> Any:
        seen.append(bt.HasField("in_slot"))
        return real(bt, *args, **kw)

    buffers.targets_of = tap
    names: Any = ("boxes", "labels", "iscrowd", "image_id", "keypoints", "keypoints_visibility", "masks") if a.masks else True
    with stoker.Loader(a.addr, "coco", batch_size=a.batch_size, transform=a.preset, targets=names, pin_memory=False,
                       timeout=300, transport="shm", seed=1, shuffle=False) as ld:
        out: Dict[int, Any] = {}
        n = 0
        for e in range(a.epochs + 1):
            if e == 1:
                c0, n = time.process_time(), 0
            for b in ld:
                n += 1
                out[b.number] = [{k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in t.items()}
                                 for t in b.targets]
        cpu = time.process_time() - c0
        if ld.stats.shm_batches != ld.stats.batches or seen.count(ask) != len(seen):
            raise SystemExit(f"{a.arm}: {ld.stats.shm_batches} of {ld.stats.batches} batches in slots, "
                             f"{seen.count(True)} of {len(seen)} batches' targets in the slot")
    sys.stdout.buffer.write(pickle.dumps((cpu / n, n, out)))


def micro(a: Any) -> None:
    """What differs between the two, alone: one served batch's header
    parsed from its bytes (protobuf's parse, as gRPC's receive does) and its
    targets decoded, the arrays in the header (copied once) or in a slot
    (laid out as the server does, after the batch's pixels; their ranges
    checked, then views), --rounds interleaved rounds of --iters each."""
    import numpy as np
    import torch

    import stoker
    import stoker._buffers as buffers
    from stoker._local import LocalServer
    from stoker._targets import ARRAYS, slot_extent, targets_of
    from stoker.v1 import stoker_pb2 as pb

    got: List[Any] = []
    real = buffers.targets_of

    def tap(bt: Any, *args: Any, **kw: Any) -> Any:
        got.append(bt)
        return real(bt, *args, **kw)

    buffers.targets_of = tap
    names: Any = ("boxes", "labels", "iscrowd", "image_id", "keypoints", "keypoints_visibility", "masks") if a.masks else True
    images = os.path.join(a.data, "images", "train")
    srv = LocalServer(a.stoker, {"coco": images}, workers=2, log_path=os.devnull,
                      args=["--annotations", f"coco={os.path.join(a.data, 'annotations', 'instances.json')}"])
    with srv, stoker.Loader(srv.addr, "coco", batch_size=a.batch_size, transform=a.preset, targets=names,
                            pin_memory=False, timeout=300, transport="grpc", shuffle=False) as ld:
        next(iter(ld))
    buffers.targets_of = real
    bt = got[0]
    n = len(bt.offsets) - 1
    pixels = n * 3 * 640 * 640
    in_header = pb.BatchHeader(number=1, data_bytes=pixels, slot=0, targets=bt).SerializeToString()
    # The slot's end as the server lays it out (ragged.ToSlot).
    slot_bt = pb.BatchTargets()
    slot_bt.CopyFrom(bt)
    at, parts = (pixels + 63) // 64 * 64, []
    for name in ARRAYS:
        data = getattr(bt, name)
        r = getattr(slot_bt.in_slot, name)
        r.offset, r.length = at, len(data)
        slot_bt.ClearField(name)
        parts.append((at, data))
        at = (at + len(data) + 63) // 64 * 64
    base = pixels // 8 * 8
    mem = np.zeros(at - base, dtype=np.uint8)
    for o, data in parts:
        mem[o - base:o - base + len(data)] = np.frombuffer(data, dtype=np.uint8)
    in_slot = pb.BatchHeader(number=1, data_bytes=pixels, slot=0, targets=slot_bt).SerializeToString()
    sel = () if names is True else names

    def header_way() -> Any:
        h = pb.BatchHeader.FromString(in_header)
        return targets_of(h.targets, n, torch, sel, 1)

    def slot_way() -> Any:
        h = pb.BatchHeader.FromString(in_slot)
        slot_extent(h.targets, pixels, at, 1)
        return targets_of(h.targets, n, torch, sel, 1, tail=(mem, base))

    x, y = header_way(), slot_way()
    for p, q in zip(x, y):
        assert list(p) == list(q) and all(torch.equal(p[k], q[k]) if isinstance(p[k], torch.Tensor) else p[k] == q[k]
                                          for k in p)
    arrays = sum(len(getattr(bt, k)) for k in ARRAYS)
    print(f"{a.preset}, batch {n}, {int(bt.offsets[-1])} instances, {'with masks' if a.masks else 'targets=True'}: "
          f"{arrays} bytes of arrays; headers of {len(in_header)} and {len(in_slot)} bytes")
    res: Dict[str, List[float]] = {k: [] for k in ARMS}
    ways = {ARMS[0]: header_way, ARMS[1]: slot_way}
    for r in range(a.rounds):
        for name in ARMS if r % 2 == 0 else ARMS[::-1]:
            c0 = time.process_time()
            for _ in range(a.iters):
                ways[name]()
            res[name].append((time.process_time() - c0) / a.iters)
    for name, rs in res.items():
        print(f"{name:16s} {statistics.median(rs) * 1e6:9.1f} us of CPU a batch (parse and decode)")
    b, s = (statistics.median(res[k]) for k in ARMS)
    print(f"before / now: {b / s:.2f}x (medians of {a.rounds} rounds of {a.iters}, interleaved)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--stoker", default="bin/stoker")
    ap.add_argument("--data", help="stoker mkdata --coco's directory")
    ap.add_argument("--preset", default="detr")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--masks", action="store_true", help="ask for the masks too")
    ap.add_argument("--arm", help=argparse.SUPPRESS)  # a client process: slot or header
    ap.add_argument("--addr", help=argparse.SUPPRESS)
    ap.add_argument("--micro", action="store_true",
                    help="time only what differs: a header's parse and its targets' decode, one served batch")
    a = ap.parse_args()
    if a.arm:
        client(a)
        return
    if a.micro:
        micro(a)
        return
    import torch

    from stoker._local import LocalServer

    images = os.path.join(a.data, "images", "train")
    srv = LocalServer(a.stoker, {"coco": images}, workers=2, log_path=os.devnull,
                      args=["--annotations", f"coco={os.path.join(a.data, 'annotations', 'instances.json')}"])
    res: Dict[str, List[float]] = {k: [] for k in ARMS}
    with srv:
        for r in range(a.rounds):
            got = {}
            for name in ARMS if r % 2 == 0 else ARMS[::-1]:
                cmd = [sys.executable, __file__, "--arm", "slot" if name.startswith("slot") else "header",
                       "--addr", srv.addr, "--preset", a.preset, "--batch-size", str(a.batch_size),
                       "--epochs", str(a.epochs)] + (["--masks"] if a.masks else [])
                p = subprocess.run(cmd, capture_output=True, timeout=900)
                if p.returncode != 0:
                    raise SystemExit(f"{name}: {p.stderr.decode()[-2000:]}")
                cpu, n, out = pickle.loads(p.stdout)
                res[name].append(cpu)
                got[name] = out
            a0, a1 = got.values()
            assert sorted(a0) == sorted(a1)
            for k in a0:
                for x, y in zip(a0[k], a1[k]):
                    assert list(x) == list(y) and all(
                        torch.equal(x[q], y[q]) if isinstance(x[q], torch.Tensor) else x[q] == y[q] for q in x), k
            print(f"round {r}: " + ", ".join(f"{k} {res[k][-1] * 1e6:.0f} us" for k in ARMS), flush=True)
    print(f"{a.preset}, batch {a.batch_size}, {'with masks' if a.masks else 'targets=True'}, {n} batches a client")
    for name, rs in res.items():
        print(f"{name:16s} {statistics.median(rs) * 1e6:9.0f} us of client CPU a batch")
    b, s = (statistics.median(res[k]) for k in ARMS)
    print(f"before / now: {b / s:.2f}x (medians of {a.rounds} rounds, interleaved)")


if __name__ == "__main__":
    main()
