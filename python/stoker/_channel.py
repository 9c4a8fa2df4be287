"""gRPC channels to a stoker server: where and how to connect (the
:class:`Endpoint`: TLS, the bearer token and the rule that keeps a token
off plaintext to remote hosts), channel creation (with the fork guard and
keepalive), and the calls a Loader makes on its channel (the Feed stream,
DescribeJob) or a one-off one does (ListDatasets).

gRPC is imported on first use, never by ``import stoker``.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import ipaddress
import math
import os
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

from stoker import _args
from stoker._errors import StokerError, rpc_error
from stoker._wire import _parse_response
from stoker.v1 import stoker_pb2 as pb

if TYPE_CHECKING:  # pragma: no cover
    import grpc

__all__ = ["MAX_RECEIVE_MESSAGE_BYTES", "KEEPALIVE_OPTIONS", "KEEPALIVE_TIME_ENV", "KEEPALIVE_TIMEOUT_ENV",
           "keepalive_options", "DEFAULT_PORT", "Endpoint", "Connection", "DatasetInfo",
           "is_loopback", "with_default_port", "speaks_tls", "list_datasets"]

#: gRPC receive limit: chunks are at most ~4 MiB, and a batch's header with
#: its fields (a job bounds them to 32 MiB) and traces at most 48 MiB (the
#: Go side's rpc.MaxHeaderBytes).
MAX_RECEIVE_MESSAGE_BYTES = 48 << 20

#: Keepalive: with no data from the server for 10 s the channel pings it,
#: and a server that does not answer within 15 s is taken for dead, so the
#: calls on the channel fail with UNAVAILABLE (a trainer waiting with
#: ``timeout=None`` on a hung or cut-off server does not wait forever).
#: Pings go also between calls (an idle loader between epochs) and without
#: data in between. The server allows a ping every 10 s (its keepalive
#: enforcement policy: MinTime 10 s, PermitWithoutStream); gRPC times the
#: next ping from the last data or ping answer, so they never come faster.
#: The environment can set both intervals (:func:`keepalive_options`).
#:
#: keepalive_timeout_ms alone is not enough: with grpcio 1.85 a keepalive
#: ping left unanswered was still pending 30 s later (measured against a
#: SIGSTOPped server). What closes the connection is the timeout every ping
#: has (keepalive's, and gRPC's own flow-control probes), ping_timeout_ms,
#: by default 1 minute: 15 s here too. A healthy server answers a ping
#: within milliseconds (its HTTP/2 writer puts the answer ahead of queued
#: batch data), even with every worker inside a C kernel: the answer is
#: the transport's goroutines' work, and a worker's thread in cgo holds no
#: Go P (TestPingsAnsweredInsideBomb: 9 ms at worst with both workers of a
#: 2-core host in the blur bomb). The timeout was 5 s, and a trainer on a
#: loaded host (its own process starved: grpc's poller threads are the
#: trainer's) lost its stream once in ~36 runs (issue 47); 15 s is the
#: margin such a host meets, and a hung server is still found within 25 s
#: of its last data.
KEEPALIVE_OPTIONS: Tuple[Tuple[str, int], ...] = (
    ("grpc.keepalive_time_ms", 10_000),
    ("grpc.keepalive_timeout_ms", 15_000),
    ("grpc.http2.ping_timeout_ms", 15_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
)

#: The environment variables that set the keepalive's two intervals, in
#: seconds, for the channels made after they are set: how long without
#: data before a ping (10 by default), and how long a ping waits for its
#: answer before the server is taken for dead (15 by default).
KEEPALIVE_TIME_ENV = "STOKER_KEEPALIVE_TIME"
KEEPALIVE_TIMEOUT_ENV = "STOKER_KEEPALIVE_TIMEOUT"


def keepalive_options(environ: Optional[Mapping[str, str]] = None) -> Tuple[Tuple[str, int], ...]:
    """:data:`KEEPALIVE_OPTIONS`, with the intervals that
    ``STOKER_KEEPALIVE_TIME`` and ``STOKER_KEEPALIVE_TIMEOUT`` set (seconds,
    positive and finite; ValueError naming the variable otherwise) in place
    of 10 and 15 s. A longer timeout suits a trainer whose host is so
    loaded that gRPC's own threads wait seconds to run; a shorter one finds
    a hung server sooner. ``stoker serve`` takes a ping more often than
    every 10 s while it sends nothing for abuse: at the fourth ping since
    its last data, each within 10 s of the one before, it closes the
    connection (GOAWAY "too_many_pings"), so a ``STOKER_KEEPALIVE_TIME``
    under 10 holds only while data flows (the tests use one to find a
    stopped server in seconds)."""
    env = os.environ if environ is None else environ
    ms = {"grpc.keepalive_time_ms": _env_ms(env, KEEPALIVE_TIME_ENV),
          "grpc.keepalive_timeout_ms": _env_ms(env, KEEPALIVE_TIMEOUT_ENV),
          "grpc.http2.ping_timeout_ms": _env_ms(env, KEEPALIVE_TIMEOUT_ENV)}
    return tuple((k, ms[k] if ms.get(k) is not None else v) for k, v in KEEPALIVE_OPTIONS)


def _env_ms(env: Mapping[str, str], name: str) -> Optional[int]:
    """Environment variable ``name``, seconds, as whole milliseconds (at
    least 1); None where it is unset or empty."""
    raw = env.get(name, "").strip()
    if not raw:
        return None
    try:
        v = float(raw)
    except ValueError:
        v = math.nan
    if not (math.isfinite(v) and v > 0):
        raise ValueError(f"{name}={raw!r}: must be a positive, finite number of seconds")
    return max(1, round(v * 1000))


_FEED_METHOD = "/stoker.v1.FeedService/Feed"
_LIST_METHOD = "/stoker.v1.FeedService/ListDatasets"
_DESCRIBE_METHOD = "/stoker.v1.FeedService/DescribeJob"

# The pid of the process that made this module's first gRPC channel. gRPC's
# core is not fork-safe: a child forked after its parent used gRPC can
# deadlock on its first channel (seen in about 1 DataLoader worker in 50).
# Such a child inherits this value and refuses with a clear error instead;
# a spawned child re-imports the module and starts from None.
_grpc_pid: Optional[int] = None


#: stoker serve's default port (``--listen 127.0.0.1:7070``): the port a
#: target without one is given, never gRPC's default, 443.
DEFAULT_PORT = 7070


def with_default_port(target: str) -> str:
    """``target`` with :data:`DEFAULT_PORT` added where it names a host
    without a port: ``"gpu-box"`` is ``"gpu-box:7070"``, ``"dns:///gpu-box"``
    ``"dns:///gpu-box:7070"``, ``"[::1]"`` ``"[::1]:7070"``. gRPC would dial
    such a target on 443, where no stoker listens unless told to. Targets
    with a port, Unix sockets and other schemes are returned as they are.
    (The Go client's rpc.WithDefaultPort.)"""
    scheme, sep, rest = target.partition(":")
    if sep:
        if scheme in ("unix", "unix-abstract", "vsock"):
            return target
        if scheme in ("dns", "passthrough"):
            if rest.startswith("//"):
                authority, slash, endpoint = rest[2:].partition("/")
                return f"{scheme}://{authority}/{_host_with_port(endpoint)}" if slash else target
            return f"{scheme}:{_host_with_port(rest)}"
        if scheme in ("ipv4", "ipv6"):
            return f"{scheme}:" + ",".join(_host_with_port(a) for a in rest.split(","))
    return _host_with_port(target)


def _host_with_port(addr: str) -> str:
    """``addr`` with :data:`DEFAULT_PORT` when it is a host alone: a name,
    an IPv4 address, or an IPv6 one bare or in brackets."""
    if not addr:
        return addr
    if addr.startswith("["):
        end = addr.find("]")
        if end == len(addr) - 1 and _is_ip(addr[1:end]):
            return f"{addr}:{DEFAULT_PORT}"
        return addr
    if ":" not in addr:
        return f"{addr}:{DEFAULT_PORT}"
    if _is_ip(addr):  # a bare IPv6 address
        return f"[{addr}]:{DEFAULT_PORT}"
    return addr


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _host_port(target: str) -> Optional[Tuple[str, int]]:
    """The (host, port) a ``"host:port"``, ``"[v6]:port"``, ``dns:`` or
    ``ipv4:``/``ipv6:`` target dials first; None for others (Unix
    sockets, unknown schemes)."""
    endpoint = target
    scheme, sep, rest = target.partition(":")
    if sep and scheme in ("unix", "unix-abstract", "vsock"):
        return None
    if sep and scheme in ("dns", "passthrough"):
        endpoint = rest[2:].partition("/")[2] if rest.startswith("//") else rest
    elif sep and scheme in ("ipv4", "ipv6"):
        endpoint = rest.split(",")[0]
    host, sep, port = endpoint.rpartition(":")
    if not sep or not port.isdigit():
        return None
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return (host, int(port)) if host and (":" not in host or _is_ip(host)) else None


def speaks_tls(target: str, timeout: float = 5.0) -> bool:
    """Whether the server at ``target`` answers a TLS handshake: it
    completes, or the server answers with a TLS alert (one that wants a
    client certificate). Only the handshake is sent, and the server's
    certificate is not checked: the answer only names the argument to
    give. A plaintext gRPC server drops the ClientHello. (`stoker status`'s
    speaksTLS.)"""
    import socket
    import ssl

    hp = _host_port(target)
    if hp is None:
        return False
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols(["h2"])
    try:
        with socket.create_connection(hp, timeout=timeout) as sock:
            with ctx.wrap_socket(sock, server_hostname=hp[0]):
                return True
    except ssl.SSLError as e:
        return "ALERT" in (e.reason or "")
    except OSError:
        return False


def is_loopback(target: str) -> bool:
    """Whether every address ``target`` names is on this machine: a loopback
    IP, ``localhost``, or a Unix socket. Names that need resolving
    otherwise count as remote. (The Go client's isLoopback.)"""
    endpoint = target
    scheme, sep, rest = target.partition(":")
    if sep:
        if scheme in ("unix", "unix-abstract"):
            return True
        if scheme in ("dns", "passthrough"):  # scheme://authority/endpoint
            if rest.startswith("//"):
                rest = rest[2:]
            _, slash, endpoint = rest.partition("/")
            if not slash:
                return False
        elif scheme in ("ipv4", "ipv6"):
            return all(_loopback_host(a) for a in rest.split(","))
    return _loopback_host(endpoint)


def _loopback_host(addr: str) -> bool:
    """Whether ``"host:port"``, ``"[v6]:port"`` or a bare host is on loopback."""
    host = addr
    if addr.startswith("["):
        end = addr.find("]")
        if end < 0:
            return False
        host = addr[1:end]
    elif addr.count(":") == 1:
        host = addr.partition(":")[0]
    if host.lower() == "localhost":
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


def _read_pem(arg: str, path: str, what: str) -> bytes:
    with open(path, "rb") as f:
        data = f.read()
    if b"-----BEGIN" not in data:
        raise ValueError(f"{arg}: no PEM {what} in {path}")
    return data


def _check_token(token: Any) -> Optional[str]:
    if token is None:
        return None
    if not isinstance(token, str):
        raise TypeError(f"token must be a str or None, got {type(token).__name__}")
    if not token:
        raise ValueError("token must not be empty (None: no token)")
    if token != token.strip():
        raise ValueError("token has leading or trailing whitespace (a newline read from its file?): strip it")
    if not all(" " <= c <= "~" for c in token):
        raise ValueError("token must be printable ASCII (it is sent as an HTTP/2 header)")
    return token


@dataclass(frozen=True)
class Endpoint:
    """Where and how a client connects: the target, the transport
    (plaintext, TLS from PEM files read at construction, or the caller's
    own gRPC credentials) and the bearer token. Picklable unless it holds
    ``credentials`` (gRPC objects are not)."""

    target: str
    token: Optional[str] = field(default=None, repr=False)
    credentials: Optional["grpc.ChannelCredentials"] = None
    tls: bool = False
    tls_ca: Optional[bytes] = field(default=None, repr=False)
    tls_cert: Optional[bytes] = field(default=None, repr=False)
    tls_key: Optional[bytes] = field(default=None, repr=False)

    @classmethod
    def make(
        cls,
        target: Any,
        *,
        token: Any = None,
        credentials: Any = None,
        tls_ca: Any = None,
        tls_cert: Any = None,
        tls_key: Any = None,
        allow_insecure_token: Any = False,
    ) -> "Endpoint":
        """Checks the connection arguments of :class:`stoker.Loader` and
        :func:`stoker.list_datasets` (see there) and reads the TLS files.
        Touches no network: a token that would go in plaintext to a remote
        host is refused here, before any connection."""
        target = with_default_port(_args.string("target", target))
        token = _check_token(token)
        allow_insecure_token = _args.boolean("allow_insecure_token", allow_insecure_token)
        ca = _args.optional_path("tls_ca", tls_ca)
        cert = _args.optional_path("tls_cert", tls_cert)
        key = _args.optional_path("tls_key", tls_key)
        tls = ca is not None or cert is not None or key is not None
        if credentials is not None:
            if tls:
                raise ValueError("give either credentials or tls_ca/tls_cert/tls_key, not both")
            import grpc

            if not isinstance(credentials, grpc.ChannelCredentials):
                raise TypeError(f"credentials must be grpc.ChannelCredentials, got {type(credentials).__name__}")
        if (cert is None) != (key is None):
            raise ValueError("a client certificate needs both tls_cert and tls_key")
        if token is not None and not tls and credentials is None and not allow_insecure_token and not is_loopback(target):
            raise ValueError(
                f"refusing to send the bearer token in plaintext to {target}, which is not a loopback address: "
                "use TLS (tls_ca=the server's CA file), or pass allow_insecure_token=True on a trusted network"
            )
        return cls(
            target,
            token,
            credentials,
            tls,
            _read_pem("tls_ca", ca, "certificate") if ca is not None else None,
            _read_pem("tls_cert", cert, "certificate") if cert is not None else None,
            _read_pem("tls_key", key, "private key") if key is not None else None,
        )

    @property
    def secure(self) -> bool:
        """Whether the channel uses TLS (or the caller's credentials)."""
        return self.tls or self.credentials is not None

    def channel_credentials(self) -> Optional["grpc.ChannelCredentials"]:
        if self.credentials is not None:
            return self.credentials
        if not self.tls:
            return None
        import grpc

        # No tls_ca: the system's root certificates.
        return grpc.ssl_channel_credentials(self.tls_ca, self.tls_key, self.tls_cert)

    def error(self, e: Exception) -> StokerError:
        """A gRPC error of a call to this endpoint as a StokerError, with
        what it means and what to do where gRPC's words do not say."""
        err = rpc_error(e)
        hint = ""
        if err.code == "UNAVAILABLE":
            hint = self._unavailable_hint(err.message)
        elif err.code == "UNAUTHENTICATED" and self.token is None:
            hint = "the server wants a bearer token: pass token="
        if hint:
            err = StokerError(err.code, f"{err.message} ({hint})")
        return err

    def _unavailable_hint(self, msg: str) -> str:
        """What an UNAVAILABLE error means. The TLS hints come only from
        the handshake: its own error, or, for a plaintext connection the
        server closed before answering, a TLS handshake tried on the side
        (speaks_tls); never from a closed socket alone, which a plaintext
        server killed mid-epoch gives too."""
        at = self.target
        if "ping timeout" in msg or "keepalive" in msg:
            return "the server stopped answering pings: it hangs, or the network to it is cut"
        connecting = "failed to connect" in msg
        if connecting and self.secure and self.credentials is None:
            # TLS 1.2 fails in the handshake; TLS 1.3 refuses a missing or
            # unknown client certificate after it, with an alert that gRPC
            # reports as "Unwrap failed (TSI_DATA_CORRUPTED)".
            if "WRONG_VERSION_NUMBER" in msg:
                return (f"the server at {at} does not answer TLS: if it is a plaintext `stoker serve` (no --tls-cert), "
                        "leave out tls_ca/tls_cert/tls_key")
            if "handshake" in msg.lower():
                return ("the TLS handshake failed: check tls_ca (the CA of the server's certificate, which must "
                        "name the target's host), and tls_cert/tls_key if the server wants a client certificate")
            if "TSI_DATA_CORRUPTED" in msg:
                return ("the server closed the TLS connection: it may want a client certificate (tls_cert, tls_key) "
                        "signed by its --tls-client-ca")
        if connecting and "Socket closed" in msg and not self.secure and speaks_tls(at):
            return (f"the server at {at} speaks TLS: pass tls_ca=, the PEM CA that signed its certificate, and "
                    "tls_cert/tls_key if it asks for a client certificate")
        if connecting and "Socket closed" in msg:
            return f"the server at {at} closed the connection before answering: is `stoker serve` running at {at}?"
        if connecting:
            return f"nothing answers there: is `stoker serve` running at {at}?"
        if any(w in msg for w in _BROKEN):
            return f"the connection broke: is `stoker serve` still running at {at}, or did it restart?"
        return ""


#: Words of gRPC's UNAVAILABLE errors when a connection that was made broke:
#: the server stopped, crashed or restarted, or the network failed.
_BROKEN = ("Stream removed", "Socket closed", "Connection reset", "Broken pipe", "Connection aborted", "GOAWAY")


@dataclass
class DatasetInfo:
    """A dataset a server serves, as :func:`list_datasets` returns it."""

    #: The name a Loader asks for.
    name: str
    #: Samples in the dataset.
    size: int
    #: Class names, in label order (label ``i`` is ``classes[i]``); empty
    #: for a dataset without classes (a WebDataset without .cls members:
    #: its labels are -1).
    classes: List[str]
    #: Identifies the dataset's content: it changes when files do.
    fingerprint: str
    #: ``"imagefolder"`` or ``"webdataset"``.
    format: str
    #: The fields its samples may have (``Loader(fields=...)``).
    fields: List[str] = field(default_factory=list)
    #: A COCO dataset's categories' ids, in ``classes``' order (empty for
    #: other datasets): a target's label, the category id by default, names
    #: ``classes[category_ids.index(label)]``; :meth:`category_names` maps them.
    category_ids: List[int] = field(default_factory=list)

    @classmethod
    def from_proto(cls, d: pb.DatasetInfo) -> "DatasetInfo":
        return cls(d.name, int(d.size), list(d.classes), d.fingerprint, d.format, list(d.fields),
                   [int(i) for i in d.category_ids])

    def category_names(self) -> Dict[int, str]:
        """``{label: name}`` of a target's labels: a COCO dataset's category
        ids (``Loader``'s default labels) to their names; of another
        dataset (or ``labels="contiguous"``), each label its class's index."""
        if self.category_ids:
            return dict(zip(self.category_ids, self.classes))
        return dict(enumerate(self.classes))


def _channel(endpoint: Endpoint) -> "grpc.Channel":
    global _grpc_pid
    pid = os.getpid()
    if _grpc_pid is not None and _grpc_pid != pid:
        raise RuntimeError(
            f"stoker: this process (pid {pid}) was forked after its parent (pid {_grpc_pid}) used gRPC, "
            "and gRPC cannot be used safely in such a child (its first channel can deadlock); "
            "use torch.utils.data.DataLoader(..., multiprocessing_context='spawn'), or num_workers=0"
        )
    _grpc_pid = pid
    import grpc

    options = [
        ("grpc.max_receive_message_length", MAX_RECEIVE_MESSAGE_BYTES),
        ("grpc.max_send_message_length", 1 << 20),
        *keepalive_options(),
    ]
    credentials = endpoint.channel_credentials()
    if credentials is not None:
        return grpc.secure_channel(endpoint.target, credentials, options=options)
    return grpc.insecure_channel(endpoint.target, options=options)


#: How long closing a channel (or a stream) waits for the threads it
#: started to end: they end within milliseconds once their calls are
#: cancelled, unless the machine is too busy to run them; one still running
#: after this long is left running, so that a close never hangs for good.
THREAD_JOIN_SECONDS = 60.0


def _is_grpc_thread(t: threading.Thread) -> bool:
    """Whether ``t`` runs gRPC's code (its targets come from its Cython
    module, wrapped there)."""
    target = getattr(t, "_target", None)
    return target is not None and getattr(target, "__module__", "").startswith("grpc")


#: The thread a garbage collection runs in, while it runs (else None).
_collector: Optional[int] = None
#: Threads a close inside a garbage collection left to end: joined at exit.
_deferred: List[threading.Thread] = []
#: Channels a close inside a garbage collection left open: closed by the
#: next close outside one, the next channel made, or at exit (see
#: :meth:`Connection.close`).
_unclosed: List["Connection"] = []


def _gc_phase(phase: str, info: Mapping[str, int]) -> None:
    global _collector
    _collector = threading.get_ident() if phase == "start" else None


gc.callbacks.append(_gc_phase)


def join_threads(threads: Sequence[threading.Thread], timeout: float = THREAD_JOIN_SECONDS) -> None:
    """Joins ``threads`` (but the calling one) within ``timeout`` seconds
    in all.

    A close that a garbage collection runs (a Loader's finalizer, once the
    Loader is unreachable) does not wait: the collection may have started at
    any allocation, holding any lock of the thread it runs in, and a thread
    that ends needs one of them (``threading.enumerate()`` holds the lock
    every ending thread takes to leave the list of threads: a collection
    started inside it, whose finalizer joined an ending reader, waited the
    whole timeout, twice, and the new stream's offer went unanswered). Those
    threads are joined at exit (:func:`_join_deferred`), the interpreter's
    end being what the joins are for."""
    if _collector == threading.get_ident():
        _deferred.extend(threads)  # nothing here that takes a lock
        return
    for t in list(_deferred):  # the ended ones forgotten
        if not t.is_alive():
            with contextlib.suppress(ValueError):
                _deferred.remove(t)
    deadline = time.monotonic() + timeout
    for t in threads:
        if t is not threading.current_thread():
            t.join(max(0.0, deadline - time.monotonic()))


def _close_unclosed() -> None:
    """Closes the channels that closes inside a collection left open, one
    at a time (a collection in another thread may add one meanwhile)."""
    while _unclosed:
        _unclosed.pop().close()


@atexit.register
def _join_deferred() -> None:
    _close_unclosed()
    threads = []
    while _deferred:
        threads.append(_deferred.pop())
    join_threads(threads)


def _metadata(token: Optional[str]) -> Optional[List[Tuple[str, str]]]:
    return [("authorization", f"Bearer {token}")] if token else None


class Connection:
    """One channel to a server and the FeedService calls on it, each with
    the endpoint's token.

    ``pid`` is the process that made it: a forked child must neither use
    nor close it (see :meth:`owned`).
    """

    def __init__(self, endpoint: Endpoint) -> None:
        _close_unclosed()
        self.endpoint = endpoint
        self.channel = _channel(endpoint)
        self.pid = os.getpid()
        self.metadata = _metadata(endpoint.token)
        self._closed = False
        #: The threads gRPC started for this channel's streaming calls (its
        #: channel spin thread, each call's request consumer): joined by
        #: close, so that none is still inside gRPC's C++ when the
        #: interpreter exits (see close).
        self._grpc_threads: List[threading.Thread] = []

    def owned(self) -> bool:
        """Whether this process made the channel (and may use or close it)."""
        return self.pid == os.getpid()

    @property
    def closed(self) -> bool:
        return self._closed

    def feed(self, requests: Iterator[pb.FeedRequest]) -> Any:
        """Starts a Feed call sending ``requests``; its responses are
        FeedResponses, or :class:`stoker._wire._Chunk` for chunks."""
        call = self.channel.stream_stream(
            _FEED_METHOD,
            request_serializer=pb.FeedRequest.SerializeToString,
            response_deserializer=_parse_response,
        )
        before = set(threading.enumerate())
        started = call(requests, metadata=self.metadata)
        self._grpc_threads += [t for t in threading.enumerate() if t not in before and _is_grpc_thread(t)]
        return started

    def describe_job(self, job: pb.JobSpec, epoch: int, consumed: int, timeout: float,
                     token_resumes: Sequence[int] = ()) -> pb.JobInfo:
        """The JobInfo of ``epoch`` of ``job`` (DescribeJob): nothing is made."""
        import grpc

        call = self.channel.unary_unary(
            _DESCRIBE_METHOD,
            request_serializer=pb.DescribeJobRequest.SerializeToString,
            response_deserializer=pb.DescribeJobResponse.FromString,
        )
        req = pb.DescribeJobRequest(job=job, epoch=epoch, consumed=consumed, token_resumes=list(token_resumes))
        try:
            return call(req, timeout=timeout, metadata=self.metadata).info
        except grpc.RpcError as e:
            raise self.endpoint.error(e) from None

    def list_datasets(self, timeout: Optional[float]) -> List[DatasetInfo]:
        """The datasets the server serves (ListDatasets)."""
        import grpc

        call = self.channel.unary_unary(
            _LIST_METHOD,
            request_serializer=pb.ListDatasetsRequest.SerializeToString,
            response_deserializer=pb.ListDatasetsResponse.FromString,
        )
        try:
            resp = call(pb.ListDatasetsRequest(), timeout=timeout, metadata=self.metadata)
        except grpc.RpcError as e:
            raise self.endpoint.error(e) from None
        return [DatasetInfo.from_proto(d) for d in resp.datasets]

    def close(self) -> None:
        """Closes the channel, cancelling its calls, and waits (at most
        :data:`THREAD_JOIN_SECONDS`) for the threads gRPC started for them
        to end; in a forked child only forgets it. Safe to call twice.

        gRPC's threads are daemons, and its channel spin thread waits for
        the calls' last events inside gRPC's C++ with the GIL released. Left
        running when the interpreter exits (a busy machine schedules it
        late), it wakes into a finalizing interpreter, which ends it with
        pthread_exit: the unwinding that starts through gRPC's C++ frames
        calls std::terminate, and the process dies of SIGABRT ("terminate
        called without an active exception") after the script's last line.

        A close inside a garbage collection (a Loader's finalizer) leaves
        the channel open, its calls already cancelled by their streams, for
        the next close outside one, the next channel made, or the exit. The
        collection may run in one of gRPC's own threads, at any allocation
        there: in this channel's spin thread, whose close waits for the
        calls' last events that only the spin thread delivers, it would wait
        for good (test_exit.py's test_a_close_on_the_channels_own_thread).
        """
        if self._closed:
            return
        if _collector == threading.get_ident():  # nothing here that takes a lock
            if self not in _unclosed:
                _unclosed.append(self)
            return
        self._closed = True
        _close_unclosed()
        if self.owned():
            self.channel.close()
            join_threads(self._grpc_threads)
        self._grpc_threads = []


def list_datasets(
    target: str,
    timeout: Optional[float] = 30.0,
    token: Optional[str] = None,
    credentials: Optional["grpc.ChannelCredentials"] = None,
    *,
    tls_ca: Optional[str] = None,
    tls_cert: Optional[str] = None,
    tls_key: Optional[str] = None,
    allow_insecure_token: bool = False,
) -> List[DatasetInfo]:
    """Returns the datasets the server at ``target`` serves, as
    :class:`DatasetInfo` (name, size, classes, fingerprint, format: plain
    Python values). ``timeout``: seconds, or None to wait forever; the
    connection arguments are :class:`stoker.Loader`'s."""
    timeout = _args.seconds("timeout", timeout)
    endpoint = Endpoint.make(target, token=token, credentials=credentials, tls_ca=tls_ca, tls_cert=tls_cert,
                             tls_key=tls_key, allow_insecure_token=allow_insecure_token)
    conn = Connection(endpoint)
    try:
        return conn.list_datasets(timeout)
    finally:
        conn.close()
