"""stoker.Mix: one job over several datasets, drawn by weight."""

import math
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from stoker import _args
from stoker.v1 import stoker_pb2 as pb

__all__ = ["Mix", "MAX_MIX_DATASETS"]

#: The most datasets one mix may name (the server's limit too).
MAX_MIX_DATASETS = 64


class Mix:
    """Several datasets the server serves, mixed by weight into one job:
    ``stoker.Loader(addr, stoker.Mix({"laion": 0.7, "cc12m": 0.3}), ...)``.

    An epoch has ``samples`` positions (None: the datasets' sizes added
    up), split over the datasets in proportion to their weights, each
    dataset's count within one sample of its exact share; the global
    shuffle (``shuffle=True``) interleaves them, so each batch draws from
    every dataset by weight. Under the block shuffle (``shuffle="block"``,
    sharded datasets) the weights share the epoch's shards instead, and
    windows of shards from every dataset are mixed (shard-level mixing, as
    open_clip's); the share of samples then follows the weights as far as
    the datasets' shards hold as many samples. A dataset drawn more often than it
    has samples goes round again, each round in a fresh order; one drawn
    less often takes a different random subset each epoch. Deterministic
    from the seed: exactly once per epoch position, resumable, ranks
    disjoint, peers and cache affinity as for one dataset. Where a dataset
    has records of several images (a conversation file's, WebDataset
    samples of numbered images), the mix counts records: ``samples`` and
    the shares are records, each drawn whole (docs/vlm.md).

    Each sample's label is its own dataset's (mixing datasets of different
    label spaces is the caller's business); ``fields=("__source__",)``
    gives each sample's dataset name. Not with ``repeats`` (yet), nor
    ``shuffle=False``.
    """

    def __init__(self, weights: Union[Mapping[str, float], Sequence[Tuple[str, float]]],
                 samples: Optional[int] = None) -> None:
        items = list(weights.items()) if isinstance(weights, Mapping) else list(weights)
        if not items:
            raise ValueError("Mix needs at least one dataset and its weight")
        if len(items) > MAX_MIX_DATASETS:
            raise ValueError(f"Mix of {len(items)} datasets: the limit is {MAX_MIX_DATASETS}")
        parts: List[Tuple[str, float]] = []
        for item in items:
            if not isinstance(item, tuple) or len(item) != 2:
                raise TypeError(f"Mix takes a dict of dataset name to weight, or (name, weight) pairs; got {item!r}")
            name = _args.string("Mix dataset name", item[0])
            w = item[1]
            if isinstance(w, bool) or not isinstance(w, (int, float)):
                raise TypeError(f"Mix weight of {name!r} must be a number, got {type(w).__name__}")
            if not math.isfinite(w) or w <= 0:
                raise ValueError(f"Mix weight of {name!r} is {w}: want a finite weight > 0")
            if any(name == n for n, _ in parts):
                raise ValueError(f"Mix names dataset {name!r} twice: give it one weight")
            parts.append((name, float(w)))
        self.parts: Tuple[Tuple[str, float], ...] = tuple(parts)
        self.samples = None if samples is None else _args.integer("Mix samples", samples, 1, 1 << 40)

    @property
    def weights(self) -> Dict[str, float]:
        """The weights by dataset name, as given."""
        return dict(self.parts)

    def key(self) -> str:
        """What identifies the mix in a state_dict: its datasets, weights
        and epoch length."""
        inner = ",".join(f"{n}={w!r}" for n, w in self.parts)
        return f"mix({inner};samples={self.samples or 0})"

    def to_proto(self) -> List[Any]:
        return [pb.MixPart(dataset=n, weight=w) for n, w in self.parts]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mix) and other.parts == self.parts and other.samples == self.samples

    def __hash__(self) -> int:
        return hash((self.parts, self.samples))

    def __repr__(self) -> str:
        extra = "" if self.samples is None else f", samples={self.samples}"
        return f"Mix({dict(self.parts)!r}{extra})"
