"""The Feed stream's wire format on the receiving side: a zero-copy parser
for Chunk messages (nearly all the bytes) and the response deserializer that
uses it, leaving every other message to protobuf."""

from __future__ import annotations

from typing import Any, NamedTuple, Optional, Tuple

from stoker.v1 import stoker_pb2 as pb

__all__ = ["_Chunk", "_parse_chunk", "_parse_response"]


class _Chunk(NamedTuple):
    """A Chunk message, its pixels a view into the received message."""

    number: int
    offset: int
    data: memoryview


def _varint(buf: bytes, i: int) -> Tuple[int, int]:
    result = shift = 0
    while True:
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, i
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def _parse_chunk(data: bytes) -> Optional[_Chunk]:
    """Parses a FeedResponse holding a Chunk without copying its pixels, or
    returns None for anything unexpected (protobuf then parses it)."""
    n = len(data)
    length, i = _varint(data, 1)
    if i + length != n:
        return None
    number = offset = 0
    mv = memoryview(data)
    payload = mv[0:0]
    while i < n:
        key, i = _varint(data, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            v, i = _varint(data, i)
            if field == 1:
                number = v
            elif field == 2:
                offset = v
        elif wire == 2:
            length, i = _varint(data, i)
            if i + length > n:
                return None
            if field == 3:
                payload = mv[i : i + length]
            i += length
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        else:
            return None
    return _Chunk(number, offset, payload) if i == n else None


def _parse_response(data: bytes) -> Any:
    """The Feed stream's response deserializer. Chunks, nearly all the bytes,
    skip protobuf: their pixels stay a view into the message gRPC handed
    over, saving two copies of every batch (protobuf's parse and its bytes
    getter). Everything else is a FeedResponse."""
    if data[:1] == b"\x1a":  # field 3 (chunk), length-delimited
        try:
            c = _parse_chunk(data)
        except (IndexError, ValueError):
            c = None
        if c is not None:
            return c
    return pb.FeedResponse.FromString(data)
