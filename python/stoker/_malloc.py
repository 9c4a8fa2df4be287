"""glibc malloc tuning for the receiving process (see :func:`tune_malloc`)."""

from __future__ import annotations

import os
import sys

__all__ = ["tune_malloc"]

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
