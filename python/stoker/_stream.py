"""The Feed stream on the trainer's side: the bidi call, the reader thread
that reassembles batches while the trainer works, and the session that
keeps a Loader's channel and stream open across epochs.

A stream runs epoch after epoch (``OpenJob.epochs`` is 0): JobInfo, the
epoch's batches, EpochEnd, then the next epoch's JobInfo. A trainer that
stops at an epoch's last batch leaves the EpochEnd unread; the next
iteration on the stream reads and drops it (:attr:`_FeedStream.end_pending`). The reader thread
turns responses into ``(kind, value)`` items on :attr:`_FeedStream.out`:
``("job", JobInfo)``, ``("batch", _Batch)``, ``("end", EpochEnd)``,
``("closed", None)`` when the server ends the stream, ``("error",
exception)``. Memory is bounded by credits: the server never has more than
the granted batches sent and not yet taken.
"""

from __future__ import annotations

import os
import queue
import sys
import threading
import time
import warnings
from typing import Any, Callable, Dict, Iterator, Optional, Tuple

from stoker._buffers import _Batch, _BufferPool
from stoker._channel import Connection, Endpoint, join_threads
from stoker._errors import StokerError
from stoker._shm import Ring
from stoker._targets import slot_extent
from stoker._wire import _Chunk
from stoker.v1 import stoker_pb2 as pb

__all__ = ["_FeedStream", "_Session"]

#: The longest a wait for the server's next message sleeps before the main
#: thread gets to run (see _FeedStream.get).
_POLL = 0.1


class _FeedStream:
    """One Feed stream: a request queue feeding the bidi call, and a daemon
    reader thread turning responses into items on :attr:`out`."""

    #: Feed streams opened in this process (tests count them).
    opened = 0

    def __init__(self, conn: Connection, open_job: pb.OpenJob, pin: bool, pool: Optional[_BufferPool],
                 transport: str = "auto") -> None:
        _FeedStream.opened += 1
        self._transport = transport
        self._asked_shm = open_job.HasField("shm")
        self._shm_fallback = self._asked_shm and transport == "auto"  # reported once answered
        #: Called with the reason, on the consumer's thread, when a stream
        #: of transport="auto" that asked for a ring gets chunks instead.
        self.on_fallback: Optional[Callable[[str], None]] = None
        #: The ring batches come in when the server offered one and it was
        #: mapped (set before the first batch), else None: gRPC chunks.
        self.ring: Optional[Ring] = None
        #: Why batches come in chunks on a stream that asked for a ring.
        self.shm_reason = "" if self._asked_shm else "not asked (transport='grpc', or not Linux)"
        self.pid = conn.pid
        self._endpoint = conn.endpoint
        #: The epoch whose JobInfo comes next while the stream waits between
        #: epochs (the last iteration on it took its epoch's every batch);
        #: None while an iteration uses it, or before.
        self.next_epoch: Optional[int] = None
        #: Whether the EpochEnd before :attr:`next_epoch`'s JobInfo is still
        #: to be read: the trainer took the epoch's last batch and did not
        #: ask for more (a loop that stops at len(), as Lightning does).
        self.end_pending = False
        self._requests: "queue.SimpleQueue[Optional[pb.FeedRequest]]" = queue.SimpleQueue()  # put by finalizers too: reentrant
        self._requests.put(pb.FeedRequest(open=open_job))
        self.out: "queue.Queue[Tuple[str, Any]]" = queue.Queue()
        self._pin = pin
        self._pool = pool or _BufferPool(0)
        self._closed = False
        self._call: Any = conn.feed(self._request_iter())
        self._thread = threading.Thread(target=self._read, args=(self._call,), name="stoker-feed", daemon=True)
        self._thread.start()

    @property
    def closed(self) -> bool:
        return self._closed

    def _request_iter(self) -> Iterator[pb.FeedRequest]:
        while True:
            req = self._requests.get()
            if req is None:
                return
            yield req

    def credit(self, wait_seconds: float, step_seconds: float = 0.0) -> None:
        """Grants one more batch and reports the wait for the one taken and
        the trainer's step before it (the time between taking the previous
        batch and asking for this one): the server's controller steers on
        both. It also gives back the ring's slots released since."""
        if not self._closed:
            released = self.ring.collect() if self.ring is not None else []
            self._requests.put(
                pb.FeedRequest(
                    credit=pb.Credit(credits=1, wait_seconds=wait_seconds, batches=1, step_seconds=step_seconds,
                                     released_slots=released)
                )
            )

    def _offered(self, offer: pb.ShmOffer) -> None:
        """Answers the server's ShmOffer: maps the ring it offers, or notes
        why not (transport="shm" makes that an error)."""
        self._asked_shm = False  # answered
        reason = offer.declined
        if not reason:
            try:
                self.ring = Ring(offer)
            except (OSError, ValueError) as e:
                reason = f"could not map the server's ring: {e}"
            self._requests.put(pb.FeedRequest(shm=pb.ShmAccept(ok=self.ring is not None, reason=reason)))
        self.shm_reason = reason
        if reason and self._transport == "shm":
            raise StokerError("FAILED_PRECONDITION", f"transport='shm', but batches would come in chunks: {reason}")

    def _read(self, call: Any) -> None:
        import grpc

        put = self.out.put
        pending: Dict[int, _Batch] = {}

        def chunk(number: int, offset: int, data: memoryview) -> None:
            b = pending.get(number)
            if b is None:
                raise StokerError("INTERNAL", f"chunk for batch {number} without its header")
            if b.fill(offset, data):
                del pending[number]
                put(("batch", b))

        try:
            for resp in call:
                if type(resp) is _Chunk:
                    chunk(resp.number, resp.offset, resp.data)
                    continue
                kind = resp.WhichOneof("msg")
                if kind == "chunk":  # one the fast parser left to protobuf
                    c = resp.chunk
                    chunk(c.number, c.offset, memoryview(c.data))
                elif kind == "batch":
                    h = resp.batch
                    if h.HasField("slot"):
                        if self.ring is None:
                            raise StokerError("INTERNAL", f"batch {h.number} in a slot, and no ring")
                        # Its targets' ranges in the slot, if there, are
                        # checked before anything of it is read.
                        end = slot_extent(h.targets if h.HasField("targets") else None, int(h.data_bytes),
                                          self.ring.slot_bytes, int(h.number))
                        put(("batch", _Batch.in_slot(h, self.ring.batch(h.slot, end), self._pin)))
                        continue
                    b = _Batch(h, self._pin, self._pool)
                    if b.remaining == 0:
                        put(("batch", b))
                    else:
                        pending[resp.batch.number] = b
                elif kind == "job":
                    if self._asked_shm:  # a server that ignored OpenJob.shm
                        self._offered(pb.ShmOffer(declined="the server does not offer shared memory"))
                    put(("job", resp.job))
                elif kind == "shm":
                    self._offered(resp.shm)
                elif kind == "end":
                    put(("end", resp.end))
            put(("closed", None))
        except grpc.RpcError as e:
            if self._closed:
                put(("error", StokerError("CANCELLED", "the Feed stream was closed by the client")))
            else:
                put(("error", self._endpoint.error(e)))
            # gRPC raises the call itself, and its traceback holds frames
            # that hold the call (this one's ``call``, its own ``__next__``):
            # a cycle that only the garbage collector frees, perhaps at
            # interpreter exit, where freeing the call can hang (see close).
            e.__traceback__ = None
        except BaseException as e:  # reported to the consumer, never lost in a thread
            put(("error", e))

    def get(self, timeout: Optional[float]) -> Tuple[str, Any]:
        """The next item; a StokerError DEADLINE_EXCEEDED after ``timeout``.

        It waits in slices of at most :data:`_POLL` seconds: a Ctrl-C
        (SIGINT to the process) is often delivered to another thread than
        the main one (gRPC's, the reader), which leaves a wait on a lock in
        the main thread asleep; between slices the main thread runs and
        raises the KeyboardInterrupt."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            wait = _POLL if deadline is None else max(0.0, min(_POLL, deadline - time.monotonic()))
            try:
                item = self.out.get(timeout=wait)
            except queue.Empty:
                if deadline is not None and time.monotonic() >= deadline:
                    raise StokerError("DEADLINE_EXCEEDED", f"no message from the server within {timeout} s") from None
                continue
            if item[0] == "job" and self._shm_fallback:  # the offer was answered before the JobInfo
                self._shm_fallback = False
                if self.shm_reason and self.on_fallback is not None:
                    self.on_fallback(self.shm_reason)
            return item

    def job(self, timeout: Optional[float]) -> Tuple[str, Any]:
        """The first item of the epoch the stream starts now: its JobInfo
        (``("job", info)``), or what came instead. The previous epoch's
        EpochEnd, when it is still pending (:attr:`end_pending`), is read
        and dropped first."""
        item = self.get(timeout)
        if self.end_pending and item[0] == "end":
            self.end_pending = False
            item = self.get(timeout)
        return item

    def read_end(self, timeout: Optional[float]) -> Tuple[str, Any]:
        """Reads the pending EpochEnd, for a trainer that asks past an
        epoch's last batch: ``("end", EpochEnd)``, or what came instead."""
        item = self.get(timeout)
        if item[0] == "end":
            self.end_pending = False
        return item

    def close(self) -> None:
        """Ends the stream, cancelling it if it is still running. In a
        forked child (which must not touch gRPC) it only marks it closed.
        Safe to call twice, from any thread."""
        if self._closed:
            return
        self._closed = True
        self._requests.put(None)
        if os.getpid() != self.pid:
            return
        self._call.cancel()
        # Closed from the reader thread itself when a garbage collection run
        # there finalizes an abandoned iterator: it ends on its own.
        # It is joined (within THREAD_JOIN_SECONDS, whatever the load) so
        # that it is not left in the middle of the call's code when the
        # interpreter exits (see Connection.close).
        if threading.current_thread() is not self._thread:
            join_threads([self._thread])
        # Let the call go now, while gRPC's threads run: it is freed here
        # (the reader, if still running, keeps its own reference until it
        # ends). Its __del__ takes the call's lock. Run at interpreter exit
        # instead (the Loader's finalizer closes the stream then, but the
        # call outlived it), it could find that lock held forever by one of
        # gRPC's daemon threads that the exit had stopped mid-way, and the
        # process hung after its last batch
        # (test_another_network_namespace_falls_back, once in a dozen runs).
        self._call = None


class _Session:
    """A Loader's channel and its open Feed stream, made on first use.

    It holds no reference to its Loader, so that a ``weakref.finalize`` on
    the Loader can close it when the Loader is garbage-collected or the
    interpreter exits.
    """

    def __init__(self) -> None:
        self.conn: Optional[Connection] = None
        self._stream: Optional[_FeedStream] = None
        self._shm_warned = False

    @property
    def stream(self) -> Optional[_FeedStream]:
        """The open stream, if any."""
        return self._stream

    @stream.setter
    def stream(self, s: Optional[_FeedStream]) -> None:
        self._stream = s
        if s is not None:
            s.on_fallback = self._warn_fallback

    def _warn_fallback(self, reason: str) -> None:
        """Says, once per loader, that transport="auto" got chunks where it
        asked for shared memory, and why; not for a server on another
        machine, where chunks are the way (the server's decline says
        "another machine": server/shm.go)."""
        if self._shm_warned or "another machine" in reason:
            return
        self._shm_warned = True
        warnings.warn(
            f"stoker: transport='auto' gets its batches in gRPC chunks, not through shared memory: {reason} "
            "(shown once per loader; loader.transport_reason says it too)",
            RuntimeWarning,
            stacklevel=_outside_level(),  # the trainer's loop
        )

    def connection(self, endpoint: Endpoint) -> Connection:
        """The open channel, made if there is none (or only a forked
        parent's, which is forgotten, never used)."""
        c = self.conn
        if c is None or c.closed or not c.owned():
            c = self.conn = Connection(endpoint)
        return c

    def idle_stream(self, epoch: int) -> Optional[_FeedStream]:
        """The open stream, if it waits at the start of ``epoch``; it is then
        in use (until it is released at the end of an epoch). Its pending
        EpochEnd, if any, is for the caller to skip (:meth:`_FeedStream.job`)."""
        s = self.stream
        if s is None or s.closed or s.next_epoch != epoch or os.getpid() != s.pid:
            return None
        s.next_epoch = None
        return s

    def drop_stream(self, stream: Optional[_FeedStream] = None) -> None:
        """Closes ``stream`` (default: the open one) and forgets it if it
        is the open one."""
        s = self.stream if stream is None else stream
        if s is None:
            return
        if self.stream is s:
            self.stream = None
        s.close()

    def close(self) -> None:
        """Closes the stream and the channel. Safe to call twice."""
        self.drop_stream()
        if self.conn is not None:
            conn, self.conn = self.conn, None
            conn.close()


def _outside_level() -> int:
    """The ``stacklevel`` that points warnings.warn, called by this
    function's caller, at the first frame outside the stoker package."""
    pkg = os.path.dirname(os.path.abspath(__file__)) + os.sep
    f, level = sys._getframe(1), 1
    while f is not None and os.path.abspath(f.f_code.co_filename).startswith(pkg):
        f, level = f.f_back, level + 1
    return level
