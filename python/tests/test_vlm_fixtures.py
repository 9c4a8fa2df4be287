"""The processors' own test fixtures against from_hf (transformers 5.24's
tests/models/*/test_image_processing_*.py): the configurations their
testers build and the image sizes and expected shapes they assert,
served by a real `stoker serve` (each fixture image a lossless PNG of
random pixels, as prepare_image_inputs draws them) and held to the
processor on the same pixels (atol 1e-6) as well as to the fixture's
numbers:

- Qwen2-VL (Qwen2VLImageProcessingTester): 7 images of 1024 x 1024 give
  pixel_values (34300, 1176) and image_grid_thw [1, 70, 70] each; images
  of random sizes 56..1024; test_select_best_resolution's 561 x 278
  (smart_resize (560, 280): a 40 x 20 grid).
- InternVL (GotOcr2ImageProcessingTester with crop_to_patches, as
  test_crop_to_patches calls it: 20-px tiles, 1 to 6): a 400 x 400 image
  is 5 tiles (2 x 2 and the thumbnail); images of random sizes 30..400.
- LLaVA-OneVision (LlavaOnevisionImageProcessingTester): its 20-px patch
  with the default 384-px pinpoints is refused by from_hf, naming why
  (its patches are not whole); test_multi_images' single 768 x 768 image at
  384 is its base and 4 patches, (1, 5, 3, 384, 384); its two records (that
  image, then 7 of 1152 x 1152, each padded to a square and not patched,
  served from a conversation file) are (8, 5, 3, 384, 384).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import numpy as np
import pytest
import torch
from torchvision.io import ImageReadMode, decode_png, read_file, write_png

import stoker
from stoker import transforms as T
from stoker._local import LocalServer

from transformers.image_utils import OPENAI_CLIP_MEAN, OPENAI_CLIP_STD  # pinned: never skips
from transformers.models.got_ocr2.image_processing_got_ocr2 import GotOcr2ImageProcessor
from transformers.models.llava_onevision.image_processing_llava_onevision import LlavaOnevisionImageProcessor
from transformers.models.qwen2_vl.image_processing_qwen2_vl import Qwen2VLImageProcessor


def fixture_images(rng: np.random.Generator, sizes: List[Tuple[int, int]]) -> List[torch.Tensor]:
    """prepare_image_inputs' images: uniform random uint8 pixels, [3, h, w]."""
    return [torch.from_numpy(rng.integers(0, 255, size=(3, h, w), dtype=np.uint8)) for h, w in sizes]




def _sets() -> Dict[str, List[torch.Tensor]]:
    rng = np.random.default_rng(0)
    out = {
        "qwen-equal": fixture_images(rng, [(1024, 1024)] * 7),
        "qwen-random": fixture_images(rng, [tuple(int(x) for x in rng.integers(56, 1024, 2)) for _ in range(7)]),
        "qwen-561x278": fixture_images(rng, [(561, 278)]),
        "got-equal": fixture_images(rng, [(400, 400)] * 7),
        "got-random": fixture_images(rng, [tuple(int(x) for x in rng.integers(30, 400, 2)) for _ in range(7)]),
        "ov-768": fixture_images(rng, [(768, 768)]),
        # test_multi_images: a record of one 768 x 768 image, then one of 7 of 1152 x 1152.
        "ov-multi": fixture_images(rng, [(768, 768)] + [(1152, 1152)] * 7),
    }
    return out


# The fixture sets served as records of several images (a conversation
# file of the set's images, by their places): test_multi_images' two.
RECORDS = {"ov-multi": [[0], [1, 2, 3, 4, 5, 6, 7]]}


@pytest.fixture(scope="module")
def fixtures_server(stoker_bin: Path, tmp_path_factory: Any) -> Iterator[Tuple[str, Path, Dict[str, List[torch.Tensor]]]]:
    """A server of one dataset a fixture set, each image a PNG named by its
    place (000.png...)."""
    root = tmp_path_factory.mktemp("fixtures")
    sets = _sets()
    for name, ims in sets.items():
        d = root / name / "x"  # an ImageFolder of one class
        d.mkdir(parents=True)
        for i, im in enumerate(ims):
            write_png(im, str(d / f"{i:03d}.png"), compression_level=1)
    args = ["--grace", "1s"]
    for name, recs in RECORDS.items():
        conv = [{"id": f"r{i}", "image": [f"x/{k:03d}.png" for k in ks], "conversations": [{"from": "human", "value": "<image>"}]}
                for i, ks in enumerate(recs)]
        (root / f"{name}.json").write_text(json.dumps(conv))
        args += ["--annotations", f"{name}={root / name}.json"]
    with LocalServer(str(stoker_bin), {n: str(root / n) for n in sets}, workers=1, args=args,
                     log_path=str(root / "server.log")) as srv:
        yield srv.addr, root, sets


def served(addr: str, root: Path, name: str, tf: Any, max_size: Any = None) -> Tuple[Dict[str, Any], List[torch.Tensor]]:
    """vision_inputs of the whole set in one batch, and the images as
    decoded from their files, in the batch's order."""
    with stoker.Loader(addr, name, transform=tf, batch_size=len(RECORDS.get(name, [0] * 7)), fields=("path",), shuffle=False,
                       max_size=max_size, pin_memory=False, timeout=120) as ld:
        batches = list(ld)
        assert not list(ld.sample_errors)
    assert len(batches) == 1
    b = batches[0]
    imgs = [decode_png(read_file(str(root / name / p.decode())), mode=ImageReadMode.RGB) for p in b.fields["path"]]
    return b.vision_inputs(), imgs


def qwen_tester() -> Qwen2VLImageProcessor:
    """Qwen2VLImageProcessingTester.prepare_image_processor_dict's processor."""
    return Qwen2VLImageProcessor(do_resize=True, image_mean=OPENAI_CLIP_MEAN, image_std=OPENAI_CLIP_STD,
                                 min_pixels=56 * 56, max_pixels=28 * 28 * 1280, patch_size=14, temporal_patch_size=2,
                                 merge_size=2)


@pytest.mark.parametrize("name", ["qwen-equal", "qwen-random", "qwen-561x278"])
def test_qwen2_vl_fixtures(fixtures_server: Tuple[str, Path, Dict[str, List[torch.Tensor]]], name: str) -> None:
    addr, root, _ = fixtures_server
    proc = qwen_tester()
    got, imgs = served(addr, root, name, T.from_hf(proc))
    want = proc(images=imgs, return_tensors="pt")
    assert torch.equal(got["image_grid_thw"], want["image_grid_thw"])
    torch.testing.assert_close(got["pixel_values"], want["pixel_values"], atol=1e-6, rtol=0)
    if name == "qwen-equal":  # test_call_pytorch's batched numbers
        assert tuple(got["pixel_values"].shape) == (34300, 1176)
        assert got["image_grid_thw"].tolist() == [[1, 70, 70]] * 7
    if name == "qwen-561x278":  # test_select_best_resolution: smart_resize(561, 278) == (560, 280)
        assert got["image_grid_thw"].tolist() == [[1, 40, 20]]


def got_tester() -> GotOcr2ImageProcessor:
    """GotOcr2ImageProcessingTester's processor, tiled as test_crop_to_patches
    tiles (crop_to_patches, 20-px tiles, 1 to 6)."""
    return GotOcr2ImageProcessor(do_resize=True, size={"height": 20, "width": 20}, do_normalize=True,
                                 image_mean=[0.48145466, 0.4578275, 0.40821073],
                                 image_std=[0.26862954, 0.26130258, 0.27577711], do_convert_rgb=True, do_pad=False,
                                 crop_to_patches=True, min_patches=1, max_patches=6)


@pytest.mark.parametrize("name", ["got-equal", "got-random"])
def test_internvl_fixtures(fixtures_server: Tuple[str, Path, Dict[str, List[torch.Tensor]]], name: str) -> None:
    addr, root, _ = fixtures_server
    proc = got_tester()
    got, imgs = served(addr, root, name, T.from_hf(proc), max_size=(120, 120))
    want = proc(images=imgs, return_tensors="pt")
    assert torch.equal(got["num_patches"], want["num_patches"])
    torch.testing.assert_close(got["pixel_values"], want["pixel_values"], atol=1e-6, rtol=0)
    if name == "got-equal":  # test_crop_to_patches: 5 tiles of 20 x 20
        assert got["num_patches"].tolist() == [5] * 7
        assert tuple(got["pixel_values"].shape) == (35, 3, 20, 20)


def test_llava_onevision_fixtures(fixtures_server: Tuple[str, Path, Dict[str, List[torch.Tensor]]]) -> None:
    addr, root, _ = fixtures_server
    tester = dict(do_resize=True, do_normalize=True, image_mean=OPENAI_CLIP_MEAN, image_std=OPENAI_CLIP_STD,
                  do_convert_rgb=True)
    with pytest.raises(ValueError, match="not whole patches of 20"):
        T.from_hf(LlavaOnevisionImageProcessor(size={"height": 20, "width": 20}, **tester))
    proc = LlavaOnevisionImageProcessor(size={"height": 384, "width": 384}, **tester)  # test_multi_images' single image
    got, imgs = served(addr, root, "ov-768", T.from_hf(proc))
    want = proc(images=imgs, return_tensors="pt")
    assert tuple(got["pixel_values"].shape) == (1, 5, 3, 384, 384)
    torch.testing.assert_close(got["pixel_values"], want["pixel_values"], atol=1e-6, rtol=0)
    assert torch.equal(got["image_sizes"], want["image_sizes"])
    # test_multi_images: only the single image patched, (8, 5, 3, 384, 384); each of the 7 its square.
    got, imgs = served(addr, root, "ov-multi", T.from_hf(proc), max_size=(1152, 1152))
    want = proc(images=[imgs[:1], imgs[1:]], return_tensors="pt")
    assert tuple(got["pixel_values"].shape) == (8, 5, 3, 384, 384)
    assert got["batch_num_images"].tolist() == [1, 7] == list(want["batch_num_images"])
    torch.testing.assert_close(got["pixel_values"], want["pixel_values"], atol=1e-6, rtol=0)
    assert torch.equal(got["image_sizes"], want["image_sizes"])
