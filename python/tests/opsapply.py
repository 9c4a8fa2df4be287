"""Drives ``stoker ops apply``: stoker's kernels alone, on given pixels, for
the parity tests. One process per call, many cases per process."""

from __future__ import annotations

import base64
import json
import subprocess
from pathlib import Path
from typing import Any, List, Sequence, Tuple

import numpy as np

#: One case: an image as a uint8 array [3, H, W] (CHW) and a trace (a list of
#: [name, {args}] pairs, or (name, args) tuples).
Case = Tuple[np.ndarray, Sequence[Any]]


def ops_apply(stoker_bin: Path, cases: Sequence[Case], timeout: float = 600) -> List[np.ndarray]:
    """Runs each case's trace on its image with stoker's kernels and returns
    the results, in order. A case stoker refuses fails the call with its
    message."""
    lines = []
    for img, trace in cases:
        assert img.dtype == np.uint8 and img.ndim == 3 and img.shape[0] == 3, (img.dtype, img.shape)
        lines.append(json.dumps({"w": int(img.shape[2]), "h": int(img.shape[1]),
                                 "pix": base64.b64encode(np.ascontiguousarray(img).tobytes()).decode(),
                                 "trace": [[name, args] for name, args in trace]}))
    r = subprocess.run([str(stoker_bin), "ops", "apply"], input="\n".join(lines) + "\n", capture_output=True,
                       text=True, timeout=timeout)
    assert r.returncode == 0, f"stoker ops apply exited {r.returncode}: {r.stderr}"
    out = []
    for (img, trace), line in zip(cases, r.stdout.splitlines()):
        res = json.loads(line)
        assert "error" not in res, f"stoker ops apply refused {trace}: {res['error']}"
        shape = (3, res["h"], res["w"]) if "w" in res else img.shape  # a trace that changes the size
        out.append(np.frombuffer(base64.b64decode(res["pix"]), np.uint8).reshape(shape).copy())
    assert len(out) == len(cases), f"{len(out)} results for {len(cases)} cases: {r.stderr}"
    return out
