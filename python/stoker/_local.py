"""A `stoker serve` on loopback, for the tests, the benchmarks and the demo.

Not part of the public API: a trainer talks to a server someone runs.
"""
from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from typing import IO, Mapping, Optional, Sequence


class LocalServer:
    """Starts `BINARY serve --listen 127.0.0.1:0` over the named datasets and
    waits (at most start_timeout seconds) for the address it binds. prefix
    runs it under another command (``taskset -c 2,3``, say).

    Use as a context manager, or call stop(). RuntimeError, with the server's
    log when there is one, if it exits or never listens."""

    def __init__(
        self,
        binary: str,
        datasets: Mapping[str, str],
        *,
        workers: Optional[int] = None,
        args: Sequence[str] = (),
        log_path: Optional[str] = None,
        start_timeout: float = 30.0,
        prefix: Sequence[str] = (),
    ) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="stoker-serve-")
        addr_file = os.path.join(self._tmp.name, "addr")
        cmd = [binary, "serve", "--listen", "127.0.0.1:0", "--addr-file", addr_file]
        for name, path in datasets.items():
            cmd += ["--dataset", f"{name}={path}"]
        if workers:
            cmd += ["--workers", str(workers)]
        cmd = [*prefix, *cmd, *args]
        self.log_path = log_path
        log: Optional[IO[bytes]] = open(log_path, "wb") if log_path else None
        try:
            # A server reads no input: with /dev/null for stdin it neither
            # holds the caller's terminal nor stops (SIGTTIN) in a
            # background job, however the caller was started.
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT if log else None)
        finally:
            if log:
                log.close()
        self.addr = ""
        deadline = time.monotonic() + start_timeout
        while time.monotonic() < deadline:
            if os.path.exists(addr_file):
                with open(addr_file) as f:
                    self.addr = f.read().strip()
                if self.addr:
                    return
            if self.proc.poll() is not None:
                self._fail(f"stoker serve exited with {self.proc.returncode}")
            time.sleep(0.05)
        self._fail(f"stoker serve wrote no address in {start_timeout:g} s")

    def _fail(self, what: str) -> None:
        self.stop()
        log = self.log_tail(None)
        raise RuntimeError(what + (":\n" + log if log else ""))

    def log_tail(self, n: Optional[int] = 2000) -> str:
        """The last n characters of the server's log (all of it for None);
        empty without a log_path."""
        if not self.log_path:
            return ""
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()[-n:] if n else f.read()
        except OSError:
            return ""

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM (a graceful drain), then SIGKILL after timeout seconds."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._tmp.cleanup()

    def __enter__(self) -> "LocalServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
