"""Geometry parity on large photos, through the server: a default job
decodes at full scale (JobSpec.decode unspecified: the server's default,
exact), so each sample is torchvision's ``F.resized_crop`` (or ``resize``
then ``center_crop``) of ``decode_jpeg``'s pixels, with the box the trace
says, to the byte (torchvision's own test_transforms_v2.py allows its uint8
resize kernels ``atol=1``; stoker runs torch's uint8 kernels' arithmetic,
antialiased bilinear and bicubic alike): the photos are 1080p to 5.6K and
the outputs 96 to 224 px, where the old default decoded at 1/2, 1/4 or 1/8
scale. ``Loader(decode="fast")`` still takes the DCT path: the same draws,
other pixels on the samples whose crop is twice the output, within the
bound docs/transforms.md gives.

The large photos are made here: committed photos (testdata/photos)
upscaled by torchvision's bicubic resize and encoded with its encode_jpeg
(quality 90, 4:2:0), each a size of its own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Tuple

import numpy as np
import pytest
import torch
from torchvision.io import ImageReadMode, decode_jpeg, encode_jpeg, read_file
from torchvision.transforms import InterpolationMode
from torchvision.transforms.v2 import functional as F

import stoker
from stoker import transforms as T
from stoker._local import LocalServer
from stoker.v1 import stoker_pb2 as pb

REPO = Path(__file__).resolve().parents[2]
PHOTOS = REPO / "testdata" / "photos"

#: (source photo, width, height): 1080p to 5.6K, both orientations.
SIZES = [("autumn/000000.jpg", 1920, 1080), ("kite/000028.jpg", 2560, 1440), ("shell/000015.jpg", 1080, 1920),
         ("path/000031.jpg", 4032, 3024), ("flow/000007-422.jpg", 3840, 2160), ("summer_1am", 5616, 3744)]

#: The presets' geometry (the first op of tv-resnet50-v2, dino-local,
#: dino-global, clip), and imagenet-eval's resize then crop.
GEOMETRIES: Dict[str, pb.TransformSpec] = {
    "tv-resnet50-v2": pb.TransformSpec(ops=[T.RandomResizedCrop(176).to_proto()]),
    "dino-local": pb.TransformSpec(ops=[T.RandomResizedCrop(
        96, scale=(0.05, 0.4), interpolation="bicubic").to_proto()]),
    "dino-global": pb.TransformSpec(ops=[T.RandomResizedCrop(
        224, scale=(0.4, 1), interpolation="bicubic").to_proto()]),
    "rrc96-bilinear": pb.TransformSpec(ops=[T.RandomResizedCrop(96).to_proto()]),
    "imagenet-eval": pb.TransformSpec(preset="imagenet-eval"),
}

#: torchvision's tolerance for its uint8 resize (test_transforms_v2.py's
#: resize and resized_crop correctness tests: atol 1). stoker's filters
#: are torch's uint8 kernels (its weights, int16 precision, horizontal pass
#: first and rounded to 8 bits), so at full scale every geometry, bilinear
#: and bicubic, must be torchvision's to the byte: atol 0. The decode=fast
#: test below uses torchvision's own atol to tell a DCT-scaled sample.
ATOL = 0
TV_ATOL = 1
#: decode="fast"'s bound where it DCT-scaled (test_parity_geometry.py's
#: DCT_MEAN for outputs of 16 px and more).
DCT_MEAN = 3.0


def _source(name: str) -> Path:
    p = PHOTOS / name
    if p.is_dir():
        p = sorted(p.glob("*.jpg"))[0]
    assert p.is_file(), f"{p} is one of the repository's test photos"
    return p


@pytest.fixture(scope="module")
def large(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An ImageFolder of one class, a.jpg..f.jpg: the photos of SIZES."""
    root = tmp_path_factory.mktemp("large")
    (root / "c").mkdir()
    for i, (name, w, h) in enumerate(SIZES):
        img = decode_jpeg(read_file(str(_source(name))), mode=ImageReadMode.RGB)
        big = F.resize(img, [h, w], interpolation=InterpolationMode.BICUBIC, antialias=True)
        (root / "c" / f"{chr(ord('a') + i)}.jpg").write_bytes(encode_jpeg(big, quality=90).numpy().tobytes())
    return root


@pytest.fixture(scope="module")
def server(stoker_bin: Path, large: Path, tmp_path_factory: pytest.TempPathFactory):
    log = tmp_path_factory.mktemp("server") / "server.log"
    with LocalServer(str(stoker_bin), {"large": str(large)}, workers=2, log_path=str(log)) as srv:
        yield srv.addr


def _batches(addr: str, spec: pb.TransformSpec, seed: int, **kw) -> List[stoker.Batch]:
    with stoker.Loader(addr, "large", batch_size=len(SIZES), shuffle=False, seed=seed, trace=True, pin_memory=False,
                       timeout=120, **kw) as ld:
        ld._spec = spec
        return [b for b in ld]


def _replay(img: torch.Tensor, trace: List[Tuple[str, dict]]) -> torch.Tensor:
    for name, args in trace:
        a = dict(args)
        if "interpolation" in a:
            a["interpolation"] = InterpolationMode(a["interpolation"])
        img = getattr(F, name)(img, **a)
    return img


def _diffs(addr: str, large: Path, spec: pb.TransformSpec, seeds: range, **kw):
    """Per sample: (mean |diff|, max |diff|) against torchvision's replay of
    its trace, and the batches' decode."""
    files = sorted((large / "c").glob("*.jpg"))
    decoded = {i: decode_jpeg(read_file(str(f)), mode=ImageReadMode.RGB) for i, f in enumerate(files)}
    out, modes = [], set()
    for seed in seeds:
        for b in _batches(addr, spec, seed, **kw):
            modes.add(b.decode)
            for img, idx, tr in zip(b.images, b.indices.tolist(), b.trace):
                want = _replay(decoded[idx], tr)
                d = (img.to(torch.int16) - want.to(torch.int16)).abs()
                out.append((float(d.float().mean()), int(d.max())))
    return out, modes


@pytest.mark.parametrize("geometry", list(GEOMETRIES))
def test_default_is_torchvision_at_full_scale(server: str, large: Path, geometry: str) -> None:
    diffs, modes = _diffs(server, large, GEOMETRIES[geometry], range(4))
    assert modes == {"exact"}, f"the default job's batches say decode {modes}"
    worst = max(m for _, m in diffs)
    print(f"{geometry}: {len(diffs)} samples, {sum(m == 0 for _, m in diffs)} equal, worst max {worst}, "
          f"worst mean {max(a for a, _ in diffs):.4f}")
    assert worst <= ATOL, (f"{geometry}: {sum(m > ATOL for _, m in diffs)} of {len(diffs)} samples differ from "
                           f"torchvision's by more than {ATOL} (worst max {worst}, worst mean {max(a for a, _ in diffs):.3f})")


@pytest.mark.parametrize("geometry", ["dino-local", "rrc96-bilinear"])
def test_fast_takes_the_dct_path(server: str, large: Path, geometry: str) -> None:
    """decode="fast": the same draws (the traces are the exact job's), and
    the samples whose crop is at least twice the output decoded at a DCT
    scale: not torchvision's bytes, within the DCT bound."""
    spec = GEOMETRIES[geometry]
    fast, modes = _diffs(server, large, spec, range(4), decode="fast")
    assert modes == {"fast"}
    exact_traces = [b.trace for s in range(4) for b in _batches(server, spec, s, decode="exact")]
    fast_traces = [b.trace for s in range(4) for b in _batches(server, spec, s, decode="fast")]
    assert exact_traces == fast_traces, "decode changed the draws"
    off = [m for _, m in fast if m > TV_ATOL]
    print(f"{geometry} fast: {len(off)} of {len(fast)} samples past {TV_ATOL}, worst max {max(m for _, m in fast)}, "
          f"worst mean {max(a for a, _ in fast):.3f}")
    assert off, f"{geometry}: every decode=fast sample is within {TV_ATOL} of torchvision's full-scale pixels: no DCT scaling"
    assert max(a for a, _ in fast) <= DCT_MEAN, f"{geometry}: a DCT-scaled sample's mean |diff| passes {DCT_MEAN}"


def test_decode_argument_is_checked() -> None:
    with pytest.raises(ValueError, match="decode must be 'exact'"):
        stoker.Loader("127.0.0.1:1", "large", batch_size=1, decode="scaled")


def test_server_default_fast(stoker_bin: Path, large: Path, tmp_path: Path) -> None:
    """stoker serve --decode fast: jobs that do not say decode fast (the
    batches say so, and DCT-scaled samples are off torchvision's); a job
    that asks for exact gets torchvision's pixels all the same."""
    with LocalServer(str(stoker_bin), {"large": str(large)}, workers=2, args=["--decode", "fast"],
                     log_path=str(tmp_path / "server.log")) as srv:
        spec = GEOMETRIES["dino-local"]
        fast, modes = _diffs(srv.addr, large, spec, range(2))
        assert modes == {"fast"}
        assert any(m > 0 for _, m in fast), "a default job on a --decode fast server decoded every sample at full scale"
        exact, modes = _diffs(srv.addr, large, spec, range(2), decode="exact")
        assert modes == {"exact"}
        assert max(m for _, m in exact) == 0, "decode='exact' on a --decode fast server is not torchvision's bicubic"
