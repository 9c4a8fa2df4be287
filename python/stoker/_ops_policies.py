"""The augmentation policies of stoker.transforms: torchvision's
TrivialAugmentWide, RandAugment, AutoAugment and AugMix (their arguments,
defaults, fill and default interpolation), and timm's RandAugment as a
policy of its own name, TimmRandAugment (:func:`timm_rand_augment`), never
mixed up with torchvision's.

Their resampling ops (rotate, shear, translate) run as torchvision's tensor
kernels do: nearest or bilinear; bicubic (which torchvision takes on PIL
images only, and timm's RandAugment draws) with torch's grid_sample cubic."""

from __future__ import annotations

import math
import re
from typing import Any, Optional

from stoker._ops_base import Fill, Transform, fill_values, integer, interp_name, named_op, real
from stoker.v1 import stoker_pb2 as pb

# torchvision's policies take bicubic on PIL images (its tensor kernels
# refuse it); stoker resamples it with the bicubic warp timm's RandAugment
# uses (docs/transforms.md).
_WARP = ("nearest", "bilinear", "bicubic")
_MAX_OPS = 16  # the server's bound on num_ops, mixture_width, chain_depth
_MAX_BINS = 1000


def _bins(cls: str, n: Any) -> int:
    return integer(cls, "num_magnitude_bins", n, 2, _MAX_BINS)


class TrivialAugmentWide(Transform):
    """TrivialAugment Wide: one op of its space per image, at a uniformly
    drawn magnitude bin of ``num_magnitude_bins``. ``fill`` in uint8 units
    (None: 0)."""

    def __init__(self, num_magnitude_bins: int = 31, interpolation: Any = "nearest", fill: Fill = None) -> None:
        cls = "TrivialAugmentWide"
        self.num_magnitude_bins = _bins(cls, num_magnitude_bins)
        self.interpolation = interp_name(cls, interpolation, _WARP)
        self.fill = fill_values(cls, fill)

    def to_proto(self) -> pb.Op:
        return named_op("TrivialAugmentWide", num_magnitude_bins=self.num_magnitude_bins,
                        interpolation=self.interpolation, fill=self.fill)


class RandAugment(Transform):
    """torchvision's RandAugment: ``num_ops`` ops per image at bin
    ``magnitude`` of ``num_magnitude_bins`` (for timm's
    "rand-m9-mstd0.5-inc1", see :func:`timm_rand_augment`)."""

    def __init__(self, num_ops: int = 2, magnitude: int = 9, num_magnitude_bins: int = 31,
                 interpolation: Any = "nearest", fill: Fill = None) -> None:
        cls = "RandAugment"
        self.num_ops = integer(cls, "num_ops", num_ops, -(1 << 31), 1 << 31)
        if self.num_ops < 0:
            raise ValueError(f"{cls}: num_ops should be a non-negative integer, but got {num_ops} instead.")
        if self.num_ops > _MAX_OPS:
            raise ValueError(f"{cls}: num_ops should be at most {_MAX_OPS} (stoker's bound), got {num_ops}")
        self.num_magnitude_bins = _bins(cls, num_magnitude_bins)
        self.magnitude = integer(cls, "magnitude", magnitude, 0, self.num_magnitude_bins - 1)
        self.interpolation = interp_name(cls, interpolation, _WARP)
        self.fill = fill_values(cls, fill)

    def to_proto(self) -> pb.Op:
        return named_op("RandAugment", num_ops=self.num_ops, magnitude=self.magnitude,
                        num_magnitude_bins=self.num_magnitude_bins, interpolation=self.interpolation, fill=self.fill)


_AA_POLICIES = ("imagenet", "cifar10", "svhn")


class AutoAugment(Transform):
    """AutoAugment with a learned ``policy``: "imagenet" (the default),
    "cifar10" or "svhn", as a str or torchvision's AutoAugmentPolicy."""

    def __init__(self, policy: Any = "imagenet", interpolation: Any = "nearest", fill: Fill = None) -> None:
        cls = "AutoAugment"
        name = getattr(policy, "value", policy)  # AutoAugmentPolicy is an Enum of str values
        if not isinstance(name, str) or name.lower() not in _AA_POLICIES:
            raise ValueError(f"{cls}: The provided policy {policy!r} is not recognized: want "
                             f"{', '.join(_AA_POLICIES)}")
        self.policy = name.lower()
        self.interpolation = interp_name(cls, interpolation, _WARP)
        self.fill = fill_values(cls, fill)

    def to_proto(self) -> pb.Op:
        return named_op("AutoAugment", policy=self.policy, interpolation=self.interpolation, fill=self.fill)


class AugMix(Transform):
    """AugMix: ``mixture_width`` chains of ``chain_depth`` ops (-1: 1 to 3)
    at ``severity`` (1..10), mixed with Dirichlet(``alpha``) weights and
    the image with Beta(``alpha``, ``alpha``); ``all_ops=False`` leaves out
    the colour ops."""

    def __init__(self, severity: int = 3, mixture_width: int = 3, chain_depth: int = -1, alpha: float = 1.0,
                 all_ops: bool = True, interpolation: Any = "bilinear", fill: Fill = None) -> None:
        cls = "AugMix"
        self.severity = integer(cls, "severity", severity, -(1 << 31), 1 << 31)
        if not 1 <= self.severity <= 10:
            raise ValueError(f"{cls}: The severity must be between [1, 10]. Got {severity} instead.")
        self.mixture_width = integer(cls, "mixture_width", mixture_width, 1, _MAX_OPS)
        self.chain_depth = integer(cls, "chain_depth", chain_depth, -1, _MAX_OPS)
        if self.chain_depth == 0:
            raise ValueError(f"{cls}: chain_depth should be -1 (1 to 3 at random) or 1..{_MAX_OPS}, got 0")
        self.alpha = real(cls, "alpha", alpha)
        if not 0 < self.alpha <= 1000:
            raise ValueError(f"{cls}: alpha should be > 0 (at most 1000), got {alpha!r}")
        if not isinstance(all_ops, bool):
            raise TypeError(f"{cls}: all_ops should be a bool, got {all_ops!r}")
        self.all_ops = all_ops
        self.interpolation = interp_name(cls, interpolation, _WARP)
        self.fill = fill_values(cls, fill)

    def to_proto(self) -> pb.Op:
        return named_op("AugMix", severity=self.severity, mixture_width=self.mixture_width,
                        chain_depth=self.chain_depth, alpha=self.alpha, all_ops=self.all_ops,
                        interpolation=self.interpolation, fill=self.fill)


#: ImageNet's mean colour in uint8 pixels: timm's fill (img_mean).
IMAGENET_MEAN_PIXELS = (124, 116, 104)

_TIMM_KEYS = {"m": (0, 30, True), "n": (0, _MAX_OPS, True), "p": (0, 1, False), "mstd": (0, float("inf"), False),
              "mmax": (0, 30, True), "inc": (0, float("inf"), False)}


def _check_timm_config(config: Any) -> str:
    """timm's rand_augment_transform config: "rand" then -KEYVALUE sections
    (m, n, p, mstd, mmax, inc) and a transform set (t...), checked as the
    server checks it."""
    cls = "TimmRandAugment"
    if not isinstance(config, str):
        raise TypeError(f"{cls}: config should be a str like 'rand-m9-mstd0.5-inc1', got {config!r}")
    parts = config.split("-")
    if len(config) > 256 or parts[0] != "rand":
        raise ValueError(f"{cls}: config {config[:64]!r}: want 'rand-...' (e.g. 'rand-m9-mstd0.5-inc1')")
    n, weighted, have_t = 2, False, False
    for part in parts[1:]:
        if part.startswith("t"):  # timm's transform set: the first one counts
            if not have_t and part[1:] in ("3a", "3aw"):
                raise ValueError(f"{cls}: config {config!r}: transform set {part[1:]!r} is not supported (timm's "
                                 f"AutoAugment '3a' is timm_auto_augment's); stoker runs timm's default set (no t "
                                 f"section, or any other name) and 'tweights'")
            weighted = weighted or (not have_t and part[1:] == "weights")
            have_t = True
            continue
        m = re.fullmatch(r"([a-z]+)(\d+(?:\.\d*)?)", part)
        if not m:
            raise ValueError(f"{cls}: config {config!r}: section {part!r} is not KEYVALUE (e.g. m9)")
        key, val = m.group(1), float(m.group(2))
        if key not in _TIMM_KEYS:
            raise ValueError(f"{cls}: config {config!r}: unknown section {part!r} (stoker knows m, n, p, mstd, mmax, "
                             f"inc and t, as timm's rand_augment_transform)")
        lo, hi, whole = _TIMM_KEYS[key]
        if not lo <= val <= hi or (whole and val != int(val)):
            raise ValueError(f"{cls}: config {config!r}: {part}: want {key} an integer {lo}..{hi}" if whole else
                             f"{cls}: config {config!r}: {part}: want {key} {lo}..{hi}" if math.isfinite(hi) else
                             f"{cls}: config {config!r}: {part}: want {key} >= 0")
        if key == "n":
            n = int(val)
    if weighted and n > 15:
        raise ValueError(f"{cls}: config {config!r}: n{n} with tweights: timm chooses without replacement from 15 ops")
    return config


class TimmRandAugment(Transform):
    """timm's RandAugment (``rand_augment_transform``), a policy of its own:
    per-op probability, magnitude noise (mstd), the increasing variants
    (inc1), SolarizeAdd, and a mean-colour fill. Its ops are PIL's in timm
    and torchvision's functional kernels here. ``interpolation`` None draws
    bilinear or bicubic per op, as timm does by default; or "bilinear" or
    "bicubic". ``fill`` in uint8 units; None is the default, ImageNet's
    mean colour. Made by :func:`timm_rand_augment`."""

    def __init__(self, config: str = "rand-m9-mstd0.5-inc1", interpolation: Any = None,
                 fill: Fill = IMAGENET_MEAN_PIXELS) -> None:
        cls = "TimmRandAugment"
        self.config = _check_timm_config(config)
        self.interpolation: Optional[str] = None
        if interpolation is not None:
            self.interpolation = interp_name(cls, interpolation, ("bilinear", "bicubic"))
        self.fill = fill_values(cls, IMAGENET_MEAN_PIXELS if fill is None else fill)

    def to_proto(self) -> pb.Op:
        return named_op("TimmRandAugment", config=self.config, interpolation=self.interpolation, fill=self.fill)


def timm_rand_augment(config: str = "rand-m9-mstd0.5-inc1", interpolation: Any = None,
                      fill: Fill = IMAGENET_MEAN_PIXELS) -> TimmRandAugment:
    """timm's RandAugment for a config string as timm's
    ``rand_augment_transform`` takes it ("rand-m9-mstd0.5-inc1": magnitude
    9, noise std 0.5, increasing variants; n: ops per image, default 2;
    mmax: the magnitude's upper bound, default 10). ``fill`` defaults to
    ImageNet's mean colour, as timm's create_transform passes it. Not
    torchvision's RandAugment: another op set, magnitudes and sampling."""
    return TimmRandAugment(config, interpolation=interpolation, fill=fill)


#: timm's AutoAugment policies (auto_augment_transform) stoker runs.
TIMM_AA_POLICIES = ("original", "originalr", "v0", "v0r", "3a")


def _check_timm_aa_config(config: Any) -> str:
    """timm's auto_augment_transform config: a policy's name then -KEYVALUE
    sections, of which timm knows mstd only (a section without a digit is
    skipped, as timm skips it), checked as the server checks it."""
    cls = "TimmAutoAugment"
    if not isinstance(config, str):
        raise TypeError(f"{cls}: config should be a str like 'v0r-mstd0.5', got {config!r}")
    parts = config.split("-")
    if len(config) > 256 or parts[0] not in TIMM_AA_POLICIES:
        raise ValueError(f"{cls}: config {config[:64]!r}: want one of {', '.join(TIMM_AA_POLICIES)}, then -mstd "
                         f"sections (e.g. 'v0r-mstd0.5')")
    for part in parts[1:]:
        digit = re.search(r"\d", part)
        if digit is None:
            continue  # timm: no digit, the section is skipped
        key, val = part[:digit.start()], part[digit.start():]
        if key != "mstd":
            raise ValueError(f"{cls}: config {config!r}: unknown section {part!r} (timm's AutoAugment knows mstd only)")
        try:
            f = float(val)
        except ValueError:
            raise ValueError(f"{cls}: config {config!r}: mstd: {val!r} is not a number") from None
        if not f <= 1e3:
            raise ValueError(f"{cls}: config {config!r}: mstd: {val!r} is not a number up to 1000")
    return config


class TimmAutoAugment(Transform):
    """timm's AutoAugment (``auto_augment_transform``), a policy of its own:
    one of timm's sub-policies chosen uniformly per image, each of its
    (op, probability, magnitude) applied with that probability at that
    magnitude (with gaussian noise of mstd, clipped to [0, 10]) through
    timm's level functions (random sign, PosterizeOriginal's 4..8 bits and
    the increasing Posterize of the 'r' policies; 3a's Desaturate as
    adjust_saturation and its GaussianBlurRand, PIL's box-blur GaussianBlur
    of a random radius, as torchvision's gaussian_blur of that sigma). Its
    ops are PIL's in timm and torchvision's functional kernels here. ``interpolation`` None draws
    bilinear or bicubic per op, as timm does by default; or "bilinear" or
    "bicubic". ``fill`` in uint8 units; None is ImageNet's mean colour.
    Made by :func:`timm_auto_augment`."""

    def __init__(self, config: str = "original", interpolation: Any = None,
                 fill: Fill = IMAGENET_MEAN_PIXELS) -> None:
        cls = "TimmAutoAugment"
        self.config = _check_timm_aa_config(config)
        self.interpolation: Optional[str] = None
        if interpolation is not None:
            self.interpolation = interp_name(cls, interpolation, ("bilinear", "bicubic"))
        self.fill = fill_values(cls, IMAGENET_MEAN_PIXELS if fill is None else fill)

    def to_proto(self) -> pb.Op:
        return named_op("TimmAutoAugment", config=self.config, interpolation=self.interpolation, fill=self.fill)


def timm_auto_augment(config: str = "original", interpolation: Any = None,
                      fill: Fill = IMAGENET_MEAN_PIXELS) -> TimmAutoAugment:
    """timm's AutoAugment for a config string as timm's
    ``auto_augment_transform`` (and ``create_transform(auto_augment=...)``)
    takes it: "original", "originalr", "v0", "v0r" or "3a", with an optional
    magnitude noise section ("v0r-mstd0.5"). ``fill`` defaults to
    ImageNet's mean colour, as timm's create_transform passes it. Not
    torchvision's AutoAugment: other sub-policies, magnitudes and ops."""
    return TimmAutoAugment(config, interpolation=interpolation, fill=fill)


_TIMM_AUGMIX_KEYS = {"m": (0, 30, True), "w": (1, _MAX_OPS, True), "d": (-1e9, _MAX_OPS, True), "a": (0, 1e3, False),
                     "b": (0, 1e9, True), "mstd": (0, 1e3, False)}


def _check_timm_augmix_config(config: Any) -> str:
    """timm's augment_and_mix_transform config: "augmix" then -KEYVALUE
    sections (m, w, d, a, b, mstd; a section without a digit is skipped, as
    timm skips it), checked as the server checks it."""
    cls = "TimmAugMix"
    if not isinstance(config, str):
        raise TypeError(f"{cls}: config should be a str like 'augmix-m5-w4-d2', got {config!r}")
    parts = config.split("-")
    if len(config) > 256 or parts[0] != "augmix":
        raise ValueError(f"{cls}: config {config[:64]!r}: want 'augmix-...' (e.g. 'augmix-m5-w4-d2')")
    for part in parts[1:]:
        digit = re.search(r"\d", part)
        if digit is None:
            continue  # timm: no digit, the section is skipped
        key, val = part[:digit.start()], part[digit.start():]
        if key not in _TIMM_AUGMIX_KEYS:
            raise ValueError(f"{cls}: config {config!r}: unknown section {part!r} (timm's AugMix knows m, w, d, a, b "
                             f"and mstd)")
        try:
            f = float(val)
        except ValueError:
            raise ValueError(f"{cls}: config {config!r}: {key}: {val!r} is not a number") from None
        lo, hi, whole = _TIMM_AUGMIX_KEYS[key]
        if (whole and not re.fullmatch(r"\d+", val)) or not (lo < f <= hi if key == "a" else lo <= f <= hi):
            raise ValueError(f"{cls}: config {config!r}: {part}: want {key} "
                             + ("an integer >= 0" if hi >= 1e9 else f"an integer {max(lo, 0):g}..{hi:g}" if whole
                                else f"{lo:g}..{hi:g}"))
    return config


class TimmAugMix(Transform):
    """timm's AugMix (``augment_and_mix_transform``), a policy of its own:
    ``width`` chains of ``depth`` (or 1..3) of timm's AugMix ops from the
    image, each at a uniform magnitude in [0, m] (or m with gaussian noise
    of mstd) through timm's level functions, summed in float32 by Dirichlet
    weights and truncated to uint8, then blended with the image by a Beta
    weight as PIL's Image.blend computes it (b1, blended: each chain's
    result blended into the image so far, one PIL blend per chain, by
    timm's blended weights). Its ops are PIL's in timm and
    torchvision's functional kernels here. ``interpolation`` None draws
    bilinear or bicubic per op, as timm does by default; or "bilinear" or
    "bicubic". ``fill`` in uint8 units; None is ImageNet's mean colour.
    Made by :func:`timm_aug_mix`."""

    def __init__(self, config: str = "augmix-m3-w3", interpolation: Any = None,
                 fill: Fill = IMAGENET_MEAN_PIXELS) -> None:
        cls = "TimmAugMix"
        self.config = _check_timm_augmix_config(config)
        self.interpolation: Optional[str] = None
        if interpolation is not None:
            self.interpolation = interp_name(cls, interpolation, ("bilinear", "bicubic"))
        self.fill = fill_values(cls, IMAGENET_MEAN_PIXELS if fill is None else fill)

    def to_proto(self) -> pb.Op:
        return named_op("TimmAugMix", config=self.config, interpolation=self.interpolation, fill=self.fill)


def timm_aug_mix(config: str = "augmix-m3-w3", interpolation: Any = None,
                 fill: Fill = IMAGENET_MEAN_PIXELS) -> TimmAugMix:
    """timm's AugMix for a config string as timm's
    ``augment_and_mix_transform`` (and ``create_transform(auto_augment=...)``)
    takes it: "augmix-m5-w4-d2" (severity 5, width 4, depth 2; a: alpha,
    mstd: magnitude noise instead of uniform magnitudes; b1: blended),
    with create_transform's translate_pct of 0.3. ``fill``
    defaults to ImageNet's mean colour, as timm's create_transform passes
    it. Not torchvision's AugMix: other ops, magnitudes and blend."""
    return TimmAugMix(config, interpolation=interpolation, fill=fill)
