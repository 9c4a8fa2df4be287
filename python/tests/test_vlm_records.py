"""Records of several images (a LLaVA record's "image" list, a ShareGPT
record's "images"), served by a real `stoker serve --annotations`: each
record whole, its images consecutive and in its order in one batch
(Batch.records), every record once an epoch, by records a batch
(batch_size) or by vision tokens across ranks (batch_tokens); the images
the processor's (the qwen2-vl preset); a record one of whose images fails
left out whole, named in sample_errors."""

from __future__ import annotations

import contextlib
import io
import json
import tarfile
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import pytest
import torch
from torchvision.io import ImageReadMode, decode_jpeg, read_file

import stoker
from stoker._local import LocalServer

from transformers.models.qwen2_vl.image_processing_qwen2_vl import Qwen2VLImageProcessor  # pinned: never skips

REPO = Path(__file__).resolve().parents[2]
PHOTOS = REPO / "testdata" / "photos"


@pytest.fixture(scope="module")
def records_server(stoker_bin: Path, tmp_path_factory: Any) -> Iterator[Tuple[str, Path, List[Dict[str, Any]]]]:
    """A server of 13 records over 12 photos: record i has 1 + i % 3
    images (photos reused across records), LLaVA's and ShareGPT's layouts
    alternating; record 12's second image is a corrupt JPEG."""
    photos = sorted(PHOTOS.glob("*/*.jpg"))[:12]
    assert len(photos) == 12, f"the committed photos are missing under {PHOTOS}"
    tmp = tmp_path_factory.mktemp("records")
    img = tmp / "images"
    img.mkdir()
    for i, p in enumerate(photos):
        (img / f"{i:03d}.jpg").write_bytes(p.read_bytes())
    (img / "bad.jpg").write_bytes(b"\xff\xd8\xff\xe0" + b"\x00" * 200)
    records: List[Dict[str, Any]] = []
    for i in range(12):
        names = [f"{(i + k * 5) % 12:03d}.jpg" for k in range(1 + i % 3)]
        if i % 2:
            records.append({"messages": [{"role": "user", "content": "<image>" * len(names) + f"Record {i}?"}],
                            "images": names})
        else:
            records.append({"id": f"r{i}", "image": names if len(names) > 1 else names[0],
                            "conversations": [{"from": "human", "value": "<image>\n" * len(names) + f"Record {i}?"}]})
    records.append({"id": "broken", "image": ["000.jpg", "bad.jpg"], "conversations": [{"from": "human", "value": "x"}]})
    ann = tmp / "sft.json"
    ann.write_text(json.dumps(records))
    wds = tmp / "wds"  # the same records as WebDataset samples: KEY.0.jpg, KEY.1.jpg, ..., KEY.json
    wds.mkdir()
    with tarfile.open(wds / "shard-000.tar", "w") as tar:
        for i, rec in enumerate(records[:12]):
            for k, name in enumerate(names_of(rec)):
                tar.add(str(img / name), arcname=f"w{i:03d}.{k}.jpg")
            data = json.dumps(rec).encode()
            info = tarfile.TarInfo(f"w{i:03d}.json")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    with LocalServer(str(stoker_bin), {"sft": str(img), "wds": str(wds)}, workers=1,
                     args=["--grace", "1s", "--annotations", f"sft={ann}"], log_path=str(tmp / "server.log")) as srv:
        yield srv.addr, img, records


def names_of(rec: Dict[str, Any]) -> List[str]:
    im = rec.get("image") or rec.get("images")
    return [im] if isinstance(im, str) else list(im)


def check_batch(b: Any, img: Path, proc: Any) -> List[Dict[str, Any]]:
    """b's records whole, each record's images its own in order, the
    pixels the processor's over the kept images; its records."""
    assert b.records is not None and len(b.records) == len(b.fields["path"])
    recs = [json.loads(r) for r in b.record_fields("json")]
    counts = b.images_per_record.tolist()
    assert len(counts) == len(recs)
    kept = [p.decode() for p, r in zip(b.fields["path"], b.records.tolist()) if r >= 0]
    assert kept == [n for rec in recs for n in names_of(rec)]  # each record's images, in its order
    assert counts == [len(names_of(r)) for r in recs]
    got = b.vision_inputs()
    want = proc(images=[decode_jpeg(read_file(str(img / n)), mode=ImageReadMode.RGB) for n in kept], return_tensors="pt")
    assert torch.equal(got["image_grid_thw"], want["image_grid_thw"])
    torch.testing.assert_close(got["pixel_values"], want["pixel_values"], atol=1e-6, rtol=0)
    return recs


def test_records_whole_by_batch_size(records_server: Tuple[str, Path, List[Dict[str, Any]]]) -> None:
    """batch_size counts records; every record once an epoch, whole; the
    record with a corrupt image left out, its other image marked -1, the
    corrupt one in sample_errors."""
    addr, img, records = records_server
    proc = Qwen2VLImageProcessor()
    seen: List[Dict[str, Any]] = []
    marked = 0
    with stoker.Loader(addr, "sft", transform="qwen2-vl", batch_size=3, fields=("json", "path"), shuffle=True,
                       seed=5, pin_memory=False, timeout=120, max_sample_errors=1) as ld:
        assert len(ld) == 5  # 13 records, 3 a batch
        with pytest.warns(RuntimeWarning, match="'drop' policy left it out"):
            for b in ld:
                seen += check_batch(b, img, proc)
                marked += int((b.records < 0).sum())
        errors = list(ld.sample_errors)
    assert sorted(json.dumps(r) for r in seen) == sorted(json.dumps(r) for r in records[:12])
    assert marked == 1  # 000.jpg of the broken record; bad.jpg was dropped
    assert len(errors) == 1 and "bad.jpg" in str(errors[0]), errors


def test_records_by_tokens_across_ranks(records_server: Tuple[str, Path, List[Dict[str, Any]]]) -> None:
    """batch_tokens over 2 ranks: a batch's tokens (its records' images')
    at most the budget, every good record once across the ranks, whole;
    the broken record (its image's header does not parse) in no batch."""
    addr, img, records = records_server
    proc = Qwen2VLImageProcessor()
    budget = 1200
    seen: List[Dict[str, Any]] = []
    for rank in range(2):
        with stoker.Loader(addr, "sft", transform="qwen2-vl", batch_tokens=budget, fields=("json", "path"), seed=2,
                           rank=rank, world_size=2, pin_memory=False, timeout=120) as ld:
            n = 0
            for b in ld:
                seen += check_batch(b, img, proc)
                tokens = int(b.vision_inputs()["image_grid_thw"].prod(dim=1).sum()) // 4
                assert 0 < tokens <= budget
                n += 1
            assert n == len(ld)
    assert sorted(json.dumps(r) for r in seen) == sorted(json.dumps(r) for r in records[:12])


def onevision_processor() -> Any:
    """LLaVA-OneVision's image processor as its checkpoints configure it
    (mean and std 0.5: the square's colour 127)."""
    from transformers.models.llava_onevision.image_processing_llava_onevision import LlavaOnevisionImageProcessor

    return LlavaOnevisionImageProcessor(image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5])


def onevision_want(b: Any, img: Path, proc: Any) -> Any:
    """The processor over b's kept images, nested by record (its
    batch_num_images: an image of a record of several padded to a square,
    not patched)."""
    kept = [p.decode() for p, r in zip(b.fields["path"], b.records.tolist()) if r >= 0]
    nested, at = [], 0
    for n in b.images_per_record.tolist():
        nested.append([decode_jpeg(read_file(str(img / x)), mode=ImageReadMode.RGB) for x in kept[at:at + n]])
        at += n
    return proc(images=nested, return_tensors="pt")


@pytest.mark.parametrize("data", ["wds", "mix"])
def test_records_from_shards_and_mixed(records_server: Tuple[str, Path, List[Dict[str, Any]]], data: str) -> None:
    """The same records as WebDataset samples of numbered images, and a
    mix of them with the conversation file's: each batch's records whole,
    in order, their images the processor's; every record once an epoch
    from the shards, and from both parts in the mix (its records drawn
    whole, mix_samples counting records)."""
    addr, img, records = records_server
    proc = Qwen2VLImageProcessor()
    ds: Any = "wds" if data == "wds" else stoker.Mix({"sft": 1, "wds": 1}, samples=24)
    seen: List[Dict[str, Any]] = []
    sources = set()
    with stoker.Loader(addr, ds, transform="qwen2-vl", batch_size=3, fields=("json", "__source__"), shuffle=True,
                       seed=3, pin_memory=False, timeout=120, max_sample_errors=1) as ld:
        batches = 0
        broken = pytest.warns(RuntimeWarning, match="'drop' policy left it out") if data == "mix" else contextlib.nullcontext()
        with broken:  # seed 3 draws the broken record into the mix's 12 of sft's 13
            for b in ld:
                recs = [json.loads(r) for r in b.record_fields("json")]
                assert b.images_per_record.tolist() == [len(names_of(r)) for r in recs]
                kept = [n for rec in recs for n in names_of(rec)]
                got = b.vision_inputs()
                want = proc(images=[decode_jpeg(read_file(str(img / n)), mode=ImageReadMode.RGB) for n in kept], return_tensors="pt")
                assert torch.equal(got["image_grid_thw"], want["image_grid_thw"])
                torch.testing.assert_close(got["pixel_values"], want["pixel_values"], atol=1e-6, rtol=0)
                seen += recs
                sources.update(x.decode() for x in b.record_fields("__source__") if x is not None)
                batches += 1
        assert batches == len(ld)
    if data == "wds":
        assert sorted(json.dumps(r) for r in seen) == sorted(json.dumps(r) for r in records[:12])
    else:  # 24 records drawn, 12 a part, the broken record's draw left out whole
        assert len(seen) == 23 and sources == {"sft", "wds"}, (len(seen), sources)


@pytest.mark.parametrize("batch_size", [1, 3])
def test_onevision_records_of_several(records_server: Tuple[str, Path, List[Dict[str, Any]]], batch_size: int) -> None:
    """LLaVA-OneVision over records of one to three images: vision_inputs
    equal to the processor's over each batch's records (each image of a
    record of several its square of the mean's colour resized, alone; an
    image of a record of one its base and patches), batch_num_images its.
    The server makes each image the views of its record's kind alone (the
    others 0 x 0 or zeros): a batch of one record of several has no
    canvas at all."""
    addr, img, records = records_server
    proc = onevision_processor()
    seen: List[Dict[str, Any]] = []
    several = 0
    with stoker.Loader(addr, "sft", transform=stoker.transforms.from_hf(proc), batch_size=batch_size, fields=("json", "path"),
                       shuffle=True, seed=7, pin_memory=False, timeout=120, max_sample_errors=1) as ld:
        with pytest.warns(RuntimeWarning, match="'drop' policy left it out"):
            for b in ld:
                if not len(b.images_per_record):  # the broken record alone: nothing left of it
                    continue
                got, want = b.vision_inputs(), onevision_want(b, img, proc)
                assert set(got) == set(want.keys())
                assert torch.equal(got["batch_num_images"], torch.as_tensor(want["batch_num_images"]).long())
                assert torch.equal(got["image_sizes"], want["image_sizes"])
                assert got["pixel_values"].shape == want["pixel_values"].shape
                torch.testing.assert_close(got["pixel_values"], want["pixel_values"], atol=1e-6, rtol=0)
                seen += [json.loads(r) for r in b.record_fields("json")]
                several += int((b.images_per_record > 1).sum())
                canvas = b.sizes[0].tolist()
                for i, r in enumerate(b.records.tolist()):  # each image its record's kind's views alone
                    alone = sum(x == r for x in b.records.tolist()) == 1
                    assert (canvas[i] != [0, 0]) == alone or r < 0, (i, canvas[i], b.records.tolist())
    assert sorted(json.dumps(r) for r in seen) == sorted(json.dumps(r) for r in records[:12])
    assert several == 8  # records 1, 2, 4, 5, 7, 8, 10, 11


def test_onevision_records_by_tokens(records_server: Tuple[str, Path, List[Dict[str, Any]]]) -> None:
    """batch_tokens with LLaVA-OneVision over records: an image of a record
    of several is the base's 729 tokens and a newline, one of a record of
    one AnyRes's count (the processor's replace_image_token, which needs
    no tokenizer past its counts); every batch within the budget, every
    good record once."""
    from transformers.models.llava_onevision.processing_llava_onevision import LlavaOnevisionProcessor

    addr, img, records = records_server
    proc = onevision_processor()
    c = LlavaOnevisionProcessor.__new__(LlavaOnevisionProcessor)
    c.num_image_tokens, c.vision_aspect_ratio, c.vision_feature_select_strategy = 729, "anyres_max_9", "full"
    c.image_processor, c.image_token = proc, "<image>"
    budget = 4000
    seen: List[Dict[str, Any]] = []
    with stoker.Loader(addr, "sft", transform=stoker.transforms.from_hf(proc), batch_tokens=budget, fields=("json", "path"),
                       seed=4, pin_memory=False, timeout=120) as ld:
        for b in ld:
            want = onevision_want(b, img, proc)
            tokens = sum(len(c.replace_image_token(want, i)) // len("<image>") for i in range(len(want["image_sizes"])))
            assert 0 < tokens <= budget, tokens
            seen += [json.loads(r) for r in b.record_fields("json")]
    assert sorted(json.dumps(r) for r in seen) == sorted(json.dumps(r) for r in records[:12])


def test_onevision_without_squares_refuses_records_of_several() -> None:
    """A batch without the squares (a transform that makes none):
    vision_inputs refuses a record of several rather than give other
    pixels."""
    from stoker._vlm import AnyResVision, anyres_inputs

    v = AnyResVision(patch_size=4, grid_pinpoints=((4, 4), (4, 8)), do_pad=True, multi_image=False)
    canvas, base = torch.zeros(3, 4, 8, dtype=torch.uint8), torch.zeros(3, 4, 4, dtype=torch.uint8)
    sizes = [torch.tensor([[4, 8], [4, 8]]), torch.tensor([[4, 4], [4, 4]])]
    ok = anyres_inputs([[canvas, canvas], [base, base]], sizes, torch.tensor([[9, 17], [9, 17]]), v, torch.tensor([1, 1]))
    assert tuple(ok["pixel_values"].shape) == (2, 3, 3, 4, 4) and ok["batch_num_images"].tolist() == [1, 1]
    with pytest.raises(ValueError, match="pads each image of a record of several"):
        anyres_inputs([[canvas, canvas], [base, base]], sizes, torch.tensor([[9, 17], [9, 17]]), v, torch.tensor([2]))
    spec = stoker.transforms.from_hf(onevision_processor()).to_spec()  # the square made only for records of several
    assert [(g.name, g.several_images) for g in spec.views] == [("canvas", False), ("base", False), ("square", True)]
