"""Same-host delivery: the shared-memory ring a server on this machine
offers (ShmOffer), mapped here, whose slots hold batches' pixels (and
their targets' arrays, when they fit).

The handshake: OpenJob carries this machine's boot id; a server that shares
it offers a ring, named by an abstract Unix socket and a single-use token.
Connecting to the socket (possible only from the server's network
namespace) and writing the token brings back the ring's memfd (SCM_RIGHTS),
sealed against resizing, which is mapped here. Each batch sent in a slot
is then a header on the stream; its tensors are views on the slot (its
targets' too, when the server put their arrays after the pixels: it does
when they fit, ShmRequest.targets_in_slot), and the slot goes back to the
server (in the next credit) once no tensor, view or array of the batch is
left: a finalizer on the batch's array notes it.
"""

from __future__ import annotations

import mmap
import os
import socket
import sys
import threading
import time
import weakref
from typing import List, Optional

import numpy as np

from stoker.v1 import stoker_pb2 as pb

__all__ = ["TRANSPORTS", "boot_id", "shm_request", "Ring"]

#: The ``transport`` values a Loader takes.
TRANSPORTS = ("auto", "grpc", "shm")

#: How long one handshake on the server's socket may take, and how long a
#: trainer connects again when the server cut its handshake unanswered (a
#: neighbor flooding the socket can get a connection cut): under the
#: server's default --first-message-timeout (10 s), the token's life.
_HANDSHAKE_TIMEOUT = 2.0
_FETCH_PATIENCE = 5.0


def boot_id() -> Optional[str]:
    """This machine's boot id (one per running kernel), or None off Linux."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return None


def shm_request(transport: str) -> Optional[pb.ShmRequest]:
    """The OpenJob.shm a loader with ``transport`` sends, if any."""
    if transport == "grpc" or not sys.platform.startswith("linux"):
        return None
    boot = boot_id()
    # targets_in_slot: this client reads a batch's target arrays from its
    # slot (BatchTargets.in_slot, _targets.slot_ranges).
    return pb.ShmRequest(boot_id=boot, targets_in_slot=True) if boot else None


class Ring:
    """An offered ring, mapped. Batches in slots are arrays on the mapping;
    a slot is released when its batch's array is garbage."""

    def __init__(self, offer: pb.ShmOffer) -> None:
        self.slots = int(offer.slots)
        self.slot_bytes = int(offer.slot_bytes)
        size = self.slots * self.slot_bytes
        fd = _fetch(offer.socket, bytes(offer.token))
        try:
            st = os.fstat(fd)
            if st.st_size != size:
                raise OSError(f"the ring's memfd has {st.st_size} bytes, the offer says {size}")
            # The mapping keeps the memory; the descriptor is not needed.
            self._mm = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(fd)
        self._lock = threading.Lock()
        self._released: List[int] = []
        self._held = [False] * self.slots

    def batch(self, slot: int, n: int) -> np.ndarray:
        """The uint8 array of the first ``n`` bytes of ``slot``, where a
        batch lies (its pixels, and its targets' arrays after them when they
        came there): its slot is released once the array, and every tensor
        and view made from it, is garbage."""
        if slot >= self.slots or n > self.slot_bytes:
            raise ValueError(f"batch of {n} bytes in slot {slot} of a ring of {self.slots} slots of {self.slot_bytes}")
        with self._lock:
            if self._held[slot]:
                raise ValueError(f"slot {slot} sent again before it was released")
            self._held[slot] = True
        a = np.frombuffer(self._mm, np.uint8, n, offset=slot * self.slot_bytes)
        weakref.finalize(a, self._release, slot)
        return a

    def _release(self, slot: int) -> None:
        # From whichever thread drops the last reference.
        with self._lock:
            self._held[slot] = False
            self._released.append(slot)

    def collect(self) -> List[int]:
        """The slots released since the last call (for the next credit)."""
        with self._lock:
            out, self._released = self._released, []
        return out


class _Cut(OSError):
    """The server closed a handshake unanswered: worth another try."""


def _fetch(name: str, token: bytes) -> int:
    """The ring's memfd, from the server's abstract socket ``name``. A
    handshake the server cut unanswered is tried again for up to
    :data:`_FETCH_PATIENCE` seconds; no socket there (another network
    namespace) or a refused token is not."""
    deadline = time.monotonic() + _FETCH_PATIENCE
    wait = 0.002
    while True:
        try:
            return _fetch_once(name, token)
        except (_Cut, ConnectionResetError, BrokenPipeError, BlockingIOError):
            if time.monotonic() > deadline:
                raise
        time.sleep(wait)
        wait = min(2 * wait, 0.1)


def _fetch_once(name: str, token: bytes) -> int:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(_HANDSHAKE_TIMEOUT)
        s.connect("\0" + name)
        s.sendall(token)
        msg, fds, _, _ = socket.recv_fds(s, 1, 1)
        if msg != b"\x01" or len(fds) != 1:
            for fd in fds:
                os.close(fd)
            if msg == b"\x00":
                raise OSError("the server refused the token")
            raise _Cut("the server closed the handshake")
        return fds[0]
