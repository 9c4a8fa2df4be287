"""Batch memory: the pool of reusable buffers, the reassembly of a batch
from its chunks into one buffer, and the tensors handed to the trainer.

Every tensor handed over owns its buffer (it stays valid however long the
trainer keeps it); a buffer is reused only once nothing references it.
"""

from __future__ import annotations

import sys
import threading
from typing import TYPE_CHECKING, Any, List, Sequence, Tuple, Union

import numpy as np

from stoker._errors import StokerError
from stoker._batch import Batch, fields_of
from stoker._job import DECODE_NAMES
from stoker._targets import targets_of
from stoker.v1 import stoker_pb2 as pb

if TYPE_CHECKING:  # pragma: no cover
    import torch

__all__ = ["_BufferPool", "_Batch", "batch_tensors"]


class _BufferPool:
    """Reusable batch buffers for unpinned batches.

    A buffer goes to the trainer inside the tensors made from it
    (torch.from_numpy keeps a reference to the array), so it is reused only
    when its reference count says no tensor, view or batch holds it any
    more: a trainer that keeps every batch gets fresh buffers, one that lets
    them go gets the same few back, without their page faults.
    """

    def __init__(self, keep: int) -> None:
        self._keep = keep
        self._arrays: List[np.ndarray] = []
        self._lock = threading.Lock()
        probe = [np.empty(1, np.uint8)]
        self._free_refs = self._refs(probe, 0)

    @staticmethod
    def _refs(arrays: List[np.ndarray], i: int) -> int:
        return sys.getrefcount(arrays[i])

    def get(self, n: int) -> np.ndarray:
        """A uint8 array of n bytes that nothing else references."""
        with self._lock:
            arrays = self._arrays
            for i in range(len(arrays)):
                if arrays[i].nbytes >= n and self._refs(arrays, i) <= self._free_refs:
                    return arrays[i][:n]
            a = np.empty(n, np.uint8)
            if len(arrays) < self._keep:
                arrays.append(a)
            else:  # replace a free smaller one, if any
                for i in range(len(arrays)):
                    if arrays[i].nbytes < n and self._refs(arrays, i) <= self._free_refs:
                        arrays[i] = a
                        break
            return a


class _Batch:
    """A batch being reassembled from its chunks."""

    __slots__ = ("header", "buf", "arr", "remaining", "tail")

    def __init__(self, header: pb.BatchHeader, pin: bool, pool: _BufferPool) -> None:
        import torch

        self.header = header
        n = int(header.data_bytes)
        # The tensor handed to the trainer owns its buffer, so it stays valid
        # however long the trainer keeps it. Pinned buffers come from torch's
        # caching host allocator, which reuses them once freed; the others
        # from the pool, which does the same.
        if pin:
            self.buf = torch.empty(n, dtype=torch.uint8, pin_memory=True)
            self.arr = self.buf.numpy()
        else:
            self.arr = pool.get(n)
            self.buf = torch.from_numpy(self.arr)
        self.remaining = n
        self.tail = None  # the targets are in the header

    def fill(self, offset: int, data: memoryview) -> bool:
        """Copies a chunk's pixels in place; True once the batch is whole."""
        n = len(data)
        if offset + n > self.arr.shape[0]:
            raise StokerError(
                "INTERNAL",
                f"chunk [{offset}, {offset + n}) of batch {self.header.number} is past its {self.arr.shape[0]} bytes",
            )
        self.arr[offset : offset + n] = np.frombuffer(data, dtype=np.uint8)
        self.remaining -= n
        return self.remaining <= 0

    @classmethod
    def in_slot(cls, header: pb.BatchHeader, arr: np.ndarray, pin: bool) -> "_Batch":
        """A batch in a shared-memory slot, whole at once: ``arr`` is the
        slot's bytes from its start, its pixels (``data_bytes``) and, when
        its targets' arrays came after them (BatchTargets.in_slot), those.
        Its tensors, its targets' too, are views on the slot, which goes
        back once none is left; pinned, the pixels are copied into pinned
        memory (the copy CUDA's needs anyway), the targets' arrays into one
        array of their own (a few KB), and the slot is released at once."""
        import torch

        b = cls.__new__(cls)
        b.header = header
        b.remaining = 0
        n = int(header.data_bytes)
        # The targets' arrays: the slot's bytes from the pixels' end (from a
        # multiple of 8 before it, as the ranges are), or none.
        base = n // 8 * 8
        b.tail = None
        # Targets in the slot may all be empty (no instance in the batch):
        # their places are then at the pixels' end, and the slot's bytes
        # are the pixels' alone, so the tail is kept whenever they are there.
        there = header.HasField("targets") and header.targets.HasField("in_slot")
        if pin:
            b.buf = torch.empty(n, dtype=torch.uint8, pin_memory=True)
            b.arr = b.buf.numpy()
            b.arr[:] = arr[:n]
            if there or arr.shape[0] > n:
                b.tail = (arr[base:].copy(), base)
        else:
            b.arr = arr[:n]
            b.buf = torch.from_numpy(b.arr)
            if there or arr.shape[0] > n:
                b.tail = (arr[base:], base)
        return b


def batch_tensors(b: _Batch, return_indices: bool, torch: Any, names: Sequence[str] = (), fields: Sequence[str] = (),
                  targets: Union[bool, Sequence[str]] = False, image_list: bool = False) -> Batch:
    """The tensors of a whole batch as a stoker.Batch: (images, labels[,
    indices]), with its indices, traces, fields (those named in ``fields``)
    and numbers. The images are a view of the batch's buffer, in its shape
    and dtype; of a job of several views (the header lists them, ``names``
    their groups' names from JobInfo), a list of each view's, in order: the
    buffer holds them back to back. A batch of per-sample sizes (the header's
    ``sample_sizes``) is padded to its largest sample: ``Batch.sizes`` says
    each sample's, and with ``image_list`` the images are a list of each
    sample's window of it (views, no copy)."""
    h = b.header
    elem = 4 if h.dtype == pb.DTYPE_FLOAT32 else 1

    def view(buf: Any, shape: Sequence[int]) -> Any:
        if elem == 4:
            buf = buf.view(torch.float32)
        return buf.view([int(s) for s in shape])

    views = None
    if len(h.views) and h.ragged:  # several views, some of per-sample sizes: each view's samples back to back
        images, sizes_v = ragged_views(h, b.buf, elem, view, torch)
        views = {}
        for name, im in zip(names, images):
            if name:
                views.setdefault(name, []).append(im)
    elif len(h.views):
        images, off = [], 0
        for v in h.views:
            n = elem
            for d in v.dims:
                n *= int(d)
            images.append(view(b.buf[off:off + n], v.dims))
            off += n
        if off != b.buf.shape[0]:
            raise StokerError("INTERNAL", f"batch {h.number}: views of {off} bytes in a batch of {b.buf.shape[0]}")
        views = {}
        for name, im in zip(names, images):
            if name:
                views.setdefault(name, []).append(im)
    elif h.ragged:
        images = None  # each sample's own, below
    else:
        images = view(b.buf, h.shape)
    if len(h.views) and h.ragged:
        sizes = sizes_v
    else:
        sizes = sample_sizes(h, images, torch) if len(h.sample_sizes) else None
    if h.ragged and not len(h.views):
        images = ragged_images(h, b.buf, sizes, elem, view)
    elif sizes is not None and image_list:
        nchw = _chw(h)
        images = [images[i, :, :hh, :ww] if nchw else images[i, :hh, :ww, :]
                  for i, (hh, ww) in enumerate(sizes.tolist())]
    labels = torch.from_numpy(np.array(h.labels, dtype=np.int64))
    indices = torch.from_numpy(np.array(h.indices, dtype=np.int64))
    got = fields_of(h, fields)
    second: Any = labels
    if targets:  # (images, targets[, indices]): the header's ragged arrays
        bt = h.targets if h.HasField("targets") else None
        second = targets_of(bt, int(h.shape[0]) if len(h.shape) else 0, torch, () if targets is True else tuple(targets),
                            int(h.number), tail=b.tail)
    items = (images, second, indices) if return_indices else (images, second)
    out = Batch(items, indices=indices, traces=list(h.traces) if len(h.traces) else None,
                fields=got, epoch=int(h.epoch), number=int(h.number), views=views,
                decode=DECODE_NAMES.get(h.decode) if len(h.traces) else None)
    if targets:
        out.labels, out.targets = labels, second
    if len(h.source_sizes):
        if len(h.source_sizes) != 2 * int(h.shape[0]):
            raise StokerError("INTERNAL", f"batch {h.number}: {len(h.source_sizes)} source sizes for {int(h.shape[0])} samples")
        out.source_sizes = torch.from_numpy(np.array(h.source_sizes, dtype=np.int64).reshape(-1, 2))
    if len(h.records):
        if len(h.records) != int(h.shape[0]):
            raise StokerError("INTERNAL", f"batch {h.number}: {len(h.records)} records for {int(h.shape[0])} samples")
        out.records = torch.from_numpy(np.array(h.records, dtype=np.int64))
    if sizes is not None and len(h.views):  # several ragged views: a list of each view's sizes
        out.sizes, out._layout, out._flat = sizes, "NCHW" if images and images[0] and images[0][0].shape[0] == 3 else "NHWC", b.buf
    elif sizes is not None:
        out.sizes, out._layout = sizes, "NCHW" if _chw(h) else "NHWC"
        if h.ragged:
            out._flat = b.buf
        else:
            out._padded = view(b.buf, h.shape)
    return out


def ragged_views(h: Any, buf: Any, elem: int, view: Any, torch: Any) -> Tuple[List[List[Any]], List[Any]]:
    """A ragged batch of several views (BatchHeader.ragged and views):
    per view, each sample's ``[3, h, w]`` (or ``[h, w, 3]``) view of the
    buffer, view after view, and per view its samples' sizes (int64
    ``[N, 2]``), from ``sample_sizes`` (every view's, view after view),
    each at most its view's dims; the bytes must add up to the buffer's."""
    n, nv = int(h.shape[0]), len(h.views)
    if len(h.sample_sizes) != 2 * n * nv:
        raise StokerError("INTERNAL", f"batch {h.number}: {len(h.sample_sizes)} sample sizes for {n} samples of {nv} views")
    all_sizes = np.array(h.sample_sizes, dtype=np.int64).reshape(nv, n, 2)
    images, sizes, off = [], [], 0
    for v, shape in enumerate(h.views):
        d = [int(x) for x in shape.dims]
        chw = d[1] == 3 and (n == 0 or (d[2], d[3]) == tuple(int(x) for x in all_sizes[v].max(axis=0)))
        bh, bw = (d[2], d[3]) if chw else (d[1], d[2])
        sv = all_sizes[v]
        # A sample's view may be 0 x 0: a view group for the images of records of one (or of several) alone.
        if n and (int(sv.min()) < 0 or int(sv[:, 0].max()) != bh or int(sv[:, 1].max()) != bw):
            raise StokerError("INTERNAL", f"batch {h.number}: view {v}'s sample sizes {sv.tolist()[:4]}... do not fit its {bh}x{bw}")
        out = []
        for hh, ww in sv.tolist():
            k = 3 * hh * ww * elem
            out.append(view(buf[off:off + k], (3, hh, ww) if chw else (hh, ww, 3)))
            off += k
        images.append(out)
        sizes.append(torch.from_numpy(sv.copy()))
    if off != buf.shape[0]:
        raise StokerError("INTERNAL", f"batch {h.number}: ragged views of {off} bytes in a batch of {buf.shape[0]}")
    return images, sizes


def ragged_images(h: Any, buf: Any, sizes: Any, elem: int, view: Any) -> List[Any]:
    """A ragged batch's images (BatchHeader.ragged): each sample's own
    ``[3, h, w]`` (or ``[h, w, 3]``) view of the buffer, back to back in
    batch order; their bytes must add up to the buffer's."""
    chw, out, off = _chw(h), [], 0
    for hh, ww in sizes.tolist():
        n = 3 * hh * ww * elem
        out.append(view(buf[off:off + n], (3, hh, ww) if chw else (hh, ww, 3)))
        off += n
    if off != buf.shape[0]:
        raise StokerError("INTERNAL", f"batch {h.number}: ragged samples of {off} bytes in a batch of {buf.shape[0]}")
    return out


def _chw(h: Any) -> bool:
    # A batch of per-sample sizes is uint8 or float32 [N, 3, H, W] or
    # [N, H, W, 3]: its layout is in its shape, whose H and W are its
    # largest sample's (a bound of at least 3 could read either way: the
    # sizes settle it).
    sizes = list(h.sample_sizes)
    bh = max(sizes[0::2], default=0)
    return int(h.shape[1]) == 3 and (int(h.shape[2]), int(h.shape[3])) == (bh, max(sizes[1::2], default=0))


def sample_sizes(h: Any, images: Any, torch: Any) -> Any:
    """A header's per-sample sizes as int64 ``[N, 2]`` (height, width),
    checked against its shape: each at least 1 and at most the batch's."""
    n = int(h.shape[0])
    if len(h.sample_sizes) != 2 * n:
        raise StokerError("INTERNAL", f"batch {h.number}: {len(h.sample_sizes)} sample sizes for {n} samples")
    sizes = torch.from_numpy(np.array(h.sample_sizes, dtype=np.int64).reshape(n, 2))
    chw = _chw(h)
    bh, bw = (int(h.shape[2]), int(h.shape[3])) if chw else (int(h.shape[1]), int(h.shape[2]))
    if n and (int(sizes.min()) < 1 or int(sizes[:, 0].max()) != bh or int(sizes[:, 1].max()) != bw):
        raise StokerError("INTERNAL", f"batch {h.number}: sample sizes {sizes.tolist()[:4]}... do not pad to its "
                          f"{bh}x{bw}")
    return sizes
