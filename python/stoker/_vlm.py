"""Vision-language models' image processors: the Qwen2-VL family's
(transformers' ``Qwen2VLImageProcessor``, which Qwen2.5-VL and Qwen3-VL use
too), as a stoker transform and the device side of its output.

The server makes the processor's resized uint8 image (``SmartResize``:
smart_resize, then torchvision's antialiased uint8 resize), each sample at
its own size; :meth:`stoker.Batch.vision_inputs` does the rest on the
trainer's device (rescale and normalize fused as the processor fuses them,
the temporal repeat, the patchify) and gives what the processor gives:
``pixel_values`` float32 ``[sum of patches, C * T * P * P]`` and
``image_grid_thw`` int64 ``[N, 3]``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, Optional, Sequence, Tuple

from stoker._ops_containers import Compose
from stoker._views import MultiView

if TYPE_CHECKING:  # pragma: no cover
    import torch

__all__ = ["QwenVision", "NaFlexVision", "InternVision", "AnyResVision", "VisionCompose", "VisionMultiView", "from_hf", "VLM_PRESETS",
           "vlm_preset", "vision_inputs", "internvl_inputs", "anyres_inputs"]

OPENAI_CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
OPENAI_CLIP_STD = (0.26862954, 0.26130258, 0.27577711)
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)

# The processors from_hf converts: transformers 5's torchvision back-end
# (Qwen2VLImageProcessor) and 4.x's name for it (Qwen2VLImageProcessorFast).
_SUPPORTED = ("Qwen2VLImageProcessor", "Qwen2VLImageProcessorFast")
# PIL's resample codes (transformers' PILImageResampling) stoker's resize has.
_RESAMPLE = {0: "nearest", 2: "bilinear", 3: "bicubic"}


@dataclass(frozen=True)
class QwenVision:
    """The device side of a Qwen2-VL-family processor: what
    :meth:`stoker.Batch.vision_inputs` does to each resized uint8 image."""

    patch_size: int = 14
    merge_size: int = 2
    temporal_patch_size: int = 2
    do_rescale: bool = True
    rescale_factor: float = 1 / 255
    do_normalize: bool = True
    image_mean: Tuple[float, ...] = OPENAI_CLIP_MEAN
    image_std: Tuple[float, ...] = OPENAI_CLIP_STD

    @property
    def factor(self) -> int:
        """The multiple of the resized image's sides: patch_size * merge_size."""
        return self.patch_size * self.merge_size


@dataclass(frozen=True)
class NaFlexVision:
    """The device side of SigLIP2's NaFlex processor (transformers'
    ``Siglip2ImageProcessor``): each resized uint8 image rescaled and
    normalized, cut into patch_size patches (row-major, each
    ``patch x patch x C``), padded to max_num_patches, with its attention
    mask and its patch grid."""

    patch_size: int = 16
    max_num_patches: int = 256
    do_rescale: bool = True
    rescale_factor: float = 1 / 255
    do_normalize: bool = True
    image_mean: Tuple[float, ...] = (0.5, 0.5, 0.5)
    image_std: Tuple[float, ...] = (0.5, 0.5, 0.5)


@dataclass(frozen=True)
class InternVision:
    """The device side of InternVL's dynamic tiling (transformers'
    ``GotOcr2ImageProcessor`` with ``crop_to_patches``, which
    ``InternVLProcessor`` holds): each image's canvas (a TileResize, its
    sides multiples of tile_size) cut into its tiles, row by row, then its
    thumbnail (the whole image resized to one tile, another view of the
    same decode) when it has more than one tile and use_thumbnail, each
    rescaled and normalized."""

    tile_size: int = 448
    min_tiles: int = 1
    max_tiles: int = 12
    use_thumbnail: bool = True
    #: The model's vision tokens a tile becomes, for ``batch_tokens``
    #: (InternVL's 256: 448 / 14 patches a side, halved by its pixel
    #: shuffle); the processor does not know it.
    tokens_per_tile: int = 256
    do_rescale: bool = True
    rescale_factor: float = 1 / 255
    do_normalize: bool = True
    image_mean: Tuple[float, ...] = IMAGENET_MEAN
    image_std: Tuple[float, ...] = IMAGENET_STD


# LlavaOnevisionImageProcessor's image_grid_pinpoints (transformers 5.24):
# 384 to 2304 a side, by 384, (height, width).
ONEVISION_PINPOINTS = tuple((h, w) for h in range(384, 2305, 384) for w in range(384, 2305, 384))


@dataclass(frozen=True)
class AnyResVision:
    """The device side of LLaVA-OneVision's AnyRes (transformers'
    ``LlavaOnevisionImageProcessor``): each image's base (the whole image
    resized to one patch, a view of the same decode) then its canvas (an
    AnyResResize: the best-fitting resolution of the grid pinpoints, the
    image in it padded with zeros) cut into patch_size patches, row by row,
    each rescaled and normalized; with do_pad, the images' patches padded
    with zeros to the batch's most."""

    patch_size: int = 384
    grid_pinpoints: Tuple[Tuple[int, int], ...] = ONEVISION_PINPOINTS
    do_pad: bool = True
    do_rescale: bool = True
    rescale_factor: float = 1 / 255
    do_normalize: bool = True
    image_mean: Tuple[float, ...] = (0.5, 0.5, 0.5)
    image_std: Tuple[float, ...] = (0.5, 0.5, 0.5)
    #: Whether vision_inputs gives batch_num_images (OneVision's processor
    #: does, LLaVA-NeXT's does not).
    batch_num_images: bool = True
    #: Whether the transform makes each image's square too (a third view:
    #: PadToSquare with the mean's colour, then the patch's resize), which
    #: OneVision's processor gives an image of a record of several in
    #: place of its base and patches; the server makes it only where the
    #: data has such records (ViewGroup.several_images).
    multi_image: bool = True


# LlavaNextImageProcessor's image_grid_pinpoints (transformers 5.24),
# (height, width); its checkpoints' patch is 336.
LLAVA_NEXT_PINPOINTS = ((336, 672), (672, 336), (672, 672), (1008, 336), (336, 1008))


class VisionCompose(Compose):
    """A :class:`stoker.transforms.Compose` whose batches a vision-language
    model's processor would make: its ``vision`` says how
    :meth:`stoker.Batch.vision_inputs` turns them into the processor's
    tensors."""

    def __init__(self, transforms: Any, vision: Any) -> None:
        super().__init__(transforms)
        self.vision = vision

    def __repr__(self) -> str:
        return f"VisionCompose({self.transforms!r}, vision={self.vision!r})"


class VisionMultiView(MultiView):
    """A :class:`stoker.transforms.MultiView` whose batches a
    vision-language model's processor would make (InternVL's: the tiled
    canvas and the thumbnail): its ``vision`` says how
    :meth:`stoker.Batch.vision_inputs` turns them into the processor's
    tensors. The groups named in ``several_images`` are made only for
    the images of records of several (LLaVA-OneVision's square: the
    server leaves them out of a job over single images), those in
    ``one_image`` only for the images of records of one (its canvas and
    base); another image's view of them is zeros."""

    def __init__(self, groups: Any, vision: Any, several_images: Tuple[str, ...] = (),
                 one_image: Tuple[str, ...] = ()) -> None:
        super().__init__(groups)
        self.vision = vision
        self.several_images = tuple(several_images)
        self.one_image = tuple(one_image)
        self._groups = list(groups)

    def before(self, ops: Sequence[Any]) -> "VisionMultiView":
        """This transform with ops (a trainer's augmentation before the
        processor) first in every group: the server draws them once an
        image, for all its views."""
        groups = []
        for name, count, group in self._groups:
            if not isinstance(group, (list, tuple)):
                raise ValueError(f"VisionMultiView.before: group {name!r} is {type(group).__name__}: want a list of ops")
            groups.append((name, count, [*ops, *group]))
        return VisionMultiView(groups, self.vision, self.several_images, self.one_image)

    def to_spec(self) -> Any:
        spec = super().to_spec()
        for g in spec.views:
            g.several_images = g.name in self.several_images
            g.one_image = g.name in self.one_image
        return spec


def _tile_resize(v: InternVision, interpolation: str = "bicubic") -> Any:
    from stoker._ops_generated import TileResize

    return TileResize(tile_size=v.tile_size, min_tiles=v.min_tiles, max_tiles=v.max_tiles, interpolation=interpolation,
                      tokens_per_tile=v.tokens_per_tile)


def _internvl_transform(v: InternVision, interpolation: str = "bicubic") -> Any:
    """InternVL's: the canvas, and with use_thumbnail the thumbnail as a
    second view (both of one decode; the server makes the thumbnail of a
    one-tile image too, vision_inputs leaves it out as the processor
    does)."""
    if not v.use_thumbnail:
        return VisionCompose([_tile_resize(v, interpolation)], v)
    from stoker._ops import Resize

    thumb = Resize((v.tile_size, v.tile_size), interpolation=interpolation)
    return VisionMultiView([("tiles", 1, [_tile_resize(v, interpolation)]), ("thumbnail", 1, [thumb])], v)


def _internvl() -> Any:
    # InternVL3's checkpoints (OpenGVLab/InternVL3-*-hf preprocessor_config.json):
    # GotOcr2ImageProcessor, crop_to_patches, 1 to 12 tiles of 448, bicubic, ImageNet's mean and std.
    return _internvl_transform(InternVision())


#: LLaVA-OneVision's model count (llava-onevision-qwen2-*-ov-hf): 729
#: tokens a 384-px patch (27 a side), anyres_max_9, the full strategy.
ONEVISION_TOKENS = (27, 729, 9)


def _anyres_transform(v: AnyResVision, interpolation: str = "bicubic", tokens: Tuple[int, int, int] = (0, 0, 0)) -> Any:
    """LLaVA-OneVision's: the canvas, and the base image as a second view
    (both of one decode); tokens the model's count (tokens a patch side,
    the base image's tokens, anyres_max_N) for batch_tokens, (0, 0, 0):
    none."""
    from stoker._ops import Resize
    from stoker._ops_generated import AnyResResize

    flat = [int(x) for hw in v.grid_pinpoints for x in hw]
    grid, base, most = tokens
    canvas = AnyResResize(grid_pinpoints=flat, interpolation=interpolation, patch=v.patch_size if grid else 0,
                          tokens_grid=grid, base_tokens=base, max_patches=most)
    base = Resize((v.patch_size, v.patch_size), interpolation=interpolation)
    views = [("canvas", 1, [canvas]), ("base", 1, [base])]
    if v.multi_image:  # pad_to_square's background_color: the mean's, int(x * 255)
        from stoker._ops_generated import PadToSquare

        fill = [int(x * 255) for x in v.image_mean]
        views.append(("square", 1, [PadToSquare(fill=fill), Resize((v.patch_size, v.patch_size), interpolation=interpolation)]))
    return VisionMultiView(views, v, several_images=("square",), one_image=("canvas", "base"))


def _llava_onevision() -> Any:
    # LLaVA-OneVision's checkpoints (llava-hf/llava-onevision-qwen2-*-ov-hf
    # preprocessor_config.json): 384-pixel patches, the 36 pinpoints,
    # bicubic, mean and std 0.5 (SigLIP's).
    return _anyres_transform(AnyResVision(), tokens=ONEVISION_TOKENS)


def _smart_resize(min_pixels: int, max_pixels: int, factor: int, interpolation: str = "bicubic") -> Any:
    from stoker._ops_generated import SmartResize

    return SmartResize(min_pixels=min_pixels, max_pixels=max_pixels, factor=factor, interpolation=interpolation)


def _qwen2_vl() -> VisionCompose:
    # Qwen2VLImageProcessor's class defaults (Qwen2-VL, Qwen2.5-VL).
    v = QwenVision()
    return VisionCompose([_smart_resize(56 * 56, 28 * 28 * 1280, v.factor)], v)


def _qwen3_vl() -> VisionCompose:
    # Qwen3-VL's checkpoints' preprocessor_config.json: patch 16, merge 2,
    # mean and std 0.5, 256*256 to 4096*4096 pixels.
    v = QwenVision(patch_size=16, image_mean=(0.5, 0.5, 0.5), image_std=(0.5, 0.5, 0.5))
    return VisionCompose([_smart_resize(256 * 256, 4096 * 4096, v.factor)], v)


def _naflex_resize(patch_size: int, max_num_patches: int, interpolation: str = "bilinear") -> Any:
    from stoker._ops_generated import NaFlexResize

    return NaFlexResize(patch_size=patch_size, max_num_patches=max_num_patches, interpolation=interpolation)


def _siglip2_naflex() -> VisionCompose:
    # Siglip2ImageProcessor's class defaults: patch 16, 256 patches, bilinear, mean and std 0.5.
    v = NaFlexVision()
    return VisionCompose([_naflex_resize(v.patch_size, v.max_num_patches)], v)


#: The vision-language presets: names the client resolves (the server sees
#: their SmartResize or NaFlexResize), each a processor's defaults.
VLM_PRESETS = {"qwen2-vl": _qwen2_vl, "qwen3-vl": _qwen3_vl, "siglip2-naflex": _siglip2_naflex, "internvl": _internvl,
               "llava-onevision": _llava_onevision}


def vlm_preset(name: str) -> Any:
    """The transform of a vision-language preset (:data:`VLM_PRESETS`)."""
    return VLM_PRESETS[name]()


def _refuse(name: str, what: str) -> None:
    raise ValueError(f"from_hf: {name}: {what}")


def from_hf(processor: Any, *, tokens_per_tile: int = 256, before: Any = ()) -> Any:
    """A transform that makes what a Hugging Face processor makes of each
    image: a Qwen2-VL, Qwen2.5-VL or Qwen3-VL image processor (transformers'
    ``Qwen2VLImageProcessor``, its torchvision back-end, the default), or a
    processor holding one (``Qwen2VLProcessor``, ``Qwen3VLProcessor``...:
    its ``image_processor``), as configured: its ``size`` (``shortest_edge``
    and ``longest_edge``, the min and max pixels), ``patch_size``,
    ``merge_size``, ``temporal_patch_size``, ``resample``, rescale and
    normalize. Also SigLIP2's ``Siglip2ImageProcessor`` (NaFlex), InternVL's
    ``GotOcr2ImageProcessor`` with ``crop_to_patches`` (its tiles and
    thumbnail; ``tokens_per_tile``, the model's tokens a tile, for
    ``batch_tokens``), ``LlavaOnevisionImageProcessor`` and
    ``LlavaNextImageProcessor`` (AnyRes; of OneVision's, each image's
    square too, what the processor makes of an image of a record of
    several, which the server makes only where the data has such
    records). Serve
    it with :class:`stoker.Loader` and call
    :meth:`stoker.Batch.vision_inputs` on its batches (docs/vlm.md).

    ``before``: augmentation a trainer runs on the image before the
    processor, made on the image at its own size before the resize:
    :class:`~stoker.transforms.ColorJitter` and
    ``RandomPhotometricDistort``; and first, a
    :class:`~stoker.transforms.RandomResizedCrop` (every image then that
    size, which the processor resizes as it resizes any image: two
    resizes, none where smart_resize keeps the size), the photometric ops
    then on the crop. Of the processors of several views (InternVL's
    tiles and thumbnail, OneVision's canvas, base and square) they are
    drawn and made once an image: every view is of the one augmented
    image.

    What stoker does not do the processor's way is refused with ValueError
    naming it: another processor class (the PIL back-end, whose bicubic is
    PIL's), ``do_resize=False``, a resample other than nearest, bilinear or
    bicubic, ``do_convert_rgb=False``, neither rescale nor normalize."""
    tf = _from_hf(processor, tokens_per_tile)
    before = list(before)
    if not before:
        return tf
    name = type(getattr(processor, "image_processor", None) or processor).__name__
    crops = [op for op in before if type(op).__name__ == "RandomResizedCrop"]
    for op in before:
        if type(op).__name__ not in ("ColorJitter", "RandomPhotometricDistort", "RandomResizedCrop"):
            _refuse(name, f"before=: {type(op).__name__}: stoker makes RandomResizedCrop, ColorJitter and "
                          "RandomPhotometricDistort before a processor's resize")
    if crops and (len(crops) > 1 or type(before[0]).__name__ != "RandomResizedCrop"):
        _refuse(name, "before=: one RandomResizedCrop, first (the photometric ops may then follow it)")
    if isinstance(tf, VisionMultiView):  # every view of the one augmented image: the server draws it once
        return tf.before(before)
    # The crop (resized to its size), the photometric ops on it, then the processor's resize (none where
    # smart_resize keeps the crop's size and no op comes between: the crop alone is the processor's pixels).
    return VisionCompose([*before, *tf.transforms], tf.vision)


def _from_hf(processor: Any, tokens_per_tile: int) -> Any:
    """from_hf without its augmentation before."""
    ip = getattr(processor, "image_processor", None) or processor
    name = type(ip).__name__
    if name in _NAFLEX:
        return _from_siglip2(ip, name)
    if name in _GOTOCR2:
        return _from_gotocr2(ip, name, tokens_per_tile)
    if name in _ONEVISION:
        return _from_onevision(ip, name, processor)
    if name in _NEXT:
        return _from_llava_next(ip, name, processor)
    if name not in _SUPPORTED:
        _refuse(name, f"not a processor stoker reproduces (it does {', '.join(_SUPPORTED)}: the Qwen2-VL family's "
                      "torchvision back-end; load it with AutoImageProcessor.from_pretrained(..., backend='torchvision'))")

    def get(key: str, default: Any = None) -> Any:
        return getattr(ip, key, default)

    interp = _resize_of(ip, name, 3, "stoker's SmartResize always resizes (a batch of unresized images has no grid)")
    size = _size_of(ip)
    lo = size.get("shortest_edge") or get("min_pixels")
    hi = size.get("longest_edge") or get("max_pixels")
    if not lo or not hi:
        _refuse(name, f"size {size!r}: want shortest_edge and longest_edge (the min and max pixels)")
    patch, merge, temporal = int(get("patch_size", 14)), int(get("merge_size", 2)), int(get("temporal_patch_size", 2))
    v = QwenVision(patch_size=patch, merge_size=merge, temporal_patch_size=temporal,
                   **_norm_args(ip, name, OPENAI_CLIP_MEAN, OPENAI_CLIP_STD))
    return VisionCompose([_smart_resize(int(lo), int(hi), v.factor, interp)], v)


# SigLIP2's NaFlex processors from_hf converts: transformers 5's torchvision
# back-end and 4.x's name for it.
_NAFLEX = ("Siglip2ImageProcessor", "Siglip2ImageProcessorFast")


def _norm_args(ip: Any, name: str, mean0: Tuple[float, ...], std0: Tuple[float, ...]) -> Dict[str, Any]:
    """A processor's rescale and normalize, checked: from_hf's refusals."""
    do_rescale, do_normalize = bool(getattr(ip, "do_rescale", True)), bool(getattr(ip, "do_normalize", True))
    if not (do_rescale or do_normalize):
        _refuse(name, "neither do_rescale nor do_normalize: pixel_values would stay uint8")
    mean = getattr(ip, "image_mean", None)
    std = getattr(ip, "image_std", None)
    if do_normalize and (mean is None or std is None):
        _refuse(name, "do_normalize with image_mean or image_std None (the processor refuses it too)")
    mean, std = mean0 if mean is None else mean, std0 if std is None else std
    mean = tuple(float(m) for m in (mean if isinstance(mean, (list, tuple)) else [mean] * 3))
    std = tuple(float(x) for x in (std if isinstance(std, (list, tuple)) else [std] * 3))
    if len(mean) != 3 or len(std) != 3:
        _refuse(name, f"image_mean {mean!r}, image_std {std!r}: want 3 values each (RGB)")
    return dict(do_rescale=do_rescale, rescale_factor=float(getattr(ip, "rescale_factor", 1 / 255)),
                do_normalize=do_normalize, image_mean=mean, image_std=std)


def _from_siglip2(ip: Any, name: str) -> VisionCompose:
    """from_hf of a Siglip2ImageProcessor: its patch_size, max_num_patches,
    resample, rescale and normalize."""
    interp = _resize_of(ip, name, 2, "stoker's NaFlexResize always resizes")
    v = NaFlexVision(patch_size=int(getattr(ip, "patch_size", 16)), max_num_patches=int(getattr(ip, "max_num_patches", 256)),
                     **_norm_args(ip, name, (0.5, 0.5, 0.5), (0.5, 0.5, 0.5)))
    return VisionCompose([_naflex_resize(v.patch_size, v.max_num_patches, interp)], v)


# InternVL's image processors from_hf converts (transformers' GotOcr2, which
# InternVLProcessor holds): 5's torchvision back-end, 4.x's name for it.
_GOTOCR2 = ("GotOcr2ImageProcessor", "GotOcr2ImageProcessorFast")


def _resize_of(ip: Any, name: str, default: int, no_resize: str) -> str:
    """A processor's resize as stoker makes it, checked: do_resize (else
    refused, saying no_resize), do_convert_rgb, and its resample (default
    when it has none) as stoker's interpolation."""
    if not getattr(ip, "do_resize", True):
        _refuse(name, f"do_resize=False: {no_resize}")
    if getattr(ip, "do_convert_rgb", True) is False:
        _refuse(name, "do_convert_rgb=False: stoker always decodes to RGB")
    resample = getattr(ip, "resample", default)
    code = int(getattr(resample, "value", resample)) if not isinstance(resample, str) else None
    interp = _RESAMPLE.get(code) if code is not None else None
    if interp is None:
        _refuse(name, f"resample={resample!r}: stoker resizes with nearest, bilinear or bicubic (torchvision's uint8)")
    return interp


def _size_of(ip: Any, attr: str = "size") -> Dict[str, Any]:
    """A processor's size (or crop_size: attr; a dict or a SizeDict) as a dict."""
    size = getattr(ip, attr, None) or {}
    return dict(size.items()) if hasattr(size, "items") else dict(vars(size))


def _square_side(ip: Any, name: str, what: str) -> int:
    """A processor's square size's side (height == width), else refused."""
    size = _size_of(ip)
    h, w = size.get("height"), size.get("width")
    if not h or h != w:
        _refuse(name, f"size {size!r}: stoker's {what} (height == width)")
    return int(h)


def _from_gotocr2(ip: Any, name: str, tokens_per_tile: int = 256) -> Any:
    """from_hf of InternVL's GotOcr2ImageProcessor: crop_to_patches, its
    size (square tiles), min_patches and max_patches, resample, rescale and
    normalize; the thumbnail as the processor adds it; tokens_per_tile the
    model's (batch_tokens)."""
    if not getattr(ip, "crop_to_patches", False):
        _refuse(name, "crop_to_patches=False: stoker converts InternVL's tiling (crop_to_patches=True); "
                      "the plain resize is stoker.transforms.Resize((h, w))")
    interp = _resize_of(ip, name, 3, "the tiles are a resize of the image")
    th = _square_side(ip, name, "TileResize makes square tiles")
    lo, hi = int(getattr(ip, "min_patches", 1)), int(getattr(ip, "max_patches", 12))
    v = InternVision(tile_size=int(th), min_tiles=lo, max_tiles=hi, tokens_per_tile=int(tokens_per_tile),
                     **_norm_args(ip, name, OPENAI_CLIP_MEAN, OPENAI_CLIP_STD))
    return _internvl_transform(v, interp)


# LLaVA-OneVision's image processors from_hf converts: 5's torchvision
# back-end, 4.x's name for it.
_ONEVISION = ("LlavaOnevisionImageProcessor", "LlavaOnevisionImageProcessorFast")


def _anyres_count(processor: Any, name: str, patch: int, next_: bool) -> Tuple[int, int, int]:
    """The model's vision tokens of AnyRes for batch_tokens, from the
    processor that holds the image processor (LlavaOnevisionProcessor's
    num_image_tokens, vision_aspect_ratio and vision_feature_select_strategy;
    LlavaNextProcessor's patch_size, num_additional_image_tokens and the
    strategy), or the checkpoints' when given the image processor alone:
    (tokens a patch side, the base image's tokens, anyres_max_N or 0)."""
    import math

    held = getattr(processor, "image_processor", None) is not None
    get = (lambda k, d: getattr(processor, k, None) or d) if held else (lambda k, d: d)
    minus = 1 if get("vision_feature_select_strategy", "full" if not next_ else "default") == "default" else 0
    if next_:
        g = patch // int(get("patch_size", 14))
        return g, g * g + int(get("num_additional_image_tokens", 1)) - minus, 0
    n = int(get("num_image_tokens", 729))
    g = math.isqrt(n)
    ratio = str(get("vision_aspect_ratio", "anyres_max_9"))
    if not ratio.startswith("anyres_max_") or not ratio[len("anyres_max_"):].isdigit():
        _refuse(name, f"vision_aspect_ratio {ratio!r}: stoker counts anyres_max_N")
    return g, n - minus, int(ratio[len("anyres_max_"):])


def _from_onevision(ip: Any, name: str, processor: Any = None) -> Any:
    """from_hf of LLaVA-OneVision's image processor: its size (square: the
    patch), image_grid_pinpoints (each a multiple of the patch), resample,
    rescale, normalize and do_pad; the model's count of tokens from the
    processor (_anyres_count)."""
    if getattr(ip, "do_center_crop", None):
        _refuse(name, "do_center_crop=True: stoker's AnyRes does not crop the patches")
    interp = _resize_of(ip, name, 3, "the patches are a resize of the image")
    ph = _square_side(ip, name, "AnyRes wants a square patch")
    pins = tuple((int(h), int(w)) for h, w in getattr(ip, "image_grid_pinpoints", ONEVISION_PINPOINTS))
    for h, w in pins:
        if h % ph or w % ph:
            _refuse(name, f"image_grid_pinpoints {h}x{w}: not whole patches of {ph} (the processor's patches would not stack)")
    v = AnyResVision(patch_size=int(ph), grid_pinpoints=pins, do_pad=bool(getattr(ip, "do_pad", True)),
                     **_norm_args(ip, name, OPENAI_CLIP_MEAN, OPENAI_CLIP_STD))
    return _anyres_transform(v, interp, _anyres_count(processor if processor is not None else ip, name, int(ph), False))


_NEXT = ("LlavaNextImageProcessor", "LlavaNextImageProcessorFast")


def _from_llava_next(ip: Any, name: str, processor: Any = None) -> Any:
    """from_hf of LLaVA-NeXT's image processor: AnyRes as OneVision's, its
    patch the crop_size, its base the image resized to (shortest_edge,
    shortest_edge); each patch and the base then resized to the
    shortest_edge and center-cropped to crop_size, which is nothing when
    the two are equal (its checkpoints': 336), and refused otherwise."""
    interp = _resize_of(ip, name, 3, "the patches are a resize of the image")
    size, crop = _size_of(ip), _size_of(ip, "crop_size")
    s = size.get("shortest_edge") or (size.get("height") if size.get("height") == size.get("width") else None)
    c = crop.get("height") if crop.get("height") and crop.get("height") == crop.get("width") else None
    if not s or (getattr(ip, "do_center_crop", True) and c != s) or (not getattr(ip, "do_center_crop", True) and c and c != s):
        _refuse(name, f"size {size!r} and crop_size {crop!r}: stoker's AnyRes wants a square patch of the size's side "
                      "(each patch then neither resized nor cropped again)")
    p = int(s)
    pins = tuple((int(h), int(w)) for h, w in getattr(ip, "image_grid_pinpoints", LLAVA_NEXT_PINPOINTS))
    for h, w in pins:
        if h % p or w % p:
            _refuse(name, f"image_grid_pinpoints {h}x{w}: not whole patches of {p} (the processor's patches would not stack)")
    v = AnyResVision(patch_size=p, grid_pinpoints=pins, do_pad=bool(getattr(ip, "do_pad", True)), batch_num_images=False, multi_image=False,
                     **_norm_args(ip, name, OPENAI_CLIP_MEAN, OPENAI_CLIP_STD))
    return _anyres_transform(v, interp, _anyres_count(processor if processor is not None else ip, name, p, True))


def _cut(x: Any, i: int, h: int, w: int, p: int, op: str) -> Any:
    """Sample i's uint8 canvas x ([3, h, w]) cut into its p x p tiles, row
    by row: [rows * cols, 3, p, p] (views of x, no copy); a canvas that is
    not uint8 or not whole tiles is refused, naming the op that makes it."""
    import torch

    if x.dtype != torch.uint8:
        raise ValueError(f"vision_inputs wants the uint8 images a{'n' if op[0] in 'AEIOU' else ''} {op} makes, got {x.dtype}")
    if h % p or w % p:
        raise ValueError(f"sample {i} is {h}x{w} (height x width): not whole tiles of {p}; was the transform a{'n' if op[0] in 'AEIOU' else ''} {op} of that size?")
    return x.reshape(3, h // p, p, w // p, p).permute(1, 3, 0, 2, 4).reshape(-1, 3, p, p)


def anyres_inputs(views: Any, sizes: Any, source_sizes: Any, v: AnyResVision, num_images: Any = None) -> Dict[str, Any]:
    """LLaVA-OneVision's processor's ``pixel_values`` (float32 ``[N, most
    patches, 3, P, P]`` with do_pad: each image's base, then its canvas's
    patches row by row, then zeros; an image of a record of several its
    square alone; a list of each image's without), ``image_sizes`` (int64
    ``[N, 2]``, each image's height and width as decoded) and
    ``batch_num_images`` (int64, each record's images: ``num_images``, or
    ones, ``[N]``) of a ragged batch: ``views`` the canvases (each uint8
    ``[3, H, W]``, whole patches), the bases (``[3, P, P]``) and, with
    multi_image, the squares (``[3, P, P]``), on their device."""
    import torch

    several = v.batch_num_images and num_images is not None and bool((num_images > 1).any())
    if several and (not v.multi_image or len(views) < 3):
        raise ValueError("vision_inputs: LLaVA-OneVision's processor pads each image of a record of several to a square "
                         "(the mean's colour) and does not patch it, and this batch has no such square: its transform "
                         "makes none (AnyResVision(multi_image=False)); serve it with from_hf(processor) (docs/vlm.md)")
    canvases, bases = views[0], views[1]
    squares = views[2] if several else None
    # The processor's need_patching: an image of a record of one.
    patched = [n == 1 for n in num_images.tolist() for _ in range(n)] if several else None
    p = v.patch_size
    dev = canvases[0].device if canvases else torch.device("cpu")
    mean, std = _mean_std(v, dev) if v.do_normalize else (None, None)
    out = []
    for i, (h, w) in enumerate(sizes[0].tolist()):
        if patched is not None and not patched[i]:
            x = squares[i].reshape(1, 3, p, p).to(torch.float32)
        else:
            patches = _cut(canvases[i], i, h, w, p, "AnyResResize")
            x = torch.cat([bases[i].reshape(1, 3, p, p), patches], dim=0).to(torch.float32)
        out.append(x.sub_(mean).div_(std) if v.do_normalize else x.mul_(v.rescale_factor))
    n = len(out)
    if v.do_pad:
        most = max((x.shape[0] for x in out), default=0)
        values: Any = torch.zeros(n, most, 3, p, p, dtype=torch.float32, device=dev)
        for i, x in enumerate(out):
            values[i, : x.shape[0]] = x
    else:
        values = out
    out_ = {"pixel_values": values, "image_sizes": source_sizes.to(torch.long).reshape(-1, 2)}
    if v.batch_num_images:
        out_["batch_num_images"] = num_images if num_images is not None else torch.ones(n, dtype=torch.long)
    return out_


def internvl_inputs(views: Any, sizes: Any, v: InternVision) -> Dict[str, "torch.Tensor"]:
    """InternVL's processor's ``pixel_values`` (float32 ``[sum of tiles, 3,
    tile, tile]``: each image's tiles row by row, then its thumbnail when it
    has more than one tile) and ``num_patches`` (int64 ``[N]``) of a ragged
    batch: ``views`` the canvases (each uint8 ``[3, rows * tile, cols *
    tile]``, on its device) and, with use_thumbnail, the thumbnails (each
    ``[3, tile, tile]``); ``sizes`` each view's int64 ``[N, 2]``."""
    import torch

    canvases = views[0]
    thumbs = views[1] if v.use_thumbnail else None
    t = v.tile_size
    dev = canvases[0].device if canvases else torch.device("cpu")
    mean, std = _mean_std(v, dev) if v.do_normalize else (None, None)
    out, counts = [], []
    for i, (h, w) in enumerate(sizes[0].tolist()):
        tiles = _cut(canvases[i], i, h, w, t, "TileResize")
        if thumbs is not None and tiles.shape[0] > 1:
            tiles = torch.cat([tiles, thumbs[i].reshape(1, 3, t, t)], dim=0)
        out.append(tiles)
        counts.append(tiles.shape[0])
    if not out:
        return {"pixel_values": torch.empty(0, 3, t, t, device=dev), "num_patches": torch.empty(0, dtype=torch.long)}
    x = torch.cat(out, dim=0).to(torch.float32)
    x = x.sub_(mean).div_(std) if v.do_normalize else x.mul_(v.rescale_factor)
    return {"pixel_values": x, "num_patches": torch.tensor(counts, dtype=torch.long)}


def naflex_inputs(images: Any, sizes: Any, v: NaFlexVision) -> Dict[str, "torch.Tensor"]:
    """Siglip2ImageProcessor's ``pixel_values`` (float32 ``[N,
    max_num_patches, P * P * C]``, each image's patches row-major then
    zeros), ``pixel_attention_mask`` (int32 ``[N, max_num_patches]``, 1 on
    its patches) and ``spatial_shapes`` (int64 ``[N, 2]``, its patch grid)
    of a ragged batch's images (each uint8 ``[3, h, w]``, on its device)."""
    import torch

    p, n = v.patch_size, v.max_num_patches
    dev = images[0].device if images else torch.device("cpu")
    mean, std = _mean_std(v, dev) if v.do_normalize else (None, None)
    values = torch.zeros(len(images), n, p * p * 3, dtype=torch.float32, device=dev)
    mask = torch.zeros(len(images), n, dtype=torch.int32, device=dev)
    shapes = []
    for i, (h, w) in enumerate(sizes.tolist()):
        x = images[i]
        if x.dtype != torch.uint8:
            raise ValueError(f"vision_inputs wants the uint8 images a NaFlexResize makes, got {x.dtype}")
        if h % p or w % p or (h // p) * (w // p) > n:
            raise ValueError(f"sample {i} is {h}x{w} (height x width): not a NaFlexResize of patch {p} and {n} patches")
        x = x.to(torch.float32).sub_(mean).div_(std) if v.do_normalize else x * v.rescale_factor
        nh, nw = h // p, w // p
        values[i, : nh * nw] = x.reshape(3, nh, p, nw, p).permute(1, 3, 2, 4, 0).reshape(nh * nw, p * p * 3)
        mask[i, : nh * nw] = 1
        shapes.append((nh, nw))
    return {"pixel_values": values, "pixel_attention_mask": mask,
            "spatial_shapes": torch.tensor(shapes, dtype=torch.int64, device=dev).reshape(-1, 2)}


_consts: Dict[Any, Any] = {}


def _mean_std(v: Any, device: Any) -> Tuple[Any, Any]:
    """The processor's normalize constants on device: with rescale, mean
    and std times 1/rescale_factor as its _fuse_mean_std_and_rescale_factor
    makes them (float32 tensors, on the CPU, then moved)."""
    import torch

    key = (v, str(device))
    got = _consts.get(key)
    if got is None:
        mean, std = torch.tensor(v.image_mean), torch.tensor(v.image_std)
        if v.do_rescale and v.do_normalize:
            mean, std = mean * (1.0 / v.rescale_factor), std * (1.0 / v.rescale_factor)
        got = (mean.view(-1, 1, 1).to(device), std.view(-1, 1, 1).to(device))
        _consts[key] = got
    return got


def vision_inputs(images: Any, sizes: Any, v: QwenVision, layout: str = "NCHW",
                  device: Optional[Any] = None) -> Dict[str, "torch.Tensor"]:
    """The processor's ``pixel_values`` and ``image_grid_thw`` of a padded
    uint8 batch (``images`` ``[N, 3, H, W]``, or NHWC; or a ragged batch's
    list of each image's ``[3, h, w]``, on its device) whose samples are
    ``sizes`` (int64 ``[N, 2]``, height and width), on ``device``: per
    image, float32, then (x - mean) / std (rescale fused in, as the
    processor's torchvision back-end does it) or x * rescale_factor, its
    patches in the processor's order ([grid_h / m, grid_w / m, m, m]), each
    C x T x P x P with the image repeated over the T temporal frames."""
    import torch

    if isinstance(images, (list, tuple)):  # a ragged batch's: each [3, h, w], on its device already
        dtype = images[0].dtype if images else torch.uint8
        dev = images[0].device if images else torch.device("cpu")
        crops = list(images)
    else:
        dtype = images.dtype
        if device is not None:
            images = images.to(device, non_blocking=True)
        if layout == "NHWC":
            images = images.permute(0, 3, 1, 2)
        dev = images.device
        crops = [images[i, :, :h, :w] for i, (h, w) in enumerate(sizes.tolist())]
    if dtype != torch.uint8:
        raise ValueError(f"vision_inputs wants the uint8 images a SmartResize makes, got {dtype} "
                         "(a Normalize in the transform: leave it out, vision_inputs normalizes)")
    p, m, t = v.patch_size, v.merge_size, v.temporal_patch_size
    mean, std = _mean_std(v, dev) if v.do_normalize else (None, None)
    out, grids = [], []
    for i, (h, w) in enumerate(sizes.tolist()):
        if h % v.factor or w % v.factor:
            raise ValueError(f"sample {i} is {h}x{w} (height x width): not multiples of {v.factor}; "
                             "was the transform a SmartResize of the same patch and merge sizes?")
        x = crops[i]
        if v.do_normalize:
            x = x.to(torch.float32).sub_(mean).div_(std)
        else:
            x = x * v.rescale_factor
        c, gh, gw = x.shape[0], h // p, w // p
        x = x.reshape(1, c, gh // m, m, p, gw // m, m, p).permute(0, 2, 5, 3, 6, 1, 4, 7)
        x = x.unsqueeze(6).expand(-1, -1, -1, -1, -1, -1, t, -1, -1).reshape(gh * gw, c * t * p * p)
        out.append(x)
        grids.append([1, gh, gw])
    if not out:
        return {"pixel_values": torch.empty(0, 3 * t * p * p, device=dev),
                "image_grid_thw": torch.empty(0, 3, dtype=torch.long, device=dev)}
    pixel_values = out[0] if len(out) == 1 else torch.cat(out, dim=0)
    return {"pixel_values": pixel_values, "image_grid_thw": torch.tensor(grids, dtype=torch.long, device=dev)}
