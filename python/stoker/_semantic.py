"""The semantic mask torchvision's segmentation references train on, made
from a sample's instance masks and labels as their COCO loader makes it
(references/segmentation/coco_utils.py: FilterAndRemapCategories, then
ConvertCocoPolysToMask), after the geometry: their loader makes it from the
source's instances and the transform moves it; the geometry's nearest
resizes, crops, pads and flips move each pixel of it with the instances'
pixels, so the one made from the moved instances is the same map, and
where a pad (a rotation, an affine) filled, every instance's mask holds the
fill, which the map takes."""

from __future__ import annotations

from typing import Any, Sequence

#: The references' CAT_LIST: the COCO category ids of Pascal VOC's 21
#: classes, background (0) first; a category's class is its place here.
VOC_CATEGORIES = (0, 5, 2, 16, 9, 44, 6, 3, 17, 62, 21, 67, 18, 19, 4, 1, 64, 20, 63, 7, 72)


def semantic_mask(masks: Any, labels: Any, values: Sequence[int], ignore_index: int = 255) -> Any:
    """One sample's semantic mask, tv_tensors.Mask [H, W] uint8, from its
    ``masks`` (tv_tensors.Mask [K, H, W], ``Loader(targets=(..., "labels",
    "masks"))``) and ``labels`` (int64 [K]): each instance's pixels (1 in
    its mask) take ``values[label]`` (0..255; -1: the instance is left out,
    as FilterAndRemapCategories drops a category not in its list), the
    largest where several fall (their ``max``), ``ignore_index`` where more
    than one instance left in covers the pixel; 0 elsewhere; and where a
    Mask fill filled every instance (PadIfSmaller's 255, say), that fill.

    The references' COCO map: with the labels a COCO set gives by
    default (its category ids, as torchvision's wrapper), ``values =
    range(max_id + 1)`` (each id its own class), or, remapped to VOC's
    classes as their training does, ``[VOC_CATEGORIES.index(c) if c in
    VOC_CATEGORIES else -1 for c in range(max_id + 1)]``; with
    ``Loader(labels="contiguous")``, index by rank instead (``ids =
    sorted(c["id"] for c in categories)``, ``values = ids``). A sample of no instance has no fill to take (zeros; the
    references drop such images from their training set), and a fill of 1
    is an instance's pixel."""
    import torch
    from torchvision import tv_tensors

    m = masks.as_subclass(torch.Tensor) if isinstance(masks, torch.Tensor) else torch.as_tensor(masks)
    if m.dim() != 3 or m.dtype != torch.uint8:
        raise ValueError(f"semantic_mask: masks of shape {tuple(m.shape)} and {m.dtype}: want uint8 [K, H, W]")
    k, h, w = m.shape
    labels = torch.as_tensor(labels, dtype=torch.int64)
    vals = torch.as_tensor(list(values), dtype=torch.int64)
    if labels.shape != (k,):
        raise ValueError(f"semantic_mask: {tuple(labels.shape)} labels for {k} masks")
    if vals.dim() != 1 or (len(vals) and (vals.min() < -1 or vals.max() > 255)):
        raise ValueError("semantic_mask: values are a class 0..255 (or -1: left out) for each label")
    if k and (labels.min() < 0 or labels.max() >= len(vals)):
        raise ValueError(f"semantic_mask: labels up to {int(labels.max())}, values for {len(vals)}")
    if not 0 <= ignore_index <= 255:
        raise ValueError(f"semantic_mask: ignore_index {ignore_index}: want 0..255 (a uint8 Mask's value)")
    sem = torch.zeros(h, w, dtype=torch.uint8)
    if not k:
        return tv_tensors.Mask(sem)
    v = vals[labels]
    keep = v >= 0
    inst = m[keep] == 1
    if inst.shape[0]:
        sem = (inst.to(torch.uint8) * v[keep].to(torch.uint8)[:, None, None]).amax(0)
        sem[inst.sum(0) > 1] = ignore_index
    fill = m.amax(0)  # a fill's value in every instance's mask (0 and 1: none)
    filled = fill > 1
    sem[filled] = fill[filled]
    return tv_tensors.Mask(sem)
