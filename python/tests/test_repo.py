"""What a fresh clone's user meets first: make help lists every target, and
neither README.md nor the Makefile points outside the repository."""

from __future__ import annotations

import importlib.util
import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def phony_targets() -> set:
    text = (REPO / "Makefile").read_text()
    targets = set()
    for m in re.finditer(r"^\.PHONY:(.*(?:\\\n.*)*)", text, re.M):
        targets |= set(m.group(1).replace("\\\n", " ").split())
    return targets


def test_make_help_lists_every_target() -> None:
    out = subprocess.run(["make", "-s", "help"], cwd=REPO, capture_output=True, text=True, timeout=60, check=True).stdout
    listed = {line.split()[1] for line in out.splitlines() if line.startswith("make ")}
    assert len(phony_targets()) > 10
    assert phony_targets() <= listed, f"make help leaves out {sorted(phony_targets() - listed)}"
    for line in out.splitlines():
        assert "$(" not in line and len(line.split(None, 2)) == 3, f"no description: {line!r}"


def test_nothing_points_outside_the_repository() -> None:
    for name in ("README.md", "Makefile"):
        outside = re.findall(r"\S*\.\./\S*", (REPO / name).read_text())
        assert outside == [], f"{name} names paths outside the repository: {outside}"


def test_docs_point_inside_the_repository() -> None:
    """BENCHMARKS.md and docs/ name no path a clone lacks: a ../ path
    resolves inside the repository, and none is absolute under /work."""
    files = [REPO / "BENCHMARKS.md", *sorted((REPO / "docs").glob("*.md"))]
    assert len(files) > 6
    for f in files:
        text = f.read_text()
        assert "/work/" not in text, f"{f.name} names a path of this machine"
        for m in re.finditer(r"(?:\.\./)+[^\s)`'\"#]*", text):
            target = (f.parent / m.group(0)).resolve()
            assert target.is_relative_to(REPO) and target.exists(), f"{f.name} names {m.group(0)}, not in the repository"


def test_make_bench_without_photos_uses_generated_images() -> None:
    out = subprocess.run(["make", "-n", "bench", "PHOTOS="], cwd=REPO, capture_output=True, text=True, timeout=60,
                         check=True).stdout
    assert "mkdata --out out/bench-data.tmp" in out
    assert re.search(r"bench/compare\.py .*--data out/bench-data ", out)
    given = subprocess.run(["make", "-n", "bench", "PHOTOS=/some/photos"], cwd=REPO, capture_output=True, text=True,
                           timeout=60, check=True).stdout
    assert re.search(r"bench/compare\.py .*--data /some/photos ", given)


def test_make_bench_prints_a_verdict() -> None:
    spec = importlib.util.spec_from_file_location("compare", REPO / "bench" / "compare.py")
    compare = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(compare)
    assert compare.verdict(3.14, 0) == (3.0, "verdict: PASS: stoker / faster baseline, epochs >= 2 (defaults) = 3.14x; "
                                              "target >= 3.0x")
    target, line = compare.verdict(2.46, 0)
    assert line.startswith("verdict: FAIL: ") and "2.46x" in line and target == 3.0
    target, line = compare.verdict(4.19, 2_000_000_000)
    assert target == 5.0 and line.startswith("verdict: FAIL: ") and "with the coefficient cache" in line
    target, line = compare.verdict(3.2, -1)
    assert target == 3.0 and line.startswith("verdict: PASS: ") and "without the coefficient cache" in line


def test_benchmarks_read_in_five_minutes() -> None:
    """BENCHMARKS.md is the figures of record, by question: at most 60 KB,
    each table row (its text, link targets aside) at most ~300 characters,
    the history linked under bench/history/ and the bench-peers markers
    (make bench-peers writes between them) in place."""
    text = (REPO / "BENCHMARKS.md").read_text()
    assert len(text.encode()) <= 60_000, f"BENCHMARKS.md is {len(text.encode())} bytes: move runs to bench/history/"
    rows = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| ---")
            and "bench-peers" not in line]
    assert len(rows) > 20
    for line in rows:
        shown = re.sub(r"\]\([^)]*\)", "]", line)
        if re.match(r"\| (imagenet|tv-resnet|recipe)", line):
            continue  # the bench-peers table, written by make bench-peers
        assert len(shown) <= 350, f"a row of {len(shown)} characters: {shown[:80]}..."
    history = sorted((REPO / "bench" / "history").glob("*.md"))
    assert history, "no bench/history/*.md"
    for h in history:
        assert f"bench/history/{h.name}" in text, f"BENCHMARKS.md does not link {h.name}"
    assert "<!-- bench-peers: begin" in text and "<!-- bench-peers: end -->" in text


def test_torchvision_decode_deprecation_is_the_one_filtered() -> None:
    """pyproject.toml's filterwarnings hides torchvision 0.29's deprecation
    of its image decoding (the parity tests' reference decoder, kept on
    purpose): the warning is still that one, and the decoder still there."""
    import pytest
    import torch
    import torchvision.io

    data = (REPO / "testdata" / "photos").rglob("*.jpg").__next__().read_bytes()
    with pytest.warns(DeprecationWarning, match="image decoding and encoding capabilities of TorchVision are deprecated"):
        img = torchvision.io.decode_jpeg(torch.frombuffer(bytearray(data), dtype=torch.uint8))
    assert img.dtype == torch.uint8 and img.shape[0] == 3
