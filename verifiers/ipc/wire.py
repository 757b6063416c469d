"""Length-framed JSON messages over a Unix stream socket, with file descriptors attached.

The judge and each arm process talk over one ``socketpair``. A frame is a 4-byte
big-endian length and a UTF-8 JSON object. File descriptors (the memfd of a CPU buffer
set) travel with the frame's first bytes (``SCM_RIGHTS``).

Only JSON crosses from an arm to the judge: the judge never unpickles anything an arm
sends, so a hostile arm can at worst send a malformed or oversized frame, which
``recv`` turns into ``WireError`` (the judge then blames the arm).
"""
from __future__ import annotations

import array
import json
import select
import socket
import struct
import time
from collections.abc import Callable
from typing import Any, NoReturn

HEADER = struct.Struct(">I")
MAX_FRAME = 64 << 20  # a profile's kernel records stay far below this
MAX_FDS = 16


class WireError(Exception):
    """The peer closed the channel, sent something that is not a frame, or was too slow."""


class WireTimeout(WireError):
    """No complete frame arrived before the deadline."""


def send(sock: socket.socket, message: dict[str, Any], fds: list[int] | tuple[int, ...] = ()) -> None:
    payload = json.dumps(message, separators=(",", ":"), allow_nan=True).encode()
    frame = HEADER.pack(len(payload)) + payload
    try:
        if fds:
            sent = socket.send_fds(sock, [frame], list(fds))
            if sent < len(frame):
                sock.sendall(frame[sent:])
        else:
            sock.sendall(frame)
    except OSError as exc:
        raise WireError(f"cannot send: {exc}") from None


def _read(sock: socket.socket, n: int, deadline: float | None, fds: list[int]) -> bytes:
    chunks: list[bytes] = []
    got = 0
    while got < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise WireTimeout(f"no reply within the deadline ({got} of {n} bytes read)")
            ready, _, _ = select.select([sock], [], [], left)
            if not ready:
                raise WireTimeout(f"no reply within the deadline ({got} of {n} bytes read)")
        try:
            data, ancdata, _flags, _addr = sock.recvmsg(n - got, socket.CMSG_SPACE(MAX_FDS * 4))
        except OSError as exc:
            raise WireError(f"cannot receive: {exc}") from None
        for level, kind, raw in ancdata:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                arr = array.array("i")
                arr.frombytes(raw[: len(raw) - (len(raw) % arr.itemsize)])
                fds.extend(arr)
        if not data:
            raise WireError("the peer closed the channel")
        chunks.append(data)
        got += len(data)
    return b"".join(chunks)


def recv(sock: socket.socket, deadline: float | None = None) -> tuple[dict[str, Any], list[int]]:
    """One message and the descriptors that came with it; ``deadline`` is ``time.monotonic()``."""
    fds: list[int] = []
    (length,) = HEADER.unpack(_read(sock, HEADER.size, deadline, fds))
    if length > MAX_FRAME:
        raise WireError(f"frame of {length} bytes exceeds the {MAX_FRAME}-byte limit")
    payload = _read(sock, length, deadline, fds)
    try:
        message = json.loads(payload)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise WireError(f"not a JSON frame: {exc}") from None
    if not isinstance(message, dict):
        raise WireError(f"expected a JSON object, got {type(message).__name__}")
    return message, fds


#: a request handler of ``serve_requests``: (message, its descriptors) -> the reply
Handler = Callable[[dict[str, Any], list[int]], dict[str, Any]]


def serve_requests(sock: socket.socket, handlers: dict[str, Handler], before: Callable[[], None] | None = None
                   ) -> NoReturn:
    """A forking server's loop (the judge template, the zygote): answer each request by its
    ``op`` until the peer closes the socket or sends ``exit``; the process then ends at once
    (``os._exit``: nothing of the caller's runs in it). A request for another op, or one whose
    handler raises, is answered ``ok: False`` and the descriptors it carried are closed; a
    handler owns the descriptors it is given. ``before`` runs ahead of every request."""
    import os

    while True:
        try:
            msg, fds = recv(sock)
        except WireError:
            os._exit(0)
        if before is not None:
            before()
        op = msg.get("op")
        if op == "exit":
            os._exit(0)
        handler = handlers.get(str(op))
        try:
            if handler is None:
                raise ValueError(f"unknown op {op!r}")
            reply = handler(msg, fds)
        except (ValueError, KeyError, TypeError, OSError) as exc:
            for f in fds:
                try:
                    os.close(f)
                except OSError:
                    pass
            reply = {"ok": False, "error": str(exc)[:300]}
        send(sock, reply)
