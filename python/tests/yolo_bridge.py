"""Drives ``stoker ops cv``: the YOLO family's kernels (pipeline/kernels/cv)
on given pixels and labels, for test_yolo_kernels.py. Images travel as
stoker holds them (RGB planes, CHW); these helpers take and give OpenCV's
BGR HWC arrays."""

from __future__ import annotations

import base64
import json
import subprocess
from pathlib import Path
from typing import Any, Dict, List, Sequence

import numpy as np


def to_wire(img: np.ndarray) -> Dict[str, Any]:
    """A BGR HWC uint8 image as a case's image: RGB planes, base64."""
    assert img.dtype == np.uint8 and img.ndim == 3 and img.shape[2] == 3, (img.dtype, img.shape)
    chw = np.ascontiguousarray(img[..., ::-1].transpose(2, 0, 1))
    return {"w": int(img.shape[1]), "h": int(img.shape[0]), "pix": base64.b64encode(chw.tobytes()).decode()}


def from_wire(im: Dict[str, Any]) -> np.ndarray:
    """A result's image back as BGR HWC."""
    chw = np.frombuffer(base64.b64decode(im["pix"]), np.uint8).reshape(3, im["h"], im["w"])
    return np.ascontiguousarray(chw.transpose(1, 2, 0)[..., ::-1])


def labels_to_wire(boxes: np.ndarray, cls: np.ndarray, segments: np.ndarray | None = None,
                   keypoints: np.ndarray | None = None) -> Dict[str, Any]:
    d: Dict[str, Any] = {"boxes": np.asarray(boxes, np.float32).reshape(-1, 4).tolist(),
                         "cls": [int(c) for c in np.asarray(cls).reshape(-1)]}
    if segments is not None and len(segments):
        d["segments"] = np.asarray(segments, np.float32).tolist()
    if keypoints is not None:
        d["keypoints"] = np.asarray(keypoints, np.float32).tolist()
    return d


def run_cv(stoker_bin: Path, cases: Sequence[Dict[str, Any]], timeout: float = 600) -> List[Dict[str, Any]]:
    """Runs the cases through ``stoker ops cv`` and returns its results, in
    order; a case it refuses fails the call with its message."""
    r = subprocess.run([str(stoker_bin), "ops", "cv"], input="\n".join(json.dumps(c) for c in cases) + "\n",
                       capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"stoker ops cv exited {r.returncode}: {r.stderr}"
    out = [json.loads(line) for line in r.stdout.splitlines()]
    assert len(out) == len(cases), f"{len(out)} results for {len(cases)} cases: {r.stderr}"
    for c, res in zip(cases, out):
        assert "error" not in res, f"stoker ops cv refused {c['op']}: {res['error']}"
    return out
