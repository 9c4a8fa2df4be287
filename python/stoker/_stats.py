"""What a Loader counts and reports over its life: running totals
(:class:`LoaderStats`) and the undecodable samples the server reported
(listed once each, warned about once)."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import List, Sequence, Set, Tuple

from stoker._errors import SampleError
from stoker.v1 import stoker_pb2 as pb

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
    #: Samples reported undecodable (each occurrence, every epoch).
    sample_errors: int = 0
    #: Batches whose pixels came in a shared-memory slot (same-host
    #: delivery), not in gRPC chunks.
    shm_batches: int = 0


@dataclass
class Tally:
    """A Loader's :class:`LoaderStats` and its list of sample errors."""

    fail_policy: str
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
            self._errors(header.errors)

    def _errors(self, errors: Sequence[pb.SampleError]) -> None:
        self.stats.sample_errors += len(errors)
        for e in errors:
            key = (int(e.index), e.name, e.reason)
            if key not in self._seen:
                self._seen.add(key)
                self.sample_errors.append(SampleError(*key))
        if not self._warned:
            self._warned = True
            e = errors[0]
            warnings.warn(
                f"stoker: the server could not make sample {e.index} ({e.name}): {e.reason}; its slot was "
                f"filled by the {self.fail_policy!r} policy. All such samples are listed in loader.sample_errors "
                "(this warning is shown once)",
                RuntimeWarning,
                stacklevel=4,  # the trainer's loop: _errors, batch, Loader._run, the loop
            )
