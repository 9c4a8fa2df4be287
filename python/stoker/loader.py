"""stoker.Loader: ready batches from a stoker server as torch tensors.

One iteration of a Loader is one epoch of one job, carried by one Feed
stream: the trainer opens the job with ``prefetch`` credits, the server
answers with JobInfo, then each batch as a BatchHeader followed by the Chunks
of its pixels, then EpochEnd. A reader thread reassembles each batch into one
buffer while the trainer works; each batch taken from the loader grants the
server one more credit and reports how long the trainer waited for it, which
is what the server's controller steers on.

Memory is bounded: the server never has more than ``prefetch`` batches sent
and not yet taken, so at most ``prefetch`` assembled batches wait here.
"""

from __future__ import annotations

import os
import queue
import sys
import threading
import time
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from stoker import transforms as _transforms
from stoker.v1 import stoker_pb2 as pb

if TYPE_CHECKING:  # pragma: no cover
    import grpc
    import torch

__all__ = ["Loader", "StokerError", "SampleError", "LoaderStats", "list_datasets"]

#: gRPC receive limit: chunks are at most ~4 MiB, headers are small.
MAX_RECEIVE_MESSAGE_BYTES = 8 << 20

_FEED_METHOD = "/stoker.v1.FeedService/Feed"
_LIST_METHOD = "/stoker.v1.FeedService/ListDatasets"
_LAYOUTS = {"NCHW": pb.LAYOUT_NCHW, "NHWC": pb.LAYOUT_NHWC}


class StokerError(RuntimeError):
    """An error from the stoker server, or from the stream that carries it.

    ``code`` is the gRPC status code's name (``"NOT_FOUND"``,
    ``"INVALID_ARGUMENT"``, ``"UNAVAILABLE"``, …) and ``message`` the
    server's message.
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(code, message)
        self.code = code
        self.message = message

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


class SampleError(NamedTuple):
    """A sample the server could not make; its slot was filled by policy."""

    index: int
    name: str
    reason: str


@dataclass
class LoaderStats:
    """Running totals over a Loader's life (all epochs)."""

    batches: int = 0
    samples: int = 0
    #: Seconds the trainer spent blocked in ``next()`` waiting for batches.
    wait_seconds: float = 0.0
    #: Bytes of pixels received.
    bytes: int = 0
    #: Samples reported undecodable (each occurrence, every epoch).
    sample_errors: int = 0


def _rpc_error(e: Exception) -> StokerError:
    """Turns a grpc.RpcError into a StokerError with the server's message."""
    code = getattr(e, "code", None)
    details = getattr(e, "details", None)
    try:
        name = code().name if callable(code) else "UNKNOWN"
        msg = details() if callable(details) else str(e)
    except Exception:  # pragma: no cover - an RpcError without status
        name, msg = "UNKNOWN", str(e)
    return StokerError(name, msg or "")


_malloc_tuned = False


def tune_malloc() -> bool:
    """Keeps glibc's malloc from returning large freed blocks to the kernel.

    gRPC hands every received message over in fresh buffers of up to 4 MiB.
    Under glibc's defaults those come from mmap, or from heap that was just
    trimmed, so every byte of every batch is page-faulted in anew: about
    half of the trainer's CPU spent on receiving. This sets M_MMAP_THRESHOLD
    to 16 MiB and M_TRIM_THRESHOLD to 64 MiB (the process keeps up to 64 MiB
    of freed heap for reuse). It is process-wide, done once, and skipped when
    the environment already tunes malloc (GLIBC_TUNABLES, MALLOC_*_) or sets
    STOKER_TUNE_MALLOC=0. Returns whether it was applied.
    """
    global _malloc_tuned
    if _malloc_tuned:
        return True
    env = os.environ
    if (
        env.get("STOKER_TUNE_MALLOC", "1") == "0"
        or "glibc.malloc" in env.get("GLIBC_TUNABLES", "")
        or any(k.startswith("MALLOC_") and k.endswith("_") for k in env)
        or not sys.platform.startswith("linux")
    ):
        return False
    try:
        import ctypes

        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    m_trim_threshold, m_mmap_threshold = -1, -3
    ok = mallopt(m_mmap_threshold, 16 << 20) == 1 and mallopt(m_trim_threshold, 64 << 20) == 1
    _malloc_tuned = ok
    return ok


# The pid of the process that made this module's first gRPC channel. gRPC's
# core is not fork-safe: a child forked after its parent used gRPC can
# deadlock on its first channel (seen in about 1 DataLoader worker in 50).
# Such a child inherits this value and refuses with a clear error instead;
# a spawned child re-imports the module and starts from None.
_grpc_pid: Optional[int] = None


def _channel(target: str, credentials: Optional["grpc.ChannelCredentials"]) -> "grpc.Channel":
    global _grpc_pid
    pid = os.getpid()
    if _grpc_pid is not None and _grpc_pid != pid:
        raise RuntimeError(
            f"stoker: this process (pid {pid}) was forked after its parent (pid {_grpc_pid}) used gRPC, "
            "and gRPC cannot be used safely in such a child (its first channel can deadlock); "
            "use torch.utils.data.DataLoader(..., multiprocessing_context='spawn'), or num_workers=0"
        )
    _grpc_pid = pid
    import grpc

    options = [
        ("grpc.max_receive_message_length", MAX_RECEIVE_MESSAGE_BYTES),
        ("grpc.max_send_message_length", 1 << 20),
    ]
    if credentials is not None:
        return grpc.secure_channel(target, credentials, options=options)
    return grpc.insecure_channel(target, options=options)


def _metadata(token: Optional[str]) -> Optional[List[Tuple[str, str]]]:
    return [("authorization", f"Bearer {token}")] if token else None


def list_datasets(
    target: str,
    timeout: float = 30.0,
    token: Optional[str] = None,
    credentials: Optional["grpc.ChannelCredentials"] = None,
) -> List[pb.DatasetInfo]:
    """Returns the datasets the server at ``target`` serves (name, size,
    classes, fingerprint, format)."""
    import grpc

    ch = _channel(target, credentials)
    try:
        call = ch.unary_unary(
            _LIST_METHOD,
            request_serializer=pb.ListDatasetsRequest.SerializeToString,
            response_deserializer=pb.ListDatasetsResponse.FromString,
        )
        return list(call(pb.ListDatasetsRequest(), timeout=timeout, metadata=_metadata(token)).datasets)
    except grpc.RpcError as e:
        raise _rpc_error(e) from None
    finally:
        ch.close()


class _Chunk(NamedTuple):
    """A Chunk message, its pixels a view into the received message."""

    number: int
    offset: int
    data: memoryview


def _varint(buf: bytes, i: int) -> Tuple[int, int]:
    result = shift = 0
    while True:
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, i
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def _parse_chunk(data: bytes) -> Optional[_Chunk]:
    """Parses a FeedResponse holding a Chunk without copying its pixels, or
    returns None for anything unexpected (protobuf then parses it)."""
    n = len(data)
    length, i = _varint(data, 1)
    if i + length != n:
        return None
    number = offset = 0
    mv = memoryview(data)
    payload = mv[0:0]
    while i < n:
        key, i = _varint(data, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            v, i = _varint(data, i)
            if field == 1:
                number = v
            elif field == 2:
                offset = v
        elif wire == 2:
            length, i = _varint(data, i)
            if i + length > n:
                return None
            if field == 3:
                payload = mv[i : i + length]
            i += length
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        else:
            return None
    return _Chunk(number, offset, payload) if i == n else None


def _parse_response(data: bytes) -> Any:
    """The Feed stream's response deserializer. Chunks, nearly all the bytes,
    skip protobuf: their pixels stay a view into the message gRPC handed
    over, saving two copies of every batch (protobuf's parse and its bytes
    getter). Everything else is a FeedResponse."""
    if data[:1] == b"\x1a":  # field 3 (chunk), length-delimited
        try:
            c = _parse_chunk(data)
        except (IndexError, ValueError):
            c = None
        if c is not None:
            return c
    return pb.FeedResponse.FromString(data)


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

    __slots__ = ("header", "buf", "arr", "remaining")

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


class _FeedStream:
    """One Feed stream: a request queue feeding the bidi call, and a reader
    thread turning responses into ("job" | "batch" | "end" | "error", value)
    items on an output queue."""

    def __init__(
        self,
        target: str,
        open_job: pb.OpenJob,
        pin: bool,
        pool: Optional[_BufferPool],
        token: Optional[str],
        credentials: Optional["grpc.ChannelCredentials"],
    ) -> None:
        self._channel = _channel(target, credentials)
        self._requests: "queue.Queue[Optional[pb.FeedRequest]]" = queue.Queue()
        self._requests.put(pb.FeedRequest(open=open_job))
        self.out: "queue.Queue[Tuple[str, Any]]" = queue.Queue()
        self._pin = pin
        self._pool = pool or _BufferPool(0)
        self._closed = False
        feed = self._channel.stream_stream(
            _FEED_METHOD,
            request_serializer=pb.FeedRequest.SerializeToString,
            response_deserializer=_parse_response,
        )
        self._call = feed(self._request_iter(), metadata=_metadata(token))
        self._thread = threading.Thread(target=self._read, name="stoker-feed", daemon=True)
        self._thread.start()

    def _request_iter(self) -> Iterator[pb.FeedRequest]:
        while True:
            req = self._requests.get()
            if req is None:
                return
            yield req

    def credit(self, wait_seconds: float) -> None:
        """Grants one more batch and reports the wait for the one taken."""
        if not self._closed:
            self._requests.put(
                pb.FeedRequest(credit=pb.Credit(credits=1, wait_seconds=wait_seconds, batches=1))
            )

    def _read(self) -> None:
        import grpc

        put = self.out.put
        pending: Dict[int, _Batch] = {}

        def chunk(number: int, offset: int, data: memoryview) -> None:
            b = pending.get(number)
            if b is None:
                raise StokerError("INTERNAL", f"chunk for batch {number} without its header")
            n = len(data)
            if offset + n > b.arr.shape[0]:
                raise StokerError(
                    "INTERNAL", f"chunk [{offset}, {offset + n}) of batch {number} is past its {b.arr.shape[0]} bytes"
                )
            b.arr[offset : offset + n] = np.frombuffer(data, dtype=np.uint8)
            b.remaining -= n
            if b.remaining <= 0:
                del pending[number]
                put(("batch", b))

        try:
            for resp in self._call:
                if type(resp) is _Chunk:
                    chunk(resp.number, resp.offset, resp.data)
                    continue
                kind = resp.WhichOneof("msg")
                if kind == "chunk":  # one the fast parser left to protobuf
                    c = resp.chunk
                    chunk(c.number, c.offset, memoryview(c.data))
                elif kind == "batch":
                    b = _Batch(resp.batch, self._pin, self._pool)
                    if b.remaining == 0:
                        put(("batch", b))
                    else:
                        pending[resp.batch.number] = b
                elif kind == "job":
                    put(("job", resp.job))
                elif kind == "end":
                    put(("end", resp.end))
            put(("closed", None))
        except grpc.RpcError as e:
            put(("error", _rpc_error(e)))
        except BaseException as e:  # reported to the consumer, never lost in a thread
            put(("error", e))

    def get(self, timeout: Optional[float]) -> Tuple[str, Any]:
        """The next item; a StokerError DEADLINE_EXCEEDED after ``timeout``."""
        try:
            return self.out.get(timeout=timeout)
        except queue.Empty:
            raise StokerError("DEADLINE_EXCEEDED", f"no message from the server within {timeout} s") from None

    def close(self) -> None:
        """Ends the stream (cancelling it if it is still running) and the
        channel. Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        self._requests.put(None)
        self._call.cancel()
        self._thread.join(timeout=5)
        self._channel.close()


def _layout(layout: str) -> int:
    try:
        return _LAYOUTS[layout.upper()]
    except KeyError:
        raise ValueError(f"layout must be 'NCHW' or 'NHWC', got {layout!r}") from None


class Loader:
    """Batches of augmented images from a stoker server, as torch tensors.

    Each iteration is one epoch of this rank's share of the dataset, made by
    the server at ``target`` (``"host:port"``, or any gRPC target such as
    ``"dns:///name:port"``), yielding ``(images, labels)`` or, with
    ``return_indices``, ``(images, labels, indices)``:

    - images: ``torch.uint8`` ``[B, 3, H, W]`` (``layout="NHWC"``:
      ``[B, H, W, 3]``), or ``torch.float32`` when the transform ends in
      Normalize; in pinned memory when ``pin_memory`` (default: when CUDA is
      available). Normalize on the GPU with :func:`stoker.normalize`.
    - labels, indices: ``torch.int64`` ``[B]`` (indices into the dataset).

    Every yielded tensor owns its memory: it stays valid after later batches.

    The epoch's order is a function of ``(seed, epoch)``; rank ``r`` of
    ``world_size`` takes every ``world_size``-th sample of it, wrapping around
    so every rank gets ``ceil(N / world_size)`` samples and the same number of
    batches (torch's DistributedSampler). Call :meth:`set_epoch` before each
    epoch, as with DistributedSampler; a loader that runs an epoch to its end
    also moves on to the next epoch by itself, so that forgetting to call it
    does not repeat the same order and augmentations.

    Args:
        target: the server's address.
        dataset: a dataset name the server serves (see :func:`list_datasets`).
        transform: a preset name (``"imagenet-train"``, ``"imagenet-eval"``)
            or a :class:`stoker.transforms.Compose` of ops.
        batch_size: samples per batch.
        shuffle: shuffle the epoch's order (from ``seed`` and the epoch).
        seed: seeds the order and every random augmentation.
        rank, world_size: this trainer's share of the epoch.
        drop_last: drop the rank's last incomplete batch.
        prefetch: batches the server may send ahead of the trainer (credits).
        return_indices: also yield the samples' dataset indices.
        pin_memory: assemble batches in pinned memory; None: when CUDA is
            available.
        layout: ``"NCHW"`` or ``"NHWC"``.
        in_order: yield batches in batch-number order; False yields them as
            they are ready (faster when batch times vary).
        timeout: seconds to wait for any message from the server before
            raising StokerError("DEADLINE_EXCEEDED"); None waits forever.
        token: a bearer token sent on every call, for servers that want one.
        credentials: gRPC channel credentials (TLS); None for plaintext.
        fail_policy: ``"pad"`` (an undecodable sample's slot is filled with
            a good sample of the same batch, so batches keep their size) or
            ``"drop"`` (the batch is smaller). Either way the sample is listed
            in :attr:`sample_errors`.
        tune_malloc: call :func:`stoker.loader.tune_malloc` on the first
            iteration (halves the trainer's receive CPU under glibc).

    Attributes:
        sample_errors: every distinct (index, name, reason) the server
            reported as undecodable.
        stats: running totals (:class:`LoaderStats`).
        job_info: the last JobInfo the server sent (classes, fingerprint,
            sample shape, …), or None before the first stream.
    """

    def __init__(
        self,
        target: str,
        dataset: str,
        transform: _transforms.TransformLike = "imagenet-train",
        batch_size: int = 256,
        shuffle: bool = True,
        seed: int = 0,
        rank: int = 0,
        world_size: int = 1,
        drop_last: bool = False,
        prefetch: int = 4,
        return_indices: bool = False,
        pin_memory: Optional[bool] = None,
        layout: str = "NCHW",
        in_order: bool = True,
        timeout: Optional[float] = None,
        *,
        token: Optional[str] = None,
        credentials: Optional["grpc.ChannelCredentials"] = None,
        fail_policy: str = "pad",
        tune_malloc: bool = True,
    ) -> None:
        if not isinstance(dataset, str) or not dataset:
            raise ValueError("dataset must be a dataset name")
        if not 1 <= batch_size <= 65536:
            raise ValueError(f"batch_size must be in 1..65536, got {batch_size}")
        if world_size < 1 or not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} of world_size {world_size}: want 0 <= rank < world_size")
        if prefetch < 1:
            raise ValueError(f"prefetch must be >= 1, got {prefetch}")
        if not 0 <= seed < 1 << 64:
            raise ValueError("seed must be in 0..2**64-1")
        if fail_policy not in ("pad", "drop"):
            raise ValueError(f"fail_policy must be 'pad' or 'drop', got {fail_policy!r}")
        self.target = target
        self.dataset = dataset
        self.transform = transform
        self.batch_size = int(batch_size)
        self.shuffle = bool(shuffle)
        self.seed = int(seed)
        self.rank = int(rank)
        self.world_size = int(world_size)
        self.drop_last = bool(drop_last)
        self.prefetch = int(prefetch)
        self.return_indices = bool(return_indices)
        self.pin_memory = pin_memory
        self.layout = layout.upper()
        self.in_order = bool(in_order)
        self.timeout = timeout
        self.token = token
        self.credentials = credentials
        self.fail_policy = fail_policy
        self.tune_malloc = tune_malloc
        self._layout = _layout(layout)
        self._spec = _transforms.to_spec(transform)

        self.epoch = 0
        #: Batches of the current epoch taken so far (in as-ready mode: the
        #: length of the unbroken prefix of batch numbers taken).
        self.batches_consumed = 0
        self.sample_errors: List[SampleError] = []
        self.stats = LoaderStats()
        self.job_info: Optional[pb.JobInfo] = None
        self._resume: Optional[int] = None
        self._resume_fingerprint = ""
        self._len_cache: Dict[int, int] = {}
        self._seen_errors: set = set()
        self._warned = False
        self._pool: Optional[_BufferPool] = None

    def _buffers(self) -> _BufferPool:
        # Made on first use and kept across epochs: a trainer that lets its
        # batches go reuses the same few buffers all run long. Room for the
        # batches in flight, the one being filled and the trainer's.
        if self._pool is None:
            self._pool = _BufferPool(self.prefetch + 2)
        return self._pool

    def __getstate__(self) -> Dict[str, Any]:
        # Picklable for DataLoader workers (spawn): buffers are not carried.
        state = self.__dict__.copy()
        state["_pool"] = None
        return state

    # -- epochs and resume --------------------------------------------------

    def set_epoch(self, epoch: int) -> None:
        """Sets the epoch the next iteration runs (like DistributedSampler).

        Every rank must use the same epoch. A pending resume from
        :meth:`load_state_dict` for another epoch is dropped.
        """
        epoch = int(epoch)
        if epoch < 0:
            raise ValueError("epoch must be >= 0")
        if epoch != self.epoch:
            self._resume = None
            self.batches_consumed = 0
        self.epoch = epoch

    def _job_params(self) -> Dict[str, Any]:
        from google.protobuf import json_format

        return {
            "dataset": self.dataset,
            "transform": json_format.MessageToDict(self._spec),
            "batch_size": self.batch_size,
            "seed": self.seed,
            "shuffle": self.shuffle,
            "rank": self.rank,
            "world_size": self.world_size,
            "drop_last": self.drop_last,
            "layout": self.layout,
        }

    def state_dict(self) -> Dict[str, Any]:
        """The position to resume from: the epoch, the batches of it taken so
        far, and the job's parameters (checked on load). Plain Python values,
        fit for ``torch.save`` or JSON.

        With ``in_order=False`` the position is the unbroken prefix of batch
        numbers taken: batches taken out of order past it are delivered again
        after a resume (at most the few that were in flight)."""
        sd = {"epoch": self.epoch, "batches_consumed": self.batches_consumed}
        sd.update(self._job_params())
        sd["fingerprint"] = self.job_info.fingerprint if self.job_info is not None else ""
        return sd

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Resumes from :meth:`state_dict`: the next iteration runs the saved
        epoch from the first batch not yet taken, and yields exactly the
        batches an uninterrupted run would have yielded after it, byte for
        byte. The job's parameters must be the same."""
        mine = self._job_params()
        diff = [k for k, v in mine.items() if k in state and state[k] != v]
        if diff:
            raise ValueError(
                "state_dict is from a different job: "
                + ", ".join(f"{k}: saved {state[k]!r}, now {mine[k]!r}" for k in diff)
            )
        self.epoch = int(state["epoch"])
        self.batches_consumed = int(state["batches_consumed"])
        self._resume = self.batches_consumed
        self._resume_fingerprint = state.get("fingerprint", "") or ""

    # -- the stream ----------------------------------------------------------

    def _open_job(self, epoch: int, start_batch: int, credits: int) -> pb.OpenJob:
        return pb.OpenJob(
            dataset=self.dataset,
            transform=self._spec,
            batch_size=self.batch_size,
            seed=self.seed,
            shuffle=self.shuffle,
            epoch=epoch,
            rank=self.rank,
            world_size=self.world_size,
            drop_last=self.drop_last,
            as_ready=not self.in_order,
            layout=self._layout,
            credits=credits,
            start_batch=start_batch,
            fail_policy=pb.FAIL_POLICY_PAD if self.fail_policy == "pad" else pb.FAIL_POLICY_DROP,
        )

    def _wants_pin(self) -> bool:
        if self.pin_memory is not None:
            return bool(self.pin_memory)
        import torch

        return torch.cuda.is_available()

    def __len__(self) -> int:
        """Batches per epoch for this rank, as the server computes them
        (asked once per epoch: a Feed stream opened for its JobInfo)."""
        n = self._len_cache.get(self.epoch)
        if n is None:
            n = int(self._fetch_job_info(self.epoch).batches)
            self._len_cache[self.epoch] = n
        return n

    def _fetch_job_info(self, epoch: int) -> pb.JobInfo:
        stream = _FeedStream(
            self.target, self._open_job(epoch, 0, credits=0), False, None, self.token, self.credentials
        )
        try:
            while True:
                kind, v = stream.get(self.timeout if self.timeout is not None else 60.0)
                if kind == "job":
                    return v
                if kind == "error":
                    raise v
                if kind in ("end", "closed"):
                    raise StokerError("INTERNAL", "the server closed the stream before sending JobInfo")
        finally:
            stream.close()

    def __iter__(self) -> Iterator[Tuple["torch.Tensor", ...]]:
        epoch = self.epoch
        start = self._resume or 0
        fingerprint = self._resume_fingerprint
        self._resume = None
        self._resume_fingerprint = ""
        return self._run(epoch, start, fingerprint)

    def _run(self, epoch: int, start: int, fingerprint: str) -> Iterator[Tuple["torch.Tensor", ...]]:
        import torch

        if self.tune_malloc:
            tune_malloc()
        # The channel is made here, on the first next(): never before a fork.
        t0 = time.perf_counter()  # the first batch's wait includes opening
        stream = _FeedStream(
            self.target,
            self._open_job(epoch, start, self.prefetch),
            self._wants_pin(),
            self._buffers(),
            self.token,
            self.credentials,
        )
        try:
            kind, info = stream.get(self.timeout)
            if kind == "error":
                raise info
            if kind != "job":
                raise StokerError("INTERNAL", f"the stream opened with {kind!r}, not JobInfo")
            self.job_info = info
            self._len_cache[epoch] = int(info.batches)
            if fingerprint and info.fingerprint != fingerprint:
                warnings.warn(
                    f"stoker: dataset {self.dataset!r} changed since the state_dict was saved "
                    f"(fingerprint {fingerprint} -> {info.fingerprint}); the resumed epoch's remaining "
                    "batches are not those the interrupted run would have had",
                    RuntimeWarning,
                    stacklevel=2,
                )
            self.batches_consumed = start
            taken: set = set()  # as-ready: batch numbers taken past the prefix
            while True:
                kind, v = stream.get(self.timeout)
                waited = time.perf_counter() - t0
                if kind == "batch":
                    stream.credit(waited)
                    out = self._tensors(v, torch)
                    self.stats.wait_seconds += waited
                    number = int(v.header.number)
                    v = None  # only the yielded tensors hold the buffer now
                    if number == self.batches_consumed:
                        self.batches_consumed += 1
                        while self.batches_consumed in taken:
                            taken.discard(self.batches_consumed)
                            self.batches_consumed += 1
                    else:
                        taken.add(number)
                    yield out
                    t0 = time.perf_counter()
                elif kind == "end":
                    self.stats.wait_seconds += waited
                    break
                elif kind == "error":
                    raise v
                else:  # "closed" without EpochEnd, or a JobInfo twice
                    raise StokerError("INTERNAL", f"the Feed stream ended without EpochEnd ({kind})")
            if self.epoch == epoch:  # not moved by set_epoch meanwhile
                self.epoch = epoch + 1
                self.batches_consumed = 0
        finally:
            stream.close()

    def _tensors(self, b: _Batch, torch: Any) -> Tuple["torch.Tensor", ...]:
        h = b.header
        shape = [int(s) for s in h.shape]
        images = b.buf
        if h.dtype == pb.DTYPE_FLOAT32:
            images = images.view(torch.float32)
        images = images.view(shape)
        labels = torch.from_numpy(np.array(h.labels, dtype=np.int64))
        st = self.stats
        st.batches += 1
        st.samples += shape[0] if shape else 0
        st.bytes += int(h.data_bytes)
        if h.errors:
            self._record_errors(h.errors)
        if self.return_indices:
            return images, labels, torch.from_numpy(np.array(h.indices, dtype=np.int64))
        return images, labels

    def _record_errors(self, errors: Sequence[pb.SampleError]) -> None:
        self.stats.sample_errors += len(errors)
        for e in errors:
            key = (e.index, e.name, e.reason)
            if key not in self._seen_errors:
                self._seen_errors.add(key)
                self.sample_errors.append(SampleError(int(e.index), e.name, e.reason))
        if not self._warned:
            self._warned = True
            e = errors[0]
            warnings.warn(
                f"stoker: the server could not make sample {e.index} ({e.name}): {e.reason}; its slot was "
                f"filled by the {self.fail_policy!r} policy. All such samples are listed in loader.sample_errors "
                "(this warning is shown once)",
                RuntimeWarning,
                stacklevel=3,
            )

    def __repr__(self) -> str:
        return (
            f"Loader(target={self.target!r}, dataset={self.dataset!r}, transform={self.transform!r}, "
            f"batch_size={self.batch_size}, shuffle={self.shuffle}, seed={self.seed}, rank={self.rank}, "
            f"world_size={self.world_size}, epoch={self.epoch})"
        )
