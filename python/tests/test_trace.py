"""stoker.Batch and Loader(trace=True): what a batch carries besides its
tensors, against the real server."""

from __future__ import annotations

import pickle

import pytest
import torch

import stoker
from helpers import loader
from stoker import transforms as T
from stoker.v1 import stoker_pb2 as pb

#: Ops of every kind that draws, as a wire spec made by stoker.transforms'
#: classes (the classes themselves are tested in test_transforms.py).
RECIPE = [
    T.RandomResizedCrop(32, interpolation="bicubic").to_proto(),
    T.RandomHorizontalFlip().to_proto(),
    T.RandomApply([T.ColorJitter(brightness=0.4, hue=0.1)], p=0.8).to_proto(),
    T.TrivialAugmentWide().to_proto(),
    T.RandomErasing(p=0.5).to_proto(),
]


def spec_loader(server: str, **kw) -> stoker.Loader:
    ld = loader(server, **kw)
    ld._spec = pb.TransformSpec(ops=RECIPE)
    return ld


def test_batch_unpacks_and_carries(server: str) -> None:
    with loader(server, batch_size=8) as ld:
        b = next(iter(ld))
        images, labels = b
        assert isinstance(b, stoker.Batch) and isinstance(b, tuple) and len(b) == 2
        assert b.images is images and b.labels is labels
        assert b.indices.dtype == torch.int64 and b.indices.shape == (8,)
        assert b.trace is None and b.fields == {}
        assert b.epoch == 0 and b.number == 0
    with loader(server, batch_size=8, return_indices=True) as ld:
        b = next(iter(ld))
        images, labels, indices = b
        assert torch.equal(indices, b.indices)


def test_batch_rebuilt_and_pickled(server: str) -> None:
    """Frameworks rebuild a batch from a list (Lightning moving it to a
    device) and pickle it (DataLoader workers): both keep working."""
    with loader(server, batch_size=4, return_indices=True) as ld:
        b = next(iter(ld))
    again = type(b)([t.clone() for t in b])
    assert isinstance(again, stoker.Batch) and len(again) == 3
    assert torch.equal(again.images, b.images) and torch.equal(again.indices, b.indices)
    back = pickle.loads(pickle.dumps(b))
    assert isinstance(back, stoker.Batch) and back.number == b.number and torch.equal(back[0], b[0])


def test_trace(server: str) -> None:
    """Every sample's trace: geometry first (its crop, the size asked,
    bicubic), then what it drew, each op a torchvision functional's name
    with its arguments; the same on a second run (a pure function of the
    job); the pixels the same with and without trace."""
    runs = []
    for trace in (True, True, False):
        with spec_loader(server, batch_size=6, trace=trace, shuffle=False) as ld:
            ld.set_epoch(3)
            runs.append([(b.images.clone(), b.trace) for b in ld])
    seen = set()
    for (images, trace), (images2, trace2), (images3, trace3) in zip(*runs):
        assert trace == trace2 and trace3 is None
        assert torch.equal(images, images2) and torch.equal(images, images3)
        assert len(trace) == images.shape[0]
        for steps in trace:
            name, args = steps[0]
            assert name == "resized_crop" and args["size"] == [32, 32] and args["interpolation"] == "bicubic"
            assert all(isinstance(args[k], int) for k in ("top", "left", "height", "width"))
            seen.update(n for n, _ in steps)
    assert {"resized_crop", "adjust_brightness", "adjust_hue"} <= seen, seen


def test_trace_bounded(server: str) -> None:
    """A traced job whose traces could pass the server's bound is refused,
    saying so, before any batch."""
    with spec_loader(server, batch_size=4096, trace=True) as ld:
        with pytest.raises(stoker.StokerError) as e:
            next(iter(ld))
    assert e.value.code == "INVALID_ARGUMENT" and "trace" in str(e.value)
