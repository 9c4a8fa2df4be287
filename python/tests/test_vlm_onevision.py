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
    seen, padded = set(), 0
    with stoker.Loader(vlm_server, "vlm", transform=tf(proc), batch_size=5, fields=("path",), shuffle=False,
                       max_size=bound, pin_memory=False, timeout=120, transport=transport) as ld:
        for b in ld:
            got = b.vision_inputs()
            canvases, bases = b.images
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
                padded += (rh, rw) != (bh, bw)
                seen.add(b.fields["path"][i])
        assert not list(ld.sample_errors)
    assert len(seen) == len(os.listdir(vlm_data / "images"))
    assert padded > 0  # some canvases padded: the centring exercised


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
