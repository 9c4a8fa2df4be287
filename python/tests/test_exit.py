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
from typing import Dict, Optional, Tuple

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


@pytest.fixture(scope="module")
def exits(server: str) -> Dict[str, dict]:
    """Every case, the baseline first, one child at a time, each forked
    from one interpreter that imported torch and stoker (FORK_EACH, below):
    by name, each child's report (rc, stdout, stderr, the time it exited).
    A fresh interpreter per case spent about
    2 CPU-s importing torch, stoker and gRPC before the case began; each
    child still runs its case in __main__ and ends through the
    interpreter's own exit, the exit measured here."""
    import json
    import os

    cases = [(name, PRELUDE.format(pydir=PYDIR, addr=server) + code) for name, code in CASES.items()]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    r = subprocess.run([sys.executable, "-c", FORK_EACH.format(pydir=PYDIR)], env=env, capture_output=True, text=True,
                       input=json.dumps([cases, 1, EXIT_CHILD_TIMEOUT]), timeout=len(cases) * EXIT_CHILD_TIMEOUT + 60)
    assert r.returncode == 0, f"the forking interpreter failed (rc {r.returncode}):\n{r.stderr[-3000:]}"
    out = {x["name"]: x for x in (json.loads(line) for line in r.stdout.splitlines() if line.startswith("{"))}
    assert sorted(out) == sorted(CASES), f"{sorted(out)} of {sorted(CASES)} children reported:\n{r.stdout[-3000:]}"
    return out


def took(exits: Dict[str, dict], name: str) -> Tuple[float, dict]:
    """Seconds from the case's END to the child's exit, and its report."""
    r = exits[name]
    ends = [line for line in r["stdout"].splitlines() if line.startswith("END ")]
    assert ends, f"{name}: no END (rc {r['rc']}):\n{r['stdout']}\n{r['stderr']}"
    return r["exited"] - float(ends[-1].split()[1]), r


@pytest.fixture(scope="module")
def baseline(exits: Dict[str, dict]) -> float:
    t, r = took(exits, "baseline")
    assert r["rc"] == 0, r["stderr"]
    return t


@pytest.mark.parametrize("name", [n for n in CASES if n != "baseline"])
def test_abandoned_loader_does_not_hold_the_exit(exits: Dict[str, dict], baseline: float, name: str) -> None:
    t, r = took(exits, name)
    rc, stderr = r["rc"], r["stderr"]
    if name == "exception":
        assert rc == 1 and "ValueError: the trainer failed" in stderr
    elif name.startswith("keyboard_interrupt"):
        assert rc != 0 and "KeyboardInterrupt" in stderr
        if name == "keyboard_interrupt_in_next":  # raised in the wait itself
            assert "_stream.py" in stderr, stderr
    else:
        assert rc == 0, stderr
    assert "Exception ignored" not in stderr, stderr
    # A hang, not a slow machine: an abandoned loader that held the exit
    # would wait out a stream (minutes), not seconds.
    assert t < baseline + 15.0, f"{name}: exited {t:.2f} s after its end (no stream: {baseline:.2f} s)"


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


# Every exit clean beside a CPU hog. A process that ended its loader (or
# left it to the interpreter's exit) must exit 0, not die of SIGABRT: gRPC's
# daemon threads wait for their calls' events inside gRPC's C++ with the GIL
# released, and one still there when the interpreter finalizes is ended
# with pthread_exit, whose unwinding through those frames calls
# std::terminate ("terminate called without an active exception", exit
# -6: examples/accelerate_train.py --resume under `make test`'s load).
# Closing joins them; each child checks that after close() no thread but
# its own is left, and exits.

EXIT_CASES: Dict[str, str] = {
    # What the examples do at their end: epochs run, close(), exit.
    "close": "for e in range(2):\n    for b in ld:\n        pass\nld.close()\n",
    # A resumed epoch (the Accelerate example's --resume), then close().
    "resume_close": (
        "it = iter(ld)\nnext(it)\nnext(it)\nstate = ld.state_dict()\nld.close()\n"
        "ld = stoker.Loader({addr!r}, 'tiny', transform=T.Compose([T.Resize((32, 32))]), batch_size=4, prefetch=2,\n"
        "                   pin_memory=False, timeout=60)\n"
        "ld.load_state_dict(state)\nfor b in ld:\n    pass\nld.close()\n"
    ),
    # Mid-epoch: a break, then close().
    "break_close": "for i, b in enumerate(ld):\n    if i == 2:\n        break\nld.close()\n",
}

EXIT_CHECK = """
left = [t.name for t in threading.enumerate() if t is not threading.current_thread()]
assert not left, f"threads left after close(): {left}"
print("CLEAN", flush=True)
"""

# Left to the interpreter's exit (the Loader's finalizer closes it then).
EXIT_NO_CLOSE = "for i, b in enumerate(ld):\n    if i == 2:\n        break\nprint('CLEAN', flush=True)\n"

#: Children run, and at most this many at once (each beside the hog).
EXIT_RUNS, EXIT_PARALLEL = 20, 2
#: The longest one child may run before it is killed and counted a hang.
EXIT_CHILD_TIMEOUT = 120.0

# The children are forked from one interpreter that has imported torch and
# stoker (and so grpc) and made no channel: each child then runs its case
# and ends as any script does, through the interpreter's own finalization,
# where the abort came. A fresh interpreter per child spent about 1.7
# CPU-s importing torch, stoker and gRPC, 20 times over, and the hogs
# burned both cores for as long as those imports took. The forking
# interpreter reads the cases (name and code, one JSON list) on stdin and
# writes one JSON line per child: its name, exit code (negative: the
# signal that ended it, -6 for SIGABRT) and its stdout and stderr.
FORK_EACH = """
import json, os, signal, sys, tempfile, time, traceback
sys.path.insert(0, {pydir!r})
import torch
import stoker
from stoker import _channel
import threading
assert _channel._grpc_pid is None and threading.active_count() == 1, "nothing of gRPC's may run before the forks"
cases, parallel, limit = json.load(sys.stdin)
tmp = tempfile.mkdtemp()
running = {{}}  # pid: (name, started, stdout path, stderr path)
todo = list(enumerate(cases))


def start(i, name, code):
    out, err = os.path.join(tmp, f"{{i}}.out"), os.path.join(tmp, f"{{i}}.err")
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: the case, then the interpreter's exit
        os.dup2(os.open(out, os.O_WRONLY | os.O_CREAT, 0o600), 1)
        os.dup2(os.open(err, os.O_WRONLY | os.O_CREAT, 0o600), 2)
        try:
            # In __main__'s globals, as `python -c code` would run it (a
            # loader left there is closed by its finalizer at the exit).
            exec(compile(code, name, "exec"), sys.modules["__main__"].__dict__)
        except SystemExit:
            raise
        except BaseException:
            traceback.print_exc()
            sys.exit(1)
        sys.exit(0)
    running[pid] = (name, time.monotonic(), out, err)


def report(pid, rc, note=""):
    name, _, out, err = running.pop(pid)
    with open(out) as o, open(err) as e:
        print(json.dumps(dict(name=name, rc=rc, stdout=o.read(), stderr=e.read() + note, exited=time.time())),
              flush=True)


while todo or running:
    while todo and len(running) < parallel:
        i, (name, code) = todo.pop(0)
        start(i, name, code)
    pid, status = os.waitpid(-1, os.WNOHANG)
    if pid:
        report(pid, os.waitstatus_to_exitcode(status))
        continue
    for pid, (name, started, _, _) in list(running.items()):
        if time.monotonic() - started > limit:  # a hang: killed, reported as one
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            report(pid, -signal.SIGKILL, f"\\n(killed: still running after {{limit}} s)")
    time.sleep(0.02)
"""


def test_exits_clean_beside_a_cpu_hog(server: str) -> None:
    import json
    import os

    codes = [PRELUDE.format(pydir=PYDIR, addr=server) + body.format(addr=server) + EXIT_CHECK
             for body in EXIT_CASES.values()]
    codes.append(PRELUDE.format(pydir=PYDIR, addr=server) + EXIT_NO_CLOSE)
    names = [*EXIT_CASES, "no_close"]
    cases = [(names[i % len(codes)], codes[i % len(codes)]) for i in range(EXIT_RUNS)]
    hog = [subprocess.Popen([sys.executable, "-c", "while True: pass"], stdin=subprocess.DEVNULL)
           for _ in range(os.cpu_count() or 1)]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    try:
        # Its timeout bounds the test: every round of children at its
        # children's limit, and a minute for the imports.
        rounds = -(-EXIT_RUNS // EXIT_PARALLEL)
        r = subprocess.run([sys.executable, "-c", FORK_EACH.format(pydir=PYDIR)], env=env, capture_output=True,
                           text=True, input=json.dumps([cases, EXIT_PARALLEL, EXIT_CHILD_TIMEOUT]),
                           timeout=rounds * EXIT_CHILD_TIMEOUT + 60)
    finally:
        for p in hog:
            p.kill()
            p.wait()
    assert r.returncode == 0, f"the forking interpreter failed (rc {r.returncode}):\n{r.stderr[-3000:]}"
    results = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    assert len(results) == EXIT_RUNS, f"{len(results)} of {EXIT_RUNS} children reported:\n{r.stdout[-3000:]}"
    bad = [(x["name"], x["rc"], x["stderr"][-2000:]) for x in results
           if x["rc"] != 0 or "CLEAN" not in x["stdout"] or "terminate called" in x["stderr"]]
    assert not bad, f"{len(bad)} of {EXIT_RUNS} exits not clean: {bad}"


def _other_collection_ended(timeout: float) -> Optional[str]:
    """Waits for a garbage collection another thread runs to end (stoker's
    own gc callback says which thread collects); None when none runs, else
    that thread's stack at the timeout."""
    import threading
    import traceback

    from stoker import _channel

    deadline = time.monotonic() + timeout
    while True:
        who = _channel._collector
        if who is None or who == threading.get_ident():
            return None
        if time.monotonic() > deadline:
            frame = sys._current_frames().get(who)
            return "".join(traceback.format_stack(frame)) if frame else f"thread {who}, gone"
        time.sleep(0.05)


def test_a_close_inside_a_collection_waits_for_no_thread() -> None:
    """A Loader's finalizer runs inside a garbage collection, which may start
    at any allocation of any thread, holding that thread's locks: inside
    ``threading.enumerate()`` (stoker's Connection.feed calls it), the lock
    every ending thread takes to leave the list of threads. A close there
    that joined an ending reader waited the join's whole timeout, twice, and
    the new stream's shared-memory offer went unanswered
    (test_connection.py's test_credentials_for_full_control, in full runs).
    Its threads are left to end and joined at exit instead."""
    import threading

    from stoker import _channel

    go = threading.Event()
    t = threading.Thread(target=go.wait, daemon=True)  # a reader about to end
    t.start()

    class Abandoned:  # a Loader in a reference cycle: freed by a collection
        pass

    # No collection starts by itself from here on, in any thread. One that
    # another thread started earlier may still be running (an earlier test's
    # finalizer in it, the GIL let go), and gc.collect() does nothing while
    # it does. Its finalizer may need the very lock this test holds (a
    # thread's start or end, threading.enumerate()): wait for it to end
    # before taking the lock, not inside it, where both would wait.
    gc.disable()
    try:
        other = _other_collection_ended(60.0)
        gc.collect()  # the process's other garbage (earlier tests' loaders) finalized here, outside the lock
        a = Abandoned()
        a.cycle = a
        fin = weakref.finalize(a, _channel.join_threads, [t], 30.0)
        del a
        with threading._active_limbo_lock:  # as inside threading.enumerate()
            go.set()  # t ends, and waits for the lock to leave the list
            gc.collect()  # the finalizer runs here: no other collection can be running
            ran = not fin.alive
            deferred = t in _channel._deferred
    finally:
        gc.enable()
    t.join(30)
    assert other is None, f"another thread's collection did not end in a minute:\n{other}"
    assert ran, "the collection inside the lock did not run the finalizer"
    assert deferred, "the close inside the collection waited for the thread (it had the timeout's 30 s)"
    assert not t.is_alive()
    _channel.join_threads([])  # forgets the ended ones
    assert t not in _channel._deferred


# A Loader's finalizer run by a collection in its own channel's spin thread
# (the collection can start at any allocation there: the deserializer below
# starts one as a response arrives). gRPC's close waits for its calls' last
# events, which only that thread delivers: a close that waited there would
# wait for good, and the loader's next() with it.
OWN_SPIN_THREAD = """
import gc, weakref
from stoker import _channel
parse = _channel._parse_response
hook = dict(armed=False, thread=None)


def collecting(data):
    if hook["armed"]:
        hook["armed"] = False
        hook["thread"] = threading.current_thread().name
        gc.collect()
    return parse(data)


_channel._parse_response = collecting  # read as each Feed call starts
it = iter(ld)
next(it)


class Closer:  # unreachable, in a cycle: freed by the collection
    pass


c = Closer()
c.cycle = c
weakref.finalize(c, ld.close)
del c
hook["armed"] = True
try:
    for _ in it:
        pass
    print("ENDED", flush=True)
except stoker.StokerError as e:
    print("RAISED", e.code, flush=True)
left = list(_channel._unclosed)
print("COLLECTED IN", hook["thread"], "LEFT", len(left), flush=True)
stoker.list_datasets({addr!r})  # a new channel closes the ones left
print("CLOSED", all(conn.closed for conn in left), len(_channel._unclosed), flush=True)
"""


def test_a_close_on_the_channels_own_thread(server: str) -> None:
    """A collection in gRPC's spin thread runs a finalizer that closes the
    loader whose channel that thread serves: the close returns at once,
    leaving the channel, its call cancelled, to the next channel made; the
    loader's iteration ends with its CANCELLED, and the process exits."""
    code = PRELUDE.format(pydir=PYDIR, addr=server) + OWN_SPIN_THREAD.format(addr=server)
    try:
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, stdin=subprocess.DEVNULL,
                           timeout=EXIT_CHILD_TIMEOUT)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"the child hung (still running after {EXIT_CHILD_TIMEOUT} s):\n{e.stdout!r}\n{e.stderr!r}")
    assert r.returncode == 0, r.stderr[-3000:]
    lines = r.stdout.splitlines()
    assert "RAISED CANCELLED" in lines, r.stdout + r.stderr[-3000:]
    collected = [line for line in lines if line.startswith("COLLECTED IN")]
    assert collected and "LEFT 1" in collected[0] and "MainThread" not in collected[0], r.stdout
    assert "CLOSED True 0" in lines, r.stdout
