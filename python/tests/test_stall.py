"""Where the input stalls, with the Python client as the trainer: a trainer
that sleeps a second per batch of 4 against the server's decode
goroutine never waits for input, and the server's verdict (Status, as
`stoker status` reads it) names the trainer. A classification of measured
shares: no figure of time is compared with a constant; the test counts
verdicts."""

from __future__ import annotations

import threading
import time

import grpc

import stoker
from stoker.v1 import stoker_pb2 as pb
from stoker.v1 import stoker_pb2_grpc as pb_grpc


def test_slow_trainer_verdict(start_server):
    srv = start_server()
    stop = threading.Event()
    errors = []

    def train():
        try:
            with stoker.Loader(srv.addr, "tiny", transform="imagenet-eval", batch_size=4, timeout=60,
                               pin_memory=False) as loader:
                for epoch in range(100):
                    loader.set_epoch(epoch)
                    for _ in loader:
                        time.sleep(1.0)  # the trainer's step: its own overhead per batch (a few ms) is a small share of it
                        if stop.is_set():
                            return
        except Exception as e:  # reported by the test
            errors.append(e)

    t = threading.Thread(target=train, daemon=True)
    t.start()
    verdicts = []
    try:
        with grpc.insecure_channel(srv.addr) as ch:
            stub = pb_grpc.FeedServiceStub(ch)
            deadline = time.monotonic() + 120  # a hang guard, not a measure
            while len(verdicts) < 8 and t.is_alive():
                assert time.monotonic() < deadline, f"8 verdicts past the job's start not read in 2 min: {verdicts}"
                time.sleep(0.2)
                for j in stub.Status(pb.StatusRequest(), timeout=30).jobs:
                    if j.bottleneck not in ("", "starting"):
                        verdicts.append((j.bottleneck, j.verdict, round(j.trainer_step_ratio, 2),
                                         round(j.input_stall_ratio, 2)))
    finally:
        stop.set()
        t.join(timeout=60)
    assert not errors, errors
    assert len(verdicts) >= 8, verdicts
    named = [v for v in verdicts if v[0] == "trainer" and "the trainer is the bottleneck" in v[1]]
    assert 2 * len(named) > len(verdicts), verdicts
