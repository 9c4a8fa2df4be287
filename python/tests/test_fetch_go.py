"""python/fetch_go.py, which make apt runs where there is no go new enough:
a toolchain zip served over HTTP on loopback (GOPROXY) in the module proxy's
layout, unpacked with the exec bits the go command sets; a zip whose SHA-256
is not the pinned one, or with an entry outside its prefix, is refused and
leaves nothing behind."""
from __future__ import annotations

import hashlib
import http.server
import io
import os
import platform
import subprocess
import sys
import threading
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "python" / "fetch_go.py"
ARCH = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine())
pytestmark = pytest.mark.skipif(ARCH is None, reason=f"fetch_go.py pins no toolchain for {platform.machine()}")


def toolchain_zip(version: str, extra: str = "") -> bytes:
    prefix = f"golang.org/toolchain@v0.0.1-go{version}.linux-{ARCH}/"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr(prefix + "VERSION", f"go{version}\n")
        z.writestr(prefix + "bin/go", "#!/bin/sh\necho go version go" + version + "\n")
        z.writestr(prefix + "pkg/tool/linux_" + ARCH + "/compile", "#!/bin/sh\n")
        z.writestr(prefix + "src/fmt/print.go", "package fmt\n")
        if extra:
            z.writestr(extra, "x")
    return buf.getvalue()


@pytest.fixture
def proxy():
    """An HTTP server on loopback serving files[path] (404 otherwise)."""
    files: dict[str, bytes] = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = files.get(self.path)
            self.send_response(200 if body is not None else 404)
            self.send_header("Content-Length", str(len(body or b"")))
            self.end_headers()
            self.wfile.write(body or b"")

        def log_message(self, *args) -> None:
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}", files
    srv.shutdown()
    srv.server_close()


def run(url: str, version: str, sha: str, dest: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, GOPROXY=f"off|{url},direct")
    return subprocess.run([sys.executable, str(SCRIPT), version, sha, str(dest)],
                          env=env, capture_output=True, text=True, timeout=60)


def path(version: str) -> str:
    return f"/golang.org/toolchain/@v/v0.0.1-go{version}.linux-{ARCH}.zip"


def test_unpacks_with_exec_bits(proxy, tmp_path: Path) -> None:
    url, files = proxy
    data = toolchain_zip("1.99.1")
    files[path("1.99.1")] = data
    dest = tmp_path / "sdk" / "go1.99.1"
    r = run(url, "1.99.1", hashlib.sha256(data).hexdigest(), dest)
    assert r.returncode == 0, r.stderr
    assert (dest / "VERSION").read_text() == "go1.99.1\n"
    for exe in ("bin/go", f"pkg/tool/linux_{ARCH}/compile"):
        assert os.access(dest / exe, os.X_OK), exe
    assert not os.access(dest / "src/fmt/print.go", os.X_OK)
    assert subprocess.run([str(dest / "bin/go")], capture_output=True, text=True).stdout == "go version go1.99.1\n"
    assert sorted(p.name for p in dest.parent.iterdir()) == ["go1.99.1"]  # no temporary left


@pytest.mark.parametrize("case", ["sha", "entry", "missing"])
def test_refuses(proxy, tmp_path: Path, case: str) -> None:
    url, files = proxy
    data = toolchain_zip("1.99.1", extra="../evil" if case == "entry" else "")
    if case != "missing":
        files[path("1.99.1")] = data
    sha = "0" * 64 if case == "sha" else hashlib.sha256(data).hexdigest()
    dest = tmp_path / "sdk" / "go1.99.1"
    r = run(url, "1.99.1", sha, dest)
    assert r.returncode != 0
    want = {"sha": "pinned " + "0" * 64 + ": not used", "entry": "unexpected entry '../evil'", "missing": "404"}[case]
    assert want in r.stderr
    assert not dest.exists()
    assert list(dest.parent.iterdir()) == []  # no temporary left
