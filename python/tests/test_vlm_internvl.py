"""InternVL's dynamic tiling (transformers' GotOcr2ImageProcessor with
crop_to_patches, its torchvision back-end, 5.24.0, which InternVLProcessor
holds): stoker's TileResize makes each image's canvas (its grid of tiles, as
get_optimal_tiled_canvas picks it) and a second view of the same decode its
thumbnail, the batch ragged view after view, and Batch.vision_inputs cuts
the tiles and gives the processor's pixel_values and num_patches, against
the processor on torchvision.io.decode_jpeg's pixels of the committed photos
and the extremes test_vlm_qwen.py makes of them."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any, List

import pytest
import torch

import stoker
from stoker import transforms as T
from test_vlm_qwen import bad_data, decoded, vlm_data, vlm_server  # noqa: F401 (fixtures)

from transformers.image_utils import SizeDict  # pinned in requirements-dev.txt: a missing one fails, never skips
from transformers.models.got_ocr2 import image_processing_got_ocr2 as got


def internvl3(**kw: Any) -> Any:
    """InternVL3's image processor as its checkpoints configure it
    (OpenGVLab/InternVL3-*-hf preprocessor_config.json)."""
    args = dict(crop_to_patches=True, min_patches=1, max_patches=12, size={"height": 448, "width": 448}, resample=3,
                image_mean=[0.485, 0.456, 0.406], image_std=[0.229, 0.224, 0.225])
    args.update(kw)
    return got.GotOcr2ImageProcessor(**{k: v for k, v in args.items() if v is not None})  # None: the class's default


CONFIGS = {
    # name: (processor, transform, max_size, the samples past the bound)
    "internvl": (internvl3, lambda p: "internvl", None, {"x-panorama.jpg", "x-strip.jpg"}),  # 8x1 and 12x1 tiles: past 5x5
    "small": (lambda: internvl3(size={"height": 56, "width": 56}, min_patches=2, max_patches=6, resample=2,
                                image_mean=None, image_std=None), T.from_hf, (336, 336), set()),
}


@pytest.mark.parametrize("transport", ["grpc", "shm"])
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_internvl_parity(vlm_server: str, vlm_data: Path, name: str, transport: str) -> None:  # noqa: F811
    make, tf, bound, past = CONFIGS[name]
    proc = make()
    t = proc.size.height if isinstance(proc.size, SizeDict) else proc.size["height"]
    seen, grids = set(), set()
    warns = pytest.warns(RuntimeWarning, match="past the job's bound") if past else contextlib.nullcontext()
    with warns, stoker.Loader(vlm_server, "vlm", transform=tf(proc), batch_size=5, fields=("path",), shuffle=False,
                       max_size=bound, pin_memory=False, timeout=120, transport=transport) as ld:
        for b in ld:
            got_in = b.vision_inputs()
            canvases, thumbs = b.images
            imgs: List[torch.Tensor] = [decoded(vlm_data, p) for p in b.fields["path"]]
            want = proc(images=imgs, return_tensors="pt")
            where = f"{name} {transport} {[p.decode() for p in b.fields['path']]}"
            assert torch.equal(got_in["num_patches"], torch.as_tensor(want["num_patches"]).long()), where
            assert got_in["pixel_values"].dtype == torch.float32 and got_in["pixel_values"].shape == want["pixel_values"].shape, where
            torch.testing.assert_close(got_in["pixel_values"], want["pixel_values"], atol=1e-6, rtol=0)
            assert b._flat.numel() == sum(3 * h * w for s in b.sizes for h, w in s.tolist()), "ragged: the images' bytes alone"
            for i, img in enumerate(imgs):
                cols, rows = got.get_optimal_tiled_canvas((img.shape[1], img.shape[2]), (t, t), proc.min_patches, proc.max_patches)
                assert tuple(b.sizes[0][i].tolist()) == (rows * t, cols * t), where
                assert tuple(b.sizes[1][i].tolist()) == (t, t), where
                grids.add((cols, rows))
                # The uint8 images themselves: the processor's resizes, byte for byte.
                ref = proc.resize(img[None], SizeDict(height=rows * t, width=cols * t), resample=proc.resample)[0]
                assert torch.equal(canvases[i], ref), f"{where} sample {i}"
                ref = proc.resize(img[None], SizeDict(height=t, width=t), resample=proc.resample)[0]
                assert torch.equal(thumbs[i], ref), f"{where} sample {i}"
                assert int(got_in["num_patches"][i]) == proc.get_number_of_image_patches(img.shape[1], img.shape[2]), where
                seen.add(b.fields["path"][i])
        failed = {os.path.basename(e.name) for e in ld.sample_errors}
    assert failed == past, failed
    assert len(seen) + len(past) == len(os.listdir(vlm_data / "images"))  # the 'pad' policy's copies counted once
    assert len(grids) >= 4, grids  # the photos and extremes reach several grids, one tile among them or not


def test_internvl_preset_and_refusals() -> None:
    a, b = T.VLM_PRESETS["internvl"](), T.from_hf(internvl3())
    assert a.vision == b.vision and T.to_spec(a) == T.to_spec(b)
    with pytest.raises(ValueError, match="crop_to_patches=False"):
        T.from_hf(internvl3(crop_to_patches=False))
    with pytest.raises(ValueError, match="square"):
        T.from_hf(internvl3(size={"height": 448, "width": 224}))
    with pytest.raises(ValueError, match="resample"):
        T.from_hf(internvl3(resample=1))


def test_internvl_batch_tokens(vlm_server: str, vlm_data: Path) -> None:  # noqa: F811
    """batch_tokens with InternVL's tiles: a sample's tokens are its tiles
    and its thumbnail (when it has more than one tile) times
    tokens_per_tile; each batch at most the budget, every sample once, the
    batches of varying counts."""
    proc = CONFIGS["small"][0]()
    tf = T.from_hf(proc, tokens_per_tile=4)  # 56-px tiles: 2 x 2 merged patches of 14
    budget = 64
    seen: List[bytes] = []
    counts = set()
    with stoker.Loader(vlm_server, "vlm", transform=tf, batch_tokens=budget, max_size=(336, 336), fields=("path",),
                       seed=1, pin_memory=False, timeout=120) as ld:
        n = len(ld)
        batches = 0
        for b in ld:
            got = b.vision_inputs()
            tokens = int(got["num_patches"].sum()) * 4
            assert 0 < tokens <= budget, (tokens, got["num_patches"])
            seen += b.fields["path"]
            counts.add(len(b.fields["path"]))
            batches += 1
        assert not list(ld.sample_errors)
    assert batches == n and len(counts) > 1, counts
    assert sorted(seen) == sorted(f"images/{p}".encode() for p in os.listdir(vlm_data / "images"))
