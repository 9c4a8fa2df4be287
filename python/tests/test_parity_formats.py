"""PNG and WebP parity with torchvision (issue 39): stoker's fast path
(libpng and libwebp, pipeline/formats.c) against torchvision.io.decode_image
(ImageReadMode.RGB) of the same file.

- The decoded image: a resized_crop of the whole image to its own size with
  nearest is the decoded pixels themselves; they must equal decode_image's
  byte for byte (16-bit PNGs: its uint16 shifted right by 8, what
  ToDtype(torch.uint8, scale=True) does), for every PNG color type and
  depth, palettes with and without transparency, alpha, interlacing, and
  lossy and lossless WebP with and without alpha.
- After a transform: resized_crop over a grid of boxes and sizes with each
  filter, against torchvision.transforms.v2.functional on decode_image's
  pixels, within the JPEG tests' full-scale bounds (test_parity_geometry:
  mean |diff| <= 0.5, max <= 2; PNG and WebP are never DCT-scaled).

- Served: through `stoker serve` and the Python client, files named .JPEG
  that are PNG or WebP decode by their bytes, and bad ones (animated WebP,
  a PNG cut short) are per-sample errors naming the file.

Files are made here with PIL from the repository's test photos, and with a
small PNG writer for what PIL does not write (16-bit color, Adam7).
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path
from typing import List

import numpy as np
import pytest

from test_parity_geometry import FILTERS, MAX, MEAN, PHOTOS, _boxes, _run, _torchvision

#: Adam7's passes: (x0, y0, dx, dy).
ADAM7 = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]


def _png(path: Path, pix: np.ndarray, color_type: int, interlace: bool = False) -> None:
    """Writes pix (H x W x C, uint8 or big-endian-able uint16) as a PNG with
    filter 0 on every row."""
    h, w = pix.shape[:2]
    depth = 16 if pix.dtype == np.uint16 else 8
    raw = pix.astype(">u2") if depth == 16 else pix
    passes = [raw[y0::dy, x0::dx] for x0, y0, dx, dy in ADAM7] if interlace else [raw]
    data = b"".join(b"".join(b"\0" + row.tobytes() for row in p) for p in passes if p.size)

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    ihdr = struct.pack(">IIBBBBB", w, h, depth, color_type, 0, 0, int(interlace))
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(data, 6))
                     + chunk(b"IEND", b""))


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> List[Path]:
    from PIL import Image

    d = tmp_path_factory.mktemp("formats")
    rng = np.random.default_rng(39)
    photo = Image.open(PHOTOS / "kite" / "000028.jpg").convert("RGB")
    small = Image.open(PHOTOS / "autumn" / "000000-444.jpg").convert("RGB").resize((37, 23))
    rgb = np.asarray(photo)
    h, w = rgb.shape[:2]
    alpha = rng.integers(0, 256, (h, w, 1), dtype=np.uint8)
    out: List[Path] = []

    def save(name: str, im, **kw) -> None:
        p = d / name
        im.save(p, **kw)
        out.append(p)

    save("rgb.png", photo)
    save("small.png", small)
    save("rgba.png", Image.fromarray(np.concatenate([rgb, alpha], 2), "RGBA"))
    save("gray.png", photo.convert("L"))
    save("gray-alpha.png", photo.convert("LA"))
    save("gray-1bit.png", photo.convert("1"))
    save("palette.png", photo.quantize(256))
    save("palette-4bit.png", photo.quantize(16), bits=4)
    pal = photo.quantize(64)
    save("palette-trns.png", pal, transparency=3)
    wide = (rgb.astype(np.uint16) * 257 + rng.integers(0, 257, rgb.shape)).astype(np.uint16)
    for name, pix, ct, il in [("rgb16.png", wide, 2, False), ("gray16.png", wide[:, :, :1], 0, False),
                              ("rgba16.png", np.concatenate([wide, wide[:, :, :1]], 2), 6, False),
                              ("rgb-adam7.png", rgb, 2, True), ("gray-adam7.png", rgb[:, :, 1:2], 0, True)]:
        _png(d / name, pix, ct, il)
        out.append(d / name)
    save("lossy.webp", photo, quality=90)
    save("small.webp", small, quality=90)
    save("lossy-alpha.webp", Image.fromarray(np.concatenate([rgb, alpha], 2), "RGBA"), quality=90)
    save("lossless.webp", photo, lossless=True)
    save("lossless-alpha.webp", Image.fromarray(np.concatenate([rgb, alpha], 2), "RGBA"), lossless=True)
    return out


def _decoded(path: Path) -> "object":
    """torchvision's pixels of a file, uint8 CHW."""
    import torch
    from torchvision.io import ImageReadMode, decode_image, read_file

    img = decode_image(read_file(str(path)), mode=ImageReadMode.RGB)
    if img.dtype == torch.uint16:
        img = (img.to(torch.int32) >> 8).to(torch.uint8)
    assert img.dtype == torch.uint8, f"{path.name}: decode_image gave {img.dtype}"
    return img


def test_decoded_pixels_equal_decode_image(driver: Path, files: List[Path], tmp_path: Path) -> None:
    """The whole image, and boxes of it (each the box's own pixels: a crop
    decodes only the rows, and for WebP the columns, the box needs)."""
    jobs = []
    decoded = {}  # each file decoded once (HWC), not again for each of its boxes
    for f in files:
        img = _decoded(f)
        _, h, w = img.shape
        decoded[str(f)] = img.permute(1, 2, 0).numpy()
        for top, left, bh, bw in [(0, 0, h, w), *_boxes(h, w), (h // 2 + 1, w // 3 + 1, h // 4 + 1, w // 5 + 3)]:
            jobs.append(dict(file=str(f), interpolation="nearest", antialias=False, op="resized_crop", top=top,
                             left=left, height=bh, width=bw, size=[bh, bw]))
    bad = []
    for (got, _), job in zip(_run(driver, jobs, tmp_path), jobs):
        y, x = job["top"], job["left"]
        want = decoded[job["file"]][y:y + job["height"], x:x + job["width"]]
        if not np.array_equal(got, want):
            d = np.abs(got.astype(np.int16) - want.astype(np.int16))
            bad.append(f"{Path(job['file']).name} box {(y, x, job['height'], job['width'])}: "
                       f"{int((d > 0).sum())} bytes differ, max {int(d.max())}")
    assert not bad, "decoded pixels differ from torchvision's decode_image:\n" + "\n".join(bad)


def test_resized_crop_matches_torchvision(driver: Path, files: List[Path], tmp_path: Path) -> None:
    jobs = []
    decoded = {}  # each file decoded once, for its size and its pixels
    for f in files:
        decoded[str(f)] = _decoded(f)
        _, h, w = decoded[str(f)].shape
        for top, left, bh, bw in _boxes(h, w):
            for size in ([224, 224], [max(1, bh // 7), max(1, bw // 5)], [min(2 * bh + 1, 400), min(bw + 3, 400)]):
                for interp, aa in FILTERS:
                    jobs.append(dict(file=str(f), interpolation=interp, antialias=aa, op="resized_crop", top=top,
                                     left=left, height=bh, width=bw, size=size))
    failures = []
    for (got, rep), job in zip(_run(driver, jobs, tmp_path), jobs):
        want = _torchvision(decoded[job["file"]], job)
        d = np.abs(got.astype(np.int16) - want.astype(np.int16))
        assert rep["scale_m"] == 8
        if d.mean() > MEAN or d.max() > MAX:
            failures.append(f"{Path(job['file']).name} {job}: mean |diff| {d.mean():.3f}, max {int(d.max())}")
    assert not failures, f"{len(failures)} of {len(jobs)} samples outside the bounds:\n" + "\n".join(failures[:20])


def test_served_formats_sniffed_and_bad_ones_named(stoker_bin: Path, files: List[Path], tmp_path: Path) -> None:
    """Through a real `stoker serve` and the Python client: PNGs and WebPs,
    some named .JPEG, are decoded by their bytes (torchvision's resize of
    decode_image's pixels, within the bounds above); an animated WebP and a
    PNG cut before its IEND are per-sample errors naming the file and why,
    and the job goes on."""
    import torch
    import torchvision.transforms.v2.functional as F

    import stoker
    from stoker import transforms as T
    from stoker._local import LocalServer

    by_name = {f.name: f.read_bytes() for f in files}
    root = tmp_path / "formats"
    (root / "a").mkdir(parents=True)
    good = {"0.JPEG": by_name["rgb.png"], "1.png": by_name["gray16.png"], "2.webp": by_name["lossy.webp"],
            "3.JPEG": by_name["lossless-alpha.webp"], "4.jpg": by_name["palette-trns.png"]}
    animated = Path(__file__).resolve().parents[2] / "pipeline" / "testdata" / "formats" / "animated.webp"
    bad = {"5.webp": animated.read_bytes(), "6.png": by_name["rgb.png"][:-12]}
    for name, data in {**good, **bad}.items():
        (root / "a" / name).write_bytes(data)
    # The loader is closed before the server stops: a stream left open
    # would hold the server's graceful stop for its --grace (10 s).
    with LocalServer(str(stoker_bin), {"formats": str(root)}, workers=1, log_path=str(tmp_path / "log")) as srv, \
            stoker.Loader(srv.addr, "formats", batch_size=7, shuffle=False, return_indices=True, pin_memory=False,
                          timeout=60, transform=T.Compose([T.Resize((48, 64))]), fail_policy="drop") as ld:
        with pytest.warns(RuntimeWarning, match="could not be made"):
            (images, _, idx), = [tuple(t.clone() for t in b) for b in ld]
    assert idx.tolist() == [0, 1, 2, 3, 4]
    for i, name in enumerate(sorted(good)):
        want = F.resize(_decoded(root / "a" / name), [48, 64], antialias=True)
        d = (images[i].to(torch.int16) - want.to(torch.int16)).abs()
        assert d.float().mean() <= MEAN and d.max() <= MAX, f"{name}: mean {d.float().mean():.3f}, max {d.max()}"
    errs = {e.name: e.reason for e in ld.sample_errors}
    assert set(errs) == {"a/5.webp", "a/6.png"}, errs
    assert "animated" in errs["a/5.webp"] and "IEND" in errs["a/6.png"], errs
