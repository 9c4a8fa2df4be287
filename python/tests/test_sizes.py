"""Per-sample sizes against torchvision: RandomShortestSize with a max_size
and no crop after it gives each sample its own size, through a real
``stoker serve`` and the client, by gRPC and by shared memory. Each batch is
padded to its largest sample (bottom and right, zeros, as DETR's
nested_tensor_from_tensor_list); each sample's window of it is, byte for
byte, torchvision's functional ops of its trace (resize to the drawn size,
horizontal_flip) on decode_jpeg's pixels, and its boxes, labels and crowd
flags are torchvision's on the CocoDetection wrapper's BoundingBoxes (the
same float32 bits), their canvas the sample's own size. The drawn sizes
are compared with RandomShortestSize's and RandomResize's own make_params
(chi-square); the preset "frcnn" is the references' "multiscale" recipe,
converted by from_torchvision."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest
import torch
from google.protobuf import json_format
from torchvision.io import ImageReadMode, decode_jpeg, read_file
from torchvision.transforms import v2 as tv2

import stoker
from torchvision.transforms.v2.functional._geometry import _compute_resized_output_size

from stats import Checks, chi2_homogeneity, compare_values, in_band, json_lines
from stoker import transforms as T
from stoker.v1 import stoker_pb2 as pb
from test_lsj import check_sample
from test_targets import N, coco_sources, det, server  # noqa: F401 (the fixtures)
from test_targets_kpts import coco_points

# mkdata's photos are 320 to 480 a side: the shorter side 96..160, the
# longer at most 200 (which binds for the longest photos).
TRANSFORMS = {
    "shortest": [T.RandomShortestSize((96, 128, 160), max_size=200), T.RandomHorizontalFlip(),
                 T.SanitizeBoundingBoxes()],
    "shortest-bicubic-flip-first": [T.RandomShortestSize((100, 150), max_size=180, interpolation="bicubic",
                                                         antialias=False),
                                    T.ColorJitter(0.3, 0.3), T.RandomVerticalFlip()],
}


@pytest.mark.parametrize("transport", ["grpc", "shm"])
@pytest.mark.parametrize("name", sorted(TRANSFORMS))
def test_sizes_are_torchvisions(server: str, det: Path, name: str, transport: str) -> None:  # noqa: F811
    """Every sample's window (atol 0) and boxes (float32 bits), its padding
    zeros, the mask True exactly there; two seeds."""
    images_dir = det / "images" / "train"
    sources, points = coco_sources(det), coco_points(det)
    n, shapes, sizes_seen = 0, set(), set()
    for seed in (1, 2):
        with stoker.Loader(server, "coco", batch_size=5, transform=T.Compose(TRANSFORMS[name]), targets=True,
                           trace=True, return_indices=True, fields=("path",), pin_memory=False, timeout=60,
                           seed=seed, transport=transport) as ld:
            for b in ld:
                images, targets, indices = b
                assert b.sizes is not None and b.sizes.dtype == torch.int64 and b.sizes.shape == (len(indices), 2)
                bh, bw = int(b.sizes[:, 0].max()), int(b.sizes[:, 1].max())
                assert tuple(images.shape) == (len(indices), 3, bh, bw), (images.shape, b.sizes)
                assert b.mask.shape == (len(indices), bh, bw) and b.mask.dtype == torch.bool
                shapes.add((bh, bw))
                for i, (path, idx) in enumerate(zip(b.fields["path"], indices.tolist())):
                    h, w = b.sizes[i].tolist()
                    sizes_seen.add((h, w))
                    assert max(h, w) <= TRANSFORMS[name][0].max_size
                    src = decode_jpeg(read_file(str(images_dir / path.decode())), mode=ImageReadMode.RGB)
                    where = f"{name} {transport} seed {seed} {path}"
                    check_sample(images[i, :, :h, :w], targets[i], src, sources[idx], b.trace[i], where, points[idx])
                    assert tuple(targets[i]["boxes"].canvas_size) == (h, w), where
                    pad = torch.ones(bh, bw, dtype=torch.bool)
                    pad[:h, :w] = False
                    assert torch.equal(b.mask[i], pad), where
                    assert not images[i][:, pad].any(), f"{where}: padding not zero"
                    n += 1
            assert not list(ld.sample_errors)
    assert n == 2 * N
    assert len(sizes_seen) > 3 and len(shapes) > 1, (sizes_seen, shapes)


def test_image_list_views(server: str) -> None:  # noqa: F811
    """image_list=True: a ragged batch, each sample's own [3, h, w] sent
    back to back without padding, a view of the batch's buffer (no copy),
    as torchvision's detection models take a list; the same pixels and
    targets as the padded batch's windows."""
    for layout in ("NCHW", "NHWC"):
        kw = dict(batch_size=4, transform=T.Compose(TRANSFORMS["shortest"]), targets=True, pin_memory=False,
                  timeout=60, seed=3, layout=layout)
        with stoker.Loader(server, "coco", **kw) as ld:
            padded = [(b._padded.clone(), b.sizes.clone(), b.targets) for b in ld]
        with stoker.Loader(server, "coco", image_list=True, **kw) as ld:
            got = list(ld)
        assert len(got) == len(padded)
        for b, (pb, sizes, tg) in zip(got, padded):
            images, targets = b
            assert isinstance(images, list) and len(images) == len(targets) == b.sizes.shape[0]
            assert torch.equal(b.sizes, sizes) and b._padded is None
            flat = b._flat
            assert flat.numel() == int((3 * sizes[:, 0] * sizes[:, 1]).sum())  # nothing padded
            for i, im in enumerate(images):
                h, w = b.sizes[i].tolist()
                assert im.untyped_storage().data_ptr() == flat.untyped_storage().data_ptr()
                if layout == "NCHW":
                    assert tuple(im.shape) == (3, h, w) == (3, *targets[i]["boxes"].canvas_size)
                    assert torch.equal(im, pb[i, :, :h, :w])
                else:
                    assert tuple(im.shape) == (h, w, 3)
                    assert torch.equal(im, pb[i, :h, :w, :])
                assert torch.equal(targets[i]["boxes"], tg[i]["boxes"])


def test_sizes_without_targets(server: str) -> None:  # noqa: F811
    """A job without targets gets its sizes too (they travel in each
    sample's slot): each the traced resize's, NHWC padded the same way."""
    tf = T.Compose([T.RandomShortestSize((96, 128, 160), max_size=200), T.RandomHorizontalFlip()])
    seen = set()
    for layout in ("NCHW", "NHWC"):
        with stoker.Loader(server, "plain", batch_size=5, transform=tf, trace=True, pin_memory=False, timeout=60,
                           seed=6, layout=layout) as ld:
            for b in ld:
                images, labels = b
                bh, bw = int(b.sizes[:, 0].max()), int(b.sizes[:, 1].max())
                want = (len(labels), 3, bh, bw) if layout == "NCHW" else (len(labels), bh, bw, 3)
                assert tuple(images.shape) == want
                for i, steps in enumerate(b.trace):
                    size = dict(steps)["resize"]["size"]
                    assert b.sizes[i].tolist() == size, (b.sizes[i], steps)
                    seen.add(tuple(size))
                    h, w = size
                    im = images[i] if layout == "NCHW" else images[i].permute(2, 0, 1)
                    assert not im[:, h:, :].any() and not im[:, :, w:].any()
                    assert im[:, :h, :w].any()
    assert len(seen) > 3


def test_sizes_refused(server: str) -> None:  # noqa: F811
    """Per-sample sizes without a bound, or of a RandomResize alone:
    refused at open, saying why."""
    for tf, kw, want in (
        ([T.RandomShortestSize((96, 128))], {"targets": True}, "without max_size"),
        ([T.RandomResize(96, 128)], {"targets": True}, "RandomResize gives sizes without a bound"),
    ):
        with pytest.raises(stoker.StokerError) as e:
            with stoker.Loader(server, "coco", batch_size=4, transform=T.Compose(tf), timeout=60, **kw) as ld:
                next(iter(ld))
        assert e.value.code == "INVALID_ARGUMENT" and want in str(e.value), str(e.value)


def test_random_resize_center_crop(server: str, det: Path) -> None:  # noqa: F811
    """RandomResize then CenterCrop: one size, every sample torchvision's
    replay (pixels and boxes)."""
    images_dir = det / "images" / "train"
    sources = coco_sources(det)
    tf = T.Compose([T.RandomResize(150, 260), T.CenterCrop(140), T.RandomHorizontalFlip()])
    with stoker.Loader(server, "coco", batch_size=6, transform=tf, targets=True, trace=True, return_indices=True,
                       fields=("path",), pin_memory=False, timeout=60, seed=4) as ld:
        for b in ld:
            images, targets, indices = b
            assert b.sizes is None and tuple(images.shape[1:]) == (3, 140, 140)
            for i, (path, idx) in enumerate(zip(b.fields["path"], indices.tolist())):
                src = decode_jpeg(read_file(str(images_dir / path.decode())), mode=ImageReadMode.RGB)
                # (test_lsj's keypoint replay knows no center_crop: boxes and pixels)
                check_sample(images[i], targets[i], src, sources[idx], b.trace[i], f"{path}")


def test_frcnn_preset_is_the_references_recipe(server: str, det: Path) -> None:  # noqa: F811
    """transform="frcnn" is the detection references' multiscale recipe
    (RandomShortestSize of 480..800 at most 1333, the flip, the final
    SanitizeBoundingBoxes) converted: the same traces and bytes; and each
    of its samples is torchvision's replay of its trace (pixels and
    boxes)."""
    images_dir = det / "images" / "train"
    sources, points = coco_sources(det), coco_points(det)
    recipe = tv2.Compose([
        tv2.RandomShortestSize(min_size=(480, 512, 544, 576, 608, 640, 672, 704, 736, 768, 800), max_size=1333),
        tv2.RandomHorizontalFlip(p=0.5), tv2.ToDtype(torch.float, scale=True),
        tv2.ConvertBoundingBoxFormat(tv2.BoundingBoxFormat.XYXY) if hasattr(tv2, "BoundingBoxFormat") else tv2.Identity(),
        tv2.SanitizeBoundingBoxes(), tv2.ToPureTensor()])
    converted = T.from_torchvision(recipe)
    got: List[Any] = []
    for tf in ("frcnn", converted):
        out = []
        with stoker.Loader(server, "coco", batch_size=4, transform=tf, targets=True, trace=True, pin_memory=False,
                           timeout=60, seed=5, return_indices=True, fields=("path",)) as ld:
            for b in ld:
                out.append((b.trace, b.images.clone(), b.sizes.clone(),
                            [t["boxes"].as_subclass(torch.Tensor).clone() for t in b.targets]))
                if tf != "frcnn":
                    continue
                for i, (path, idx) in enumerate(zip(b.fields["path"], b.indices.tolist())):
                    h, w = b.sizes[i].tolist()
                    src = decode_jpeg(read_file(str(images_dir / path.decode())), mode=ImageReadMode.RGB)
                    check_sample(b.images[i, :, :h, :w], b.targets[i], src, sources[idx], b.trace[i], f"frcnn {path}",
                                 points[idx])
        got.append(out)
    assert len(got[0]) == len(got[1]) > 0
    for a, c in zip(*got):
        assert a[0] == c[0] and torch.equal(a[1], c[1]) and torch.equal(a[2], c[2])
        assert all(torch.equal(x, y) for x, y in zip(a[3], c[3]))
    assert any(max(s) > 800 for o in got[0] for s in o[2].tolist()), "max_size never reached"


DRAWS = 100_000  # the issue asks >= 10^5 draws for RandomResize's sampling


def stoker_sizes(stoker_bin: Path, ops: List[pb.Op], seed: int, source: Tuple[int, int]) -> List[Tuple[int, int]]:
    js = json_format.MessageToJson(pb.TransformSpec(ops=ops), indent=None)
    r = subprocess.run([str(stoker_bin), "ops", "draw", "--spec", js, "--n", str(DRAWS), "--seed", str(seed),
                        "--source", f"{source[0]}x{source[1]}"], capture_output=True, text=True, timeout=600,
                       stdin=subprocess.DEVNULL, check=True)
    out = []
    for trace in json_lines(r.stdout):
        steps: Dict[str, Any] = dict((s, a) for s, a in trace)
        out.append(tuple(steps["resize"]["size"]) if "resize" in steps else (source[1], source[0]))
    assert len(out) == DRAWS
    return out


@pytest.mark.parametrize("source", [(500, 375), (375, 500), (1000, 300)])
def test_shortest_size_draws_are_torchvisions(stoker_bin: Path, source: Tuple[int, int]) -> None:
    """RandomShortestSize's (height, width) against its make_params on the
    same image size (chi-square, DRAWS draws a seed); on a 1000x300 image
    max_size binds for the larger min_sizes."""
    min_size, max_size = (96, 128, 160, 200), 400
    ops = [T.RandomShortestSize(min_size, max_size=max_size).to_proto()]
    t = tv2.RandomShortestSize(min_size, max_size=max_size)
    img = torch.zeros(3, source[1], source[0], dtype=torch.uint8)

    def run(k: int) -> Checks:
        mine = stoker_sizes(stoker_bin, ops, k, source)
        torch.manual_seed(500 + k)
        theirs = [tuple(t.make_params([img])["size"]) for _ in range(DRAWS)]
        assert set(mine) == set(theirs), (sorted(set(mine)), sorted(set(theirs)))
        c = Checks()
        stat, p, df = chi2_homogeneity(mine, theirs)
        c.p("RandomShortestSize: size", p, f"(chi2 {stat:.1f}, df {df})")
        return c

    in_band(run)


def test_random_resize_draws_are_torchvisions(stoker_bin: Path) -> None:
    """RandomResize's shorter side, uniform in [min_size, max_size), against
    its make_params: the resized size F.resize gives for it."""
    ops = [T.RandomResize(100, 140).to_proto(), T.CenterCrop(64).to_proto()]
    t = tv2.RandomResize(100, 140)
    img = torch.zeros(3, 375, 500, dtype=torch.uint8)

    def run(k: int) -> Checks:
        mine = stoker_sizes(stoker_bin, ops, k, (500, 375))
        torch.manual_seed(600 + k)
        theirs = []
        for _ in range(DRAWS):
            s = t.make_params([img])["size"]
            theirs.append(tuple(_compute_resized_output_size((375, 500), size=s)))
        c = Checks()
        compare_values(c, "RandomResize: height", [m[0] for m in mine], [x[0] for x in theirs])
        compare_values(c, "RandomResize: width", [m[1] for m in mine], [x[1] for x in theirs])
        return c

    in_band(run)


def test_sizes_normalized(server: str) -> None:  # noqa: F811
    """Normalize after the resize: float32 samples, padded with 0.0 (as
    DETR pads its normalized tensors), each window the uint8 job's
    normalized."""
    ops = [T.RandomShortestSize((96, 128, 160), max_size=200), T.RandomHorizontalFlip()]
    mean, std = (0.5, 0.4, 0.3), (0.2, 0.25, 0.3)
    got = []
    for tf in (T.Compose(ops), T.Compose([*ops, T.Normalize(mean, std)])):
        with stoker.Loader(server, "plain", batch_size=5, transform=tf, pin_memory=False, timeout=60, seed=8) as ld:
            got.append([(b.images.clone(), b.sizes.clone()) for b in ld])
    for (u8, s8), (f32, s32) in zip(*got):
        assert torch.equal(s8, s32) and f32.dtype == torch.float32 and f32.shape == u8.shape
        for i, (h, w) in enumerate(s8.tolist()):
            want = tv2.functional.normalize(u8[i, :, :h, :w].float() / 255, mean, std)
            torch.testing.assert_close(f32[i, :, :h, :w], want)
            assert not f32[i, :, h:, :].any() and not f32[i, :, :, w:].any()
