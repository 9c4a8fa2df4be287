"""Batch-level augmentations on the trainer's device, one draw per sample:
MixUp, CutMix, a RandomChoice of them, and RandomErasing; and one draw per
batch: MultiScale, a size for the whole batch (ultralytics' multi_scale,
D-FINE's collate), its targets resized with it (:mod:`stoker._multiscale`).

torchvision.transforms.v2's MixUp, CutMix and RandomErasing draw once per
batch (torchvision issues #8484 and #2929): every image of a batch gets the
same lambda or the same box. These classes keep their semantics (arguments,
distributions, the partner of sample i is sample i - 1 as torchvision's
``roll(1, 0)`` has it, labels mixed into soft targets) but draw per sample,
and are pure torch: no CUDA build, any device::

    from stoker import gpu
    mix = gpu.RandomChoice([gpu.MixUp(alpha=0.8, num_classes=1000), gpu.CutMix(alpha=1.0, num_classes=1000)],
                           seed=rank)
    erase = gpu.RandomErasing(p=0.25, value="random", inplace=True, seed=rank)
    for batch in loader:
        images = stoker.normalize(batch.images.cuda(non_blocking=True))
        labels = batch.labels.cuda(non_blocking=True)
        images, targets = mix(images, labels, batch=batch)
        images = erase(images, batch=batch)
        loss = torch.nn.functional.cross_entropy(model(images), targets)

**Seeded per batch.** Each call's draws are a function of the op's ``seed``
and the batch's key, ``(epoch, number)``, given as ``batch=`` (a
:class:`stoker.Batch`) or ``key=``: a resumed epoch draws for batch k what
the uninterrupted run drew, whatever came before it. Batch numbers count
each rank's batches, so give each rank its own seed (``seed=rank``) or the
ranks draw alike. The per-sample parameters (lambdas, boxes, choices) are
drawn on the CPU with numpy, the same on every device; only
``RandomErasing(value="random")``'s noise is drawn on the images' device
(the same for the same device). Without a key a call draws from a counter
of the op's own calls.

Images are ``[B, C, H, W]`` float tensors (after :func:`stoker.normalize`:
the fast path) or uint8 (mixed in float32, rounded back); a channels-last
batch ``[B, H, W, 3]`` (``Loader(layout="NHWC")``) is refused with a
ValueError, not mixed over the wrong axes: pass ``images.permute(0, 3, 1,
2)``. Labels are class
indices ``[B]`` (int) or soft targets ``[B, K]`` (float); the mixing ops
return float32 targets ``[B, K]``. The pixel work is a fixed few
vectorized passes over the batch, no Python loop over its samples; only
RandomErasing on CPU tensors writes box by box, the faster way there
(:mod:`stoker._gpu_kernels`).

Bad arguments raise as the rest of stoker's API does: TypeError for a
wrong type, ValueError for a value out of range, naming the argument.
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Optional, Sequence, Tuple, Union

import numpy as np

from stoker import _args
from stoker import _gpu_kernels as K
from stoker._multiscale import MultiScale
from stoker._seeded import Key
from stoker._seeded import Seeded as _Seeded
from stoker._seeded import check_images as _check_images

__all__ = ["MixUp", "CutMix", "RandomChoice", "RandomErasing", "MultiScale"]

# Salts that keep each kind of op's draws apart for the same seed and key.
_SALT_MIX, _SALT_ERASE = 0x6D6978, 0x657261


def _soft_targets(labels: Any, b: int, num_classes: Optional[int], smoothing: float, device: Any) -> Any:
    """Labels as float32 [B, K], label smoothing applied (timm's: the
    target class gets 1 - smoothing + smoothing / K, the others smoothing
    / K)."""
    import torch

    if not isinstance(labels, torch.Tensor):
        raise TypeError(f"labels must be a tensor, got {type(labels).__name__}")
    if labels.dim() == 1 and not labels.is_floating_point():
        if num_classes is None:
            raise ValueError("labels are class indices [B]: give num_classes")
        if labels.shape[0] != b:
            raise ValueError(f"{labels.shape[0]} labels for {b} images")
        if b and (int(labels.min()) < 0 or int(labels.max()) >= num_classes):
            raise ValueError(f"labels outside 0..{num_classes - 1} (num_classes={num_classes}): "
                             f"{int(labels.min())}..{int(labels.max())}")
        y = torch.nn.functional.one_hot(labels.to(device=device, dtype=torch.int64), num_classes).to(torch.float32)
    elif labels.dim() == 2 and labels.is_floating_point():
        if labels.shape[0] != b or (num_classes is not None and labels.shape[1] != num_classes):
            raise ValueError(f"soft labels of shape {tuple(labels.shape)} for {b} images of {num_classes} classes")
        y = labels.to(device=device, dtype=torch.float32)
    else:
        raise TypeError(f"labels must be class indices [B] (int) or soft targets [B, K] (float), got {labels.dtype} "
                        f"{tuple(labels.shape)}")
    if smoothing:
        y = y * (1.0 - smoothing) + smoothing / y.shape[1]
    return y


def _real(name: str, v: Any) -> float:
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Real):
        raise TypeError(f"{name} must be a number, got {type(v).__name__} {v!r}")
    if not math.isfinite(v):
        raise ValueError(f"{name} must be finite, got {v!r}")
    return float(v)


def _probability(name: str, p: Any) -> float:
    p = _real(name, p)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{name} must be in [0, 1], got {p!r}")
    return p


def _range(name: str, r: Any, lo: float, hi: float) -> Tuple[float, float]:
    if not isinstance(r, (tuple, list)) or len(r) != 2:
        raise TypeError(f"{name} must be a pair (min, max), got {r!r}")
    a, b = _real(name, r[0]), _real(name, r[1])
    if not lo <= a <= b <= hi:
        raise ValueError(f"{name} must be (min, max) with {lo} <= min <= max <= {hi}, got {r!r}")
    return a, b


class _Mix(_Seeded):
    """What MixUp and CutMix share: alpha, num_classes, p (each sample is
    mixed with probability p; the others keep their image and target), label
    smoothing and the seed."""

    _box = False

    def __init__(self, *, alpha: float = 1.0, num_classes: Optional[int] = None, p: float = 1.0,
                 label_smoothing: float = 0.0, seed: int = 0) -> None:
        super().__init__(seed)
        self.alpha = _real("alpha", alpha)
        if not self.alpha > 0:
            raise ValueError(f"alpha must be > 0, got {alpha!r}")
        self.num_classes = None if num_classes is None else _args.integer("num_classes", num_classes, 1, 1 << 31)
        self.p = _probability("p", p)
        self.label_smoothing = _probability("label_smoothing", label_smoothing)

    def _draw(self, rng: np.random.Generator, b: int, h: int, w: int) -> Tuple[np.ndarray, Optional[np.ndarray]]:
        """Per sample: the weight of its own image (lambda, 1 where not
        mixed) and, for CutMix, its box (x1, y1, x2, y2; empty where not
        mixed), with the lambda adjusted to the box as torchvision does."""
        lam = rng.beta(self.alpha, self.alpha, size=b)
        mixed = rng.random(b) < self.p
        if not self._box:
            return np.where(mixed, lam, 1.0), None
        # torchvision's CutMix.make_params, per sample.
        rx = rng.integers(0, w, size=b)
        ry = rng.integers(0, h, size=b)
        r = 0.5 * np.sqrt(1.0 - lam)
        rw, rh = (r * w).astype(np.int64), (r * h).astype(np.int64)
        x1, y1 = np.clip(rx - rw, 0, None), np.clip(ry - rh, 0, None)
        x2, y2 = np.clip(rx + rw, None, w), np.clip(ry + rh, None, h)
        boxes = np.stack([x1, y1, x2, y2], axis=1)
        boxes[~mixed] = 0
        lam = 1.0 - (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1]) / (w * h)
        return lam, boxes

    def __call__(self, images: Any, labels: Any, *, key: Optional[Key] = None, batch: Any = None) -> Tuple[Any, Any]:
        """Mixes each sample with the one before it (the first with the
        last), by its own draw; returns the images and float32 targets."""
        b, h, w = _check_images(images)
        targets = _soft_targets(labels, b, self.num_classes, self.label_smoothing, images.device)
        lam, boxes = self._draw(self._rng(_SALT_MIX, key, batch), b, h, w)
        return _apply_mix(images, targets, lam, boxes)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(alpha={self.alpha}, num_classes={self.num_classes}, p={self.p}, "
                f"label_smoothing={self.label_smoothing}, seed={self.seed})")


class MixUp(_Mix):
    """MixUp (torchvision.transforms.v2.MixUp's semantics), per sample:
    sample i gets ``lam_i * x_i + (1 - lam_i) * x_{i-1}`` and the same mix
    of their targets, ``lam_i ~ Beta(alpha, alpha)`` drawn for each sample;
    with probability ``1 - p`` a sample is left as it is (``lam_i = 1``).
    ``p`` and ``label_smoothing`` are timm's Mixup arguments; torchvision's
    MixUp has neither (its p is 1, its targets one-hot)."""


class CutMix(_Mix):
    """CutMix (torchvision.transforms.v2.CutMix's semantics), per sample:
    sample i gets a box of sample i - 1 pasted in, the box drawn for it as
    torchvision draws one for a batch (``lam_i ~ Beta(alpha, alpha)``, a
    centre uniform over the image, sides ``sqrt(1 - lam_i)`` of the image's,
    clipped), and the targets mixed by the share of its pixels left,
    ``1 - box area / image area``; with probability ``1 - p`` no box."""

    _box = True


def _apply_mix(images: Any, targets: Any, lam: np.ndarray, boxes: Optional[np.ndarray]) -> Tuple[Any, Any]:
    """The images mixed (boxed samples weighted 1 outside their box) and
    the targets as lam_i of their own and 1 - lam_i of sample i - 1's."""
    import torch

    lam_t = torch.as_tensor(lam, dtype=torch.float32, device=targets.device)
    out_t = torch.lerp(targets.roll(1, 0), targets, lam_t[:, None])
    weight = lam.copy()
    if boxes is not None:
        weight[(boxes[:, 2] > boxes[:, 0]) & (boxes[:, 3] > boxes[:, 1])] = 1.0
    return K.mix(images, weight, boxes), out_t


class RandomChoice(_Seeded):
    """One of ``transforms`` (MixUp and CutMix ops) for each sample, chosen
    with probabilities ``p`` (None: alike; normalized, as torchvision's
    RandomChoice does), as torchvision's ``RandomChoice([MixUp(...),
    CutMix(...)])`` chooses for a batch: each sample then draws with the
    chosen op's arguments. The ops' own seeds are not used: the choice's
    ``seed`` draws everything."""

    def __init__(self, transforms: Sequence[_Mix], p: Optional[Sequence[float]] = None, seed: int = 0) -> None:
        super().__init__(seed)
        self.transforms = list(transforms)
        if not self.transforms or not all(isinstance(t, _Mix) for t in self.transforms):
            raise TypeError("RandomChoice takes a non-empty list of stoker.gpu MixUp and CutMix ops, "
                            f"got {transforms!r}")
        if p is None:
            p = [1.0] * len(self.transforms)
        if not isinstance(p, (tuple, list)) or len(p) != len(self.transforms):
            raise ValueError(f"p must be {len(self.transforms)} weights, one per op, got {p!r}")
        weights = [_real("p", x) for x in p]
        total = sum(weights)  # once: p is normalized in O(n)
        if any(x < 0 for x in weights) or total <= 0:
            raise ValueError(f"p must be non-negative weights, not all 0, got {p!r}")
        self.p = [x / total for x in weights]
        classes = {t.num_classes for t in self.transforms}
        smoothing = {t.label_smoothing for t in self.transforms}
        if len(classes) > 1 or len(smoothing) > 1:
            raise ValueError("RandomChoice's ops must agree on num_classes and label_smoothing (the targets they make "
                             f"are one batch's): got num_classes {sorted(map(str, classes))}, label_smoothing "
                             f"{sorted(smoothing)}")
        self.num_classes, self.label_smoothing = classes.pop(), smoothing.pop()

    def __call__(self, images: Any, labels: Any, *, key: Optional[Key] = None, batch: Any = None) -> Tuple[Any, Any]:
        """Each sample mixed by its chosen op's draw; returns the images
        and float32 targets."""
        b, h, w = _check_images(images)
        targets = _soft_targets(labels, b, self.num_classes, self.label_smoothing, images.device)
        rng = self._rng(_SALT_MIX, key, batch)
        choice = rng.choice(len(self.transforms), size=b, p=self.p)
        lam = np.ones(b)
        boxes = np.zeros((b, 4), dtype=np.int64)
        for k, t in enumerate(self.transforms):  # over the ops, not the samples
            lam_k, boxes_k = t._draw(rng, b, h, w)
            sel = choice == k
            lam[sel] = lam_k[sel]
            if boxes_k is not None:
                boxes[sel] = boxes_k[sel]
        return _apply_mix(images, targets, lam, boxes)

    def __repr__(self) -> str:
        return f"RandomChoice({self.transforms!r}, p={self.p}, seed={self.seed})"


class RandomErasing(_Seeded):
    """RandomErasing (torchvision.transforms.v2.RandomErasing's semantics),
    per sample: each sample is erased with probability ``p``, in a box of
    its own drawn as torchvision draws one (up to 10 tries of an area in
    ``scale`` of the image's and a log-uniform aspect in ``ratio``; none
    that fits: not erased), filled with ``value`` (a number, one per
    channel, or ``"random"``: standard normal noise, for normalized
    images).

    ``inplace=True`` writes the erased pixels alone into ``images``; out of
    place, the batch is copied (one pass over it) whatever p is. After
    :func:`stoker.normalize`, whose output is a new tensor, in place is the
    cheap choice. (torchvision's per-batch op copies only the batches it
    erases, a share p of them.)"""

    def __init__(self, p: float = 0.5, scale: Tuple[float, float] = (0.02, 0.33),
                 ratio: Tuple[float, float] = (0.3, 3.3), value: Union[float, Sequence[float], str] = 0.0,
                 inplace: bool = False, seed: int = 0) -> None:
        super().__init__(seed)
        self.p = _probability("p", p)
        self.scale = _range("scale", scale, 0.0, 1.0)
        self.ratio = _range("ratio", ratio, 0.0, math.inf)
        if self.ratio[0] <= 0:
            raise ValueError(f"ratio must be (min, max) with 0 < min, got {ratio!r}")
        if isinstance(value, str):
            if value != "random":
                raise ValueError(f"value must be a number, one per channel, or 'random', got {value!r}")
            self.value: Union[str, Tuple[float, ...]] = "random"
        elif isinstance(value, (tuple, list)):
            if not value:
                raise ValueError("value must be a number, one per channel, or 'random', got an empty sequence")
            self.value = tuple(_real("value", v) for v in value)
        else:
            self.value = (_real("value", value),)
        self.inplace = _args.boolean("inplace", inplace)

    def _draw(self, rng: np.random.Generator, b: int, h: int, w: int) -> np.ndarray:
        """Per sample its box (i, j, h, w), h = w = 0 where not erased:
        torchvision's make_params, vectorized over samples."""
        tries = 10
        ea = h * w * rng.uniform(self.scale[0], self.scale[1], size=(b, tries))
        log_r = np.log(self.ratio)
        aspect = np.exp(rng.uniform(log_r[0], log_r[1], size=(b, tries)))
        eh = np.round(np.sqrt(ea * aspect)).astype(np.int64)
        ew = np.round(np.sqrt(ea / aspect)).astype(np.int64)
        fits = (eh < h) & (ew < w)
        first = np.argmax(fits, axis=1)  # the first try that fits
        at = np.arange(b)
        ok = fits[at, first] & (rng.random(b) < self.p)
        bh, bw = eh[at, first], ew[at, first]
        bi = (rng.random(b) * (h - bh + 1)).astype(np.int64)
        bj = (rng.random(b) * (w - bw + 1)).astype(np.int64)
        boxes = np.stack([bi, bj, bh, bw], axis=1)
        boxes[~ok] = 0
        return boxes

    def __call__(self, images: Any, *, key: Optional[Key] = None, batch: Any = None) -> Any:
        """The images, each sample erased by its own draw."""
        import torch

        b, h, w = _check_images(images)
        rng = self._rng(_SALT_ERASE, key, batch)
        boxes = self._draw(rng, b, h, w)
        c = images.shape[1]
        value, gen = None, None
        if self.value == "random":
            if not images.is_floating_point():
                raise TypeError("value='random' is standard normal noise, for normalized float images; these are "
                                f"{images.dtype} (erase uint8 pixels on the server: stoker.transforms.RandomErasing)")
            gen = torch.Generator(device=images.device)
            gen.manual_seed(int(rng.integers(0, 1 << 63)))
        else:
            if len(self.value) not in (1, c):
                raise ValueError(f"value has {len(self.value)} numbers for {c} channels (give 1 or {c})")
            if images.dtype == torch.uint8 and not all(float(v).is_integer() and 0 <= v <= 255 for v in self.value):
                raise ValueError(f"value {self.value} for uint8 images: give whole numbers in 0..255")
            value = self.value * c if len(self.value) == 1 else self.value
        return K.erase(images, boxes, value, gen, self.inplace)

    def __repr__(self) -> str:
        return (f"RandomErasing(p={self.p}, scale={self.scale}, ratio={self.ratio}, value={self.value!r}, "
                f"inplace={self.inplace}, seed={self.seed})")
