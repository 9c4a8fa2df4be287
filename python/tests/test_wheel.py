"""`pip install` of the platform wheel serves, and the local default.

The wheel (make wheel: the client with the static server binary) is
installed into a fresh venv, system site packages off, whose PATH has no Go
and whose environment has no STOKER_BIN: the ``stoker`` package and the
server come from the wheel alone. torch, numpy, grpcio and protobuf are
the suite's own (.venv's), seen through a .pth file that adds .venv's
site-packages after the venv's own: installing torch again would take
minutes, and the package under test is not among them (.venv's stoker is
an editable install, found through its own .pth file, which a path added
this way does not process). The checks:

- ``stoker serve`` from the venv's bin (the console script running the
  wheel's binary) answers ListDatasets;
- ``stoker.Loader(<testdata/photos>)``, the local default, starts a server
  from the wheel's binary, reads a batch through shared memory and says the
  server in its stats; close() stops it;
- a child that exits with its loader open, or is killed, leaves no server;
- two ranks on one host share one server, which outlives the rank that
  started it and stops with the last.

Every child reads nothing (stdin is /dev/null) and runs under a timeout.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
import zipfile
from pathlib import Path
from typing import Dict, List

import pytest

REPO = Path(__file__).resolve().parents[2]
PHOTOS = REPO / "testdata" / "photos"
# make wheel builds make static's binary first: minutes on a loaded 2-core
# machine when its cache is cold.
BUILD_TIMEOUT = 1800
CHILD_TIMEOUT = 240


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel, built now by make wheel (go build is incremental), into
    a directory of this test's, from a static binary of its own (the image
    tests run make static at the same time into theirs)."""
    out = tmp_path_factory.mktemp("wheel")
    r = subprocess.run(["make", "-s", "wheel", f"STATIC_BIN={out / 'stoker-static'}", f"WHEEL_DIST={out / 'dist'}",
                        f"WHEEL_STAGE={out / 'stage'}"], cwd=REPO, stdin=subprocess.DEVNULL, capture_output=True,
                       text=True, timeout=BUILD_TIMEOUT)
    assert r.returncode == 0, f"make wheel failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    machine = os.uname().machine
    found = sorted((out / "dist").glob(f"stoker-*-py3-none-manylinux_2_17_{machine}.manylinux2014_{machine}.whl"))
    assert len(found) == 1, f"want one wheel for {machine} in dist/, got {found}"
    return found[0]


def test_local_default_arguments(tmp_path: Path) -> None:
    import stoker

    with pytest.raises(ValueError, match="does not exist"):
        stoker.Loader(str(tmp_path / "nowhere"))
    with pytest.raises(ValueError, match="is a directory, not a server's address"):
        stoker.Loader(str(PHOTOS), "photos")
    with pytest.raises(ValueError, match="token of its own"):
        stoker.Loader(str(PHOTOS), token="t")


def test_local_server_that_fails_names_its_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A server that cannot start: the error names its log and quotes it."""
    import stoker

    fake = tmp_path / "stoker"
    fake.write_text("#!/bin/sh\necho 'serve: a reason of its own' >&2\nexit 3\n")
    fake.chmod(0o755)
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("STOKER_BIN", str(fake))
    monkeypatch.setenv("STOKER_RUNTIME_DIR", str(runtime))
    with pytest.raises(RuntimeError) as e:
        stoker.Loader(str(PHOTOS))
    msg = str(e.value)
    assert "exited with 3" in msg and "a reason of its own" in msg, msg
    logs = list(runtime.glob("local-*/serve.log"))
    assert len(logs) == 1 and str(logs[0]) in msg, (logs, msg)


def test_wheel_carries_a_static_binary(wheel: Path, tmp_path: Path) -> None:
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        assert "stoker/_bin/stoker" in names
        info = z.getinfo("stoker/_bin/stoker")
        assert (info.external_attr >> 16) & 0o111, "the binary is not executable in the wheel"
        meta = z.read(next(n for n in names if n.endswith(".dist-info/WHEEL"))).decode()
        entry = z.read(next(n for n in names if n.endswith(".dist-info/entry_points.txt"))).decode()
        z.extract("stoker/_bin/stoker", tmp_path)
    assert "Root-Is-Purelib: false" in meta, meta
    assert "stoker = stoker._cli:main" in entry, entry
    binary = tmp_path / "stoker" / "_bin" / "stoker"
    env = dict(os.environ, LC_ALL="C")
    out = subprocess.run(["readelf", "-d", str(binary)], env=env, capture_output=True, text=True, timeout=60).stdout
    assert "There is no dynamic section" in out, out
    out = subprocess.run(["readelf", "-l", str(binary)], env=env, capture_output=True, text=True, timeout=60).stdout
    assert "INTERP" not in out and "LOAD" in out, out  # no program interpreter: no ld.so, no glibc
    # ldd of a static executable says so and exits non-zero: no glibc to need.
    ldd = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, timeout=60)
    assert "not a dynamic executable" in ldd.stdout + ldd.stderr, ldd.stdout + ldd.stderr


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Dict[str, str]:
    """A fresh venv with the wheel installed; the environment to run it in."""
    root = tmp_path_factory.mktemp("venv") / "v"
    subprocess.run([sys.executable, "-m", "venv", str(root)], check=True, stdin=subprocess.DEVNULL,
                   timeout=CHILD_TIMEOUT)
    py = root / "bin" / "python"
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True, timeout=60).stdout.strip()
    (Path(site) / "suite-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    runtime = tmp_path_factory.mktemp("run")
    runtime.chmod(0o700)
    # PATH: the venv's bin, and taskset alone of the system's (the local
    # default pins its server with it): no Go wherever this host keeps one.
    tools = tmp_path_factory.mktemp("tools")
    taskset = shutil.which("taskset")
    if taskset:
        (tools / "taskset").symlink_to(taskset)
    env = {"PATH": f"{root / 'bin'}:{tools}", "HOME": os.environ.get("HOME", "/root"),
           "STOKER_RUNTIME_DIR": str(runtime), "PYTHONNOUSERSITE": "1", "LANG": "C.UTF-8"}
    r = subprocess.run(["pip", "install", "-q", "--no-index", "--no-deps", "--no-cache-dir", str(wheel)], env=env,
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=CHILD_TIMEOUT)
    assert r.returncode == 0, r.stdout + r.stderr
    for tool in ("go", "gofmt", "make", "gcc"):
        assert shutil.which(tool, path=env["PATH"]) is None, f"{tool} is on the venv's PATH"
    env["VENV"] = str(root)
    return env


def run_py(env: Dict[str, str], code: str, *args: str, timeout: float = CHILD_TIMEOUT) -> str:
    """Runs code in the venv's python (cwd: a directory with no stoker
    package in it), asserting success; its stdout."""
    r = subprocess.run([os.path.join(env["VENV"], "bin", "python"), "-c", code, *args], env=env, cwd="/",
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"rc {r.returncode}\nstdout:\n{r.stdout[-3000:]}\nstderr:\n{r.stderr[-5000:]}"
    return r.stdout


def alive(pid: int) -> bool:
    """Whether pid runs (a zombie, ended and not yet reaped, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def wait_gone(pid: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while alive(pid):
        assert time.monotonic() < deadline, f"the local server pid {pid} still runs {timeout:g} s on"
        time.sleep(0.1)


def test_package_and_binary_from_the_wheel(venv: Dict[str, str]) -> None:
    out = run_py(venv, "import stoker, stoker._serve as s; print(stoker.__file__); print(s.find_binary())")
    assert out.startswith(venv["VENV"]), out
    assert "the wheel's" in out, out


def test_stoker_serve_from_path_answers(venv: Dict[str, str], tmp_path: Path) -> None:
    addr_file = tmp_path / "addr"
    log = open(tmp_path / "serve.log", "wb")
    # `stoker` as the shell finds it on the venv's PATH: the console script.
    proc = subprocess.Popen(["stoker", "serve", "--listen", "127.0.0.1:0", "--addr-file", str(addr_file),
                             "--dataset", f"photos={PHOTOS}", "--workers", "1"], env=venv,
                            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    log.close()
    try:
        deadline = time.monotonic() + CHILD_TIMEOUT
        while not addr_file.exists() or not addr_file.read_text().strip():
            assert proc.poll() is None, (tmp_path / "serve.log").read_text()
            assert time.monotonic() < deadline, "stoker serve wrote no address"
            time.sleep(0.1)
        addr = addr_file.read_text().strip()
        out = run_py(venv, "import sys, stoker; print([(d.name, d.size) for d in stoker.list_datasets(sys.argv[1])])",
                     addr)
        n = sum(1 for p in PHOTOS.rglob("*.jpg"))
        assert f"('photos', {n})" in out, out
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    assert proc.returncode == 0, (tmp_path / "serve.log").read_text()


LOCAL = """
import json, os, sys, time
import stoker
from stoker import transforms as T
ld = stoker.Loader(sys.argv[1], transform=T.Compose([T.Resize((64, 64))]), batch_size=4, shuffle=False,
                   pin_memory=False, timeout=120)
images, labels = next(iter(ld))
info = ld.stats.local_server
print(json.dumps({"shape": list(images.shape), "dtype": str(images.dtype), "labels": labels.tolist(),
                  "transport": ld.transport, "pid": info.pid, "workers": info.workers, "cores": list(info.cores),
                  "log": info.log_path, "binary": info.binary, "started_here": info.started_here,
                  "text": str(info)}), flush=True)
"""


def test_local_default_reads_a_batch(venv: Dict[str, str]) -> None:
    out = run_py(venv, LOCAL + "ld.close()\nprint('ALIVE' if os.path.exists(f'/proc/{info.pid}') else 'GONE')\n",
                 str(PHOTOS))
    got = json.loads(out.splitlines()[0])
    assert got["shape"] == [4, 3, 64, 64] and got["dtype"] == "torch.uint8", got
    assert got["transport"] == "shm", got
    assert got["binary"].startswith(venv["VENV"]) and got["binary"].endswith("stoker/_bin/stoker"), got
    assert got["started_here"], got
    cpus = len(os.sched_getaffinity(0))
    want = cpus - 1 if cpus > 1 else 1
    assert got["workers"] == want, got
    if got["cores"]:
        assert len(got["cores"]) == want, got
    assert os.path.exists(got["log"]), got
    assert "listening" in Path(got["log"]).read_text(), got
    assert got["log"] in got["text"], got
    assert out.splitlines()[1] == "GONE", out  # close() stopped it: no other process used it


@pytest.mark.parametrize("how", ["exit", "sigkill"])
def test_no_orphan_server(venv: Dict[str, str], how: str) -> None:
    """The child ends with its loader open: at interpreter exit (the
    atexit path), or killed (the server sees its lock dropped)."""
    end = "sys.exit(0)\n" if how == "exit" else "os.kill(os.getpid(), 9)\n"
    r = subprocess.run([os.path.join(venv["VENV"], "bin", "python"), "-c", LOCAL + end, str(PHOTOS)], env=venv,
                       cwd="/", stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=CHILD_TIMEOUT)
    assert r.returncode == (0 if how == "exit" else -9), r.stderr[-3000:]
    got = json.loads(r.stdout.splitlines()[0])
    wait_gone(got["pid"])


RANK = """
import json, os, sys, time
import stoker
from stoker import transforms as T
path, rank, gate = sys.argv[1], int(sys.argv[2]), sys.argv[3]


def wait_for(p):
    deadline = time.monotonic() + 180
    while not os.path.exists(p):
        assert time.monotonic() < deadline, "no " + p
        time.sleep(0.05)


if rank == 1:
    wait_for(gate + ".0-started")
ld = stoker.Loader(path, transform=T.Compose([T.Resize((32, 32))]), batch_size=2, pin_memory=False,
                   rank=rank, world_size=2, timeout=120)
it = iter(ld)
next(it)
info = ld.stats.local_server
print(json.dumps({"pid": info.pid, "started_here": info.started_here}), flush=True)
open(gate + f".{rank}-started", "w").close()
if rank == 0:
    wait_for(gate + ".1-started")  # rank 1 uses the server before this one exits
if rank == 1:
    wait_for(gate + ".0-gone")  # rank 0, which started the server, has exited
    next(it)  # the server still serves
    print("SECOND", flush=True)
"""


def test_ranks_share_one_server(venv: Dict[str, str], tmp_path: Path) -> None:
    gate = str(tmp_path / "gate")
    env = dict(venv, LOCAL_WORLD_SIZE="2")
    py = os.path.join(venv["VENV"], "bin", "python")
    procs: List[subprocess.Popen] = [
        subprocess.Popen([py, "-c", RANK, str(PHOTOS), str(r), gate], env=env, cwd="/", stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in (0, 1)]
    try:
        out0, err0 = procs[0].communicate(timeout=CHILD_TIMEOUT)
        assert procs[0].returncode == 0, err0[-3000:]
        first = json.loads(out0.splitlines()[0])
        assert first["started_here"], first
        assert alive(first["pid"]), "the server stopped with the rank that started it"
        open(gate + ".0-gone", "w").close()
        out1, err1 = procs[1].communicate(timeout=CHILD_TIMEOUT)
        assert procs[1].returncode == 0, err1[-3000:]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate()
    second = json.loads(out1.splitlines()[0])
    assert second == {"pid": first["pid"], "started_here": False}, (first, second)
    assert "SECOND" in out1, out1
    wait_gone(first["pid"])
