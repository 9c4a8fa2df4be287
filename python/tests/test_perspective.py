"""RandomPerspective against torchvision.transforms.v2.

1. Pixels: `stoker ops apply` of perspective steps (the trace's
   startpoints and endpoints, drawn here as RandomPerspective.make_params
   draws them) on real photos (testdata/photos), uint8, against
   torchvision's F.perspective of the same tensor: the same bytes, for
   bilinear and nearest, a fill and None, distortion scales 0.1 to 1.
   torchvision computes its coefficients by its own least squares, so the
   server's solve is held to it too.
2. The draws: `stoker ops draw` against make_params (each corner's x and
   y, chi-square), on a canvas that is not square.
3. Targets: a real `stoker serve` (test_targets_clamp's set, boxes grown
   past real photos' edges, the stars' tips as keypoints); each traced
   sample's boxes and keypoints replayed through torchvision's
   F.perspective: within assert_close's float32 defaults (and counted
   where the same bits), the same instances kept by the sanitizes after.
"""

from __future__ import annotations

import base64
import json
import subprocess
from pathlib import Path
from typing import Any, Dict, List

import pytest
import torch
import torchvision.transforms.v2._geometry as tv_geometry
from torchvision.io import decode_jpeg, read_file
from torchvision.transforms import v2 as tv2
from torchvision.transforms.v2 import InterpolationMode
from torchvision.transforms.v2 import functional as F

import stoker
from helpers import wire_args
from stoker import transforms as T
from test_parity_sampling import continuous_case
from test_targets_clamp import N, check, grown, server, sources  # noqa: F401 (the fixtures)

REPO = Path(__file__).resolve().parents[2]


def make_endpoints(w: int, h: int, d: float) -> List[List[int]]:
    """RandomPerspective.make_params' endpoints on a w x h image, drawn
    with torch.randint as it draws them."""
    bh, bw = int(d * (h // 2)) + 1, int(d * (w // 2)) + 1

    def ri(a: int, b: int) -> int:
        return int(torch.randint(a, b, size=(1,)))

    return [[ri(0, bw), ri(0, bh)], [ri(w - bw, w), ri(0, bh)], [ri(w - bw, w), ri(h - bh, h)], [ri(0, bw), ri(h - bh, h)]]


def test_pixels_are_torchvisions(stoker_bin: Path) -> None:
    torch.manual_seed(46)
    photos = sorted((REPO / "testdata" / "photos").glob("*/*.jpg"))[::3]
    assert len(photos) >= 10
    cases, wants = [], []
    for i, ph in enumerate(photos):
        img = decode_jpeg(read_file(str(ph)))
        h, w = img.shape[-2:]
        img = F.resize(img, [max(8, h * (1 + i % 3) // 5), max(8, w * (1 + i % 3) // 5)])
        h, w = img.shape[-2:]
        for k, d in enumerate([0.1, 0.5, 0.9, 1.0]):
            interp = "nearest" if (i + k) % 3 == 2 else "bilinear"
            fill = None if (i + k) % 2 else [float(30 * k), 127.0, 255.0]
            start, end = [[0, 0], [w - 1, 0], [w - 1, h - 1], [0, h - 1]], make_endpoints(w, h, d)
            wants.append(F.perspective(img, start, end, interpolation=InterpolationMode(interp), fill=fill))
            cases.append({"w": w, "h": h, "pix": base64.b64encode(img.contiguous().numpy().tobytes()).decode(),
                          "trace": [["perspective", {"startpoints": start, "endpoints": end, "interpolation": interp,
                                                     "fill": fill}]]})
    r = subprocess.run([str(stoker_bin), "ops", "apply"], input="".join(json.dumps(c) + "\n" for c in cases),
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    outs = [json.loads(line) for line in r.stdout.splitlines()]
    assert len(outs) == len(cases)
    for c, o, want in zip(cases, outs, wants):
        assert "pix" in o, o
        got = torch.frombuffer(bytearray(base64.b64decode(o["pix"])), dtype=torch.uint8).reshape(want.shape)
        bad = (got != want).sum().item()
        assert bad == 0, f"{c['w']}x{c['h']} {c['trace'][0][1]}: {bad} bytes differ"
    print(f"\n{len(cases)} perspectives on {len(photos)} photos: torchvision's bytes")


def test_refused_corners(stoker_bin: Path) -> None:
    """Startpoints other than the image's corners, and endpoints in a line,
    are errors that say so."""
    img = base64.b64encode(bytes(3 * 8 * 10)).decode()
    cases = [{"w": 10, "h": 8, "pix": img, "trace": [["perspective", {
        "startpoints": [[1, 0], [9, 0], [9, 7], [0, 7]], "endpoints": [[0, 0], [9, 0], [9, 7], [0, 7]]}]]},
        {"w": 10, "h": 8, "pix": img, "trace": [["perspective", {
            "startpoints": [[0, 0], [9, 0], [9, 7], [0, 7]], "endpoints": [[0, 0], [4, 0], [9, 0], [0, 7]]}]]}]
    r = subprocess.run([str(stoker_bin), "ops", "apply"], input="".join(json.dumps(c) + "\n" for c in cases),
                       capture_output=True, text=True, timeout=60)
    outs = [json.loads(line) for line in r.stdout.splitlines()]
    assert "only the image's corners" in outs[0]["error"], outs[0]
    assert "singular" in outs[1]["error"], outs[1]


def test_draws_are_make_params(stoker_bin: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    w, h = 200, 150
    t = tv2.RandomPerspective(distortion_scale=0.6, p=1)
    seen: List[Any] = []

    def record(start: Any, end: Any) -> List[float]:
        seen.append(end)
        return [1.0, 0, 0, 0, 1.0, 0, 0, 0]

    monkeypatch.setattr(tv_geometry, "_get_perspective_coeffs", record)
    names = ["tl", "tr", "br", "bl"]

    def flat(end: Any) -> Dict[str, float]:
        return {f"{n}_{a}": float(end[i][j]) for i, n in enumerate(names) for j, a in enumerate("xy")}

    def theirs() -> Dict[str, float]:
        t.make_params([torch.zeros(3, h, w, dtype=torch.uint8)])
        return flat(seen.pop())

    continuous_case(stoker_bin, T.RandomPerspective(distortion_scale=0.6, p=1).to_proto(), "perspective",
                    lambda a: flat(a["endpoints"]), theirs, seed=17, source=(w, h))


# Through the geometry the targets support, with sanitizes after: the
# boxes and keypoints moved as torchvision's perspective moves them.
TRANSFORMS = {
    "resize-perspective": [T.Resize((96, 128)), T.RandomPerspective(0.6, p=0.8), T.SanitizeBoundingBoxes()],
    "rrc-perspective-nearest": [T.RandomResizedCrop(80, scale=(0.3, 1)), T.RandomHorizontalFlip(),
                                T.RandomPerspective(1.0, p=1, interpolation="nearest", fill=None),
                                T.SanitizeKeyPoints(), T.ConvertBoundingBoxFormat("CXCYWH")],
}


@pytest.mark.parametrize("name", sorted(TRANSFORMS))
def test_targets_are_torchvisions(server: str, grown: Path, name: str) -> None:  # noqa: F811
    src = sources(grown)
    seen, moved, boxes_same, points_same = 0, 0, 0, 0
    for seed in (1, 2):
        with stoker.Loader(server, "coco", batch_size=6, transform=T.Compose(TRANSFORMS[name]), targets=True,
                           trace=True, return_indices=True, pin_memory=False, timeout=60, seed=seed) as ld:
            for b in ld:
                images, targets, indices = b
                for i, (t, idx) in enumerate(zip(targets, indices.tolist())):
                    bs, ps = check(t, src[idx], b.trace[i], images[i], f"{name} seed {seed} sample {idx}")
                    boxes_same, points_same = boxes_same + bs, points_same + ps
                    moved += any(s == "perspective" for s, _ in b.trace[i])
                    seen += 1
            assert not list(ld.sample_errors)
    assert seen == 2 * N and moved > N, (seen, moved)
    print(f"\n{name}: {moved} of {seen} samples through a perspective; boxes torchvision's bits in {boxes_same}, "
          f"keypoints in {points_same}")


def test_loader_pixels_are_torchvisions(server: str) -> None:  # noqa: F811
    """Served end to end: each sample is its Resize alone (the same
    server's) through torchvision's perspective of its trace, to the byte."""
    base = {}
    with stoker.Loader(server, "coco", batch_size=6, transform=T.Compose([T.Resize((96, 128))]), return_indices=True,
                       pin_memory=False, timeout=60) as ld:
        for images, _, indices in ld:
            base.update(zip(indices.tolist(), images))
    moved = 0
    for interp, fill in (("bilinear", (10, 20, 30)), ("nearest", None)):
        tf = T.Compose([T.Resize((96, 128)), T.RandomPerspective(0.7, p=0.8, interpolation=interp, fill=fill)])
        with stoker.Loader(server, "coco", batch_size=6, transform=tf, trace=True, return_indices=True,
                           pin_memory=False, timeout=60, seed=5) as ld:
            for b in ld:
                images, _, indices = b
                for img, idx, trace in zip(images, indices.tolist(), b.trace):
                    steps = [a for s, a in trace if s == "perspective"]
                    want = base[idx]
                    if steps:
                        a = steps[0]
                        want = F.perspective(want, a["startpoints"], a["endpoints"],
                                             interpolation=InterpolationMode(a["interpolation"]), fill=a["fill"])
                        moved += 1
                    assert torch.equal(img, want), f"{interp} sample {idx}: {trace}: {(img != want).sum()} bytes differ"
    assert moved > N, moved


def test_from_torchvision() -> None:
    tv = tv2.RandomPerspective(0.3, p=0.7, interpolation=InterpolationMode.NEAREST, fill=5)
    got = T.from_torchvision(tv2.Compose([tv2.Resize((32, 32)), tv]))
    assert got.transforms[1].to_proto() == T.RandomPerspective(0.3, 0.7, "nearest", 5).to_proto()
    assert wire_args(got.transforms[1].to_proto())["fill"] == [5]
    with pytest.raises(ValueError, match="distortion_scale"):
        T.RandomPerspective(1.5)


@pytest.mark.filterwarnings("ignore:stoker.*could not be made:RuntimeWarning")
def test_singular_draws_fail_their_sample(server: str) -> None:  # noqa: F811
    """On a 3x3 output, distortion_scale 1 draws corners three of which
    often land in a line: those samples fail, saying so (torchvision's
    least squares raises on them), the others come."""
    tf = T.Compose([T.Resize((3, 3)), T.RandomPerspective(1.0, p=1)])
    with stoker.Loader(server, "coco", batch_size=4, transform=tf, pin_memory=False, timeout=60, fail_policy="drop",
                       max_sample_errors=1.0, seed=3) as ld:
        got = sum(images.shape[0] for images, _ in ld)
        errors = list(ld.sample_errors)
    assert errors and got == N - len(errors) and got > 0, (got, len(errors))
    assert all("perspective" in e.reason and "singular" in e.reason for e in errors), errors[0].reason
