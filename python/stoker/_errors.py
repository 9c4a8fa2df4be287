"""Errors: what the server reports, and how gRPC's errors become them.

:class:`StokerError` is every error from the server or the stream carrying
it; :class:`SampleError` a sample the server could not make (reported, not
raised).
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["StokerError", "SampleError", "rpc_error"]


class StokerError(RuntimeError):
    """An error from the stoker server, or from the stream that carries it.

    ``code`` is the gRPC status code's name (``"NOT_FOUND"``,
    ``"INVALID_ARGUMENT"``, ``"UNAVAILABLE"``, …) and ``message`` the
    server's message.
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(code, message)
        self.code = code
        self.message = message

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


class SampleError(NamedTuple):
    """A sample the server could not make; its slot was filled by policy."""

    index: int
    name: str
    reason: str


def rpc_error(e: Exception) -> StokerError:
    """Turns a grpc.RpcError into a StokerError with the server's message."""
    code = getattr(e, "code", None)
    details = getattr(e, "details", None)
    try:
        name = code().name if callable(code) else "UNKNOWN"
        msg = details() if callable(details) else str(e)
    except Exception:  # pragma: no cover - an RpcError without status
        name, msg = "UNKNOWN", str(e)
    return StokerError(name, msg or "")
