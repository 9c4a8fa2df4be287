"""A process that abandons a loader mid-epoch still exits promptly: each case
runs in a child interpreter against the real server.

A child that imports torch takes a while to exit however it used stoker
(torch's own teardown: about a second on a busy machine), so each case is
measured from its last statement to its exit and compared with a child that
made a loader and never iterated it.
"""

from __future__ import annotations

import gc
import subprocess
import sys
import time
import weakref
from pathlib import Path
from typing import Dict, Tuple

import pytest

PYDIR = str(Path(__file__).resolve().parents[1])

PRELUDE = """
import os, signal, socket, sys, threading, time
# The Ctrl-C cases need Python's own SIGINT handler. An interpreter started
# with SIGINT ignored (as `nohup cmd &`, a non-interactive shell's `&` and
# some CI runners start the tests, and children inherit it) keeps it
# ignored and never raises KeyboardInterrupt: say what this child relies on.
signal.signal(signal.SIGINT, signal.default_int_handler)
sys.path.insert(0, {pydir!r})
import torch
import stoker
from stoker import transforms as T


def end():
    print("END", time.time(), flush=True)


ld = stoker.Loader({addr!r}, "tiny", transform=T.Compose([T.Resize((32, 32))]), batch_size=4, prefetch=2,
                   pin_memory=False, timeout=60)
"""

CASES: Dict[str, str] = {
    # No stream at all: the interpreter's own exit time.
    "baseline": "end()",
    "iterator_kept_in_a_global": "it = iter(ld)\nnext(it)\nend()",
    "break": "for i, b in enumerate(ld):\n    if i == 1:\n        break\nend()",
    "idle_between_epochs": "list(ld)\nend()",  # the stream stays open, the next epoch prefetched
    "exception": (
        "for i, b in enumerate(ld):\n"
        "    if i == 1:\n"
        "        end()\n"
        "        raise ValueError('the trainer failed')\n"
    ),
    # Ctrl-C (SIGINT to the process, so to any of its threads) in the
    # trainer's step.
    "keyboard_interrupt": (
        "for i, b in enumerate(ld):\n"
        "    if i == 1:\n"
        "        end()\n"
        "        os.kill(os.getpid(), signal.SIGINT)\n"
        "        while True:\n"
        "            sum(range(1000))\n"
    ),
    # Ctrl-C while next() waits on a server that accepts the connection and
    # never answers.
    "keyboard_interrupt_in_next": (
        "s = socket.socket()\n"
        "s.bind(('127.0.0.1', 0))\n"
        "s.listen(8)\n"
        "silent = stoker.Loader('127.0.0.1:%d' % s.getsockname()[1], 'tiny', pin_memory=False)\n"
        "def interrupt():\n"
        "    end()\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
        "it = iter(silent)\n"
        "threading.Timer(1.0, interrupt).start()\n"
        "next(it)\n"
    ),
}


def run_case(server: str, name: str) -> Tuple[float, subprocess.CompletedProcess]:
    """Seconds from the case's END to the child's exit, and the result."""
    code = PRELUDE.format(pydir=PYDIR, addr=server) + CASES[name]
    r = subprocess.run([sys.executable, "-c", code], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       timeout=120)
    exited = time.time()
    ends = [line for line in r.stdout.splitlines() if line.startswith("END ")]
    assert ends, f"{name}: no END (rc {r.returncode}):\n{r.stdout}\n{r.stderr}"
    return exited - float(ends[-1].split()[1]), r


@pytest.fixture(scope="module")
def baseline(server: str) -> float:
    took, r = run_case(server, "baseline")
    assert r.returncode == 0, r.stderr
    return took


@pytest.mark.parametrize("name", [n for n in CASES if n != "baseline"])
def test_abandoned_loader_does_not_hold_the_exit(server: str, baseline: float, name: str) -> None:
    took, r = run_case(server, name)
    if name == "exception":
        assert r.returncode == 1 and "ValueError: the trainer failed" in r.stderr
    elif name.startswith("keyboard_interrupt"):
        assert r.returncode != 0 and "KeyboardInterrupt" in r.stderr
        if name == "keyboard_interrupt_in_next":  # raised in the wait itself
            assert "_stream.py" in r.stderr, r.stderr
    else:
        assert r.returncode == 0, r.stderr
    assert "Exception ignored" not in r.stderr, r.stderr
    # A hang, not a slow machine: an abandoned loader that held the exit
    # would wait out a stream (minutes), not seconds.
    assert took < baseline + 15.0, f"{name}: exited {took:.2f} s after its end (no stream: {baseline:.2f} s)"


@pytest.mark.parametrize("how", ["idle_between_epochs", "mid_epoch"])
def test_close_frees_the_feed_call(server: str, how: str) -> None:
    """Closing a loader frees its Feed call there and then, not in some
    later garbage collection. gRPC's call takes its lock as it is freed;
    freed by the collection at interpreter exit, it could find that lock
    held by a gRPC thread the exit had stopped mid-way, and the process
    hung after its last batch (about once in a dozen runs of a loader left
    idle between epochs)."""
    sys.path.insert(0, PYDIR)
    import stoker
    from stoker import transforms as T

    ld = stoker.Loader(server, "tiny", transform=T.Compose([T.Resize((32, 32))]), batch_size=4, prefetch=2,
                       pin_memory=False, timeout=60)
    if how == "idle_between_epochs":
        assert len(list(ld)) > 0
    else:
        it = iter(ld)  # kept: an iterator dropped mid-epoch closes its stream itself
        next(it)
    stream = ld._session.stream
    assert stream is not None and not stream.closed
    call = weakref.ref(stream._call)
    gc.collect()
    gc.disable()  # what close() leaves behind stays behind
    try:
        ld.close()
        assert call() is None, (
            f"the Feed call outlived close() ({len(gc.get_referrers(call()))} referrers): "
            "it was left for the garbage collector, perhaps at exit"
        )
    finally:
        gc.enable()
