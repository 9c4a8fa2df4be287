"""Which share of the epoch a Loader takes when ``rank`` and ``world_size``
are not given: the initialized ``torch.distributed`` group's, else torchrun's
``RANK`` and ``WORLD_SIZE`` environment, else rank 0 of 1 (as
DistributedSampler, which asks the group). Given values win. The choice is
logged in one line (logger ``"stoker"``): INFO, or WARNING when a given
value differs from what the group or the environment says.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any, Optional, Tuple

__all__ = ["resolve", "detected"]

log = logging.getLogger("stoker")


def _from_group() -> Optional[Tuple[int, int]]:
    # No group can be initialized in a process that never imported
    # torch.distributed: no need to import torch for the answer.
    dist = sys.modules.get("torch.distributed")
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return None
    return int(dist.get_rank()), int(dist.get_world_size())


def _env_int(name: str) -> int:
    v = os.environ[name]
    try:
        return int(v)
    except ValueError:
        raise ValueError(f"stoker.Loader: {name}={v!r} in the environment is not an integer "
                         "(pass rank= and world_size= to the Loader)") from None


def _from_env() -> Optional[Tuple[int, int]]:
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        return None
    return _env_int("RANK"), _env_int("WORLD_SIZE")


def detected() -> Tuple[Optional[Tuple[int, int]], str]:
    """(rank, world size) of the initialized torch.distributed group or of
    torchrun's environment, and where they came from; (None, why not)."""
    group = _from_group()
    if group is not None:
        return group, "the initialized torch.distributed group"
    env = _from_env()
    if env is not None:
        return env, "the RANK and WORLD_SIZE environment variables (torchrun)"
    return None, "no torch.distributed group is initialized and RANK/WORLD_SIZE are not set"


def resolve(rank: Any, world_size: Any) -> Tuple[Any, Any]:
    """``rank`` and ``world_size``, each None filled in from the group or
    the environment (else 0 and 1), and the one log line that says so."""
    found, source = detected()
    r = rank if rank is not None else (found[0] if found else 0)
    w = world_size if world_size is not None else (found[1] if found else 1)
    level = logging.INFO
    if rank is not None and world_size is not None:
        how = "given"
        if found is not None and found != (rank, world_size):
            how += f"; {source} says rank {found[0]} of {found[1]}"
            level = logging.WARNING
    elif rank is None and world_size is None:
        how = f"from {source}" if found else f"the default: {source}"
    else:
        given = "rank" if rank is not None else "world_size"
        other = "world_size" if rank is not None else "rank"
        how = f"{given} given, {other} from {source}" if found else f"{given} given, {other} by default: {source}"
    log.log(level, "stoker.Loader: rank %s of world_size %s (%s)", r, w, how)
    return r, w
