"""What stoker.gpu's batch ops share: each call's generator drawn from the
op's seed and the batch's key ``(epoch, number)``, and the check of the
images they take."""

from __future__ import annotations

import itertools
from typing import Any, Optional, Tuple

import numpy as np

from stoker import _args

__all__ = ["Key", "Seeded", "check_images"]

Key = Tuple[int, int]

_U64 = (1 << 64) - 1


class Seeded:
    """Per-call generators from (seed, key)."""

    def __init__(self, seed: int) -> None:
        self.seed = _args.integer("seed", seed, 0, _U64)
        self._calls = itertools.count()

    def _key(self, key: Optional[Key], batch: Any) -> Key:
        """The call's key: ``batch``'s (epoch, number), or ``key``, or,
        with neither, (-1, the op's own count of calls)."""
        if batch is not None:
            if key is not None:
                raise TypeError("give key or batch, not both")
            if getattr(batch, "epoch", None) is None or getattr(batch, "number", None) is None:
                raise ValueError("batch has no epoch and number (a stoker.Batch from a Loader has them)")
            return (batch.epoch, batch.number)
        if key is None:
            return (-1, next(self._calls))
        if not isinstance(key, (tuple, list)) or len(key) != 2:
            raise TypeError(f"key must be a pair (epoch, batch number), got {key!r}")
        return (key[0], key[1])

    def _rng_of(self, salt: int, key: Key) -> np.random.Generator:
        words = [self.seed, salt] + [_args.integer("key", k, -(1 << 63), _U64) & _U64 for k in key]
        return np.random.default_rng(np.random.SeedSequence(words))

    def _rng(self, salt: int, key: Optional[Key], batch: Any) -> np.random.Generator:
        return self._rng_of(salt, self._key(key, batch))


def check_images(images: Any) -> Tuple[int, int, int]:
    """(B, H, W) of a [B, C, H, W] float or uint8 tensor; a channels-last
    batch is refused, not taken for another shape."""
    import torch

    if not isinstance(images, torch.Tensor) or images.dim() != 4:
        raise TypeError(f"images must be a [B, C, H, W] tensor, got {type(images).__name__} "
                        f"{tuple(getattr(images, 'shape', ()))}")
    if not (images.is_floating_point() or images.dtype == torch.uint8):
        raise TypeError(f"images must be float or uint8, got {images.dtype}")
    b, c, h, w = images.shape
    if w == 3 and c not in (1, 3):
        # What Loader(layout="NHWC") yields: mixed as [B, C, H, W], its
        # rows would be taken for channels and its channels for columns.
        raise ValueError(f"images of shape {tuple(images.shape)} are channels-last [B, H, W, 3] (Loader(layout=\"NHWC\")); "
                         f"stoker.gpu's ops take [B, C, H, W]: pass images.permute(0, 3, 1, 2), a view (no copy), "
                         f"and permute the result back if you want it channels-last")
    return int(b), int(h), int(w)
