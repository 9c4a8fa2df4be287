"""The vision-language processors' PIL back-ends (transformers 5.24's
``*ImageProcessorPil``, which a user may still load): stoker makes the
torchvision back-end's pixels exactly (test_vlm_qwen.py and kin); against
the PIL back-end on PIL's decode of the same committed photos, its
``pixel_values`` are within upstream's own bar between its two back-ends
(atol 1e-1), and on average within 5e-3. The figures of this run (42
photos, 2026-11-27): Qwen2-VL max 0.090, mean 0.0008; InternVL 0.070,
0.0001; LLaVA-OneVision 0.047, 0.0001; SigLIP2 NaFlex 0.008, 0.00001."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import pytest
import torch
from PIL import Image

import stoker
from stoker._local import LocalServer

from transformers.models.got_ocr2.image_processing_pil_got_ocr2 import GotOcr2ImageProcessorPil  # pinned: never skips
from transformers.models.llava_onevision.image_processing_pil_llava_onevision import LlavaOnevisionImageProcessorPil
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil
from transformers.models.siglip2.image_processing_pil_siglip2 import Siglip2ImageProcessorPil

PHOTOS = Path(__file__).resolve().parents[2] / "testdata" / "photos"

FAMILIES = {
    # preset: the PIL processor configured as the preset is
    "qwen2-vl": lambda: Qwen2VLImageProcessorPil(),
    "internvl": lambda: GotOcr2ImageProcessorPil(crop_to_patches=True, size={"height": 448, "width": 448},
                                                 image_mean=[0.485, 0.456, 0.406], image_std=[0.229, 0.224, 0.225]),
    "llava-onevision": lambda: LlavaOnevisionImageProcessorPil(image_mean=[0.5] * 3, image_std=[0.5] * 3),
    "siglip2-naflex": lambda: Siglip2ImageProcessorPil(),
}


@pytest.fixture(scope="module")
def photos_server(stoker_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    log = tmp_path_factory.mktemp("pil") / "server.log"
    try:
        srv = LocalServer(str(stoker_bin), {"photos": str(PHOTOS)}, workers=2, log_path=str(log))
    except RuntimeError as e:
        pytest.fail(str(e))
    with srv:
        yield srv.addr


@pytest.mark.parametrize("preset", sorted(FAMILIES))
def test_within_the_pil_back_end(photos_server: str, preset: str) -> None:
    proc: Any = FAMILIES[preset]()
    most, total, count, n = 0.0, 0.0, 0, 0
    with stoker.Loader(photos_server, "photos", transform=preset, batch_size=4, fields=("path",), shuffle=False,
                       pin_memory=False, timeout=120) as ld:
        for b in ld:
            got = b.vision_inputs()["pixel_values"]
            imgs = [Image.open(PHOTOS / p.decode()).convert("RGB") for p in b.fields["path"]]
            want = proc(images=imgs, return_tensors="pt")["pixel_values"]
            assert got.shape == want.shape, (preset, got.shape, want.shape)
            d = (got - want).abs()
            most, total, count, n = max(most, float(d.max())), total + float(d.sum()), count + d.numel(), n + len(imgs)
        assert not list(ld.sample_errors)
    assert n >= 40, n
    assert most <= 1e-1 and total / count <= 5e-3, f"{preset}: max {most:.4f}, mean {total / count:.5f}"
