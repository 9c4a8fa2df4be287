"""What a Loader counts and reports over its life: running totals
(:class:`LoaderStats`) and the undecodable samples the server reported
(listed once each, warned about once)."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, List, Optional, Set, Tuple

from stoker._errors import SampleError
from stoker.v1 import stoker_pb2 as pb

if TYPE_CHECKING:  # pragma: no cover
    from stoker._serve import LocalServerInfo

__all__ = ["LoaderStats", "Tally"]


@dataclass
class LoaderStats:
    """Running totals over a Loader's life (all epochs)."""

    batches: int = 0
    samples: int = 0
    #: Seconds the trainer spent blocked in ``next()`` waiting for batches.
    wait_seconds: float = 0.0
    #: Bytes of pixels received.
    bytes: int = 0
    #: Samples that failed by their own fault (a file that does not decode,
    #: is missing or changed), each occurrence, every epoch: padded or
    #: dropped by the fail policy.
    sample_errors: int = 0
    #: Batches yielded smaller than asked because the ``"drop"`` policy
    #: left failed samples out (a rank's last batch, short by the epoch's
    #: end, is not counted).
    short_batches: int = 0
    #: Batches whose pixels came in a shared-memory slot (same-host
    #: delivery), not in gRPC chunks.
    shm_batches: int = 0
    #: The local default's server (``Loader(path)``): its address, pid,
    #: workers, the CPUs it runs on and its log; None for a server someone
    #: runs.
    local_server: Optional["LocalServerInfo"] = None


@dataclass
class Tally:
    """A Loader's :class:`LoaderStats` and its list of sample errors."""

    #: "pad", "drop", or None: the server's (pad; drop where the batch
    #: has records of several images).
    fail_policy: Optional[str]
    stats: LoaderStats = field(default_factory=LoaderStats)
    sample_errors: List[SampleError] = field(default_factory=list)
    _seen: Set[Tuple[int, str, str]] = field(default_factory=set)
    _warned: bool = False

    def batch(self, header: pb.BatchHeader) -> None:
        """Counts a batch taken by the trainer, and its sample errors."""
        st = self.stats
        st.batches += 1
        st.samples += int(header.shape[0]) if header.shape else 0
        st.bytes += int(header.data_bytes)
        if header.HasField("slot"):
            st.shm_batches += 1
        if header.errors:
            if self._policy(header) == "drop":
                st.short_batches += 1
            self._errors(header)

    def _policy(self, header: pb.BatchHeader) -> str:
        """The fail policy that made header's batch."""
        if self.fail_policy is not None:
            return self.fail_policy
        return "drop" if len(header.records) else "pad"

    def _errors(self, header: pb.BatchHeader) -> None:
        errors = header.errors
        self.stats.sample_errors += len(errors)
        for e in errors:
            key = (int(e.index), e.name, e.reason)
            if key not in self._seen:
                self._seen.add(key)
                self.sample_errors.append(SampleError(*key))
        if not self._warned:
            self._warned = True
            e = errors[0]
            n = int(header.shape[0]) if header.shape else 0
            if self._policy(header) == "drop":
                did = (f"the 'drop' policy left {_them(len(errors))} out: the batch has {n} samples, not "
                       f"{n + len(errors)}")
            else:
                did = (f"the 'pad' policy filled {_their(len(errors))} with copies of good samples of the same batch "
                       f"(their labels and indices too)")
            warnings.warn(
                f"stoker: {len(errors)} of batch {header.number}'s samples could not be made, first sample "
                f"{e.index} ({e.name}): {e.reason}; {did}. Every such sample is listed in loader.sample_errors and "
                "counted in loader.stats (this warning is shown once); an epoch with more than max_sample_errors of "
                "them fails",
                RuntimeWarning,
                stacklevel=4,  # the trainer's loop: _errors, batch, Loader._run, the loop
            )


def _them(n: int) -> str:
    return "it" if n == 1 else "them"


def _their(n: int) -> str:
    return "its slot" if n == 1 else "their slots"
