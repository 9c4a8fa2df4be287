"""stoker: augmented image batches from a Go service, as torch tensors.

    import stoker
    from stoker import transforms as T

    loader = stoker.Loader("gpu-host:7070", "imagenet", transform="imagenet-train",
                           batch_size=256, rank=rank, world_size=world)
    for epoch in range(epochs):
        loader.set_epoch(epoch)
        for images, labels in loader:            # uint8 [B, 3, 224, 224], int64 [B]
            images = stoker.normalize(images.cuda(non_blocking=True))

The public surface: :class:`Loader`, :class:`Dataset` (a torch
IterableDataset), :mod:`transforms`, :func:`normalize`, :class:`StokerError`,
:func:`list_datasets` (of :class:`DatasetInfo`), :class:`Batch` (what a Loader yields),
:func:`semantic_mask` (the segmentation references' map of a sample's instances). ``torch`` is imported when batches are made, or when
``stoker.Dataset`` is first used.
"""

from typing import Any

from stoker import transforms
from stoker._batch import Batch
from stoker._mix import Mix
from stoker._semantic import VOC_CATEGORIES, semantic_mask
from stoker.loader import DatasetInfo, Loader, LoaderStats, SampleError, StokerError, list_datasets
from stoker.transforms import normalize

__all__ = [
    "Loader",
    "Batch",
    "Dataset",
    "Mix",
    "transforms",
    "normalize",
    "StokerError",
    "SampleError",
    "LoaderStats",
    "list_datasets",
    "DatasetInfo",
    "semantic_mask",
    "VOC_CATEGORIES",
]

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    # Dataset subclasses torch's IterableDataset, so importing it imports
    # torch: done on first use, not on `import stoker`.
    if name == "Dataset":
        from stoker.dataset import Dataset

        return Dataset
    raise AttributeError(f"module 'stoker' has no attribute {name!r}")
