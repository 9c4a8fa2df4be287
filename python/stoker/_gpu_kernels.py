"""The pixel work of stoker.gpu: kernels that apply per-sample parameters
already drawn (stoker.gpu's classes draw them), on any device, vectorized
over the batch: a fixed few passes over it, no Python loop over its
samples; only erasing on CPU tensors writes box by box, which is faster
there (see erase_strategy).

Sample i's partner is sample i - 1 (the first's the last), as
torchvision's ``roll(1, 0)`` has it; the kernels read the partner as a
shifted view of the batch instead of a rolled copy.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

import numpy as np


def box_mask(boxes: np.ndarray, h: int, w: int, device: Any) -> Any:
    """A bool ``[B, 1, H, W]`` mask, true inside each sample's box
    ``(x1, y1, x2, y2)`` (half-open; an empty box masks nothing): built
    from two ``[B, H]`` and ``[B, W]`` comparisons, not a loop."""
    import torch

    t = torch.as_tensor(np.asarray(boxes, dtype=np.int64), device=device)
    rows = torch.arange(h, device=device)
    cols = torch.arange(w, device=device)
    in_rows = (rows >= t[:, 1:2]) & (rows < t[:, 3:4])
    in_cols = (cols >= t[:, 0:1]) & (cols < t[:, 2:3])
    return (in_rows[:, :, None] & in_cols[:, None, :])[:, None]


def _with_previous(op: Callable[..., Any], x: Any, arg: Any, out: Any) -> None:
    """out[i] = op(x[i - 1], x[i], arg[i]) in two calls, the partner a view
    of the batch: the first sample's partner is the last."""
    op(x[-1:], x[:1], arg[:1], out[:1])
    if x.shape[0] > 1:
        op(x[:-1], x[1:], arg[1:], out[1:])


def _lerp(prev: Any, cur: Any, weight: Any, out: Any) -> None:
    # lerp(a, b, 1) is b and lerp(a, b, 0) is a, exactly: torch computes
    # b - (b - a) * (1 - w) for w >= 0.5, a + (b - a) * w below.
    import torch

    torch.lerp(prev, cur, weight, out=out)


def _where(prev: Any, cur: Any, mask: Any, out: Any) -> None:
    import torch

    torch.where(mask, prev, cur, out=out)


def mix(images: Any, weight: np.ndarray, boxes: Optional[np.ndarray]) -> Any:
    """Sample i as ``weight_i`` of itself and ``1 - weight_i`` of sample
    i - 1, with sample i - 1's pixels inside box i (``(x1, y1, x2, y2)``,
    empty where none; boxes None: none at all). ``weight_i`` is 1 where a
    sample is not blended. One pass over the batch: a lerp with per-sample
    weights (MixUp), a select by the boxes' mask (CutMix, exact in any
    dtype), or a lerp with per-pixel weights where a batch has both
    (RandomChoice). uint8 images are blended in float32 and rounded."""
    import torch

    b, _, h, w = images.shape
    dev = images.device
    has_box = boxes is not None and bool(((boxes[:, 2] > boxes[:, 0]) & (boxes[:, 3] > boxes[:, 1])).any())
    blended = bool((weight < 1.0).any())
    if b == 0 or not (has_box or blended):
        return images.clone()
    if not blended:
        out = torch.empty_like(images)
        _with_previous(_where, images, box_mask(boxes, h, w, dev), out)
        return out
    x = images if images.is_floating_point() else images.to(torch.float32)
    wt = torch.as_tensor(weight, dtype=torch.float32, device=dev).view(b, 1, 1, 1)
    if has_box:
        wt = torch.where(box_mask(boxes, h, w, dev), 0.0, wt)  # [B, 1, H, W]
    out = torch.empty_like(x)
    _with_previous(_lerp, x, wt.to(x.dtype), out)
    if images.dtype == torch.uint8:
        out = out.round_().clamp_(0, 255).to(torch.uint8)
    return out


def erase(images: Any, boxes: np.ndarray, value: Optional[Sequence[float]], generator: Any, inplace: bool) -> Any:
    """Each sample's box ``(i, j, h, w)`` (h or w 0: not erased) filled
    with ``value`` (1 or C numbers) or, value None, standard normal noise
    drawn from ``generator`` (float32, cast to the images' dtype); out of
    place, the batch is copied first. How the erased pixels are written is
    :func:`erase_strategy`'s choice."""
    out = images if inplace else images.clone()
    sel = np.nonzero(boxes[:, 2] * boxes[:, 3] > 0)[0]
    if len(sel) == 0:
        return out
    strategy = erase_strategy(out, boxes[sel], value is None)
    if strategy == "loop":
        _erase_loop(out, sel, boxes[sel], value, generator)
    elif strategy == "rows":
        _erase_rows(out, sel, boxes[sel], value, generator)
    else:
        _erase_masked(out, boxes, value, generator)
    return out


#: Forces erase's strategy ("loop", "rows" or "mask") where not None: for
#: the tests, which run every strategy on CPU, and bench/gpu_ops.py.
STRATEGY: Optional[str] = None

# A pixel of the box rows' indexed store costs about as much as this many
# of the whole batch's masked writes (twice as many for noise, drawn for
# each padded pixel and gathered); measured on one CPU core, where the
# store is slow (about 7 ns an element).
_ROWS_OVER_MASK = 10


def erase_strategy(images: Any, boxes: np.ndarray, noise: bool) -> str:
    """How to write the erased pixels of ``boxes`` (the erased samples'):

    - ``"loop"`` on CPU tensors: a slice write per box. On a CPU a box is a
      few strided memsets, and the loop's cost is its pixels plus a few
      microseconds a box; every vectorized store below costs more (an
      index computed and followed per pixel, or the whole batch's mask
      read): measured 0.5 ms against 10 to 40 ms for a batch of 256 at
      p = 0.25 (bench/gpu_ops.py --strategy).
    - ``"rows"`` elsewhere, for few or small boxes: one indexed store over
      each box row's pixels, padded to the widest box.
    - ``"mask"`` elsewhere, for many or large ones: masked writes over the
      whole batch by the boxes' mask, a channel at a time.

    The Python loop is over the erased samples and on CPU alone: on a GPU
    each write would be a kernel launch, and the vectorized stores are a
    fixed few."""
    if STRATEGY is not None:
        return STRATEGY
    if images.device.type == "cpu":
        return "loop"
    b, _, h, w = images.shape
    rows, widest = int(boxes[:, 2].sum()), int(boxes[:, 3].max())
    return "rows" if rows * widest * _ROWS_OVER_MASK * (2 if noise else 1) < b * h * w else "mask"


def _noise(out: Any, total: int, generator: Any) -> Any:
    """[C, total] standard normals, drawn in float32, in out's dtype."""
    import torch

    c = out.shape[1]
    return torch.randn((c, total), generator=generator, device=out.device, dtype=torch.float32).to(out.dtype)


def _erase_loop(out: Any, sel: np.ndarray, boxes: np.ndarray, value: Optional[Sequence[float]],
                generator: Any) -> None:
    """A slice write per box (CPU tensors)."""
    import torch

    c = out.shape[1]
    n = boxes[:, 2] * boxes[:, 3]
    if value is None:
        noise, at = _noise(out, int(n.sum()), generator), 0
    else:
        v = torch.tensor(value, dtype=torch.float32).to(dtype=out.dtype).view(c, 1, 1)
    for s, (i, j, h, w) in zip(sel.tolist(), boxes.tolist()):
        if value is None:
            out[s, :, i:i + h, j:j + w] = noise[:, at:at + h * w].view(c, h, w)
            at += h * w
        else:
            out[s, :, i:i + h, j:j + w] = v


def _erase_rows(out: Any, sel: np.ndarray, boxes: np.ndarray, value: Optional[Sequence[float]],
                generator: Any) -> None:
    """One indexed store of [rows, widest] pixels: box row r of sample s
    gets columns j .. j + widest - 1, those past the box's width pointing
    at its last column again with its value (a repeated index writes the
    same value: deterministic on any device)."""
    import torch

    dev, c = out.device, out.shape[1]
    rows, widest = int(boxes[:, 2].sum()), int(boxes[:, 3].max())
    hs = boxes[:, 2]
    first = np.repeat(np.cumsum(hs) - hs, hs)
    pairs = np.stack([np.repeat(sel, hs), np.repeat(boxes[:, 0], hs) + np.arange(rows) - first,
                      np.repeat(boxes[:, 1], hs), np.repeat(boxes[:, 3], hs)], axis=1)
    t = torch.as_tensor(pairs.astype(np.int64), device=dev)
    k = torch.minimum(torch.arange(widest, device=dev)[None, :], t[:, 3:4] - 1)  # [rows, widest]
    if value is None:
        noise = torch.randn((rows, widest, c), generator=generator, device=dev, dtype=torch.float32)
        vals = noise.gather(1, k[:, :, None].expand(-1, -1, c)).to(out.dtype)
    else:
        vals = torch.tensor(value, dtype=torch.float32).to(device=dev, dtype=out.dtype)
    out[t[:, 0:1], :, t[:, 1:2], t[:, 2:3] + k] = vals  # indexed [rows, widest, C]


def _erase_masked(out: Any, boxes: np.ndarray, value: Optional[Sequence[float]], generator: Any) -> None:
    """Masked writes by the boxes' mask, a channel at a time."""
    import torch

    b, c, h, w = out.shape
    xyxy = np.stack([boxes[:, 1], boxes[:, 0], boxes[:, 1] + boxes[:, 3], boxes[:, 0] + boxes[:, 2]], axis=1)
    mask = box_mask(xyxy, h, w, out.device)[:, 0]  # [B, H, W]
    if value is None:
        # The mask's pixels in order take the noise in order: iid normals,
        # so which goes where does not matter.
        noise = _noise(out, int((boxes[:, 2] * boxes[:, 3]).sum()), generator)
        for ch in range(c):
            out[:, ch].masked_scatter_(mask, noise[ch])
    elif len(set(value)) == 1:
        out.masked_fill_(mask[:, None], value[0])
    else:
        for ch in range(c):
            out[:, ch].masked_fill_(mask, value[ch])
