"""Fixtures: the real `stoker serve` over small datasets written here.

The Go binary is built once per session from the repository (or taken from
$STOKER_BIN). One server serves these datasets:

- ``tiny``: 48 JPEGs, 80-160 px, 3 classes (16 each): plan and determinism
  tests.
- ``eval``: ~20 real photos (from ../shared/data/photos/val when it exists,
  else from the repository's testdata/photos): imagenet-eval against
  torchvision.
- ``broken``: 10 good JPEGs and one corrupt file.
- ``odd``: 37 small JPEGs (a prime count): elastic resume tests.
- ``shards``: 36 small JPEGs in six WebDataset tar shards of uneven sizes
  (SHARD_SIZES): the block shuffle.
- ``many``: 300 small JPEGs: repeated augmentation (RASampler's epoch is a
  multiple of 256 samples).
"""

from __future__ import annotations

import os
import shutil
import io
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Dict, Iterator

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
PHOTOS_VAL = REPO.parent / "shared" / "data" / "photos" / "val"
# Real photos committed with the repository (testdata/photos/NOTICE.md): a
# clone without ../shared tests on them, not on drawn images.
PHOTOS_TESTDATA = REPO / "testdata" / "photos"

# The run's own temporary directory: TMPDIR for this process and every
# child it starts (the servers, torchrun's workers and their torchelastic_*
# directories, the local servers' runtime directory, pytest's tmp_path),
# and ultralytics' settings directory. A run that passes removes it, so a
# run leaves nothing behind in the machine's /tmp; one that fails keeps it
# for its logs and says where (pytest_sessionfinish).
SESSION_TMP = tempfile.mkdtemp(prefix="stoker-tests-")
os.environ["TMPDIR"] = SESSION_TMP
tempfile.tempdir = None
os.environ.setdefault("YOLO_CONFIG_DIR", os.path.join(SESSION_TMP, "ultralytics"))
os.environ.setdefault("YOLO_OFFLINE", "1")

# This checkout's package, ahead of any installed stoker (an editable
# install of another checkout, say): before the first import of it.
sys.path.insert(0, str(REPO / "python"))

from stoker._local import LocalServer  # noqa: E402

import blasorder  # noqa: E402


def pytest_configure(config: pytest.Config) -> None:
    """torch on one intra-op thread in this process, for every module.

    The references here are torch calls on small tensors, one after another:
    on a loaded machine torch's thread pool spins more than it computes
    (test_parity_sampling.py's test_augmix alone, interleaved: 34 and 170
    CPU-s with torch's default two threads, 12 with one). Two modules set
    one thread in their setup_module for exactness, and it then held for
    every module after them in the run, so a module's threads depended on
    which ran before it; now each runs as the second half of the suite
    already did. Children (the examples, the exit cases) set
    OMP_NUM_THREADS=1 themselves."""
    import torch

    torch.set_num_threads(1)
    config.addinivalue_line(
        "markers", "expect_warning(category, match): the test must emit this warning (asserted, not printed)"
    )


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if exitstatus == 0:
        shutil.rmtree(SESSION_TMP, ignore_errors=True)
    else:
        sys.stderr.write(f"\nthis run's temporary files (kept, as it failed): {SESSION_TMP}\n")


def pytest_report_header(config: pytest.Config) -> str:
    return f"torch's float32 sums of three products: {blasorder.host_order()} (stoker's: fused; blasorder.py)"


@pytest.fixture(scope="session", autouse=True)
def torch_in_stokers_order() -> Iterator[str]:
    """torchvision's grids, boxes and keypoints summed in stoker's order
    (MKL's AVX-512 path) for the whole session, where this host's torch
    sums them plainly (an AMD CPU, say): the parity tests hold stoker to
    torchvision's bits on any host, and a torch that sums in an order
    blasorder.py does not know fails every test here, loudly."""
    with blasorder.substitute() as order:
        yield order


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """A test marked ``expect_warning(RuntimeWarning, match=...)`` runs
    inside ``pytest.warns``: the warning it provokes (a sample the 'pad' or
    'drop' policy left out, say) is asserted, and fails the test when it is
    missing, instead of landing in the run's warnings summary. The marker
    leaves the test's body as it is."""
    marker = item.get_closest_marker("expect_warning")
    if marker is None:
        return (yield)
    with pytest.warns(*marker.args, **marker.kwargs):
        return (yield)


def _image(rng: np.random.Generator, h: int, w: int) -> np.ndarray:
    """A smooth colour image with some texture: gradients, a disc, mild noise
    (natural-image-like, so resampling differences stay small)."""
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    c = rng.uniform(0, 255, size=(3, 3))
    img = np.empty((h, w, 3), np.float32)
    for k in range(3):
        img[..., k] = c[k, 0] + (c[k, 1] - c[k, 0]) * x / w * 0.8 + (c[k, 2] - 128) * y / h * 0.5
    cy, cx, r = rng.uniform(0.2, 0.8) * h, rng.uniform(0.2, 0.8) * w, rng.uniform(0.1, 0.4) * min(h, w)
    disc = (y - cy) ** 2 + (x - cx) ** 2 < r * r
    img[disc] = 0.5 * img[disc] + 0.5 * rng.uniform(0, 255, size=3)
    img += rng.normal(0, 4, size=img.shape)
    return np.clip(img, 0, 255).astype(np.uint8)


def _write_jpeg(path: Path, arr: np.ndarray) -> None:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(arr).save(path, quality=92)


def _make_tiny(root: Path) -> None:
    rng = np.random.default_rng(0)
    for cls in ("ant", "bee", "cat"):
        for i in range(16):
            h, w = rng.integers(80, 161, size=2)
            _write_jpeg(root / cls / f"{i:03d}.jpg", _image(rng, int(h), int(w)))


def _make_eval(root: Path) -> None:
    """Two photos of each of ten classes, from the first photo set there is."""
    for photos in (PHOTOS_VAL, PHOTOS_TESTDATA):
        if not photos.is_dir():
            continue
        classes = sorted(p.name for p in photos.iterdir() if p.is_dir())[:10]
        for cls in classes:
            for f in sorted(f for f in (photos / cls).iterdir() if f.suffix == ".jpg")[:2]:
                (root / cls).mkdir(parents=True, exist_ok=True)
                shutil.copyfile(f, root / cls / f.name)
        if sum(1 for _ in root.rglob("*.jpg")) >= 10:
            return
        shutil.rmtree(root)
    raise FileNotFoundError(f"no photos for the eval dataset: neither {PHOTOS_VAL} nor {PHOTOS_TESTDATA} has 10")


def _make_broken(root: Path) -> None:
    rng = np.random.default_rng(2)
    for cls in ("a", "b"):
        for i in range(5):
            _write_jpeg(root / cls / f"{i:03d}.jpg", _image(rng, 120, 100))
    # Not an image at all, under an image's name.
    (root / "b" / "zz_corrupt.jpg").write_bytes(b"this is not a JPEG\n" * 20)


def _make_allbad(root: Path) -> None:
    # Text files under images' names: every sample fails.
    for i in range(20):
        path = root / "ab"[i % 2] / f"{i:03d}.jpg"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"this is text, not a JPEG\n")


def _make_many(root: Path) -> None:
    """300 small images: enough for repeated augmentation (RASampler's
    epoch rounds the dataset down to a multiple of 256)."""
    rng = np.random.default_rng(4)
    for i in range(300):
        _write_jpeg(root / "abc"[i % 3] / f"{i:03d}.jpg", _image(rng, 24, 28))


def _make_odd(root: Path) -> None:
    rng = np.random.default_rng(3)
    for i in range(37):
        _write_jpeg(root / "abc"[i % 3] / f"{i:03d}.jpg", _image(rng, 40, 48))


#: The samples of each of ``shards``' tar shards, in name order.
SHARD_SIZES = (5, 9, 3, 8, 7, 4)


def _make_shards(root: Path) -> None:
    from PIL import Image

    rng = np.random.default_rng(4)
    root.mkdir(parents=True)
    i = 0
    for s, size in enumerate(SHARD_SIZES):
        with tarfile.open(root / f"shard-{s:02d}.tar", "w", format=tarfile.USTAR_FORMAT) as tar:
            for _ in range(size):
                jpg = io.BytesIO()
                Image.fromarray(_image(rng, 40, 48)).save(jpg, format="JPEG", quality=92)
                for name, data in ((f"{i:03d}.jpg", jpg.getvalue()), (f"{i:03d}.cls", str(i % 3).encode())):
                    info = tarfile.TarInfo(name)
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
                i += 1


#: The clip dataset: CLIP_SAMPLES image-text pairs in 3 shards (keys
#: c{shard}/{i:03d}), each KEY.jpg beside KEY.txt and KEY.json, no .cls;
#: sample 5's caption is not UTF-8, sample 9's .json is 100 KB (over the
#: default bound of a field), and c1/999 has a caption and no image.
CLIP_SAMPLES = 24


def clip_caption(i: int) -> bytes:
    return b"caf\xe9 \xff not utf-8" if i == 5 else f"a photo of thing {i}".encode()


def _make_clip(root: Path) -> None:
    from PIL import Image

    rng = np.random.default_rng(5)
    root.mkdir(parents=True)
    tars = [tarfile.open(root / f"clip-{s}.tar", "w", format=tarfile.USTAR_FORMAT) for s in range(3)]

    def add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
        info = tarfile.TarInfo(name)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))

    for i in range(CLIP_SAMPLES):
        key, tar = f"c{i % 3}/{i:03d}", tars[i % 3]
        jpg = io.BytesIO()
        Image.fromarray(_image(rng, 40, 48)).save(jpg, format="JPEG", quality=92)
        meta = b'{"pad": "' + b"x" * 100_000 + b'"}' if i == 9 else f'{{"key": "{key}", "i": {i}}}'.encode()
        for name, data in ((key + ".jpg", jpg.getvalue()), (key + ".txt", clip_caption(i)), (key + ".json", meta)):
            add(tar, name, data)
    add(tars[1], "c1/999.txt", b"a caption without its image")
    for tar in tars:
        tar.close()


@pytest.fixture(scope="session")
def data_dirs(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Path]:
    base = tmp_path_factory.mktemp("data")
    dirs = {"tiny": base / "tiny", "eval": base / "eval", "broken": base / "broken", "odd": base / "odd",
            "shards": base / "shards", "allbad": base / "allbad", "many": base / "many",
            "clip": base / "clip"}
    _make_tiny(dirs["tiny"])
    _make_eval(dirs["eval"])
    _make_broken(dirs["broken"])
    _make_odd(dirs["odd"])
    _make_shards(dirs["shards"])
    _make_allbad(dirs["allbad"])
    _make_many(dirs["many"])
    _make_clip(dirs["clip"])
    return dirs


@pytest.fixture(scope="session")
def stoker_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    env_bin = os.environ.get("STOKER_BIN")
    if env_bin:
        return Path(env_bin)
    out = tmp_path_factory.mktemp("bin") / "stoker"
    r = subprocess.run(
        ["go", "build", "-o", str(out), "./cmd/stoker"], cwd=REPO, capture_output=True, text=True, timeout=600
    )
    if r.returncode != 0:
        pytest.fail(f"go build ./cmd/stoker failed:\n{r.stderr}")
    return out


@pytest.fixture(scope="session")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The pipeline package's test binary, which drives explicit geometry
    (pipeline/geomdrive_cgo_test.go): built once a session for the modules
    that drive it (test_parity_geometry.py, test_parity_formats.py,
    test_parity_tv_grids.py), where each built and linked its own. Linked
    without DWARF (-ldflags=-w: nothing debugs it; a panic's trace needs
    none), which took about 45% of the link's CPU, and without go test's
    vet step (make lint's go vet checks the same files)."""
    if shutil.which("go") is None:
        pytest.fail("go is not on PATH: the geometry driver is the pipeline package's test binary")
    out = tmp_path_factory.mktemp("geomdrive") / "pipeline.test"
    r = subprocess.run(["go", "test", "-c", "-vet=off", "-ldflags=-w", "-o", str(out), "./pipeline"], cwd=REPO, capture_output=True,
                       text=True, timeout=900, stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        pytest.fail(f"go test -c ./pipeline failed:\n{r.stderr}")
    return out


@pytest.fixture(scope="session")
def server(stoker_bin: Path, data_dirs: Dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Starts `stoker serve` on 127.0.0.1:0 and yields its address."""
    log = tmp_path_factory.mktemp("server") / "server.log"
    try:
        srv = LocalServer(str(stoker_bin), {n: str(d) for n, d in data_dirs.items()}, workers=2, log_path=str(log))
    except RuntimeError as e:
        pytest.fail(str(e))
    with srv:
        yield srv.addr


@pytest.fixture(scope="session")
def targets_det(stoker_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """test_targets.py's detection set, `stoker mkdata --coco --yolo` of
    test_targets.N images (seed 7), made once a session: the 16 modules
    that import test_targets' det and server fixtures each made their own
    copy and started their own server over it."""
    from test_targets import N

    out = tmp_path_factory.mktemp("det")
    r = subprocess.run([str(stoker_bin), "mkdata", "--coco", "--yolo", "--out", str(out), "--n", str(N), "--seed", "7"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return out


@pytest.fixture(scope="session")
def targets_server(stoker_bin: Path, targets_det: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`stoker serve` over targets_det (coco and yolo: its images with each
    annotation format; plain: the images without), once a session: each
    test opens its own loaders, and none reads the server's log or status."""
    log = tmp_path_factory.mktemp("log") / "server.log"
    images = str(targets_det / "images" / "train")
    try:
        srv = LocalServer(str(stoker_bin), {"coco": images, "yolo": images, "plain": str(targets_det / "images")},
                          workers=2, args=["--grace", "1s", "--annotations",
                                           f"coco={targets_det / 'annotations' / 'instances.json'}",
                                           "--annotations", f"yolo={targets_det / 'data.yaml'}"], log_path=str(log))
    except RuntimeError as e:
        pytest.fail(str(e))
    with srv:
        yield srv.addr


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory):
    """A test CA and the server's and a client's certificates (certs.py)."""
    from certs import make_certs

    return make_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="session")
def start_server(stoker_bin: Path, data_dirs: Dict[str, Path], tmp_path_factory: pytest.TempPathFactory):
    """Starts another `stoker serve` over ``tiny`` with extra flags:
    ``start_server(*args)`` returns a started LocalServer, stopped at the
    end of the session if the test has not stopped it."""
    started = []

    def start(*args: str) -> LocalServer:
        log = tmp_path_factory.mktemp("server") / "server.log"
        try:
            srv = LocalServer(str(stoker_bin), {"tiny": str(data_dirs["tiny"])}, workers=1,
                              args=["--grace", "1s", *args], log_path=str(log))
        except RuntimeError as e:
            pytest.fail(str(e))
        started.append(srv)
        return srv

    yield start
    for srv in started:
        srv.stop()


@pytest.fixture(scope="session")
def run_script(tmp_path_factory: pytest.TempPathFactory):
    """``run_script(args, cwd=, env=, timeout=)`` runs `python ARGS` as a
    user would, each in its own process, forked from one interpreter that
    imported the examples' torch, torchvision, Lightning and Accelerate
    once (forkrun.py); returns its returncode (None past the timeout),
    stdout and stderr."""
    from forkrun import ForkRunner

    try:
        runner = ForkRunner(tmp_path_factory.mktemp("forkrun"))
    except RuntimeError as e:
        pytest.fail(str(e))
    yield runner.run
    runner.close()
