#!/usr/bin/env python3
"""Where a stoker process's CPU goes, from `perf record -g` files (as
`stoker bench scale --perf DIR` writes them): each sample's call stack is
put in one category (copies by where they copy, other system-call work,
the kernel's interrupts and scheduling, protobuf, gRPC, the Go runtime,
decoding, the rest) and the shares printed, one column per group of files.

    bench/perf_shares.py before=DIR/r*-1peer-before-coordinator.data after=DIR/r*-1peer-coordinator.data

A group is NAME=FILE[,FILE...] (shell globs are expanded by the shell).
With --images N (images measured per file), each category also says its
CPU ms per 1000 images.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections import Counter
from typing import Iterable, List, Tuple

# Leaf functions that copy memory, user and kernel.
_COPY_USER = {"runtime.memmove", "memcpy", "__memmove_avx_unaligned_erms", "__memcpy_avx_unaligned_erms",
              "__memmove_evex_unaligned_erms", "__memmove_sse2_unaligned_erms"}
_COPY_KERNEL = {"rep_movs_alternative", "copy_user_enhanced_fast_string", "copy_user_generic_string",
                "_copy_to_iter", "_copy_from_iter", "copy_page", "__copy_skb_header", "memcpy_orig", "memcpy"}
_DECODE = ("step", "stoker_decode", "vrow", "coeffs", "decode_mcu", "jpeg_", "jsimd_", "ycc_", "h2v", "turbo_",
           "resample", "decompress_", "process_data", "github.com/stoker-dev/stoker/pipeline")

# Who copies, for a user-space copy: the first of these among its callers,
# nearest first.
_USER_COPIES = [
    (("readDataFrame", "io.ReadAtLeast"), "copy: gRPC read buffer -> frame buffers"),
    (("bufWriter).Write", "framer).writeData"), "copy: gRPC: frames -> write buffer"),
    (("google.golang.org/protobuf", "codecV2", "MaterializeToBuffer"), "copy: protobuf (unmarshal, marshal)"),
    (("peerStream).chunk", "Peer).read"), "copy: received chunk -> batch or slot"),
    (("feed).batch", "feed).sendOne"), "copy: batch -> ring slot"),
]

CATEGORIES = [
    "copy: kernel, socket -> process",
    "copy: kernel, process -> socket",
    "copy: gRPC read buffer -> frame buffers",
    "copy: gRPC: frames -> write buffer",
    "copy: protobuf (unmarshal, marshal)",
    "copy: received chunk -> batch or slot",
    "copy: batch -> ring slot",
    "copy: other",
    "system calls (besides copies)",
    "kernel: interrupts, softirq, scheduling",
    "protobuf (besides copies)",
    "gRPC: framing, flow control, streams",
    "Go runtime: scheduler, GC, sysmon, allocation",
    "decoding and transforms",
    "stoker and the rest",
]


def _samples(path: str) -> Iterable[List[Tuple[str, str]]]:
    """Each sample's stack, leaf first: (symbol, its binary or library)."""
    out = subprocess.run(["perf", "script", "-i", path, "-F", "ip,sym,dso"], check=True,
                         capture_output=True, text=True).stdout
    stack: List[Tuple[str, str]] = []
    for line in out.splitlines():
        line = line.strip()
        if not line:
            if stack:
                yield stack
            stack = []
            continue
        parts = line.split(None, 1)
        if len(parts) < 2:
            continue
        rest = parts[1]
        dso = rest[rest.rfind("(") + 1:-1] if rest.endswith(")") else ""
        sym = rest[:rest.rfind("(")].strip() if "(" in rest else rest
        if sym.endswith("+0x0"):
            sym = sym[:-4]
        stack.append((sym, dso))
    if stack:
        yield stack


def classify(stack: List[Tuple[str, str]]) -> str:
    leaf, dso = stack[0]
    kernel = "kernel" in dso
    text = " ".join(s for s, _ in stack)
    if kernel and leaf in _COPY_KERNEL:
        if "tcp_recvmsg" in text:
            return "copy: kernel, socket -> process"
        if "tcp_sendmsg" in text:
            return "copy: kernel, process -> socket"
        return "copy: other"
    if not kernel and leaf in _COPY_USER:
        # The caller nearest the copy says what it copies.
        for sym, _ in stack[1:]:
            for pats, cat in _USER_COPIES:
                if any(p in sym for p in pats):
                    return cat
        return "copy: other"
    if kernel:
        if "entry_SYSCALL" in text:
            return "system calls (besides copies)"
        return "kernel: interrupts, softirq, scheduling"
    if any(s.startswith("google.golang.org/protobuf") for s, _ in stack):
        return "protobuf (besides copies)"
    if "libjpeg" in dso or any(s.startswith(p) for s, _ in stack for p in _DECODE):
        return "decoding and transforms"
    if any(s.startswith("google.golang.org/grpc") for s, _ in stack):
        return "gRPC: framing, flow control, streams"
    if leaf.startswith("runtime.") or leaf.startswith("internal/runtime") or leaf.startswith("sync."):
        return "Go runtime: scheduler, GC, sysmon, allocation"
    return "stoker and the rest"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("groups", nargs="+", help="NAME=FILE[,FILE...]")
    ap.add_argument("--images", type=int, default=0, help="images measured per file: adds CPU ms per 1000 images")
    ap.add_argument("--hz", type=float, default=999, help="perf's sampling frequency (bench scale --perf: 999)")
    a = ap.parse_args()
    cols = []
    for g in a.groups:
        name, _, files = g.partition("=")
        paths = [f for f in files.split(",") if f]
        if not paths:
            sys.exit(f"{g}: want NAME=FILE[,FILE...]")
        counts: Counter = Counter()
        for p in paths:
            for st in _samples(p):
                counts[classify(st)] += 1
        cols.append((name, counts, len(paths)))
    w = max(len(c) for c in CATEGORIES)

    def ms(samples: int, files: int) -> float:  # CPU ms per 1000 images
        return 1000 * samples / a.hz / (files * a.images) * 1000

    def cell(c: Counter, files: int, cat: str) -> str:
        share = f"{100 * c[cat] / max(sum(c.values()), 1):.1f}%"
        return f"{share:>8}" + (f" {ms(c[cat], files):6.1f}" if a.images else "")

    width = 15 if a.images else 8
    print(f"{'':{w}}" + "".join(f" {n:>{width}}" for n, _, _ in cols))
    if a.images:
        print(f"{'':{w}}" + "".join(f" {'share  ms/1k':>{width}}" for _ in cols))
    for cat in CATEGORIES:
        if not any(c[cat] for _, c, _ in cols):
            continue
        print(f"{cat:{w}}" + "".join(f" {cell(c, n, cat):>{width}}" for _, c, n in cols))
    print(f"{'samples':{w}}" + "".join(f" {sum(c.values()):>{width}}" for _, c, _ in cols))
    if a.images:
        print(f"{'CPU ms per 1000 images':{w}}" + "".join(f" {ms(sum(c.values()), n):>{width}.1f}" for _, c, n in cols))


if __name__ == "__main__":
    main()
