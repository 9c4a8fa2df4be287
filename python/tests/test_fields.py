"""Loader(fields=...): captions and metadata with every sample, against the
real server over the ``clip`` dataset (conftest.py: unlabelled WebDataset
shards, KEY.jpg beside KEY.txt and KEY.json)."""

from __future__ import annotations

import json
import warnings

import pytest
import torch

import stoker
from conftest import CLIP_SAMPLES, clip_caption
from helpers import loader

FIELDS = ("txt", "__key__", "json", "__source__")


def caption_of(key: bytes) -> bytes:
    if key == b"c1/999":
        return b"a caption without its image"
    return clip_caption(int(key.split(b"/")[1]))


def check_batch(b: stoker.Batch) -> None:
    """Every sample's fields are its own: its caption and metadata as the
    dataset holds them (not decoded), its key and its source; its label
    -1 (the dataset has no classes)."""
    n = b.images.shape[0]
    assert set(b.fields) == set(FIELDS)
    assert all(len(v) == n for v in b.fields.values())
    assert b.labels.tolist() == [-1] * n
    for i in range(n):
        key = b.fields["__key__"][i]
        assert b.fields["txt"][i] == caption_of(key)
        assert json.loads(b.fields["json"][i])["key"] == key.decode()
        assert b.fields["__source__"][i] == b"clip"


@pytest.mark.parametrize("shuffle", [True, "block"])
def test_fields_with_every_sample(server: str, shuffle) -> None:
    """Fields come in batch order with their samples under either shuffle;
    the two bad samples (a .json over the bound, a key without an image)
    fail by themselves, their places padded with a good sample and its
    fields; a caption in invalid UTF-8 passes through as bytes."""
    with loader(server, "clip", batch_size=5, fields=FIELDS, shuffle=shuffle, seed=3) as ld:
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            batches = list(ld)
        for b in batches:
            check_batch(b)
        captions = {c for b in batches for c in b.fields["txt"]}
        assert clip_caption(5) in captions
        failed = sorted(e.name for e in ld.sample_errors)
        assert len(failed) == 2 and "clip-1.tar/c1/999" in failed, failed
        assert any("json" in e.reason and "max_field_bytes" in e.reason for e in ld.sample_errors)
        assert any(issubclass(x.category, RuntimeWarning) for x in w)
    assert sum(b.images.shape[0] for b in batches) == CLIP_SAMPLES + 1


@pytest.mark.expect_warning(RuntimeWarning, match="could not be made")
def test_fields_resume_byte_identical(server: str) -> None:
    """A resumed epoch gets the batches, and their fields, the
    uninterrupted one has after the saved point."""
    with loader(server, "clip", batch_size=4, fields=FIELDS, seed=7) as ld:
        ld.set_epoch(2)
        full = [(b.images.clone(), b.fields) for b in ld]
    with loader(server, "clip", batch_size=4, fields=FIELDS, seed=7) as ld:
        ld.set_epoch(2)
        it = iter(ld)
        next(it), next(it)
        state = ld.state_dict()
        del it
    with loader(server, "clip", batch_size=4, fields=FIELDS, seed=7) as ld:
        ld.load_state_dict(state)
        rest = [(b.images.clone(), b.fields) for b in ld]
    assert len(rest) == len(full) - 2
    for (img, f), (img2, f2) in zip(full[2:], rest):
        assert torch.equal(img, img2) and f == f2


def test_fields_of_an_imagefolder(server: str) -> None:
    """An ImageFolder's fields: each file's path and key; no field changes
    a pixel."""
    with loader(server, "tiny", batch_size=6, fields=("path", "__key__"), shuffle=False) as ld:
        b = next(iter(ld))
    with loader(server, "tiny", batch_size=6, shuffle=False) as ld:
        plain = next(iter(ld))
    assert torch.equal(b.images, plain.images) and plain.fields == {}
    for p, k in zip(b.fields["path"], b.fields["__key__"]):
        assert p.startswith(b"ant/") and p.endswith(b".jpg") and p[: -len(b".jpg")] == k


def test_fields_refused(server: str) -> None:
    """A field the dataset has no sample with is refused at the first
    batch, naming those it has; bad arguments at once."""
    with loader(server, "tiny", fields=("txt",)) as ld:
        with pytest.raises(stoker.StokerError) as e:
            next(iter(ld))
    assert e.value.code == "INVALID_ARGUMENT" and "path, __key__" in str(e.value)
    with pytest.raises(TypeError):
        loader(server, "clip", fields=(1,))
    with pytest.raises(ValueError, match="named twice"):
        loader(server, "clip", fields=("txt", "txt"))
    with pytest.raises(ValueError, match="needs fields"):
        loader(server, "clip", max_field_bytes=100)
    assert loader(server, "clip", fields="txt").fields == ("txt",)


@pytest.mark.expect_warning(RuntimeWarning, match="could not be made")
def test_max_field_bytes(server: str) -> None:
    """A bound that lets the 100 KB .json through: no sample fails for it;
    one a batch cannot hold is refused."""
    with loader(server, "clip", batch_size=8, fields=("json",), max_field_bytes=200_000, shuffle=False) as ld:
        batches = list(ld)
        assert [e.name for e in ld.sample_errors] == ["clip-1.tar/c1/999"]
    assert max(len(v) for b in batches for v in b.fields["json"]) > 100_000
    with loader(server, "clip", batch_size=64, fields=("json", "txt"), max_field_bytes=1 << 20) as ld:
        with pytest.raises(stoker.StokerError) as e:
            next(iter(ld))
    assert e.value.code == "INVALID_ARGUMENT" and "max_field_bytes may be at most" in str(e.value)


def test_list_datasets_names_fields(server: str) -> None:
    infos = {d.name: d for d in stoker.list_datasets(server)}
    assert infos["clip"].fields == ["jpg", "json", "txt", "__key__", "__source__"]
    assert infos["clip"].classes == []
    assert infos["tiny"].fields == ["path", "__key__", "__source__"]
