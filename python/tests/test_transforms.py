"""Transform specs and the client's argument checks: no server needed."""

from __future__ import annotations

import pytest

import stoker
from stoker import transforms as T
from stoker.v1 import stoker_pb2 as pb


def test_preset_is_a_name() -> None:
    assert T.to_spec("imagenet-train") == pb.TransformSpec(preset="imagenet-train")


def test_ops_convert_to_proto() -> None:
    spec = T.to_spec(
        T.Compose(
            [
                T.RandomResizedCrop((200, 100), scale=(0.5, 1), ratio=(0.5, 2)),
                T.RandomHorizontalFlip(0.0),
                T.ColorJitter(brightness=0.4, saturation=0.2),
                T.Normalize([0.5, 0.5, 0.5], [0.25, 0.25, 0.25]),
            ]
        )
    )
    rrc, flip, jit, norm = spec.ops
    assert rrc.random_resized_crop == pb.RandomResizedCrop(
        height=200, width=100, scale_min=0.5, scale_max=1, ratio_min=0.5, ratio_max=2
    )
    # p=0 is sent as set, not as "unset means 0.5".
    assert flip.random_horizontal_flip.HasField("p") and flip.random_horizontal_flip.p == 0.0
    assert jit.color_jitter == pb.ColorJitter(brightness=0.4, saturation=0.2)
    assert list(norm.normalize.mean) == [0.5] * 3 and list(norm.normalize.std) == [0.25] * 3


def test_sizes_follow_torchvision() -> None:
    assert T.Resize(256).to_proto().resize == pb.Resize(height=256, width=0)
    assert T.Resize((32, 48)).to_proto().resize == pb.Resize(height=32, width=48)
    assert T.CenterCrop(224).to_proto().center_crop == pb.CenterCrop(height=224, width=224)
    assert T.RandomResizedCrop([7]).size == (7, 7)
    spec = T.to_spec([T.Resize(256), T.CenterCrop(224)])
    assert len(spec.ops) == 2


@pytest.mark.parametrize(
    "make",
    [
        lambda: T.RandomHorizontalFlip(2),
        lambda: T.Resize(0),
        lambda: T.CenterCrop((1, 2, 3)),
        lambda: T.ColorJitter(brightness=(0.5, 1.5)),
        lambda: T.ColorJitter(contrast=-1),
        lambda: T.Normalize([0.5, 0.5], [1, 1]),
        lambda: T.Normalize([0, 0, 0], [1, 0, 1]),
        # Not finite: NaN passes no comparison, and the server refuses it too.
        lambda: T.RandomHorizontalFlip(float("nan")),
        lambda: T.ColorJitter(saturation=float("nan")),
        lambda: T.ColorJitter(brightness=float("inf")),
        lambda: T.RandomResizedCrop(32, scale=(float("nan"), 1.0)),
        lambda: T.RandomResizedCrop(32, ratio=(0.75, float("inf"))),
        lambda: T.Normalize([float("nan"), 0, 0], [1, 1, 1]),
        lambda: T.Normalize([0, 0, 0], [1, float("inf"), 1]),
    ],
)
def test_bad_ops_fail_early(make) -> None:
    with pytest.raises(ValueError):
        make()


def test_bad_loader_arguments_fail_early() -> None:
    for kw in ({"batch_size": 0}, {"rank": 2, "world_size": 2}, {"prefetch": 0}, {"layout": "CHW"}):
        with pytest.raises(ValueError):
            stoker.Loader("127.0.0.1:1", "tiny", **kw)
    with pytest.raises(TypeError):
        stoker.Loader("127.0.0.1:1", "tiny", transform=42)


def test_no_channel_before_iteration() -> None:
    # Constructing a loader, its state and its repr touch no network.
    ld = stoker.Loader("127.0.0.1:1", "tiny", transform=T.Compose([T.CenterCrop(8)]))
    assert ld.state_dict()["batches_consumed"] == 0
    assert "tiny" in repr(ld)


def test_stoker_error() -> None:
    e = stoker.StokerError("NOT_FOUND", 'unknown dataset "x"')
    assert isinstance(e, RuntimeError)
    assert e.code == "NOT_FOUND" and str(e) == 'NOT_FOUND: unknown dataset "x"'


def test_fast_chunk_parser_agrees_with_protobuf() -> None:
    from stoker.loader import _Chunk, _parse_response

    cases = [
        pb.Chunk(number=0, offset=0, data=b""),
        pb.Chunk(number=3, offset=4 << 20, data=bytes(range(256)) * 10),
        pb.Chunk(number=2**40, offset=2**33 + 5, data=b"\x00\xff" * 1000),
    ]
    for c in cases:
        raw = pb.FeedResponse(chunk=c).SerializeToString()
        got = _parse_response(raw)
        assert isinstance(got, _Chunk)
        assert (got.number, got.offset, bytes(got.data)) == (c.number, c.offset, c.data)
    # Unknown fields inside the chunk are skipped.
    raw = pb.FeedResponse(chunk=cases[1]).SerializeToString()
    inner = pb.Chunk(number=3, offset=7, data=b"abc").SerializeToString() + b"\x20\x05" + b"\x2a\x02hi"
    got = _parse_response(b"\x1a" + bytes([len(inner)]) + inner)
    assert (got.number, got.offset, bytes(got.data)) == (3, 7, b"abc")
    # Everything else goes through protobuf.
    hdr = pb.FeedResponse(batch=pb.BatchHeader(number=1, data_bytes=10))
    assert _parse_response(hdr.SerializeToString()) == hdr
    # A truncated chunk is protobuf's to reject.
    with pytest.raises(Exception):
        _parse_response(raw[:-10])


def test_buffer_pool_reuses_only_released_buffers() -> None:
    import torch

    from stoker.loader import _BufferPool

    pool = _BufferPool(2)
    a = pool.get(100)
    held = torch.from_numpy(a).view(10, 10)
    del a
    b = pool.get(100)  # `held` still uses the first buffer
    assert b.__array_interface__["data"][0] != held.data_ptr()
    addr_b = b.__array_interface__["data"][0]
    del b
    c = pool.get(80)  # the second buffer is free again
    assert c.__array_interface__["data"][0] == addr_b
