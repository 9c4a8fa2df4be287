"""Loader(targets=True): each sample's field "targets" (its boxes and labels
moved through its geometry by the server, as torchvision.transforms.v2
moves a tv_tensors.BoundingBoxes) as the dict torchvision's detection
models take. The layout (docs/detection.md), little-endian: u32 H, u32 W
(the canvas: the sample's output size), i64 image id, u32 K, u32 the boxes'
format (0 XYXY, 1 XYWH, 2 CXCYWH: XYXY but after a ConvertBoundingBoxFormat),
then K x 4 float32 boxes, K int64 labels, K uint8 crowd flags."""

from __future__ import annotations

import struct
from typing import Any, Dict, List, Optional

import numpy as np

from stoker._errors import StokerError

HEADER = 24
FORMATS = ("XYXY", "XYWH", "CXCYWH")


def parse_targets(raw: Optional[bytes], torch: Any) -> Dict[str, Any]:
    """One sample's targets: "boxes" (tv_tensors.BoundingBoxes [K, 4], in
    their format, canvas_size (H, W)), "labels" int64 [K], "iscrowd" int64
    [K], "image_id" (an int)."""
    from torchvision import tv_tensors

    if raw is None or len(raw) < HEADER:
        raise StokerError("INTERNAL", f"a sample's targets of {0 if raw is None else len(raw)} bytes: want at least {HEADER}")
    h, w, image_id, k, fmt = struct.unpack_from("<IIqII", raw, 0)
    if fmt >= len(FORMATS):
        raise StokerError("INTERNAL", f"a sample's targets with box format {fmt}: want 0 (XYXY), 1 (XYWH) or 2 (CXCYWH)")
    if len(raw) != HEADER + 25 * k:
        raise StokerError("INTERNAL", f"a sample's targets of {len(raw)} bytes for {k} instances: want {HEADER + 25 * k}")
    boxes = np.frombuffer(raw, dtype="<f4", count=4 * k, offset=HEADER).reshape(k, 4).copy()
    labels = np.frombuffer(raw, dtype="<i8", count=k, offset=HEADER + 16 * k).copy()
    crowd = np.frombuffer(raw, dtype=np.uint8, count=k, offset=HEADER + 24 * k).astype(np.int64)
    return {
        "boxes": tv_tensors.BoundingBoxes(torch.from_numpy(boxes), format=FORMATS[fmt], canvas_size=(h, w)),
        "labels": torch.from_numpy(labels),
        "iscrowd": torch.from_numpy(crowd),
        "image_id": int(image_id),
    }


def targets_of(values: List[Optional[bytes]], torch: Any) -> List[Dict[str, Any]]:
    """A batch's targets, per sample in batch order."""
    return [parse_targets(v, torch) for v in values]
