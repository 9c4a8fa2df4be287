#!/usr/bin/env python3
"""Go for a machine that has none new enough (make apt runs this).

Fetches the Go toolchain from the Go module proxy: the zip that the go
command's own GOTOOLCHAIN=auto fetches (golang.org/toolchain@v0.0.1-goV.linux-ARCH),
checks its SHA-256 against the one pinned in the Makefile, and unpacks it
into DEST with the exec bits the go command sets on its downloads (bin/,
pkg/tool/). Debian 12's golang-go (1.19) cannot fetch a toolchain itself,
and Debian 13's (1.24) would only do the same download after its own.

    python3 python/fetch_go.py VERSION SHA256 DEST

Only the standard library: it runs before any venv. The proxy is the first
URL of $GOPROXY, else https://proxy.golang.org.
"""
from __future__ import annotations

import hashlib
import os
import platform
import shutil
import sys
import tempfile
import urllib.request
import zipfile

ARCHES = {"x86_64": "amd64", "aarch64": "arm64"}


def proxy() -> str:
    for p in os.environ.get("GOPROXY", "").replace("|", ",").split(","):
        if p.startswith(("https://", "http://")):
            return p.rstrip("/")
    return "https://proxy.golang.org"


def main() -> None:
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    version, want, dest = sys.argv[1:]
    arch = ARCHES.get(platform.machine())
    if arch is None:
        sys.exit(f"fetch_go.py: no Go toolchain pinned for {platform.machine()} (only {', '.join(ARCHES)})")
    mod = f"v0.0.1-go{version}.linux-{arch}"
    url = f"{proxy()}/golang.org/toolchain/@v/{mod}.zip"
    parent = os.path.dirname(os.path.abspath(dest))
    os.makedirs(parent, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=parent, prefix=".fetch-go-") as tmp:
        zpath = os.path.join(tmp, "go.zip")
        h = hashlib.sha256()
        try:
            with urllib.request.urlopen(url, timeout=60) as r, open(zpath, "wb") as f:
                while chunk := r.read(1 << 20):
                    h.update(chunk)
                    f.write(chunk)
        except OSError as e:  # urllib.error.URLError and HTTPError among them
            sys.exit(f"fetch_go.py: {url}: {e}")
        if h.hexdigest() != want:
            sys.exit(f"fetch_go.py: {url}: SHA-256 {h.hexdigest()}, pinned {want}: not used")
        root = os.path.join(tmp, "go")
        prefix = f"golang.org/toolchain@{mod}/"
        with zipfile.ZipFile(zpath) as z:
            for name in z.namelist():
                if not name.startswith(prefix) or ".." in name.split("/"):
                    sys.exit(f"fetch_go.py: {url}: unexpected entry {name!r}")
                z.extract(name, tmp)
        os.rename(os.path.join(tmp, prefix.rstrip("/")), root)
        # Module zips carry no modes: as cmd/go/internal/toolchain does,
        # the tools and the commands get their exec bits (tools first).
        for sub in ("pkg/tool", "bin"):
            for d, _, files in os.walk(os.path.join(root, sub)):
                for n in files:
                    p = os.path.join(d, n)
                    os.chmod(p, os.stat(p).st_mode & 0o777 | 0o111)
        if os.path.exists(dest):
            shutil.rmtree(dest)
        os.rename(root, dest)
    print(f"fetch_go.py: go{version} from {url} in {dest}")


if __name__ == "__main__":
    main()
