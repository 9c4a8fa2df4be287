"""LLaVA-OneVision's AnyRes (transformers' LlavaOnevisionImageProcessor, its
torchvision back-end, 5.24.0): stoker's AnyResResize makes each image's
canvas (the best-fitting resolution of the grid pinpoints, the image resized
into it and padded with zeros, centred), a second view of the same decode
its base image, the batch ragged view after view with each image's size as
decoded (BatchHeader.source_sizes), and Batch.vision_inputs cuts the patches
and gives the processor's pixel_values, image_sizes and batch_num_images,
against the processor on torchvision.io.decode_jpeg's pixels of the
committed photos and the extremes test_vlm_qwen.py makes of them."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, List

import pytest
import torch
import torch.nn.functional as F

import stoker
from stoker import transforms as T
from test_vlm_qwen import bad_data, decoded, vlm_data, vlm_server  # noqa: F401 (fixtures)

from transformers.image_processing_utils import get_patch_output_size, select_best_resolution  # pinned: never skips
from transformers.image_utils import ChannelDimension, SizeDict
from transformers.models.llava_next import image_processing_llava_next as nx
from transformers.models.llava_onevision import image_processing_llava_onevision as ov


def onevision(**kw: Any) -> Any:
    """LLaVA-OneVision's image processor as its checkpoints configure it
    (llava-hf/llava-onevision-qwen2-*-ov-hf: mean and std 0.5)."""
    args = dict(image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5])
    args.update(kw)
    return ov.LlavaOnevisionImageProcessor(**args)


def llava_next(**kw: Any) -> Any:
    """LLaVA-NeXT's image processor as its checkpoints configure it
    (llava-hf/llava-v1.6-*-hf: 336-px patches, the class's five pinpoints,
    OpenAI CLIP's mean and std, bicubic)."""
    args = dict(size={"shortest_edge": 336}, crop_size={"height": 336, "width": 336})
    args.update(kw)
    return nx.LlavaNextImageProcessor(**args)


# name: (processor, transform, max_size)
CONFIGS = {
    "llava-next": (llava_next, T.from_hf, None),
    "next-small": (lambda: llava_next(size={"shortest_edge": 56}, crop_size={"height": 56, "width": 56}, resample=2,
                                      image_grid_pinpoints=[[56, 112], [112, 56], [112, 112], [168, 56], [56, 168]]),
                   T.from_hf, None),
    "llava-onevision": (onevision, lambda p: "llava-onevision", None),
    "small": (lambda: ov.LlavaOnevisionImageProcessor(  # the class's mean and std (OpenAI CLIP's), bilinear
        size={"height": 56, "width": 56}, resample=2,
        image_grid_pinpoints=[[56, 112], [112, 56], [112, 112], [168, 56], [56, 168]]), T.from_hf, None),
}


@pytest.mark.parametrize("transport", ["grpc", "shm"])
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_onevision_parity(vlm_server: str, vlm_data: Path, name: str, transport: str) -> None:  # noqa: F811
    make, tf, bound = CONFIGS[name]
    proc = make()
    crop = proc.crop_size if name.startswith("next") or name == "llava-next" else proc.size
    p = crop.height if isinstance(crop, SizeDict) else crop["height"]
    seen, padded, squared = set(), 0, 0
    tf = tf(proc)
    if name == "small":  # its squares made for single images too, to hold them to the processor's
        tf.several_images = ()
    with stoker.Loader(vlm_server, "vlm", transform=tf, batch_size=5, fields=("path",), shuffle=False,
                       max_size=bound, pin_memory=False, timeout=120, transport=transport) as ld:
        for b in ld:
            got = b.vision_inputs()
            canvases, bases = b.images[:2]
            squares = b.images[2] if len(b.images) > 2 else None  # OneVision's: an image of a record of several
            assert (squares is not None) == (name == "small"), len(b.images)  # else left out: no record of several here
            imgs: List[torch.Tensor] = [decoded(vlm_data, x) for x in b.fields["path"]]
            want = proc(images=imgs, return_tensors="pt")
            where = f"{name} {transport} {[x.decode() for x in b.fields['path']]}"
            assert torch.equal(got["image_sizes"], want["image_sizes"]), where
            assert set(got) == set(want.keys()), (where, set(got), set(want.keys()))
            if "batch_num_images" in want:  # OneVision's; LLaVA-NeXT's processor gives none
                assert torch.equal(got["batch_num_images"], torch.as_tensor(want["batch_num_images"]).long()), where
            assert got["pixel_values"].shape == want["pixel_values"].shape, (where, got["pixel_values"].shape)
            torch.testing.assert_close(got["pixel_values"], want["pixel_values"], atol=1e-6, rtol=0)
            for i, img in enumerate(imgs):
                h, w = img.shape[1:]
                assert tuple(b.source_sizes[i].tolist()) == (h, w), where
                bh, bw = select_best_resolution((h, w), proc.image_grid_pinpoints)
                assert tuple(b.sizes[0][i].tolist()) == (bh, bw), where
                # The uint8 canvas: the processor's resize into the resolution, padded as it pads, byte for byte.
                rh, rw = get_patch_output_size(img, (bh, bw), ChannelDimension.FIRST)
                ref = proc.resize(img[None], SizeDict(height=rh, width=rw), resample=proc.resample)[0]
                left, top = (bw - rw) // 2, (bh - rh) // 2  # the processor's divmod: the odd pixel right and bottom
                ref = F.pad(ref, [left, bw - rw - left, top, bh - rh - top])
                assert torch.equal(canvases[i], ref), f"{where} sample {i}"
                ref = proc.resize(img[None], SizeDict(height=p, width=p), resample=proc.resample)[0]
                assert torch.equal(bases[i], ref), f"{where} sample {i}"
                if squares is not None:  # the processor's pad_to_square (the mean's colour), then its resize
                    sq = proc.pad_to_square(img, background_color=tuple(int(x * 255) for x in proc.image_mean))
                    ref = proc.resize(sq[None], SizeDict(height=p, width=p), resample=proc.resample)[0]
                    assert torch.equal(squares[i], ref), f"{where} sample {i}: the square"
                    squared += h != w
                padded += (rh, rw) != (bh, bw)
                seen.add(b.fields["path"][i])
        assert not list(ld.sample_errors)
    assert len(seen) == len(os.listdir(vlm_data / "images"))
    assert padded > 0  # some canvases padded: the centring exercised
    assert squared > 0 or name != "small"  # the squares padded, the fill the mean's colour (CLIP's: not grey)


def test_onevision_preset_and_refusals() -> None:
    a, b = T.VLM_PRESETS["llava-onevision"](), T.from_hf(onevision())
    assert a.vision == b.vision and T.to_spec(a) == T.to_spec(b)
    with pytest.raises(ValueError, match="square"):
        T.from_hf(onevision(size={"height": 384, "width": 336}))
    with pytest.raises(ValueError, match="whole patches"):
        T.from_hf(onevision(image_grid_pinpoints=[[384, 500]]))
    with pytest.raises(ValueError, match="resample"):
        T.from_hf(onevision(resample=1))
    with pytest.raises(ValueError, match="crop_size"):  # each patch resized and cropped again: not stoker's AnyRes
        T.from_hf(llava_next(crop_size={"height": 224, "width": 224}))
    with pytest.raises(ValueError, match="whole patches"):
        T.from_hf(llava_next(image_grid_pinpoints=[[336, 500]]))


def counter(kind: str, proc: Any) -> Any:
    """transformers' token count of AnyRes (the processors'
    _get_number_of_features, which need no tokenizer), as the checkpoints
    configure it: OneVision's 729 tokens a patch, anyres_max_9 and the full
    strategy; LLaVA-NeXT's 14-px tokens, a CLS and the default strategy
    (one token off)."""
    from transformers.models.llava_next.processing_llava_next import LlavaNextProcessor
    from transformers.models.llava_onevision.processing_llava_onevision import LlavaOnevisionProcessor

    if kind == "onevision":
        c = LlavaOnevisionProcessor.__new__(LlavaOnevisionProcessor)
        c.num_image_tokens, c.vision_aspect_ratio, c.vision_feature_select_strategy = 729, "anyres_max_9", "full"
    else:
        c = LlavaNextProcessor.__new__(LlavaNextProcessor)
        c.patch_size, c.num_additional_image_tokens, c.vision_feature_select_strategy = 14, 1, "default"
    c.image_processor = proc
    return lambda h, w, p: c._get_number_of_features(h, w, p, p) - (c.vision_feature_select_strategy == "default")


@pytest.mark.parametrize("kind", ["onevision", "next"])
def test_anyres_batch_tokens(vlm_server: str, vlm_data: Path, kind: str) -> None:  # noqa: F811
    """batch_tokens with AnyRes: a batch's tokens, as transformers counts
    each image's (from its size as decoded), at most the budget; every
    sample once; batches of varying counts."""
    proc = onevision() if kind == "onevision" else llava_next()
    p = 384 if kind == "onevision" else 336
    count = counter(kind, proc)
    budget = 12000  # OneVision's canvas slot is 2304 x 2304: at most 14 of them within the server's batch bytes
    seen: List[bytes] = []
    counts = set()
    with stoker.Loader(vlm_server, "vlm", transform=T.from_hf(proc), batch_tokens=budget, fields=("path",), seed=3,
                       pin_memory=False, timeout=120) as ld:
        n, batches = len(ld), 0
        for b in ld:
            tokens = sum(count(h, w, p) for h, w in b.source_sizes.tolist())
            assert 0 < tokens <= budget, (tokens, b.source_sizes.tolist())
            seen += b.fields["path"]
            counts.add(len(b.fields["path"]))
            batches += 1
        assert not list(ld.sample_errors)
    assert batches == n and len(counts) > 1, counts
    assert sorted(seen) == sorted(f"images/{x}".encode() for x in os.listdir(vlm_data / "images"))
