"""`make bench-peers` (bench/peers.py), run small: every peer measured or
skipped with its reason, the table well formed and written between its
markers in place of the previous run's; and bench/mklarge.py's large photos
(>= 8 MP, every second one progressive, the same bytes for the same seed).

Only the peers .venv has run here (stoker, torchvision v2, Pillow); the
others, whose venv (out/peers-venv) a test run does not build, must come out
skipped, each with why."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

from PIL import Image

REPO = Path(__file__).resolve().parents[2]
#: Generous: a loaded 2-core machine imports torch slowly (three Python
#: processes, one stoker); a hang still ends as a failure.
TIMEOUT = 600


def load_peers():
    spec = importlib.util.spec_from_file_location("peers", REPO / "bench" / "peers.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_bench_peers_writes_a_table_of_every_peer(stoker_bin: Path, tmp_path: Path) -> None:
    peers = load_peers()
    md = tmp_path / "BENCHMARKS.md"
    before = "# Benchmarks\n\nText before.\n\n"
    after = "\n\n## Later section\n\nText after.\n"
    md.write_text(before + f"{peers.MARK_BEGIN}\nthe previous run's table\n{peers.MARK_END}" + after)
    missing = tmp_path / "no-peers-venv" / "bin" / "python"
    cmd = [sys.executable, str(REPO / "bench" / "peers.py"), "--stoker", str(stoker_bin),
           "--data", str(REPO / "testdata" / "photos"), "--limit", "6", "--rounds", "1", "--seconds", "1",
           "--transforms", "imagenet-train", "--peers-python", str(missing), "--write", str(md), "--json"]
    r = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=TIMEOUT, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stdout + r.stderr

    text = md.read_text()
    assert text.startswith(before) and text.endswith(after)
    assert "the previous run's table" not in text
    assert text.count(peers.MARK_BEGIN) == 1 and text.count(peers.MARK_END) == 1
    body = text[text.index(peers.MARK_BEGIN) + len(peers.MARK_BEGIN):text.index(peers.MARK_END)]
    assert re.search(r"^Command: `.*bench/peers\.py .*--limit 6", body, re.M)
    assert re.search(r"^Date: \d{4}-\d\d-\d\d \d\d:\d\d UTC; machine: .+; commit: `[0-9a-f]{7,}", body, re.M)
    assert "6 images" in body

    rows = [line for line in body.splitlines() if line.startswith("| ")]
    cells = [[c.strip() for c in row.strip("|").split("|")] for row in rows]
    assert cells[0] == ["recipe", "peer", "images per CPU-second", "runs", "stoker epoch 1 / peer",
                        "stoker epochs >= 2 / peer"]
    assert all(len(c) == 6 for c in cells), rows
    by_peer = {c[1]: c for c in cells[2:]}
    assert all(c[0] == "imagenet-train" for c in cells[2:])
    # stoker, torchvision v2 and Pillow are measured: a positive median of
    # the one round, and stoker's ratio to each peer in both columns.
    for label in ("stoker epoch 1", "stoker epochs >= 2", "tv2", "pil"):
        assert float(by_peer[label][2]) > 0, by_peer[label]
    for label in ("tv2", "pil"):
        assert re.fullmatch(r"\d+\.\d\dx", by_peer[label][4]) and re.fullmatch(r"\d+\.\d\dx", by_peer[label][5])
    # The peers of out/peers-venv are skipped, each with its reason.
    for label in ("pillow-simd", "dali", "spdl"):
        assert by_peer[label][2].startswith("skipped: ") and str(missing) in by_peer[label][2], by_peer[label]
    assert set(by_peer) == {"stoker epoch 1", "stoker epochs >= 2", *peers.PEERS} - {"stoker"}

    res = json.loads(r.stdout.strip().splitlines()[-1])["results"]["imagenet-train"]
    assert set(res) == set(peers.PEERS)
    for p in ("stoker", "tv2", "pil"):
        assert len(res[p]["runs"]) == 1 and res[p]["median"] == res[p]["runs"][0] > 0
    assert res["stoker"]["median_epoch1"] > 0
    for p in ("pillow-simd", "dali", "spdl"):
        assert set(res[p]) == {"skipped"} and res[p]["skipped"]
    for p in ("pillow-simd", "dali", "spdl"):
        assert f"skipping {p}: " in r.stderr


def test_write_between_markers_appends_a_section_once(tmp_path: Path) -> None:
    peers = load_peers()
    md = tmp_path / "B.md"
    md.write_text("# Benchmarks\n")
    peers.write_between_markers(str(md), "first\n")
    peers.write_between_markers(str(md), "second\n")
    text = md.read_text()
    assert text.count("## Per core against the peers") == 1
    assert f"{peers.MARK_BEGIN}\nsecond\n{peers.MARK_END}" in text and "first" not in text


def test_mklarge_makes_large_baseline_and_progressive_photos(tmp_path: Path) -> None:
    outs = []
    for name in ("a", "b"):
        out = tmp_path / name
        subprocess.run([sys.executable, str(REPO / "bench" / "mklarge.py"), str(out), "--n", "2", "--seed", "7"],
                       check=True, capture_output=True, timeout=TIMEOUT, stdin=subprocess.DEVNULL)
        outs.append(sorted(p for p in out.rglob("*.jpg")))
    a, b = outs
    assert len(a) == 2 and [p.relative_to(tmp_path / "a") for p in a] == [p.relative_to(tmp_path / "b") for p in b]
    assert [p.read_bytes() for p in a] == [p.read_bytes() for p in b], "not deterministic for a seed"
    progressive = []
    for p in a:
        with Image.open(p) as im:
            assert im.format == "JPEG" and im.mode == "RGB"
            assert im.width * im.height >= 8_000_000, (p, im.size)
            progressive.append(bool(im.info.get("progressive")))
            assert p.parent.parent == tmp_path / "a"  # an ImageFolder: OUT/<class>/<file>
    assert sorted(progressive) == [False, True]
