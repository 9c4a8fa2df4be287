"""SigLIP2 NaFlex (transformers' Siglip2ImageProcessor, its torchvision
back-end, 5.24.0): stoker's NaFlexResize makes each image's uint8 as the
processor resizes it, the batch ragged, and Batch.vision_inputs makes its
pixel_values, pixel_attention_mask and spatial_shapes, against the
processor on torchvision.io.decode_jpeg's pixels of the committed photos
and the extremes test_vlm_qwen.py makes of them."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, List

import pytest
import torch

import stoker
from stoker import transforms as T
from test_vlm_qwen import bad_data, decoded, vlm_data, vlm_server  # noqa: F401 (fixtures)

from transformers.models.siglip2 import image_processing_siglip2 as siglip2  # pinned in requirements-dev.txt: a missing one fails, never skips


def processor(**kw: Any) -> Any:
    return siglip2.Siglip2ImageProcessor(**kw)


@pytest.mark.parametrize("transport", ["grpc", "shm"])
@pytest.mark.parametrize("name, kw, bound", [
    ("defaults", {}, (512, 3232)),  # 256 patches of 16: the strip's 16 x 3232 needs a max_size
    ("small", dict(max_num_patches=64, patch_size=14, resample=3), (448, 2240)),
])
def test_naflex_parity(vlm_server: str, vlm_data: Path, name: str, kw: Any, bound: Any, transport: str) -> None:  # noqa: F811
    proc = processor(**kw)
    tf = T.from_hf(proc)
    n = 0
    with stoker.Loader(vlm_server, "vlm", transform=tf, batch_size=5, fields=("path",), shuffle=False, max_size=bound,
                       pin_memory=False, timeout=120, transport=transport) as ld:
        for b in ld:
            got = b.vision_inputs()
            imgs: List[torch.Tensor] = [decoded(vlm_data, p) for p in b.fields["path"]]
            want = proc(images=imgs, return_tensors="pt")
            where = f"{name} {transport} {[p.decode() for p in b.fields['path']]}"
            assert torch.equal(got["spatial_shapes"], want["spatial_shapes"]), where
            assert torch.equal(got["pixel_attention_mask"], want["pixel_attention_mask"].to(torch.int32)), where
            assert got["pixel_values"].dtype == torch.float32 and got["pixel_values"].shape == want["pixel_values"].shape
            torch.testing.assert_close(got["pixel_values"], want["pixel_values"], atol=1e-6, rtol=0)
            for i, img in enumerate(imgs):
                h, w = b.sizes[i].tolist()
                th, tw = siglip2.get_image_size_for_max_num_patches(img.shape[1], img.shape[2], proc.patch_size,
                                                                    proc.max_num_patches)
                assert (h, w) == (th, tw), where
                # The uint8 image itself: the processor's resize, byte for byte.
                ref = proc.resize(image=img, size=siglip2.SizeDict(height=th, width=tw), resample=proc.resample)
                assert torch.equal(b.images[i], ref), f"{where} sample {i}"
                n += 1
        assert not list(ld.sample_errors)
    assert n == len(os.listdir(vlm_data / "images"))


def test_naflex_preset_and_refusals() -> None:
    a, b = T.VLM_PRESETS["siglip2-naflex"](), T.from_hf(processor())
    assert a.vision == b.vision and T.to_spec(a) == T.to_spec(b)
    with pytest.raises(ValueError, match="do_resize=False"):
        T.from_hf(processor(do_resize=False))
    with pytest.raises(ValueError, match="resample"):
        T.from_hf(processor(resample=1))
