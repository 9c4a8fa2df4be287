"""The local default: a ``stoker serve`` on this host for ``stoker.Loader(path)``.

A Loader given a dataset path and no server (``stoker.Loader("/data/train",
transform=...)``) gets one from :func:`acquire`: a ``stoker serve`` of that
path on loopback, started from the installed binary (the wheel's
``stoker/_bin/stoker``, else ``$STOKER_BIN``, else a ``stoker`` binary on
PATH), whose batches come through shared memory.

One server per (user, dataset) on a host, however many processes use it
(``world_size`` ranks under torchrun), kept in a directory of the user's
runtime directory (:func:`runtime_dir`) keyed by the path:

- ``start.lock``: whoever starts or joins the server holds it meanwhile,
  so two ranks never start two servers;
- ``users.lock``: every process that uses the server holds a shared
  ``flock`` on it for as long as it does; the server (``--while-locked``)
  stops once no process holds one, however they ended (the kernel drops a
  killed process's locks), so it outlives the rank that started it and
  leaves no orphan;
- ``addr`` (the server writes it; it removes it when it stops), ``token``
  (the bearer token the server asks for: other users on the host cannot
  read the dataset through its port), ``info.json`` (pid, workers, cores),
  ``serve.log`` (the server's log).

The server runs on the cores the trainer leaves: the CPUs this process may
run on less one per rank on this host (``LOCAL_WORLD_SIZE``, torchrun's; else
1), pinned there with ``taskset`` where it is installed; on a machine with
no more CPUs than ranks it shares them all with one worker.
"""

from __future__ import annotations

import atexit
import errno
import fcntl
import hashlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

__all__ = ["LocalServerInfo", "acquire", "release", "find_binary", "runtime_dir", "DATASET"]

#: The dataset name the local server serves the path as.
DATASET = "local"
#: How long starting (or joining) a server may take before the Loader fails.
START_TIMEOUT = 120.0


@dataclass(frozen=True)
class LocalServerInfo:
    """The local server a Loader reads from (``loader.stats.local_server``)."""

    #: The dataset path (or URL) it serves.
    path: str
    #: Its gRPC address on loopback.
    addr: str
    #: Its process id.
    pid: int
    #: Its decode workers.
    workers: int
    #: The CPUs it is pinned to (empty: not pinned, taskset missing).
    cores: Tuple[int, ...]
    #: Its log file.
    log_path: str
    #: The binary it runs.
    binary: str
    #: Whether this process started it (else another rank did).
    started_here: bool

    def __str__(self) -> str:
        where = f"cores {_cpu_list(self.cores)}" if self.cores else "unpinned"
        who = "started here" if self.started_here else "started by another process"
        return (f"local stoker serve pid {self.pid} at {self.addr}, {self.workers} worker"
                f"{'s' if self.workers != 1 else ''} on {where} ({who}), log {self.log_path}")


def find_binary() -> Tuple[Optional[str], str]:
    """The stoker binary the local default runs, and where it was found; (None,
    what was looked at) when there is none."""
    bundled = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_bin", "stoker")
    if os.access(bundled, os.X_OK):
        return bundled, "the wheel's"
    env = os.environ.get("STOKER_BIN")
    if env:
        if os.access(env, os.X_OK):
            return env, "$STOKER_BIN"
        return None, f"STOKER_BIN={env!r} is not an executable file"
    on_path = shutil.which("stoker")
    # A `stoker` console script of a package installed without the binary
    # (pip install ./python) would only say it has none.
    if on_path and not _is_script(on_path):
        return on_path, "PATH's"
    return None, ("no server binary: this stoker package has none (installed from source, not from a wheel), "
                  "STOKER_BIN is not set and there is no stoker binary on PATH; install the platform wheel "
                  "(make wheel; pip install dist/stoker-*.whl), or build the server (make build) and set STOKER_BIN")


def _is_script(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(2) == b"#!"
    except OSError:
        return False


def runtime_dir() -> str:
    """Where the local servers' directories are: ``$STOKER_RUNTIME_DIR``, else
    ``$XDG_RUNTIME_DIR/stoker``, else ``/tmp/stoker-<uid>``; made mode 0700,
    and refused unless this user owns it and no one else may enter it."""
    base = os.environ.get("STOKER_RUNTIME_DIR")
    if not base:
        xdg = os.environ.get("XDG_RUNTIME_DIR")
        base = os.path.join(xdg, "stoker") if xdg and os.path.isdir(xdg) else os.path.join(
            tempfile.gettempdir(), f"stoker-{os.getuid()}")
    _private_dir(base)
    return base


def _private_dir(path: str) -> None:
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
    except OSError as e:
        raise RuntimeError(f"stoker: cannot make the local server's directory {path}: {e}") from None
    st = os.lstat(path)
    if not os.path.isdir(path) or os.path.islink(path) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise RuntimeError(f"stoker: the local server's directory {path} must be a directory of this user "
                           f"(uid {os.getuid()}) that no one else may enter (mode 0700): it is mode "
                           f"{st.st_mode & 0o777:o} of uid {st.st_uid}; remove it, or set STOKER_RUNTIME_DIR")


def _key(path: str) -> str:
    p = path if "://" in path else os.path.realpath(os.path.expanduser(path))
    return p


def cores_left(local_world: int) -> Tuple[int, Tuple[int, ...]]:
    """(workers, CPUs to pin to) for a server beside local_world trainer
    processes: this process's CPUs less one per trainer; all of them with
    one worker when there are no more CPUs than trainers."""
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = list(range(os.cpu_count() or 1))
    if len(cpus) > local_world:
        left = cpus[local_world:]
        return len(left), tuple(left)
    return 1, tuple(cpus)


def _local_world() -> int:
    v = os.environ.get("LOCAL_WORLD_SIZE", "")
    return int(v) if v.isdigit() and int(v) > 0 else 1


def _cpu_list(cpus: Tuple[int, ...]) -> str:
    return ",".join(map(str, cpus))


class _Handle:
    """This process's use of one local server: its shared lock on
    users.lock, the loaders using it, and the server process if started
    here."""

    def __init__(self, dirpath: str, users_fd: int, info: LocalServerInfo, token: str,
                 proc: Optional[subprocess.Popen]) -> None:
        self.dir, self.users_fd, self.info, self.token, self.proc = dirpath, users_fd, info, token, proc
        self.refs = 1
        self.pid = os.getpid()  # a forked child inherits the handle, not the server


_handles: Dict[str, _Handle] = {}
_mu = threading.Lock()


def acquire(path: str) -> _Handle:
    """This process's handle on the local server of path, started if no
    process on this host runs one (see the module). RuntimeError, naming
    the server's log, if it cannot start."""
    key = _key(path)
    with _mu:
        h = _handles.get(key)
        if h is not None:
            h.refs += 1
            return h
        h = _open(key)
        _handles[key] = h
        return h


def release(h: _Handle) -> None:
    """Drops one loader's use of h; the last one in this process drops the
    process's lock, and stops the server if it was started here and no
    other process uses it (else it stops by itself when the last does)."""
    with _mu:
        h.refs -= 1
        if h.refs > 0:
            return
        _handles.pop(h.info.path, None)
        _close(h)


def _close(h: _Handle) -> None:
    if h.pid != os.getpid():
        return  # a forked child's copy: the lock and the server are its parent's
    os.close(h.users_fd)  # drops the shared lock
    proc = h.proc
    if proc is None or proc.poll() is not None:
        return
    fd = os.open(os.path.join(h.dir, "users.lock"), os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return  # another process uses it (or it is stopping by itself)
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        # No one can join meanwhile: joiners wait for a shared lock.
        for name in ("addr", "info.json"):
            try:
                os.remove(os.path.join(h.dir, name))
            except FileNotFoundError:
                pass
    finally:
        os.close(fd)


@atexit.register
def _release_all() -> None:
    with _mu:
        hs = list(_handles.values())
        _handles.clear()
    for h in hs:
        try:
            _close(h)
        except OSError:
            pass


def _flock(fd: int, op: int, what: str, deadline: float) -> None:
    while True:
        try:
            fcntl.flock(fd, op | fcntl.LOCK_NB)
            return
        except OSError as e:
            if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
        if time.monotonic() > deadline:
            raise RuntimeError(f"stoker: the local server's {what} was held for {START_TIMEOUT:g} s")
        time.sleep(0.05)


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read().strip()
    except FileNotFoundError:
        return ""


def _write(path: str, data: str) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(data)
    os.replace(tmp, path)


def _open(key: str) -> _Handle:
    dirpath = os.path.join(runtime_dir(), "local-" + hashlib.sha256(key.encode()).hexdigest()[:16])
    _private_dir(dirpath)
    deadline = time.monotonic() + START_TIMEOUT
    start_fd = os.open(os.path.join(dirpath, "start.lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        _flock(start_fd, fcntl.LOCK_EX, "start lock", deadline)
        users_fd = os.open(os.path.join(dirpath, "users.lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            # Waits only while a server that found no user is stopping (it
            # holds the lock exclusively until it exits).
            _flock(users_fd, fcntl.LOCK_SH, "users lock", deadline)
            h = _join(key, dirpath, users_fd)
            return h if h is not None else _start(key, dirpath, users_fd, deadline)
        except BaseException:
            os.close(users_fd)
            raise
    finally:
        os.close(start_fd)  # drops the start lock


def _join(key: str, dirpath: str, users_fd: int) -> Optional[_Handle]:
    """A handle on the server another process started, if it answers."""
    addr, token = _read(os.path.join(dirpath, "addr")), _read(os.path.join(dirpath, "token"))
    if not addr or not token:
        return None
    try:
        meta = json.loads(_read(os.path.join(dirpath, "info.json")) or "{}")
        from stoker._channel import list_datasets

        list_datasets(addr, token=token, timeout=10.0)
    except Exception:  # a server that died without removing its addr
        return None
    info = LocalServerInfo(path=key, addr=addr, pid=int(meta.get("pid", 0)), workers=int(meta.get("workers", 0)),
                           cores=tuple(meta.get("cores", ())), log_path=os.path.join(dirpath, "serve.log"),
                           binary=str(meta.get("binary", "")), started_here=False)
    return _Handle(dirpath, users_fd, info, token, None)


def yolo_images(yaml_path: str) -> str:
    """The training images' directory a YOLO data YAML names (its ``path``
    joined with its ``train``, relative to the YAML's directory as
    ultralytics resolves them); a ValueError when it names none, or
    several, or a list file."""
    with open(yaml_path, encoding="utf-8") as f:
        text = f.read(1 << 20)
    try:
        import yaml  # ultralytics requires PyYAML; without it, the two keys read by hand

        doc = yaml.safe_load(text) or {}
    except ImportError:
        doc = {}
        for line in text.splitlines():
            k, sep, v = line.partition(":")
            if sep and k in ("path", "train"):
                doc[k] = v.split("#", 1)[0].strip().strip("'\"")
    train = doc.get("train") if isinstance(doc, dict) else None
    if not isinstance(train, str) or not train:
        raise ValueError(f"{yaml_path}: a local stoker server wants one 'train' directory in the data YAML, "
                         f"not {train!r}")
    base = os.path.join(os.path.dirname(os.path.abspath(yaml_path)), str(doc.get("path") or "."))
    images = os.path.normpath(os.path.join(base, train))
    if not os.path.isdir(images):
        raise ValueError(f"{yaml_path}: its train images, {images}, are not a directory (a list file is not served)")
    return images


def dataset_args(key: str) -> List[str]:
    """``stoker serve``'s dataset flags for the local default's path: a YOLO
    data YAML is its training images with the YAML as their annotations;
    anything else the dataset itself."""
    if key.endswith((".yaml", ".yml")) and os.path.isfile(key):
        return ["--dataset", f"{DATASET}={yolo_images(key)}", "--annotations", f"{DATASET}={key}"]
    return ["--dataset", f"{DATASET}={key}"]


def _start(key: str, dirpath: str, users_fd: int, deadline: float) -> _Handle:
    binary, where = find_binary()
    if binary is None:
        raise RuntimeError(f"stoker.Loader({key!r}) starts a local stoker serve, but there is {where}")
    workers, cores = cores_left(_local_world())
    addr_file, log_path = os.path.join(dirpath, "addr"), os.path.join(dirpath, "serve.log")
    token_file = os.path.join(dirpath, "token")
    for stale in (addr_file, os.path.join(dirpath, "info.json")):
        if os.path.exists(stale):
            os.remove(stale)
    token = secrets.token_hex(32)
    _write(token_file, token + "\n")
    cmd: List[str] = [binary, "serve", "--listen", "127.0.0.1:0", "--addr-file", addr_file,
                      "--while-locked", os.path.join(dirpath, "users.lock"), "--auth-tokens", token_file,
                      *dataset_args(key), "--workers", str(workers), "--shm=true"]
    taskset = shutil.which("taskset")
    if taskset and cores:
        cmd = [taskset, "-c", _cpu_list(cores), *cmd]
    else:
        cores = ()
    with open(log_path, "wb") as log:
        # No stdin (it reads none, and must not hold the trainer's
        # terminal); its own session, so that a ^C meant for the trainer
        # reaches the trainer, which then lets the server go.
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, close_fds=True)
    addr = ""
    while not addr:
        addr = _read(addr_file)
        if addr:
            break
        if proc.poll() is not None:
            raise RuntimeError(f"stoker.Loader({key!r}): the local stoker serve ({binary}, {where}) exited with "
                               f"{proc.returncode}; its log, {log_path}:\n{_tail(log_path)}")
        if time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            raise RuntimeError(f"stoker.Loader({key!r}): the local stoker serve ({binary}) wrote no address in "
                               f"{START_TIMEOUT:g} s; its log, {log_path}:\n{_tail(log_path)}")
        time.sleep(0.05)
    info = LocalServerInfo(path=key, addr=addr, pid=proc.pid, workers=workers, cores=cores, log_path=log_path,
                           binary=binary, started_here=True)
    _write(os.path.join(dirpath, "info.json"),
           json.dumps({"pid": proc.pid, "workers": workers, "cores": list(cores), "binary": binary}))
    return _Handle(dirpath, users_fd, info, token, proc)


def _tail(path: str, n: int = 3000) -> str:
    try:
        with open(path, errors="replace") as f:
            return f.read()[-n:] or "(empty)"
    except OSError:
        return "(no log)"
