"""A vision-language fine-tuning set as its repositories write it: a JSON
list of LLaVA records ({"id", "image", "conversations"}) and
LLaMA-Factory's ShareGPT records ({"messages", "images"}) over a folder of
images, served by a real `stoker serve --dataset sft=DIR --annotations
sft=FILE`: each sample a record of one image, its record the field "json"
byte for byte, its image the processor's (the qwen2-vl preset); the
records of no image left out and logged. Records of several images:
test_vlm_records.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List

import torch
from torchvision.io import ImageReadMode, decode_jpeg, read_file

import stoker
from stoker._local import LocalServer

from transformers.models.qwen2_vl.image_processing_qwen2_vl import Qwen2VLImageProcessor  # pinned: never skips

REPO = Path(__file__).resolve().parents[2]
PHOTOS = REPO / "testdata" / "photos"


def test_llava_and_sharegpt_records(stoker_bin: Path, tmp_path: Path) -> None:
    photos = sorted(PHOTOS.glob("*/*.jpg"))[:12]
    assert len(photos) == 12, f"the committed photos are missing under {PHOTOS}"
    img = tmp_path / "images" / "coco"
    img.mkdir(parents=True)
    records: List[Dict[str, Any]] = []
    for i, p in enumerate(photos):
        (img / f"{i:03d}.jpg").write_bytes(p.read_bytes())
        if i % 2:
            records.append({"messages": [{"role": "user", "content": f"<image>What is photo {i}?"},
                                         {"role": "assistant", "content": p.parent.name}],
                            "images": [f"coco/{i:03d}.jpg"]})
        else:
            records.append({"id": f"r{i}", "image": f"coco/{i:03d}.jpg",
                            "conversations": [{"from": "human", "value": "<image>\nWhat is it?"},
                                              {"from": "gpt", "value": p.parent.name}]})
    records.append({"id": "text", "conversations": [{"from": "human", "value": "No image."}]})
    records.append({"id": "two", "image": ["coco/000.jpg", "coco/001.jpg"], "conversations": []})
    ann = tmp_path / "sft.json"
    ann.write_text(json.dumps(records, indent=1))
    served = {r.get("image") or r["images"][0]: r for r in records[:12]}
    two = records[-1]
    log = tmp_path / "server.log"
    proc = Qwen2VLImageProcessor()
    seen = set()
    with LocalServer(str(stoker_bin), {"sft": str(tmp_path / "images")}, workers=1,
                     args=["--grace", "1s", "--annotations", f"sft={ann}"], log_path=str(log)) as srv:
        with stoker.Loader(srv.addr, "sft", transform="qwen2-vl", batch_size=5, fields=("json", "path"), shuffle=True,
                           seed=3, pin_memory=False, timeout=120) as ld:
            for b in ld:
                got = b.vision_inputs()
                imgs = [decode_jpeg(read_file(str(tmp_path / "images" / p.decode())), mode=ImageReadMode.RGB)
                        for p in b.fields["path"]]
                want = proc(images=imgs, return_tensors="pt")
                assert torch.equal(got["image_grid_thw"], want["image_grid_thw"])
                torch.testing.assert_close(got["pixel_values"], want["pixel_values"], atol=1e-6, rtol=0)
                for path, rec in zip(b.fields["path"], b.fields["json"]):
                    r = json.loads(rec)
                    if r == two:  # a record of two images: both, together
                        seen.add("two")
                        continue
                    assert r == served[path.decode()], path  # the record, byte for byte the file's JSON value
                    seen.add(path.decode())
            assert not list(ld.sample_errors)
    assert seen == set(served) | {"two"}
    text = log.read_text()
    assert "1 of 14 records left out: 1 without an image" in text, text[-2000:]


def test_indexed_conversations_batch_tokens(stoker_bin: Path, tmp_path: Path) -> None:
    """A conversation file of more images than a job may read the headers
    of at open (70,000 records over 3 photos): batch_tokens is refused,
    naming `stoker index`; after `stoker index DIR --annotations FILE
    --sizes` (the manifest beside the images) the job opens, its tokens
    from the manifest, and its batches are within the budget."""
    import subprocess

    import pytest

    photos = sorted(PHOTOS.glob("*/*.jpg"))[:3]
    img = tmp_path / "images"
    img.mkdir()
    for i, p in enumerate(photos):
        (img / f"{i}.jpg").write_bytes(p.read_bytes())
    ann = tmp_path / "sft.json"
    ann.write_text(json.dumps([{"id": k, "image": f"{k % 3}.jpg", "conversations": [{"from": "human", "value": "<image>"}]}
                               for k in range(70_000)]))
    budget = 2048

    def serve() -> Any:
        return LocalServer(str(stoker_bin), {"sft": str(img)}, workers=1, args=["--grace", "1s", "--annotations", f"sft={ann}"],
                           log_path=str(tmp_path / "server.log"))

    with serve() as srv:
        with pytest.raises(stoker.StokerError, match="stoker index"):
            with stoker.Loader(srv.addr, "sft", transform="qwen2-vl", batch_tokens=budget, pin_memory=False, timeout=120) as ld:
                len(ld)
    out = subprocess.run([str(stoker_bin), "index", str(img), "--annotations", str(ann), "--sizes"], check=True,
                         capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert "conversations, 3 samples in 3 objects" in out.stdout and "3 of the images' sizes" in out.stdout, out.stdout
    with serve() as srv:
        with stoker.Loader(srv.addr, "sft", transform="qwen2-vl", batch_tokens=budget, pin_memory=False, timeout=120) as ld:
            assert len(ld) > 0
            b = next(iter(ld))
            tokens = int(b.vision_inputs()["image_grid_thw"].prod(dim=1).sum()) // 4
            assert 0 < tokens <= budget
            # The slot is the data's largest image as smart_resize makes it (the manifest's sizes), not a square of
            # twice max_pixels: what the server's memory counts for a batch.
            from transformers.models.qwen2_vl.image_processing_qwen2_vl import smart_resize

            from PIL import Image

            sizes = [smart_resize(*Image.open(p).size[::-1], factor=28, min_pixels=56 * 56, max_pixels=28 * 28 * 1280)
                     for p in photos]
            assert list(ld.job_info.sample_shape) == [3, max(h for h, _ in sizes), max(w for _, w in sizes)], ld.job_info
    assert "conversation images opened from their manifest" in (tmp_path / "server.log").read_text()
