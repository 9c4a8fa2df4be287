"""stoker.gpu.MultiScale: each batch resized to a size drawn for it, on the
trainer's device, its targets moved with it. ultralytics' ``multi_scale``
(``DetectionTrainer.preprocess_batch``) and D-FINE's (RT-DETR's, DEIM's)
``BatchImageCollateFunction`` in one line each::

    from stoker import gpu
    ms = gpu.MultiScale.ultralytics(imgsz=640, multi_scale=0.5, seed=loader.seed)
    ms = gpu.MultiScale.dfine(base_size=640, base_size_repeat=3, stop_epoch=72, seed=loader.seed)
    for batch in loader:
        images = batch.images.cuda(non_blocking=True).float() / 255
        images, targets = ms(images, batch.targets, batch=batch)

The size is drawn from the op's ``seed`` and the batch's key ``(epoch,
number)`` alone, as stoker.gpu's other ops draw: a resumed epoch resizes
batch k as the uninterrupted run did. Batch numbers count each rank's
batches, so ranks with one seed resize their k-th batches alike (as
mmdetection's BatchSyncRandomResize does); ``seed=loader.seed + rank``
draws per rank, as ultralytics' and D-FINE's per-rank generators do.

The targets are stoker's, in pixels of the batch's canvas, so they follow
the resize as torchvision.transforms.v2.functional.resize moves them:
``boxes`` (BoundingBoxes) and ``keypoints`` (KeyPoints) scaled by the new
width and height over the old, in float32, their ``canvas_size`` the new
one; ``masks`` (Mask) resampled nearest. ultralytics' ``overlap_mask`` is
left as it is, as ultralytics leaves ``batch["masks"]``: its segment loss
takes the mask at its own size (it resamples its prototypes to it).
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from stoker import _args
from stoker._seeded import Key, Seeded, check_images

__all__ = ["MultiScale", "dfine_scales", "ultralytics_sizes"]

_SALT_SCALE = 0x7363616C
_MODES = ("nearest", "bilinear")
_MAX_SIDE = 1 << 15

Size = Union[int, Tuple[int, int]]


def ultralytics_sizes(imgsz: int, multi_scale: float, stride: int) -> List[int]:
    """The sizes ultralytics 8.4's preprocess_batch draws among, one per
    integer its ``random.randrange`` may return (so drawing one of them
    uniformly is its distribution): ``randrange(max(stride, int(imgsz *
    (1 - multi_scale))), int(imgsz * (1 + multi_scale) + stride)) //
    stride * stride``."""
    lo = max(stride, int(imgsz * (1.0 - multi_scale)))
    hi = int(imgsz * (1.0 + multi_scale) + stride)
    if hi <= lo:
        raise ValueError(f"imgsz={imgsz}, multi_scale={multi_scale}, stride={stride} leave no size to draw")
    return [r // stride * stride for r in range(lo, hi)]


def dfine_scales(base_size: int, base_size_repeat: int) -> List[int]:
    """D-FINE's ``generate_scales``: from 0.75 to 1.25 of ``base_size`` in
    steps of 32, ``base_size`` itself ``base_size_repeat`` times among
    them (640, 3: 480, 512, ..., 608, 640 x3, 800, 768, ..., 672)."""
    low = int(base_size * 0.75 / 32) * 32
    high = int(base_size * 1.25 / 32) * 32
    n = (base_size - low) // 32
    return [low + i * 32 for i in range(n)] + [base_size] * base_size_repeat + [high - i * 32 for i in range(n)]


def _side(name: str, v: Any) -> int:
    return _args.integer(name, v, 1, _MAX_SIDE)


class MultiScale(Seeded):
    """Resizes a batch ``[B, C, H, W]`` to a size drawn for the batch,
    uniformly among ``sizes`` (a size listed twice is drawn twice as
    often), with ``torch.nn.functional.interpolate(images, size, mode=mode)``
    (``align_corners=False`` for bilinear), and its targets with it.

    - ``stride=None``: the drawn size is the batch's new size, a side
      ``s`` meaning ``(s, s)`` or a pair ``(h, w)`` (D-FINE's ``size=sz``);
    - ``stride=n``: a drawn side ``s`` is the new longer side: with ``f =
      s / max(H, W)``, each side becomes ``ceil(side * f / n) * n``, and
      nothing is done where ``f == 1`` (ultralytics' rule).

    ``stop_epoch``: from that epoch on (``epoch >= stop_epoch``, counted from
    0 as the Loader's) batches are left as they are, as D-FINE's collate
    stops; None never stops.

    Images are float (the references' own: ultralytics divides by 255
    first, D-FINE's images are in [0, 1]) or uint8: nearest on uint8 is the
    same pixels, bilinear is done in float32 and rounded back. A batch of
    per-sample sizes (``batch.sizes``, padded) is refused, and so are
    channels-last images.
    """

    def __init__(self, sizes: Sequence[Size], *, mode: str = "nearest", stride: Optional[int] = None,
                 stop_epoch: Optional[int] = None, seed: int = 0) -> None:
        super().__init__(seed)
        if not isinstance(mode, str) or mode not in _MODES:
            raise ValueError(f"mode must be one of {', '.join(_MODES)}, got {mode!r}")
        self.mode = mode
        self.stride = None if stride is None else _args.integer("stride", stride, 1, 1 << 10)
        if stop_epoch is not None:
            stop_epoch = _args.integer("stop_epoch", stop_epoch, 0, 1 << 31)
            if stop_epoch == 0:
                raise ValueError("stop_epoch=0 would never resize: leave MultiScale out instead")
        self.stop_epoch = stop_epoch
        if isinstance(sizes, (str, bytes)) or not isinstance(sizes, Sequence) or not sizes:
            raise TypeError(f"sizes must be a non-empty list of sides or (height, width) pairs, got {sizes!r}")
        out: List[Tuple[int, int]] = []
        for s in sizes:
            if isinstance(s, (tuple, list)):
                if self.stride is not None:
                    raise ValueError(f"sizes: with a stride a size is the longer side, one number; got {s!r}")
                if len(s) != 2:
                    raise ValueError(f"sizes: a pair (height, width) or one side, got {s!r}")
                out.append((_side("sizes' height", s[0]), _side("sizes' width", s[1])))
            else:
                v = _side("sizes", s)
                out.append((v, v))
        self.sizes: Tuple[Tuple[int, int], ...] = tuple(out)

    @classmethod
    def ultralytics(cls, *, multi_scale: float, imgsz: int = 640, stride: int = 32, stop_epoch: Optional[int] = None,
                    seed: int = 0) -> "MultiScale":
        """ultralytics 8.4's ``multi_scale`` (``DetectionTrainer.preprocess_batch``):
        the longer side drawn from ``imgsz * (1 +- multi_scale)`` rounded
        down to the stride (:func:`ultralytics_sizes`), each side then
        stretched to a multiple of ``stride`` (the model's largest, at least
        32), bilinear. ``multi_scale`` is its fraction of ``imgsz`` (its
        default 0.0 is off: leave MultiScale out)."""
        imgsz = _side("imgsz", imgsz)
        stride = _args.integer("stride", stride, 1, 1 << 10)
        if isinstance(multi_scale, bool) or not isinstance(multi_scale, (int, float)) or not math.isfinite(multi_scale):
            raise TypeError(f"multi_scale must be a number, got {multi_scale!r}")
        if not 0.0 < multi_scale <= 1.0:
            raise ValueError(f"multi_scale must be in (0, 1], a fraction of imgsz, got {multi_scale!r}")
        return cls(ultralytics_sizes(imgsz, float(multi_scale), stride), mode="bilinear", stride=stride,
                   stop_epoch=stop_epoch, seed=seed)

    @classmethod
    def dfine(cls, *, base_size: int = 640, base_size_repeat: int = 3, stop_epoch: Optional[int] = None,
              seed: int = 0) -> "MultiScale":
        """D-FINE's (and DEIM's) ``BatchImageCollateFunction(base_size,
        base_size_repeat, stop_epoch)``: a square side drawn among
        :func:`dfine_scales`, nearest; its configs stop at 72 (L, X) or
        120. RT-DETR's older ``scales`` list is ``MultiScale(scales + [640]
        * 3)``."""
        base_size = _side("base_size", base_size)
        repeat = _args.integer("base_size_repeat", base_size_repeat, 0, 1 << 10)
        return cls(dfine_scales(base_size, repeat), mode="nearest", stop_epoch=stop_epoch, seed=seed)

    def _new_size(self, h: int, w: int, pick: Tuple[int, int]) -> Optional[Tuple[int, int]]:
        if self.stride is None:
            return None if pick == (h, w) else pick
        sf = pick[0] / max(h, w)
        if sf == 1:
            return None
        # As ultralytics writes it, for the same float rounding.
        nh, nw = (math.ceil(x * sf / self.stride) * self.stride for x in (h, w))
        return None if (nh, nw) == (h, w) else (nh, nw)

    def _pick(self, key: Optional[Key], batch: Any) -> Optional[Tuple[int, int]]:
        k = self._key(key, batch)
        if self.stop_epoch is not None and k[0] >= self.stop_epoch:
            return None
        return self.sizes[int(self._rng_of(_SALT_SCALE, k).integers(len(self.sizes)))]

    def draw(self, *, key: Optional[Key] = None, batch: Any = None) -> Optional[Size]:
        """The size drawn at this key, as ``sizes`` has it (a side, or a
        (height, width) pair); None from ``stop_epoch`` on."""
        pick = self._pick(key, batch)
        return None if pick is None else pick[0] if pick[0] == pick[1] else pick

    def size(self, h: int, w: int, *, key: Optional[Key] = None, batch: Any = None) -> Optional[Tuple[int, int]]:
        """The new (height, width) of a batch of ``h`` x ``w`` images at
        this key, or None where the batch stays as it is (stopped, or drawn
        its own size)."""
        pick = self._pick(key, batch)
        return None if pick is None else self._new_size(h, w, pick)

    def __call__(self, images: Any, targets: Optional[Sequence[Dict[str, Any]]] = None, *,
                 key: Optional[Key] = None, batch: Any = None) -> Tuple[Any, Optional[List[Dict[str, Any]]]]:
        """The images resized to the batch's drawn size, and the targets
        (a dict per sample, as ``Batch.targets``; None: none) moved with
        them in new dicts; both as given where the batch stays."""
        b, h, w = check_images(images)
        if batch is not None and getattr(batch, "sizes", None) is not None:
            raise ValueError("a batch of per-sample sizes (padded to its largest) cannot be resized as one: "
                             "MultiScale takes batches of one size")
        if targets is not None and len(targets) != b:
            raise ValueError(f"{len(targets)} targets for {b} images")
        new = self.size(h, w, key=key, batch=batch)
        if new is None:
            return images, None if targets is None else list(targets)
        out = resize_images(images, new, self.mode)
        if targets is None:
            return out, None
        return out, [resize_target(t, (h, w), new) for t in targets]

    def __repr__(self) -> str:
        sides = [s[0] if s[0] == s[1] else s for s in self.sizes]
        if len(sides) > 8:
            shown = f"[{', '.join(map(str, sides[:4]))}, ... {len(sides)} sizes]"
        else:
            shown = repr(sides)
        return (f"MultiScale({shown}, mode={self.mode!r}, stride={self.stride}, stop_epoch={self.stop_epoch}, "
                f"seed={self.seed})")


def resize_images(images: Any, size: Tuple[int, int], mode: str) -> Any:
    """``interpolate(images, size, mode)``; bilinear on uint8 in float32,
    rounded back."""
    import torch
    from torch.nn import functional as F

    if mode == "nearest":
        return F.interpolate(images, size=list(size), mode="nearest")
    if images.dtype == torch.uint8:
        out = F.interpolate(images.to(torch.float32), size=list(size), mode=mode, align_corners=False)
        return out.round_().clamp_(0, 255).to(torch.uint8)
    return F.interpolate(images, size=list(size), mode=mode, align_corners=False)


def resize_target(t: Dict[str, Any], old: Tuple[int, int], new: Tuple[int, int]) -> Dict[str, Any]:
    """One sample's target dict moved from canvas ``old`` to ``new`` as
    torchvision's resize moves each tv_tensor; other keys as they are."""
    import torch
    from torchvision import tv_tensors

    if not isinstance(t, dict):
        raise TypeError(f"targets must be dicts (Batch.targets'), got {type(t).__name__}")
    wr, hr = new[1] / old[1], new[0] / old[0]
    out = dict(t)
    for name, v in t.items():
        if isinstance(v, (tv_tensors.BoundingBoxes, tv_tensors.KeyPoints)):
            if tuple(v.canvas_size) != old:
                raise ValueError(f"targets' {name!r} on a canvas of {tuple(v.canvas_size)}, the images' is {old}")
            if isinstance(v, tv_tensors.BoundingBoxes) and tv_tensors.is_rotated_bounding_format(v.format):
                raise ValueError(f"targets' {name!r} are rotated boxes ({v.format.name}): not resized by MultiScale")
            # torchvision's ratios: a float32 tensor of w and h ratios.
            ratios = [wr, hr, wr, hr] if isinstance(v, tv_tensors.BoundingBoxes) else [wr, hr]
            moved = v.as_subclass(torch.Tensor).mul(torch.tensor(ratios, device=v.device)).to(v.dtype)
            out[name] = tv_tensors.wrap(moved, like=v, canvas_size=new)
        elif isinstance(v, tv_tensors.Mask):
            out[name] = tv_tensors.wrap(_resize_mask(v.as_subclass(torch.Tensor), new), like=v)
    return out


def _resize_mask(m: Any, size: Tuple[int, int]) -> Any:
    """Nearest, as torchvision's resize_mask: [..., H, W] to [..., h, w]."""
    import torch
    from torch.nn import functional as F

    lead = m.shape[:-2]
    if m.numel() == 0:
        return m.new_zeros((*lead, *size))
    flat = m.reshape(1, -1, *m.shape[-2:])
    if m.dtype in (torch.uint8, torch.bool):
        out = F.interpolate(flat.to(torch.uint8), size=list(size), mode="nearest").to(m.dtype)
    else:
        out = F.interpolate(flat.to(torch.float32), size=list(size), mode="nearest").to(m.dtype)
    return out.reshape(*lead, *size)
