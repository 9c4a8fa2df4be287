"""Loader(targets=True): a batch's targets (each sample's boxes, labels and
keypoints moved through its geometry by the server, as torchvision.transforms.v2
moves a tv_tensors.BoundingBoxes and a tv_tensors.KeyPoints) as the dicts
torchvision's detection models take. They come as ragged arrays
(BatchHeader.targets, docs/detection.md): per array, every sample's instances
back to back in batch order, little-endian, and N + 1 offsets (sample i's
instances are [offsets[i], offsets[i+1])): boxes [K, 4] float32 in the batch's
format (0 XYXY, 1 XYWH, 2 CXCYWH: XYXY but after a ConvertBoundingBoxFormat),
labels [K] int64, iscrowd [K] uint8; per sample its canvas (h, w), image id and
P (keypoints an instance), the keypoints (x, y) float32 and their visibilities
uint8 sample after sample; with masks, K + 1 run offsets and the runs (u32):
each instance's mask on its sample's canvas, row-major, alternating runs of 0
and 1 from a run of 0. Each sample's tensors are views into the batch's arrays
(one copy of each array a batch, none a sample)."""

from __future__ import annotations

from typing import Any, Dict, List, Sequence, Tuple, Union

import numpy as np

from stoker._errors import StokerError

FORMATS = ("XYXY", "XYWH", "CXCYWH")
# The keys Loader(targets=(...)) may name: torchvision's.
NAMES = ("boxes", "labels", "iscrowd", "image_id", "keypoints", "keypoints_visibility", "masks")


def target_names(value: Union[bool, Sequence[str]]) -> Tuple[bool, Tuple[str, ...]]:
    """Loader(targets=...): True (every key the dataset has but "masks", as
    torchvision's wrap_dataset_for_transforms_v2 by default) or False, or the
    keys asked for, exactly (a tuple of NAMES)."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value), ()
    if isinstance(value, str) or not isinstance(value, (tuple, list)):
        raise TypeError(f"targets must be a bool or a tuple of names among {', '.join(NAMES)}, got {value!r}")
    names = tuple(value)
    if not names:
        raise ValueError("targets=(): name at least one of " + ", ".join(NAMES) + " (or targets=True)")
    for n in names:
        if n not in NAMES:
            raise ValueError(f"targets: unknown name {n!r}: want some of {', '.join(NAMES)}")
    if len(set(names)) != len(names):
        raise ValueError(f"targets: a name asked for twice in {names!r}")
    return True, names


def targets_of(bt: Any, n: int, torch: Any, names: Sequence[str] = (), number: int = 0) -> List[Dict[str, Any]]:
    """A batch's targets (``bt``, a BatchTargets of ``n`` samples), per sample
    in batch order: "boxes" (tv_tensors.BoundingBoxes [K, 4], in their
    format, canvas_size (H, W)), "labels" int64 [K], "iscrowd" int64 [K],
    "image_id" (an int); when the dataset has keypoints (P of them an
    instance), "keypoints" (tv_tensors.KeyPoints [K, P, 2] float32, x and y,
    canvas_size (H, W)) and "keypoints_visibility" (uint8 [K, P]: COCO's v,
    0 not labelled, 1 labelled but not visible, 2 visible; the KeyPoints
    class has no visibility, and the geometry does not change it); with
    masks, "masks" (tv_tensors.Mask [K, H, W] uint8, 0 or 1). names: the keys
    to keep (all but none). Every tensor is a view into the batch's arrays.
    Offsets out of range or going down, or arrays of other lengths than
    they say, are the server's error (StokerError("INTERNAL")), never read."""
    from torchvision import tv_tensors

    def bad(msg: str) -> StokerError:
        return StokerError("INTERNAL", f"batch {number}: targets: {msg}")

    if bt is None:
        raise bad("the batch has none (BatchHeader.targets)")
    off = np.array(bt.offsets, dtype=np.int64)
    canvas = np.array(bt.canvas, dtype=np.int64)
    ids = list(bt.image_ids)
    ps = np.array(bt.keypoints_per_instance, dtype=np.int64)
    if len(off) != n + 1 or len(canvas) != 2 * n or len(ids) != n:
        raise bad(f"{len(off)} offsets, {len(canvas)} canvas sizes and {len(ids)} image ids for {n} samples: "
                  f"want {n + 1}, {2 * n} and {n}")
    if len(ps) not in (0, n):
        raise bad(f"{len(ps)} keypoint counts for {n} samples")
    if off[0] != 0:
        raise bad(f"offsets start at {off[0]}, want 0")
    ks = np.diff(off)
    if n and ks.min() < 0:
        i = int(np.argmax(ks < 0))
        raise bad(f"offsets go down at sample {i} ({off[i]}, then {off[i + 1]})")
    fmt = int(bt.box_format)
    if fmt >= len(FORMATS):
        raise bad(f"box format {fmt}: want 0 (XYXY), 1 (XYWH) or 2 (CXCYWH)")
    k = int(off[-1])
    pk = ks * ps if len(ps) else np.zeros(n, dtype=np.int64)
    kp = int(pk.sum())
    raw = {"boxes": (bt.boxes, 16 * k), "labels": (bt.labels, 8 * k), "iscrowd": (bt.iscrowd, k),
           "keypoints": (bt.keypoints, 8 * kp), "keypoints_visibility": (bt.keypoints_visibility, kp),
           "mask_offsets": (bt.mask_offsets, 4 * (k + 1) if bt.masks else 0),
           "mask_runs": (bt.mask_runs, len(bt.mask_runs) // 4 * 4 if bt.masks else 0)}
    for name, (b, size) in raw.items():
        if len(b) != size:
            raise bad(f"{name} of {len(b)} bytes, want {size} for {k} instances")

    def arr(name: str, dtype: str) -> Any:
        # One writable copy of the array a batch (protobuf's bytes are
        # immutable): every sample's tensors are views into it.
        return torch.from_numpy(np.frombuffer(bytearray(raw[name][0]), dtype=dtype))

    # Each array split into its samples' views at once (torch.split: no
    # copy), only the keys asked for made.
    want = set(names) if names else set(NAMES)
    kl = ks.tolist()
    bx = arr("boxes", "<f4").view(k, 4).split(kl) if "boxes" in want else None
    lb = arr("labels", "<i8").split(kl) if "labels" in want else None
    cr = None
    if "iscrowd" in want:
        cr = torch.from_numpy(np.frombuffer(raw["iscrowd"][0], dtype=np.uint8).astype(np.int64)).split(kl)
    pts = vs = None
    if len(ps) and want & {"keypoints", "keypoints_visibility"}:
        pts = arr("keypoints", "<f4").split((2 * pk).tolist())
        vs = arr("keypoints_visibility", "u1").split(pk.tolist())
    masks = _masks(bt, canvas, ks, k, bad, torch) if bt.masks and "masks" in want else None
    box_format = tv_tensors.BoundingBoxFormat[FORMATS[fmt]]
    hw, pl = canvas.tolist(), ps.tolist()
    out = []
    for i in range(n):
        size = (hw[2 * i], hw[2 * i + 1])
        t: Dict[str, Any] = {}
        if bx is not None:
            t["boxes"] = tv_tensors.BoundingBoxes(bx[i], format=box_format, canvas_size=size)
        if lb is not None:
            t["labels"] = lb[i]
        if cr is not None:
            t["iscrowd"] = cr[i]
        if "image_id" in want:
            t["image_id"] = int(ids[i])
        if pts is not None and pl[i]:
            if "keypoints" in want:
                t["keypoints"] = tv_tensors.KeyPoints(pts[i].view(kl[i], pl[i], 2), canvas_size=size)
            if "keypoints_visibility" in want:
                t["keypoints_visibility"] = vs[i].view(kl[i], pl[i])
        if masks is not None:
            t["masks"] = masks[i]
        if names:
            if len(t) != len(names):
                missing = [m for m in names if m not in t]
                raise bad(f"sample {i}'s lack {missing}: the server sent keypoints {bool(pl and pl[i])}, masks {bool(bt.masks)}")
            t = {m: t[m] for m in names}
        out.append(t)
    return out


def _masks(bt: Any, canvas: Any, ks: Any, k: int, bad: Any, torch: Any) -> List[Any]:
    """A batch's masks: each sample's tv_tensors.Mask [K, H, W] uint8,
    decoded from the runs (each instance's alternating 0 and 1 from a run of
    0, row-major over its sample's H x W), every run checked first."""
    from torchvision import tv_tensors

    moff = np.frombuffer(bt.mask_offsets, dtype="<u4").astype(np.int64)
    runs = np.frombuffer(bt.mask_runs, dtype="<u4").astype(np.int64)
    counts = np.diff(moff)
    if moff[0] != 0:
        raise bad(f"mask offsets start at {moff[0]}, want 0")
    if k and counts.min() < 0:
        j = int(np.argmax(counts < 0))
        raise bad(f"mask offsets go down at instance {j} ({moff[j]}, then {moff[j + 1]})")
    if moff[-1] != len(runs):
        raise bad(f"mask offsets end at {moff[-1]}, mask_runs holds {len(runs)} runs")
    area = canvas[0::2] * canvas[1::2]
    want = np.repeat(area, ks)  # each instance's canvas
    cs = np.concatenate(([0], np.cumsum(runs)))
    got = cs[moff[1:]] - cs[moff[:-1]]
    if (got != want).any():
        j = int(np.argmax(got != want))
        raise bad(f"mask {j}: runs of {int(got[j])} pixels on a canvas of {int(want[j])}")
    # A run's value is its place in its instance's runs, odd or even.
    parity = ((np.arange(len(runs)) - np.repeat(moff[:-1], counts)) & 1).astype(np.uint8)
    # Decoded sample by sample: arrays of a sample's size are the
    # allocator's to reuse from batch to batch, where one of the batch's
    # (64 samples' masks of 512 x 512: 120 MiB) is fresh pages every batch.
    kl, hw = ks.tolist(), canvas.tolist()
    at = np.concatenate(([0], np.cumsum(ks)))
    out = []
    for i, kk in enumerate(kl):
        r0, r1 = int(moff[at[i]]), int(moff[at[i + 1]])
        m = np.repeat(parity[r0:r1], runs[r0:r1]).reshape(kk, hw[2 * i], hw[2 * i + 1])
        out.append(tv_tensors.Mask(torch.from_numpy(m)))
    return out
