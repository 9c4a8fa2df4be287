"""batch_tokens: the Loader sends it, and the server, which plans such
batches but does not stream them yet, refuses the job whole, saying so."""

from __future__ import annotations

import pytest

import stoker
from helpers import loader

WANT = "batch_tokens 16384: batches cut by vision tokens are not served yet"


def test_batch_tokens_refused_saying_so(server: str) -> None:
    ld = loader(server, "tiny", batch_tokens=16384)
    assert ld._job().spec().batch_tokens == 16384
    with pytest.raises(stoker.StokerError) as e:
        len(ld)
    assert e.value.code == "UNIMPLEMENTED" and WANT in e.value.message, e.value
    with pytest.raises(stoker.StokerError) as e:
        next(iter(ld))
    assert e.value.code == "UNIMPLEMENTED" and WANT in e.value.message, e.value
    ld.close()
    # Without it the job is the batch_size job it always was.
    plain = loader(server, "tiny")
    assert plain._job().spec().batch_tokens == 0 and len(plain) > 0
    plain.close()
