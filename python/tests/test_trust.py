"""What a hostile client or neighbor cannot do to a trainer, against the
real server: long names are refused with a short echo."""

from __future__ import annotations

import pytest

import stoker
from helpers import loader


@pytest.mark.parametrize("what", ["preset", "dataset"])
def test_long_names_are_invalid_argument(server: str, what: str) -> None:
    long = "x" * (16 << 10) + "é" * 512  # 17 KB: echoed whole, its status passed grpcio's 8 KB header limit
    kw = {"transform": long} if what == "preset" else {"dataset": long}
    for use in (lambda ld: next(iter(ld)), len):
        with loader(server, **kw) as ld, pytest.raises(stoker.StokerError) as e:
            use(ld)
        assert e.value.code == "INVALID_ARGUMENT", e.value
        assert len(e.value.message) < 512 and "the limit is 256" in e.value.message
