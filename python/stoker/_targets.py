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
and 1 from a run of 0, and where a Mask fill other than 0 filled a sample's
pixels (a pad's, a rotation's, an affine's) its fill block (N + 1 byte offsets
and the blocks: u32 F, F u32 runs alternating the masks' own pixels and a
fill's, F // 2 uint8 values, zeros to a multiple of 4), whose values every
instance's mask of the sample takes; with the overlap mask (ultralytics' yolov8-seg one), each
sample's index map, its canvas divided by 4, uint8 (int32 past 255 instances),
padded to 4 bytes, the instances in its order. Each sample's tensors are views into the batch's arrays:
over gRPC one copy of each array a batch out of protobuf's immutable bytes,
none a sample; from a shared-memory slot (BatchTargets.in_slot: the arrays
after the pixels), views of the slot itself, no copy at all."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from stoker._errors import StokerError

FORMATS = ("XYXY", "XYWH", "CXCYWH")
# The keys Loader(targets=(...)) may name: torchvision's, and "overlap_mask",
# ultralytics' Format(return_mask=True, mask_ratio=4, mask_overlap=True) mask,
# and "sem_masks", Format's semantic map of classes (made here from the
# overlap mask and the labels: sem_mask).
NAMES = ("boxes", "labels", "iscrowd", "image_id", "keypoints", "keypoints_visibility", "masks", "overlap_mask", "sem_masks")
#: Ultralytics' Format's default mask_ratio: the overlap mask is the canvas divided by it.
OVERLAP_RATIO = 4


def target_names(value: Union[bool, Sequence[str]]) -> Tuple[bool, Tuple[str, ...]]:
    """Loader(targets=...): True (every key the dataset has but "masks" and
    "overlap_mask", as torchvision's wrap_dataset_for_transforms_v2 by default) or False, or the
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
    if "sem_masks" in names and "masks" in names:
        raise ValueError('targets: "sem_masks" is made from ultralytics\' overlap mask, which "masks" (torchvision\'s, '
                         'in the boxes\' order) cannot come with: ask for one')
    return True, names


def server_fields(names: Sequence[str]) -> Tuple[str, ...]:
    """The targets' keys a job asks the server for: names, but for
    "sem_masks", which the client makes from "overlap_mask" and "labels"
    (asked for in its place, once)."""
    if "sem_masks" not in names:
        return tuple(names)
    out = [n for n in names if n != "sem_masks"]
    for n in ("labels", "overlap_mask"):
        if n not in out:
            out.append(n)
    return tuple(out)


def sem_mask(overlap: Any, labels: Any, per_instance: bool, h: int, w: int, torch: Any) -> Any:
    """ultralytics' Format(return_mask=True)'s ``sem_masks`` of one sample
    (8.4.190): ``[h, w]`` float32, each pixel its instance's class, from its
    overlap mask (``[h, w]``, 0 or an instance's position plus 1) or, with
    ``per_instance`` (mask_overlap False), its ``[K, h, w]`` masks, and its
    labels (its classes, in the masks' order). With the overlap mask a
    pixel of none takes the last instance's class, as Format's indexing of
    the classes by the mask less 1 (-1) gives it; with one mask an
    instance, the smallest (fewest pixels; the first of equal ones)
    covering the pixel wins, and a pixel of none is 0. No instance: all 0."""
    if not len(labels):
        return torch.zeros(h, w)
    cls = labels.to(torch.float32)
    if not per_instance:
        return cls[overlap.long() - 1]
    weights = overlap.sum(dim=(1, 2), dtype=torch.int64)
    key = torch.where(overlap.bool(), weights[:, None, None], weights.max() + 1)
    return cls[key.min(0).indices] * overlap.any(0)


#: The byte arrays of a BatchTargets, in the wire's order: in its header,
#: or in its slot where BatchTargets.in_slot says.
ARRAYS = ("boxes", "labels", "iscrowd", "keypoints", "keypoints_visibility", "mask_offsets", "mask_runs",
          "overlap_masks", "mask_fill_offsets", "mask_fills")

#: A slot's bytes a batch's targets are read from: a uint8 array of the
#: slot's bytes from ``base`` on (the slot's own memory, or a copy of its
#: end), and ``base``.
Tail = Tuple[np.ndarray, int]


def slot_ranges(bt: Any, lo: int, hi: int, number: int = 0) -> Dict[str, Tuple[int, int]]:
    """Where BatchTargets ``bt``'s arrays lie in its slot (``in_slot``): each
    name's (offset, length), checked to lie within bytes [lo, hi) of the
    slot (past the pixels, within the slot), at a multiple of 8, none
    overlapping another, and the header's own arrays empty; else the
    server's error (StokerError("INTERNAL")), before anything is read."""
    def bad(msg: str) -> StokerError:
        return StokerError("INTERNAL", f"batch {number}: targets: {msg}")

    ins = bt.in_slot
    out: Dict[str, Tuple[int, int]] = {}
    spans: List[Tuple[int, int, str]] = []
    for name in ARRAYS:
        if len(getattr(bt, name)):
            raise bad(f"{name} both in the slot and in the header")
        if not ins.HasField(name):
            raise bad(f"{name}: no place in the slot")
        r = getattr(ins, name)
        off, size = int(r.offset), int(r.length)
        if off < lo or off % 8 or off + size > hi:
            raise bad(f"{name} at [{off}, +{size}) of a slot whose pixels end at {lo} and which ends at {hi}: "
                      "want past the pixels, within the slot, at a multiple of 8")
        if size:
            for s0, s1, other in spans:
                if off < s1 and s0 < off + size:
                    raise bad(f"{name} at [{off}, +{size}) overlaps {other}")
            spans.append((off, off + size, name))
        out[name] = (off, size)
    return out


def slot_extent(bt: Any, data_bytes: int, slot_bytes: int, number: int = 0) -> int:
    """How many bytes from its slot's start a batch whose pixels take
    ``data_bytes`` and whose targets are ``bt`` (BatchTargets, or None) uses:
    its pixels, and its targets' arrays when they are in the slot (their
    ranges checked: slot_ranges)."""
    if bt is None or not bt.HasField("in_slot"):
        return data_bytes
    return max([data_bytes] + [o + n for o, n in slot_ranges(bt, data_bytes, slot_bytes, number).values()])


def arrays_of(bt: Any, tail: Optional[Tail] = None, number: int = 0) -> Dict[str, np.ndarray]:
    """BatchTargets ``bt``'s arrays by name (ARRAYS), uint8: read-only views
    of its header's bytes, or, when they are in its slot (``in_slot``),
    views of ``tail`` (the slot's bytes) where it says, checked first."""
    if not bt.HasField("in_slot"):
        return {name: np.frombuffer(getattr(bt, name), dtype=np.uint8) for name in ARRAYS}
    if tail is None:
        raise StokerError("INTERNAL", f"batch {number}: targets: in a slot, and the batch has none")
    mem, base = tail
    return {name: mem[o - base:o - base + size]
            for name, (o, size) in slot_ranges(bt, base, base + len(mem), number).items()}


def targets_of(bt: Any, n: int, torch: Any, names: Sequence[str] = (), number: int = 0,
               tail: Optional[Tail] = None) -> List[Dict[str, Any]]:
    """A batch's targets (``bt``, a BatchTargets of ``n`` samples), per sample
    in batch order: "boxes" (tv_tensors.BoundingBoxes [K, 4], in their
    format, canvas_size (H, W)), "labels" int64 [K], "iscrowd" int64 [K],
    "image_id" (an int); when the dataset has keypoints (P of them an
    instance), "keypoints" (tv_tensors.KeyPoints [K, P, 2] float32, x and y,
    canvas_size (H, W)) and "keypoints_visibility" (uint8 [K, P]: COCO's v,
    0 not labelled, 1 labelled but not visible, 2 visible; the KeyPoints
    class has no visibility, and the geometry does not change it); with
    masks, "masks" (tv_tensors.Mask [K, H, W] uint8, 0 or 1, and a Mask
    fill's value where a pad, rotation or affine filled it); with the
    overlap mask, "overlap_mask" ([H // r, W // r] uint8, r the job's
    mask_ratio, 4 by default; int32 past 255 instances: ultralytics'
    polygons2masks_overlap map, 0 or an instance's position in the sample's
    order plus 1; the instances then in its area order, as Format reorders
    them; with mask_overlap False, polygons2masks' [K, H // r, W // r]
    uint8, 0 or 1, the instances in their order). names: the keys
    to keep (all but none). Every tensor is a view into the batch's arrays:
    of ``tail`` (its slot's bytes, kept alive by them) when the arrays are
    in its shared-memory slot (``bt.in_slot``), else of one copy of each
    array of the header. Offsets out of range or going down, arrays of
    other lengths than they say, or slot ranges outside ``tail``, past the
    pixels or overlapping, are the server's error (StokerError("INTERNAL")),
    never read."""
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
    in_slot = bt.HasField("in_slot")
    # The overlap mask's Format options: mask_ratio (0 from a server
    # before it: 4) and mask_overlap (absent: True).
    ratio = int(bt.mask_ratio) or OVERLAP_RATIO
    per_instance = bt.HasField("mask_overlap") and not bt.mask_overlap
    got = arrays_of(bt, tail, number)
    sizes = {"boxes": 16 * k, "labels": 8 * k, "iscrowd": k, "keypoints": 8 * kp, "keypoints_visibility": kp,
             "mask_offsets": 4 * (k + 1) if bt.masks else 0,
             "mask_runs": len(got["mask_runs"]) // 4 * 4 if bt.masks else 0,
             "overlap_masks": int(_overlap_sizes(canvas, ks, ratio, per_instance).sum()) if bt.overlap_mask else 0,
             "mask_fill_offsets": 4 * (n + 1) if bt.masks and len(got["mask_fill_offsets"]) else 0,
             "mask_fills": len(got["mask_fills"]) if bt.masks and len(got["mask_fill_offsets"]) else 0}
    raw = {name: (got[name], size) for name, size in sizes.items()}
    for name, (b, size) in raw.items():
        if len(b) != size:
            raise bad(f"{name} of {len(b)} bytes, want {size} for {k} instances")

    def arr(name: str, dtype: str) -> Any:
        # In the slot: a view of it (writable, as the pixels'). In the
        # header: one writable copy of the array a batch (protobuf's bytes
        # are immutable). Every sample's tensors are views into it.
        a = raw[name][0]
        return torch.from_numpy((a if in_slot else a.copy()).view(dtype))

    # Each array split into its samples' views at once (torch.split: no
    # copy), only the keys asked for made.
    want = set(names) if names else set(NAMES)
    kl = ks.tolist()
    sem = "sem_masks" in want and bool(bt.overlap_mask)  # made from the overlap mask and the labels
    bx = arr("boxes", "<f4").view(k, 4).split(kl) if "boxes" in want else None
    lb = arr("labels", "<i8").split(kl) if "labels" in want or sem else None
    cr = None
    if "iscrowd" in want:
        cr = torch.from_numpy(raw["iscrowd"][0].astype(np.int64)).split(kl)
    pts = vs = None
    if len(ps) and want & {"keypoints", "keypoints_visibility"}:
        pts = arr("keypoints", "<f4").split((2 * pk).tolist())
        vs = arr("keypoints_visibility", "u1").split(pk.tolist())
    masks = None
    if bt.masks and "masks" in want:
        masks = _masks(raw["mask_offsets"][0], raw["mask_runs"][0], canvas, ks, k, bad, torch,
                       raw["mask_fill_offsets"][0], raw["mask_fills"][0])
    overlap = None
    if bt.overlap_mask and ("overlap_mask" in want or sem):
        ob = arr("overlap_masks", "u1").split(_overlap_sizes(canvas, ks, ratio, per_instance).tolist())
        overlap = []
        cl = canvas.tolist()
        for i in range(n):
            h, w = cl[2 * i] // ratio, cl[2 * i + 1] // ratio
            if per_instance:  # the bits of K masks: unpacked (a copy a sample)
                px = kl[i] * h * w
                bits = np.unpackbits(ob[i].numpy(), count=px, bitorder="little")
                overlap.append(torch.from_numpy(bits).view(kl[i], h, w))
                continue
            m = ob[i][:h * w * (4 if kl[i] > 255 else 1)]
            overlap.append((m.view(torch.int32) if kl[i] > 255 else m).view(h, w))
    box_format = tv_tensors.BoundingBoxFormat[FORMATS[fmt]]
    hw, pl = canvas.tolist(), ps.tolist()
    out = []
    for i in range(n):
        size = (hw[2 * i], hw[2 * i + 1])
        t: Dict[str, Any] = {}
        if bx is not None:
            t["boxes"] = tv_tensors.BoundingBoxes(bx[i], format=box_format, canvas_size=size)
        if lb is not None and "labels" in want:
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
        if overlap is not None and "overlap_mask" in want:
            t["overlap_mask"] = overlap[i]
        if sem:
            t["sem_masks"] = sem_mask(overlap[i], lb[i], per_instance, hw[2 * i] // ratio, hw[2 * i + 1] // ratio, torch)
        if names:
            if len(t) != len(names):
                missing = [m for m in names if m not in t]
                raise bad(f"sample {i}'s lack {missing}: the server sent keypoints {bool(pl and pl[i])}, masks {bool(bt.masks)}, "
                          f"overlap mask {bool(bt.overlap_mask)}")
            t = {m: t[m] for m in names}
        out.append(t)
    return out


def _overlap_sizes(canvas: Any, ks: Any, ratio: int = OVERLAP_RATIO, per_instance: bool = False) -> Any:
    """Each sample's bytes of overlap_masks: its canvas // ratio, a byte a
    pixel (four past 255 instances), or with per_instance (mask_overlap
    False) K such masks a bit a pixel, padded to a multiple of 4."""
    px = (canvas[0::2] // ratio) * (canvas[1::2] // ratio)
    if per_instance:
        return ((ks * px + 7) // 8 + 3) // 4 * 4
    px = px * np.where(ks > 255, 4, 1)
    return (px + 3) // 4 * 4


def _fill_maps(fill_offsets: np.ndarray, fills: np.ndarray, canvas: Any, bad: Any) -> List[Optional[np.ndarray]]:
    """Each sample's fill map (uint8 [H * W]: a Mask fill's value where
    its fill block puts one, 0 where the masks' own runs hold), None for a
    sample without a block; every offset, run and value checked first."""
    n = len(canvas) // 2
    if not len(fill_offsets):
        if len(fills):
            raise bad(f"mask_fills of {len(fills)} bytes without mask_fill_offsets")
        return [None] * n
    foff = fill_offsets.view("<u4").astype(np.int64)
    if foff[0] != 0 or (np.diff(foff) < 0).any() or (foff % 4).any() or foff[-1] != len(fills):
        raise bad(f"mask fill offsets {foff.tolist()} for mask_fills of {len(fills)} bytes: want 0, non-decreasing "
                  "multiples of 4, the last its length")
    hw = canvas.tolist()
    out: List[Optional[np.ndarray]] = []
    for i in range(n):
        f0, f1 = int(foff[i]), int(foff[i + 1])
        if f0 == f1:
            out.append(None)
            continue
        block = fills[f0:f1]
        f = int(block[:4].view("<u4")[0]) if len(block) >= 4 else -1
        if f < 0 or 4 + 4 * f + (f // 2 + 3) // 4 * 4 != len(block):
            raise bad(f"sample {i}'s fill block of {len(block)} bytes does not add up")
        runs = block[4:4 + 4 * f].view("<u4").astype(np.int64)
        vals = block[4 + 4 * f:4 + 4 * f + f // 2]
        area = hw[2 * i] * hw[2 * i + 1]
        if int(runs.sum()) != area or (vals == 0).any():
            raise bad(f"sample {i}'s fill runs cover {int(runs.sum())} pixels of {area}, values {vals.tolist()}")
        per = np.zeros(f, dtype=np.uint8)
        per[1::2] = vals
        out.append(np.repeat(per, runs))
    return out


def _masks(mask_offsets: np.ndarray, mask_runs: np.ndarray, canvas: Any, ks: Any, k: int, bad: Any,
           torch: Any, fill_offsets: Optional[np.ndarray] = None, fills: Optional[np.ndarray] = None) -> List[Any]:
    """A batch's masks: each sample's tv_tensors.Mask [K, H, W] uint8,
    decoded from the runs (uint8 arrays of u32: each instance's alternating 0
    and 1 from a run of 0, row-major over its sample's H x W), every run
    checked first; where the sample has a fill block (fill_offsets and
    fills), its fill's values over every instance's mask."""
    from torchvision import tv_tensors

    moff = mask_offsets.view("<u4").astype(np.int64)
    runs = mask_runs.view("<u4").astype(np.int64)
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
    empty = np.zeros(0, dtype=np.uint8)
    fmaps = _fill_maps(empty if fill_offsets is None else fill_offsets, empty if fills is None else fills, canvas, bad)
    out = []
    for i, kk in enumerate(kl):
        r0, r1 = int(moff[at[i]]), int(moff[at[i + 1]])
        m = np.repeat(parity[r0:r1], runs[r0:r1]).reshape(kk, hw[2 * i] * hw[2 * i + 1])
        fm = fmaps[i]
        if fm is not None and kk:
            where = fm != 0
            m[:, where] = fm[where]
        out.append(tv_tensors.Mask(torch.from_numpy(m.reshape(kk, hw[2 * i], hw[2 * i + 1]))))
    return out
