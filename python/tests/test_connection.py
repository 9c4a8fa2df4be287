"""Connections: TLS and mutual TLS, bearer tokens (and the refusal to send
one in plaintext to another host), keepalive against a hung server. Each
server here is a `stoker serve` of its own over ``tiny`` (conftest's
start_server); the certificates come from certs.py."""

from __future__ import annotations

import contextlib
import os
import pickle
import re
import signal
import socket
import time
from pathlib import Path
from typing import Iterator

import pytest

import stoker
from stoker._channel import (KEEPALIVE_OPTIONS, KEEPALIVE_TIME_ENV, KEEPALIVE_TIMEOUT_ENV, Endpoint, is_loopback,
                             keepalive_options, with_default_port)

from helpers import TINY_N, collect, loader

TOKEN = "s3cret-token-for-tests"


@contextlib.contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Fails the test if its block takes longer than ``seconds`` (SIGALRM:
    the loader's waits wake every 0.1 s, so the handler runs)."""

    def expired(signum, frame):
        pytest.fail(f"still waiting after {seconds} s")

    old = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@pytest.fixture
def no_channels(monkeypatch: pytest.MonkeyPatch) -> None:
    """Makes any attempt to open a gRPC channel fail the test."""
    import grpc

    def refuse(*a, **kw):
        raise AssertionError("a channel was made")

    monkeypatch.setattr(grpc, "insecure_channel", refuse)
    monkeypatch.setattr(grpc, "secure_channel", refuse)


# 1. TLS and mutual TLS.


@pytest.fixture(scope="module")
def tls_server(start_server, certs) -> str:
    return start_server("--tls-cert", certs.server_cert, "--tls-key", certs.server_key).addr


@pytest.fixture(scope="module")
def mtls_server(start_server, certs) -> str:
    return start_server("--tls-cert", certs.server_cert, "--tls-key", certs.server_key,
                        "--tls-client-ca", certs.ca).addr


def test_tls_loader_iterates_an_epoch(tls_server: str, certs) -> None:
    with loader(tls_server, tls_ca=certs.ca, return_indices=True) as ld:
        assert len(ld) == 10
        batches = collect(ld)
    assert len(batches) == 10
    assert sorted(i for b in batches for i in b[2].tolist()) == list(range(TINY_N))
    names = [d.name for d in stoker.list_datasets(tls_server, tls_ca=certs.ca)]
    assert names == ["tiny"]
    # "localhost" is in the certificate too; a path-like is a path.
    port = tls_server.rsplit(":", 1)[1]
    assert len(loader(f"localhost:{port}", tls_ca=Path(certs.ca))) == 10


def test_tls_loader_pickles_with_its_files(tls_server: str, certs) -> None:
    # The files are read when the loader is made and travel with it (a
    # DataLoader worker needs them, not the paths).
    ld = pickle.loads(pickle.dumps(loader(tls_server, tls_ca=certs.ca)))
    assert len(collect(ld)) == 10


def test_plaintext_to_a_tls_server_fails_clearly(tls_server: str, mtls_server: str) -> None:
    # The server closes the plaintext connection; a TLS handshake tried on
    # the side finds that it speaks TLS, and the message says so.
    for target in (tls_server, mtls_server):
        want = f"the server at {target} speaks TLS: pass tls_ca="
        with loader(target, timeout=30) as ld, pytest.raises(stoker.StokerError) as e:
            next(iter(ld))
        assert e.value.code == "UNAVAILABLE"
        assert want in e.value.message, e.value.message
        with pytest.raises(stoker.StokerError) as e:
            stoker.list_datasets(target)
        assert e.value.code == "UNAVAILABLE"
        assert want in e.value.message, e.value.message


def test_tls_to_a_plaintext_server_says_so(server: str, certs) -> None:
    with pytest.raises(stoker.StokerError) as e:
        stoker.list_datasets(server, tls_ca=certs.ca)
    assert e.value.code == "UNAVAILABLE"
    assert f"the server at {server} does not answer TLS" in e.value.message, e.value.message
    assert "leave out tls_ca" in e.value.message


def test_tls_with_another_ca_fails(tls_server: str, certs) -> None:
    with loader(tls_server, tls_ca=certs.other_ca, timeout=30) as ld, pytest.raises(stoker.StokerError) as e:
        next(iter(ld))
    assert e.value.code == "UNAVAILABLE"
    assert "tls_ca" in e.value.message, e.value.message


def test_mtls_needs_the_client_certificate(mtls_server: str, certs) -> None:
    with loader(mtls_server, tls_ca=certs.ca, timeout=30) as ld:
        with pytest.raises(stoker.StokerError) as e:
            next(iter(ld))
        assert e.value.code == "UNAVAILABLE", e.value
        assert "tls_cert" in e.value.message, e.value.message
        with pytest.raises(stoker.StokerError) as e:
            len(ld)
    assert e.value.code == "UNAVAILABLE"
    with pytest.raises(stoker.StokerError):
        stoker.list_datasets(mtls_server, tls_ca=certs.ca)

    kw = dict(tls_ca=certs.ca, tls_cert=certs.client_cert, tls_key=certs.client_key)
    with loader(mtls_server, **kw) as ld:
        assert len(ld) == 10
        assert len(collect(ld)) == 10
    assert [d.name for d in stoker.list_datasets(mtls_server, **kw)] == ["tiny"]
    # stoker.Dataset takes the same arguments.
    ds = stoker.Dataset(mtls_server, "tiny", batch_size=5, pin_memory=False, timeout=60, **kw)
    assert len(ds) == 10 and len(collect(ds)) == 10


def test_credentials_for_full_control(tls_server: str, certs) -> None:
    import grpc

    creds = grpc.ssl_channel_credentials(Path(certs.ca).read_bytes())
    assert len(collect(loader(tls_server, credentials=creds))) == 10
    assert [d.name for d in stoker.list_datasets(tls_server, credentials=creds)] == ["tiny"]


def test_tls_argument_errors(certs, tmp_path: Path) -> None:
    import grpc

    creds = grpc.ssl_channel_credentials()
    not_pem = tmp_path / "not.pem"
    not_pem.write_text("hello\n")
    cases = [
        (dict(credentials=creds, tls_ca=certs.ca), ValueError, "not both"),
        (dict(credentials=creds, tls_cert=certs.client_cert, tls_key=certs.client_key), ValueError, "not both"),
        (dict(tls_ca=certs.ca, tls_cert=certs.client_cert), ValueError, "tls_key"),
        (dict(tls_ca=certs.ca, tls_key=certs.client_key), ValueError, "tls_cert"),
        (dict(tls_ca=str(tmp_path / "missing.pem")), FileNotFoundError, "missing.pem"),
        (dict(tls_ca=str(not_pem)), ValueError, "no PEM"),
        (dict(tls_ca=42), TypeError, "tls_ca"),
        (dict(credentials="tls"), TypeError, "credentials"),
        (dict(allow_insecure_token=1), TypeError, "allow_insecure_token"),
    ]
    for kw, exc, match in cases:
        with pytest.raises(exc, match=match):
            stoker.Loader("127.0.0.1:1", "tiny", **kw)
        with pytest.raises(exc, match=match):
            stoker.list_datasets("127.0.0.1:1", **kw)


# 2. Tokens.


@pytest.fixture(scope="module")
def auth_server(start_server, tmp_path_factory: pytest.TempPathFactory) -> str:
    tokens = tmp_path_factory.mktemp("auth") / "tokens"
    tokens.write_text(f"# test tokens\n\n{TOKEN}\nanother-token\n")
    return start_server("--auth-tokens", str(tokens)).addr


@pytest.mark.parametrize("token", [None, "wrong-token"])
def test_calls_without_a_good_token_are_refused(auth_server: str, token) -> None:
    with loader(auth_server, token=token) as ld:
        with pytest.raises(stoker.StokerError) as e:
            next(iter(ld))
        assert e.value.code == "UNAUTHENTICATED"
        assert "bearer token" in e.value.message
        if token is None:
            assert "token=" in e.value.message  # the hint
        with pytest.raises(stoker.StokerError) as e:
            len(ld)
        assert e.value.code == "UNAUTHENTICATED"
    with pytest.raises(stoker.StokerError) as e:
        stoker.list_datasets(auth_server, token=token)
    assert e.value.code == "UNAUTHENTICATED"


def test_token_goes_on_every_call(auth_server: str) -> None:
    with loader(auth_server, token=TOKEN, return_indices=True) as ld:
        assert len(ld) == 10  # DescribeJob
        first = collect(ld)  # Feed
        assert len(first) == 10
        assert len(collect(ld)) == 10  # the next epoch, on the same stream
        assert len(ld) == 10  # epoch 2, asked again
    assert [d.name for d in stoker.list_datasets(auth_server, token=TOKEN)] == ["tiny"]
    ds = stoker.Dataset(auth_server, "tiny", batch_size=5, pin_memory=False, timeout=60, token=TOKEN)
    assert len(ds) == 10 and len(collect(ds)) == 10


def test_token_in_plaintext_to_a_remote_host_is_refused_before_connecting(no_channels, certs) -> None:
    target = "10.0.0.1:7070"  # never connected to: the check comes first
    for make in (  # no_channels fails the test if any of them dials
        lambda **kw: stoker.Loader(target, "tiny", **kw),
        lambda **kw: stoker.Dataset(target, "tiny", **kw),
        lambda **kw: stoker.list_datasets(target, **kw),
    ):
        with pytest.raises(ValueError) as e:
            make(token=TOKEN)
        msg = str(e.value)
        assert "plaintext" in msg and "tls_ca" in msg and "allow_insecure_token=True" in msg
        assert TOKEN not in msg
    # Allowed: told so, with TLS, or without a token.
    stoker.Loader(target, "tiny", token=TOKEN, allow_insecure_token=True)
    stoker.Loader(target, "tiny", token=TOKEN, tls_ca=certs.ca)
    stoker.Loader("dns:///stoker.example:7070", "tiny", token=TOKEN, tls_ca=certs.ca)
    stoker.Loader(target, "tiny")
    # Loopback targets may have it in plaintext.
    for t in ("127.0.0.1:7070", "localhost:7070", "[::1]:7070", "unix:/tmp/stoker.sock"):
        stoker.Loader(t, "tiny", token=TOKEN)
    with pytest.raises(ValueError):
        stoker.Loader("dns:///stoker.example:7070", "tiny", token=TOKEN)


def test_token_argument_errors() -> None:
    for token, exc in ((42, TypeError), (b"tok", TypeError), ("", ValueError), ("tok\n", ValueError),
                       ("t\x00k", ValueError), ("tøk", ValueError)):
        with pytest.raises(exc):
            stoker.Loader("127.0.0.1:1", "tiny", token=token)


@pytest.mark.parametrize(
    "target, want",
    [
        ("127.0.0.1:7070", True),
        ("127.8.9.10:7070", True),
        ("localhost:7070", True),
        ("LOCALHOST", True),
        ("[::1]:7070", True),
        ("::1", True),
        ("[::ffff:127.0.0.1]:7070", True),
        ("unix:/run/stoker.sock", True),
        ("unix-abstract:stoker", True),
        ("dns:///localhost:7070", True),
        ("dns://8.8.8.8/localhost:7070", True),
        ("passthrough:///127.0.0.1:7070", True),
        ("ipv4:127.0.0.1:1,127.0.0.2:2", True),
        ("ipv6:[::1]:7070", True),
        ("10.0.0.1:7070", False),
        ("gpu-host:7070", False),
        ("[2001:db8::1]:7070", False),
        ("dns:///gpu-host:7070", False),
        ("dns:localhost:7070", False),  # unsure how it resolves: remote
        ("ipv4:127.0.0.1:1,10.0.0.1:2", False),
        ("localhost.evil.example:7070", False),
        ("", False),
    ],
)
def test_is_loopback(target: str, want: bool) -> None:
    assert is_loopback(target) is want


# 3. Keepalive.


def test_keepalive_detects_a_hung_server(start_server, monkeypatch: pytest.MonkeyPatch) -> None:
    # With timeout=None a loader waits as long as the server is alive; a
    # stopped one (SIGSTOP: its socket stays open, nothing answers) stops
    # answering keepalive pings, found within STOKER_KEEPALIVE_TIME (ping)
    # + STOKER_KEEPALIVE_TIMEOUT of the last data: 2 s + 2 s here, where
    # the defaults (10 s + 15 s) made this test wait 25 s. A ping every
    # 2 s is under the server's 10 s minimum, which it enforces at the
    # fourth ping since its last data: the server is stopped before the
    # second. (The
    # sleep lets gRPC's own ping, sent on data, be answered first: it is
    # the keepalive ping that finds the hang.)
    monkeypatch.setenv(KEEPALIVE_TIME_ENV, "2")
    monkeypatch.setenv(KEEPALIVE_TIMEOUT_ENV, "2")
    srv = start_server()
    pid = srv.proc.pid
    ld = loader(srv.addr, timeout=None, prefetch=2)
    it = iter(ld)
    try:
        next(it)
        time.sleep(2)
        os.kill(pid, signal.SIGSTOP)
        t0 = time.monotonic()
        with deadline(60), pytest.raises(stoker.StokerError) as e:
            while True:
                next(it)  # the batches already here, then the error
        took = time.monotonic() - t0
        assert e.value.code == "UNAVAILABLE", e.value
        # Keepalive found it (deadline(60) turns a hang into a failure; the
        # time it took is the machine's as much as keepalive's).
        assert "stopped answering pings" in e.value.message, e.value.message
        print(f"the stopped server was found after {took:.1f} s")
    finally:
        os.kill(pid, signal.SIGCONT)
        ld.close()
        srv.stop()


def test_keepalive_intervals_from_the_environment() -> None:
    """STOKER_KEEPALIVE_TIME and STOKER_KEEPALIVE_TIMEOUT set the ping's
    interval and its timeout (both of gRPC's: keepalive's and every
    ping's), in seconds; unset or empty, the defaults; anything but a
    positive, finite number is refused, naming the variable."""
    assert keepalive_options({}) == KEEPALIVE_OPTIONS
    assert keepalive_options({KEEPALIVE_TIME_ENV: "", KEEPALIVE_TIMEOUT_ENV: " "}) == KEEPALIVE_OPTIONS
    got = dict(keepalive_options({KEEPALIVE_TIME_ENV: "30", KEEPALIVE_TIMEOUT_ENV: "0.25"}))
    assert got == dict(KEEPALIVE_OPTIONS, **{"grpc.keepalive_time_ms": 30_000, "grpc.keepalive_timeout_ms": 250,
                                              "grpc.http2.ping_timeout_ms": 250})
    assert dict(keepalive_options({KEEPALIVE_TIMEOUT_ENV: "60"}))["grpc.keepalive_time_ms"] == 10_000
    for bad in ("0", "-1", "inf", "nan", "ten", "10s"):
        with pytest.raises(ValueError, match=re.escape(f"{KEEPALIVE_TIMEOUT_ENV}={bad!r}: must be a positive")):
            keepalive_options({KEEPALIVE_TIMEOUT_ENV: bad})


# 4. Messages that say what happened and what to do.


def test_killed_plaintext_server_gets_no_tls_hint(start_server) -> None:
    # A plaintext server killed mid-epoch closes the connection: nothing
    # about TLS (the handshake never said so), but whether the server
    # still runs.
    srv = start_server()
    ld = loader(srv.addr, timeout=30, prefetch=1, batch_size=2)
    it = iter(ld)
    try:
        next(it)
        srv.proc.kill()
        srv.proc.wait(timeout=30)
        with deadline(60), pytest.raises(stoker.StokerError) as e:
            while True:
                next(it)  # the batches already here, then the error
    finally:
        ld.close()
        srv.stop()
    assert e.value.code == "UNAVAILABLE", e.value
    assert "tls" not in e.value.message.lower(), e.value.message
    assert f"is `stoker serve` still running at {srv.addr}" in e.value.message, e.value.message


def test_closed_port_asks_whether_stoker_serve_runs() -> None:
    with socket.socket() as s:  # a port nothing listens at
        s.bind(("127.0.0.1", 0))
        addr = "127.0.0.1:%d" % s.getsockname()[1]
    want = f"is `stoker serve` running at {addr}?"
    with pytest.raises(stoker.StokerError) as e:
        stoker.list_datasets(addr, timeout=30)
    assert e.value.code == "UNAVAILABLE" and want in e.value.message, e.value.message
    with loader(addr, timeout=30) as ld, pytest.raises(stoker.StokerError) as e:
        next(iter(ld))
    assert e.value.code == "UNAVAILABLE" and want in e.value.message, e.value.message


class _RpcError(Exception):
    """The two methods of a grpc.RpcError that Endpoint.error reads."""

    def __init__(self, code: str, details: str) -> None:
        import grpc

        self._code, self._details = getattr(grpc.StatusCode, code), details

    def code(self):
        return self._code

    def details(self) -> str:
        return self._details


@pytest.mark.parametrize(
    "details, hint",
    [
        # A plaintext server killed mid-epoch (issue 29's text): no TLS hint.
        ("Stream removed (Socket closed)", "is `stoker serve` still running at 127.0.0.1:1, or did it restart?"),
        ("Stream removed (recvmsg:Connection reset by peer (104))", "still running at 127.0.0.1:1, or did it restart?"),
        ("failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:1: Failed to connect to remote "
         "host: Connection refused", "nothing answers there: is `stoker serve` running at 127.0.0.1:1?"),
        # Closed at connect, and no TLS handshake answers on the side.
        ("failed to connect to all addresses; last error: UNAVAILABLE: ipv4:127.0.0.1:1: Socket closed",
         "closed the connection before answering: is `stoker serve` running at 127.0.0.1:1?"),
        ("some error of the server's own", None),
    ],
)
def test_unavailable_messages(details: str, hint) -> None:
    err = Endpoint.make("127.0.0.1:1").error(_RpcError("UNAVAILABLE", details))
    assert err.code == "UNAVAILABLE"
    assert "tls" not in err.message.lower()
    if hint is None:
        assert err.message == details
    else:
        assert err.message.startswith(details + " (") and err.message.endswith(hint + ")"), err.message


@pytest.mark.parametrize(
    "target, want",
    [
        ("gpu-box", "gpu-box:7070"),
        ("127.0.0.1", "127.0.0.1:7070"),
        ("[::1]", "[::1]:7070"),
        ("::1", "[::1]:7070"),
        ("dns:///gpu-box", "dns:///gpu-box:7070"),
        ("dns://8.8.8.8/gpu-box", "dns://8.8.8.8/gpu-box:7070"),
        ("ipv4:127.0.0.1,127.0.0.2:9000", "ipv4:127.0.0.1:7070,127.0.0.2:9000"),
        ("gpu-box:443", "gpu-box:443"),
        ("dns:///gpu-box:9000", "dns:///gpu-box:9000"),
        ("unix:/tmp/stoker.sock", "unix:/tmp/stoker.sock"),
        ("xds:///svc", "xds:///svc"),
    ],
)
def test_a_target_without_a_port_is_on_7070(target: str, want: str) -> None:
    # stoker serve listens on 7070 by default; gRPC alone would dial 443.
    assert with_default_port(target) == want
    assert stoker.Loader(target, "tiny").target == want
