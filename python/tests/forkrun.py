"""Scripts run as `python SCRIPT ARGS` runs them, each in its own process,
forked from one interpreter that imported torch, torchvision, Lightning,
Accelerate and stoker once (conftest's ``run_script`` fixture).

A fresh interpreter per example spent 2-4 CPU-s on those imports before the
script's first line (torchvision alone imports torch._dynamo). Each child
here still runs its script as ``__main__`` (runpy, with its argv, sys.path[0]
its directory, its working directory, environment and stdin from
/dev/null) and ends through the interpreter's own exit, with the exit code
`python SCRIPT` would give: SystemExit's, 1 after an uncaught exception's
traceback. The forking interpreter makes no gRPC channel and starts no
thread, so a child starts as a fresh one would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Dict, List, Optional, Sequence

REPO = Path(__file__).resolve().parents[2]

#: What the forking interpreter imports before it forks: the examples' own
#: heavy imports.
PRELOAD = ("torch", "torchvision", "torchvision.models.detection", "torch.distributed.run", "lightning",
           "accelerate", "google.protobuf.json_format", "stoker", "stoker.gpu", "stoker.transforms")

SERVER = r"""
import json, os, runpy, signal, sys, tempfile, threading, time, traceback
for name in json.loads(sys.argv[1]):
    __import__(name)
from stoker import _channel
assert _channel._grpc_pid is None and threading.active_count() == 1, "nothing of gRPC's may run before the forks"
tasks = len(os.listdir("/proc/self/task"))
assert tasks == 1, f"the forking interpreter runs {tasks} threads: a fork would copy their locks mid-use"
print("READY", flush=True)
for line in sys.stdin:
    req = json.loads(line)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: `python SCRIPT ARGS` (or `python -m MODULE ARGS`) from here on
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(os.open(req["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), 1)
        os.dup2(os.open(req["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), 2)
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        tempfile.tempdir = None  # TMPDIR as the child's environment says
        sys.stdin = open(os.devnull)
        try:
            if req["module"]:
                sys.argv = [req["module"], *req["args"]]
                sys.path[0] = req["cwd"]
                runpy.run_module(req["module"], run_name="__main__", alter_sys=True)
            else:
                sys.argv = [req["script"], *req["args"]]
                sys.path[0] = os.path.dirname(os.path.abspath(req["script"]))
                runpy.run_path(req["script"], run_name="__main__")
        except SystemExit:
            raise
        except BaseException:
            traceback.print_exc()
            sys.exit(1)
        sys.exit(0)
    deadline = time.monotonic() + req["timeout"]
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            rc = os.waitstatus_to_exitcode(status)
            break
        if time.monotonic() > deadline:  # a hang: killed, reported as one
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            rc = None
            break
        time.sleep(0.02)
    print(json.dumps({"rc": rc}), flush=True)
"""


class Result:
    def __init__(self, args: List[str], returncode: Optional[int], stdout: str, stderr: str) -> None:
        self.args, self.returncode, self.stdout, self.stderr = args, returncode, stdout, stderr


class ForkRunner:
    """The forking interpreter: run() one script at a time."""

    def __init__(self, tmp: Path) -> None:
        self._tmp = tmp
        self._n = 0
        self._lock = threading.Lock()
        env = dict(os.environ, OMP_NUM_THREADS="1")
        env["PYTHONPATH"] = os.pathsep.join([str(REPO / "python"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        self._proc = subprocess.Popen([sys.executable, "-c", SERVER, json.dumps(PRELOAD)], env=env, cwd=tmp,
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = self._proc.stdout.readline()
        if line.strip() != "READY":
            self.close()
            raise RuntimeError(f"the forking interpreter did not start (rc {self._proc.returncode}): {line!r}")

    def run(self, args: Sequence[str], *, cwd: Path, env: Dict[str, str], timeout: float) -> Result:
        """`python ARGS` (a script and its arguments, or -m MODULE and its
        arguments) in cwd with env; returncode None if it ran past timeout
        and was killed."""
        args = [str(a) for a in args]
        module = args[1] if args[0] == "-m" else None
        rest = args[2:] if module else args[1:]
        with self._lock:
            self._n += 1
            out, err = self._tmp / f"{self._n}.out", self._tmp / f"{self._n}.err"
            req = dict(script=None if module else args[0], module=module, args=rest, cwd=str(cwd), env=env,
                       timeout=timeout, stdout=str(out), stderr=str(err))
            self._proc.stdin.write(json.dumps(req) + "\n")
            self._proc.stdin.flush()
            line = self._proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the forking interpreter exited (rc {self._proc.poll()})")
        return Result(args, json.loads(line)["rc"], out.read_text(errors="replace"), err.read_text(errors="replace"))

    def close(self) -> None:
        if self._proc.stdin:
            self._proc.stdin.close()
        try:
            self._proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
