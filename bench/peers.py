#!/usr/bin/env python3
"""`make bench-peers`: stoker against the pipelines a user would pick
instead, on the same photos and recipes, one core each, images per
CPU-second, medians of interleaved rounds.

The peers:
  stoker       `stoker bench pipeline --threads 1 --json` (as compare.py
               runs it): its first epoch (a cold decoder index and
               coefficient cache) and its epochs >= 2 apart.
  tv2          torchvision.io.decode_jpeg + transforms.v2 (baselines.py
               --impl tv2), in this Python (.venv).
  pil          Pillow + torchvision v1 (baselines.py --impl pil), .venv.
  pillow-simd  the same code on pillow-simd: baselines.py --impl pil run by
               --peers-python (out/peers-venv, where pillow-simd replaces
               Pillow).
  dali         NVIDIA DALI's CPU pipeline (peer_pipelines.py --impl dali),
               device_id=None, num_threads=1.
  spdl         Meta's SPDL: FFmpeg decode + filter graph on one thread
               (peer_pipelines.py --impl spdl).
  before       with --before BIN: another stoker build (main's, say), run
               as stoker is, in the same rounds; the table gives stoker's
               ratio to it, epoch 1 to epoch 1 and epochs >= 2 to theirs.

Each round runs every (recipe, peer) once, the peers' order rotated from
round to round, so that a loaded machine's noise lands on all alike. The
figure is images per CPU-second of the measuring process (every thread; and
its children): on a loaded machine wall-clock ratios overstate the side
that yields the core less. A peer that is not installed, or lacks a
recipe's ops, is skipped, and the table says why. --write FILE replaces the
table between the markers MARK_BEGIN and MARK_END in FILE (appended with a
heading when FILE has none).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
PEERS = ("stoker", "tv2", "pil", "pillow-simd", "dali", "spdl")
#: The recipes each peer has the ops for (the others are skipped for it).
#: stoker, torchvision and Pillow run every preset baselines.py knows.
PEER_RECIPES = {
    "dali": ("imagenet-train", "imagenet-eval", "tv-resnet50-v2"),
    "spdl": ("imagenet-train", "imagenet-eval"),
}
MARK_BEGIN = "<!-- bench-peers: begin (written by make bench-peers; edits here are replaced) -->"
MARK_END = "<!-- bench-peers: end -->"
#: How long one peer's run may take beyond --seconds (imports, a first
#: epoch over large photos, a loaded machine) before it counts as failed.
SLACK = 600


class Skip(Exception):
    """A peer that cannot run here: the message says why."""


def last_json(cmd: list[str], timeout: float) -> dict:
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    if r.returncode == 3:  # peer_pipelines.py: no ops for this recipe
        raise Skip(r.stderr.strip().splitlines()[-1])
    if r.returncode != 0:
        tail = (r.stderr or r.stdout).strip().splitlines()[-3:]
        raise RuntimeError(f"{shlex.join(cmd)} exited with {r.returncode}: {' | '.join(tail)}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def probe_python(py: str, module: str, dist: str) -> str:
    """Why `py` cannot run a peer that imports `module` from distribution
    `dist`, or '' when it can."""
    if not os.path.exists(py):
        return f"{py} not found (make bench-peers builds it from python/requirements-peers.txt)"
    code = (f"import importlib.metadata as m, {module}; v = m.version({dist!r}); "
            f"print(v, {module}.__file__)")
    r = subprocess.run([py, "-c", code], capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        why = (r.stderr.strip().splitlines() or ["?"])[-1]
        return f"{dist} is not importable in {py}: {why}"
    return ""


def install_failure(venv: str, dist: str) -> str:
    """The reason the Makefile recorded when `dist` did not install."""
    f = os.path.join(venv, "failed", dist + ".txt")
    if os.path.exists(f):
        with open(f) as fh:
            return " ".join(fh.read().split())[:300]
    return ""


def availability(a: argparse.Namespace) -> dict[str, str]:
    """Each wanted peer: '' when it can run, else why not."""
    venv = os.path.dirname(os.path.dirname(a.peers_python))
    why = {}
    tv = None
    for peer in a.peers:
        if peer == "stoker":
            why[peer] = "" if os.access(a.stoker, os.X_OK) else f"{a.stoker} not found (make build)"
        elif peer == "before":
            why[peer] = "" if os.access(a.before, os.X_OK) else f"{a.before} not found"
        elif peer in ("tv2", "pil"):
            tv = probe_python(sys.executable, "torchvision", "torchvision") if tv is None else tv
            why[peer] = tv
        else:
            module, dist = {"pillow-simd": ("PIL", "pillow-simd"), "dali": ("nvidia.dali", "nvidia-dali-cuda120"),
                            "spdl": ("spdl.io", "spdl")}[peer]
            failed = install_failure(venv, dist)
            why[peer] = f"{dist} did not install: {failed}" if failed else probe_python(a.peers_python, module, dist)
            if not why[peer] and peer == "spdl":
                # spdl.io loads the system's FFmpeg libraries on first use.
                # (Any attribute of its lazy _libspdl but a dunder loads them.)
                code = "from spdl.io.lib import _libspdl; _libspdl.make_demuxer"
                r = subprocess.run([a.peers_python, "-c", code], capture_output=True, text=True, timeout=300,
                                   stdin=subprocess.DEVNULL)
                if r.returncode != 0:
                    why[peer] = "spdl cannot load FFmpeg's libraries (make bench-peers apt-installs them): " + \
                                (r.stderr.strip().splitlines() or ["?"])[-1][:200]
    return why


def peer_cmd(a: argparse.Namespace, peer: str, transform: str, data: str) -> list[str]:
    common = ["--data", data, "--threads", "1", "--transform", transform, "--seconds", str(a.seconds), "--json"]
    if peer in ("stoker", "before"):
        binary = a.stoker if peer == "stoker" else a.before
        return [binary, "bench", "pipeline", *common, "--coef-budget", str(a.coef_budget)]
    if peer in ("tv2", "pil"):
        return [sys.executable, os.path.join(HERE, "baselines.py"), "--impl", peer, *common]
    if peer == "pillow-simd":
        return [a.peers_python, os.path.join(HERE, "baselines.py"), "--impl", "pil", *common]
    return [a.peers_python, os.path.join(HERE, "peer_pipelines.py"), "--impl", peer, *common]


def subset(src: str, n: int, dst: str) -> int:
    """An ImageFolder of copies of n of src's images, taken from its
    classes in turn (each class's files in name order). Copies, not
    symlinks: stoker's ImageFolder reader refuses a symlink that
    leads out of its root (pipeline/doc.go)."""
    classes = sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)) and not d.startswith("."))
    exts = (".jpg", ".jpeg", ".png", ".webp")
    files = {c: sorted(f for f in os.listdir(os.path.join(src, c)) if f.lower().endswith(exts)) for c in classes}
    taken = 0
    i = 0
    while taken < n and any(i < len(v) for v in files.values()):
        for c in classes:
            if taken < n and i < len(files[c]):
                os.makedirs(os.path.join(dst, c), exist_ok=True)
                shutil.copyfile(os.path.join(src, c, files[c][i]), os.path.join(dst, c, files[c][i]))
                taken += 1
        i += 1
    return taken


def describe_data(data: str) -> str:
    from PIL import Image

    n, pixels, progressive, size = 0, 0, 0, 0
    for d, _, fs in os.walk(data):
        if os.path.samefile(d, data):
            continue  # the root's own files (a NOTICE.md) are no class's images
        for f in fs:
            p = os.path.join(d, f)
            with Image.open(p) as im:
                pixels += im.width * im.height
                progressive += bool(im.info.get("progressive") or im.info.get("progression"))
            size += os.path.getsize(p)
            n += 1
    return (f"{n} images, mean {pixels / max(n, 1) / 1e6:.2f} MP and {size / max(n, 1) / 1024:.0f} KiB, "
            f"{progressive} progressive")


def machine() -> str:
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return f"{model}, {os.cpu_count()} cores, {platform.system()} {platform.release()}, load average {load:.1f} at start"


def commit() -> str:
    r = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=REPO, capture_output=True, text=True)
    return r.stdout.strip() or "unknown"


def measure(a: argparse.Namespace, data: str, why: dict[str, str]) -> dict:
    """Runs the rounds; returns {transform: {peer: {...}}} where each peer
    has its runs and medians, or skipped: reason."""
    res = {t: {} for t in a.transforms}
    for t in a.transforms:
        for p in a.peers:
            if why[p]:
                res[t][p] = {"skipped": why[p]}
            elif p in PEER_RECIPES and t not in PEER_RECIPES[p]:
                res[t][p] = {"skipped": f"{p} has no ops for {t} here (it runs {', '.join(PEER_RECIPES[p])})"}
            else:
                res[t][p] = {"runs": [], "runs_epoch1": [], "note": ""}
    for r in range(a.rounds):
        order = list(a.peers[r % len(a.peers):] + a.peers[:r % len(a.peers)])
        for t in a.transforms:
            for p in order:
                q = res[t][p]
                if "skipped" in q:
                    continue
                cmd = peer_cmd(a, p, t, data)
                try:
                    out = last_json(cmd, a.seconds + SLACK)
                except Skip as e:
                    res[t][p] = {"skipped": str(e)}
                    continue
                except (RuntimeError, subprocess.TimeoutExpired) as e:
                    res[t][p] = {"skipped": f"failed: {e}"[:400]}
                    print(f"{p} {t}: {res[t][p]['skipped']}", file=sys.stderr)
                    continue
                if out.get("errors"):
                    res[t][p] = {"skipped": f"failed: {out['errors']} sample errors ({shlex.join(cmd)})"}
                    print(f"{p} {t}: {res[t][p]['skipped']}", file=sys.stderr)
                    continue
                if p in ("stoker", "before"):
                    q["runs_epoch1"].append(out["epoch1"]["images_per_cpu_sec"])
                    q["runs"].append(out["later"]["images_per_cpu_sec"])
                else:
                    q["runs"].append(out["images_per_cpu_sec"])
                    q["note"] = out.get("note", "")
                print(f"round {r + 1}/{a.rounds} {t:16} {p:12} {q['runs'][-1]:8.1f} images per CPU-second"
                      + (f" (epoch 1: {q['runs_epoch1'][-1]:.1f})" if p in ("stoker", "before") else ""), file=sys.stderr)
    for t in a.transforms:
        for p, q in res[t].items():
            if "skipped" not in q:
                q["median"] = statistics.median(q["runs"])
                if q["runs_epoch1"]:
                    q["median_epoch1"] = statistics.median(q["runs_epoch1"])
                else:
                    del q["runs_epoch1"]
    return res


def fmt(x: float, median: bool = False) -> str:
    """A run's figure to about three significant digits (large photos make
    single-digit images per CPU-second); a median of 100 or more with one
    decimal."""
    return f"{x:.{1 if median and x >= 100 else 0 if x >= 100 else 1 if x >= 10 else 2}f}"


def table(a: argparse.Namespace, res: dict, header: dict) -> str:
    """The Markdown written between the markers."""
    lines = [
        f"Command: `{header['command']}`  ",
        f"Date: {header['date']}; machine: {header['machine']}; commit: `{header['commit']}`  ",
        f"Photos: {header['data']}; {a.rounds} interleaved round(s) of {a.seconds:g} s per peer and recipe, "
        f"one core each; figures are medians, images per CPU-second (higher is better); "
        f"stoker's first epoch (cold caches) and its epochs >= 2 apart, and stoker's ratio to each peer in both.",
        "",
        "| recipe | peer | images per CPU-second | runs | stoker epoch 1 / peer | stoker epochs >= 2 / peer |",
        "| --- | --- | ---: | --- | ---: | ---: |",
    ]
    for t in a.transforms:
        st = res[t].get("stoker", {})
        for p in a.peers:
            q = res[t][p]
            if "skipped" in q:
                lines.append(f"| {t} | {p} | skipped: {q['skipped'].replace('|', '/')} | | | |")
                continue
            runs = ", ".join(fmt(x) for x in q["runs"])
            if p == "stoker":
                lines.append(f"| {t} | stoker epoch 1 | {fmt(q['median_epoch1'], True)} | "
                             + ", ".join(fmt(x) for x in q["runs_epoch1"]) + " | | |")
                lines.append(f"| {t} | stoker epochs >= 2 | {fmt(q['median'], True)} | {runs} | | |")
                continue
            if p == "before":
                # another build of stoker: epoch 1 against epoch 1, epochs >= 2 against epochs >= 2
                r1 = r2 = ""
                if "median" in st:
                    r1, r2 = f"{st['median_epoch1'] / q['median_epoch1']:.2f}x", f"{st['median'] / q['median']:.2f}x"
                lines.append(f"| {t} | before ({a.before_name}) epoch 1 | {fmt(q['median_epoch1'], True)} | "
                             + ", ".join(fmt(x) for x in q["runs_epoch1"]) + f" | {r1} | |")
                lines.append(f"| {t} | before ({a.before_name}) epochs >= 2 | {fmt(q['median'], True)} | {runs} | | {r2} |")
                continue
            r1 = r2 = ""
            if "median" in st:
                r1, r2 = f"{st['median_epoch1'] / q['median']:.2f}x", f"{st['median'] / q['median']:.2f}x"
            note = f" ({q['note']})" if q.get("note") else ""
            lines.append(f"| {t} | {p}{note} | {fmt(q['median'], True)} | {runs} | {r1} | {r2} |")
    return "\n".join(lines) + "\n"


def write_between_markers(path: str, body: str) -> None:
    """Replaces what stands between the markers in path with body (the
    markers kept); appends a section with the markers when path has none."""
    text = open(path).read() if os.path.exists(path) else ""
    block = f"{MARK_BEGIN}\n{body}{MARK_END}"
    b, e = text.find(MARK_BEGIN), text.find(MARK_END)
    if b >= 0 and e > b:
        text = text[:b] + block + text[e + len(MARK_END):]
    elif b >= 0 or e >= 0:
        raise SystemExit(f"{path}: one bench-peers marker without the other; fix the file by hand")
    else:
        text = text.rstrip("\n") + "\n\n## Per core against the peers (`make bench-peers`)\n\n" + block + "\n"
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stoker", default=os.path.join(REPO, "bin", "stoker"))
    ap.add_argument("--data", required=True, help="ImageFolder directory")
    ap.add_argument("--limit", type=int, default=0, help="only this many of --data's images (taken from its classes in turn); 0: all")
    ap.add_argument("--transforms", default="imagenet-train,imagenet-eval,tv-resnet50-v2",
                    help="comma-separated recipes (stoker's presets, docs/transforms.md)")
    ap.add_argument("--peers", default=",".join(PEERS), help="comma-separated, of " + ", ".join(PEERS))
    ap.add_argument("--peers-python", default=os.path.join(REPO, "out", "peers-venv", "bin", "python"),
                    help="the Python of the venv with pillow-simd, DALI and SPDL")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=8)
    ap.add_argument("--coef-budget", type=int, default=0, help="stoker's --coef-budget (0: serve's default)")
    ap.add_argument("--before", help="another stoker binary (a build of main, say) run in every round too, as the "
                    "peer 'before': its first epoch and epochs >= 2 apart, and stoker's ratio to each")
    ap.add_argument("--write", help="Markdown file whose table between the bench-peers markers this run replaces")
    ap.add_argument("--command", help="the command to name in the table (default: this one)")
    ap.add_argument("--json", action="store_true", help="end with one JSON line of the results")
    a = ap.parse_args()
    a.transforms = [t for t in a.transforms.split(",") if t]
    a.peers = [p for p in a.peers.split(",") if p]
    unknown = set(a.peers) - set(PEERS)
    if unknown:
        ap.error(f"unknown peers {sorted(unknown)}; known: {', '.join(PEERS)}")
    if a.before:
        a.peers.append("before")
        a.before_name = os.path.basename(a.before)
    with tempfile.TemporaryDirectory(prefix="stoker-peers-") as tmp:
        data = a.data
        if a.limit > 0:
            n = subset(a.data, a.limit, tmp)
            data = tmp
            print(f"{n} of {a.data}'s images (copies in {tmp})", file=sys.stderr)
        command = a.command or shlex.join(["bench/peers.py", *sys.argv[1:]])
        shown = os.path.relpath(a.data, REPO)
        if not os.path.abspath(a.data).startswith(REPO + os.sep):
            # A path of this machine's, outside the repository (a clone
            # has no such path): DIR, said to be a directory of that name.
            command = command.replace(a.data, "DIR")
            shown = f"DIR (a directory named {os.path.basename(os.path.normpath(a.data))})"
        header = {
            "command": command,
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "machine": machine(),
            "commit": commit(),
            "data": shown + (f", the first {a.limit} of its images" if a.limit > 0 else "")
                    + f": {describe_data(data)}",
        }
        why = availability(a)
        for p, w in why.items():
            if w:
                print(f"skipping {p}: {w}", file=sys.stderr)
        res = measure(a, data, why)
    md = table(a, res, header)
    print()
    print(md)
    if a.write:
        write_between_markers(a.write, md)
        print(f"wrote the table into {a.write}", file=sys.stderr)
    if a.json:
        print(json.dumps({"header": header, "results": res, "peers": a.peers, "transforms": a.transforms}))


if __name__ == "__main__":
    main()
