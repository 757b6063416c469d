"""The judge -> caller channel: numbered, authenticated lines on the judge's stdout.

The caller (``runner``) writes a random key and the job to the judge's stdin and closes
it; the key then exists only in those two processes' memory. Each line the judge writes
is ``@@v <seq> <kind> <mac> <json>`` with an HMAC-SHA256 over ``seq, kind, json``. The
arm processes never inherit the judge's stdout; a process that still manages to write
there (e.g. as root through ``/proc/<judge>/fd/1``) cannot produce a valid line, and one
invalid line fails the run as tampering.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import sys
from dataclasses import dataclass
from typing import Any, TextIO

PREFIX = "@@v "
KINDS = ("progress", "manifest", "bytecode", "preparing", "candidate", "result")


def new_key() -> str:
    return secrets.token_hex(32)


def _mac(key: str, seq: int, kind: str, body: str) -> str:
    return hmac.new(bytes.fromhex(key), f"{seq}\0{kind}\0{body}".encode(), hashlib.sha256).hexdigest()


class Writer:
    """The judge's side."""

    def __init__(self, key: str, stream: TextIO | None = None) -> None:
        self._key = key
        self._stream = stream or sys.stdout
        self._seq = 0

    def send(self, kind: str, payload: Any) -> None:
        body = json.dumps(payload, separators=(",", ":"), allow_nan=True)
        self._seq += 1
        self._stream.write(f"{PREFIX}{self._seq} {kind} {_mac(self._key, self._seq, kind, body)} {body}\n")
        self._stream.flush()


@dataclass
class Message:
    kind: str
    payload: Any


class Reader:
    """The caller's side: parse one line; ``Message``, None (not a channel line) or raise."""

    def __init__(self, key: str) -> None:
        self._key = key
        self._seq = 0

    def parse(self, line: str) -> Message | None:
        if not line.startswith(PREFIX):
            return None
        try:
            seq_s, kind, mac, body = line[len(PREFIX):].rstrip("\n").split(" ", 3)
            seq = int(seq_s)
        except ValueError:
            raise TamperError("a malformed line on the judge's channel") from None
        if seq != self._seq + 1 or kind not in KINDS or not hmac.compare_digest(mac, _mac(self._key, seq, kind, body)):
            raise TamperError(f"a line on the judge's channel was not written by the judge (kind {kind[:20]!r})")
        self._seq = seq
        try:
            return Message(kind, json.loads(body))
        except ValueError:
            raise TamperError("an authenticated line does not hold JSON") from None


class TamperError(Exception):
    pass
