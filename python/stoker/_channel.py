"""gRPC channels to a stoker server: creation (with the fork guard), the
bearer token, and the calls a Loader makes on its channel (the Feed stream,
DescribeJob) or a one-off one does (ListDatasets).

gRPC is imported on first use, never by ``import stoker``.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Iterator, List, Optional, Tuple

from stoker._errors import rpc_error
from stoker._wire import _parse_response
from stoker.v1 import stoker_pb2 as pb

if TYPE_CHECKING:  # pragma: no cover
    import grpc

__all__ = ["MAX_RECEIVE_MESSAGE_BYTES", "Connection", "list_datasets"]

#: gRPC receive limit: chunks are at most ~4 MiB, headers are small.
MAX_RECEIVE_MESSAGE_BYTES = 8 << 20

_FEED_METHOD = "/stoker.v1.FeedService/Feed"
_LIST_METHOD = "/stoker.v1.FeedService/ListDatasets"
_DESCRIBE_METHOD = "/stoker.v1.FeedService/DescribeJob"

# The pid of the process that made this module's first gRPC channel. gRPC's
# core is not fork-safe: a child forked after its parent used gRPC can
# deadlock on its first channel (seen in about 1 DataLoader worker in 50).
# Such a child inherits this value and refuses with a clear error instead;
# a spawned child re-imports the module and starts from None.
_grpc_pid: Optional[int] = None


def _channel(target: str, credentials: Optional["grpc.ChannelCredentials"]) -> "grpc.Channel":
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
    ]
    if credentials is not None:
        return grpc.secure_channel(target, credentials, options=options)
    return grpc.insecure_channel(target, options=options)


def _metadata(token: Optional[str]) -> Optional[List[Tuple[str, str]]]:
    return [("authorization", f"Bearer {token}")] if token else None


class Connection:
    """One channel to a server and the FeedService calls on it.

    ``pid`` is the process that made it: a forked child must neither use
    nor close it (see :meth:`owned`).
    """

    def __init__(
        self, target: str, credentials: Optional["grpc.ChannelCredentials"], token: Optional[str]
    ) -> None:
        self.channel = _channel(target, credentials)
        self.pid = os.getpid()
        self.metadata = _metadata(token)
        self._closed = False

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
        return call(requests, metadata=self.metadata)

    def describe_job(self, job: pb.JobSpec, epoch: int, consumed: int, timeout: float) -> pb.JobInfo:
        """The JobInfo of ``epoch`` of ``job`` (DescribeJob): nothing is made."""
        import grpc

        call = self.channel.unary_unary(
            _DESCRIBE_METHOD,
            request_serializer=pb.DescribeJobRequest.SerializeToString,
            response_deserializer=pb.DescribeJobResponse.FromString,
        )
        req = pb.DescribeJobRequest(job=job, epoch=epoch, consumed=consumed)
        try:
            return call(req, timeout=timeout, metadata=self.metadata).info
        except grpc.RpcError as e:
            raise rpc_error(e) from None

    def list_datasets(self, timeout: float) -> List[pb.DatasetInfo]:
        """The datasets the server serves (ListDatasets)."""
        import grpc

        call = self.channel.unary_unary(
            _LIST_METHOD,
            request_serializer=pb.ListDatasetsRequest.SerializeToString,
            response_deserializer=pb.ListDatasetsResponse.FromString,
        )
        try:
            return list(call(pb.ListDatasetsRequest(), timeout=timeout, metadata=self.metadata).datasets)
        except grpc.RpcError as e:
            raise rpc_error(e) from None

    def close(self) -> None:
        """Closes the channel, cancelling its calls; in a forked child only
        forgets it. Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        if self.owned():
            self.channel.close()


def list_datasets(
    target: str,
    timeout: float = 30.0,
    token: Optional[str] = None,
    credentials: Optional["grpc.ChannelCredentials"] = None,
) -> List[pb.DatasetInfo]:
    """Returns the datasets the server at ``target`` serves (name, size,
    classes, fingerprint, format)."""
    conn = Connection(target, credentials, token)
    try:
        return conn.list_datasets(timeout)
    finally:
        conn.close()
