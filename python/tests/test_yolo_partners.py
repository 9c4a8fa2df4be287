"""A Mosaic's partners, served: over a YOLO set of more than two windows
(128 positions of the epoch's order each), a real server and Loader give
every index as a primary sample exactly once an epoch, each sample's
partners come from its window of the order the batches arrive in (the
global shuffle's, one rank), and a server with its partner cache
(the default) makes the very bytes of one without (--partner-budget -1)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Tuple

import numpy as np
import pytest
from PIL import Image

import stoker
from stoker import transforms as T
from stoker._local import LocalServer

N = 300  # two windows: positions [0, 128) and [128, 300)
WINDOW = 128
IMGSZ = 32


def make_set(root: Path) -> None:
    (root / "images" / "train").mkdir(parents=True)
    (root / "labels" / "train").mkdir(parents=True)
    rng = np.random.default_rng(5)
    for i in range(N):
        w, h = int(rng.integers(20, 60)), int(rng.integers(20, 60))
        img = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        Image.fromarray(img).save(root / "images" / "train" / f"{i:06d}.png")
        (root / "labels" / "train" / f"{i:06d}.txt").write_text(f"{i % 3} 0.5 0.5 0.4 0.3\n")
    (root / "data.yaml").write_text("path: .\ntrain: images/train\nval: images/train\nnames:\n  0: a\n  1: b\n  2: c\n")


def epoch(addr: str, seed: int) -> Tuple[List[int], List[List[int]], List[np.ndarray]]:
    """One epoch in arrival order: the indices, each one's partners (its
    trace's), its pixels."""
    order: List[int] = []
    partners: List[List[int]] = []
    pixels: List[np.ndarray] = []
    with stoker.Loader(addr, "y", batch_size=16, transform=T.Compose([T.YOLOMosaic(IMGSZ), T.YOLOMixUp(0.5)]),
                       targets=True, trace=True, return_indices=True, pin_memory=False, timeout=120, seed=seed) as ld:
        for b in ld:
            images, _, indices = b
            for i, idx in enumerate(indices.tolist()):
                steps = b.trace[i]
                op, m = steps[0]
                assert op == "yolo_mosaic" and m["indexes"][0] == idx, steps
                ps = list(m["indexes"][1:])
                for op, args in steps[1:]:
                    if op == "yolo_mixup":
                        ps += args["mosaic"]["indexes"]
                order.append(idx)
                partners.append(ps)
                pixels.append(images[i].numpy().copy())
        assert not list(ld.sample_errors)
    return order, partners, pixels


@pytest.fixture(scope="module")
def servers(stoker_bin: Path, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("yolo-partners")
    make_set(root)
    logs = tmp_path_factory.mktemp("log")
    args = ["--grace", "1s", "--annotations", f"y={root / 'data.yaml'}"]
    with LocalServer(str(stoker_bin), {"y": str(root / "images" / "train")}, workers=2, args=args,
                     log_path=str(logs / "cache.log")) as cached, \
            LocalServer(str(stoker_bin), {"y": str(root / "images" / "train")}, workers=2,
                        args=args + ["--partner-budget", "-1"], log_path=str(logs / "none.log")) as none:
        yield cached.addr, none.addr


def test_partners_from_the_window(servers) -> None:
    cached, none = servers
    for seed in (1, 2):
        order, partners, pixels = epoch(cached, seed)
        assert sorted(order) == list(range(N)), "every index a primary sample exactly once an epoch"
        windows = [set(order[:WINDOW]), set(order[WINDOW:])]
        for q, ps in enumerate(partners):
            w = windows[min(q // WINDOW, 1)]
            outside = [p for p in ps if p not in w]
            assert not outside, f"position {q} (sample {order[q]}): partners {outside} outside its window"
        assert len({p for ps in partners for p in ps}) > N * 3 // 4, "partners spread over the windows"
        order2, partners2, pixels2 = epoch(none, seed)
        assert order2 == order and partners2 == partners
        for q in range(N):
            assert np.array_equal(pixels[q], pixels2[q]), f"sample {order[q]}: other bytes with the partner cache"
