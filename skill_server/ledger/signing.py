"""Evidence levels, digests and the server's signing key.

Every ledger record and every figure the server serves carries one level:

``verified``
    written by this deployment's verifier (run_verifier, ``skill-server verify``,
    re-verification): the record names the verifier report's digest and the harness
    digest, and carries an HMAC-SHA256 signature made with a key only the server holds.
    A record counts as verified only while its signature checks against that key,
    so a row edited in the database, or copied from another deployment, is not.
``reported``
    anything an agent or a person submitted: hand-made records, and verifier reports
    whose signature does not check (edited, or produced elsewhere).
``transcribed``
    a figure from a card's validation artifact (copied from prose or an export).

Why HMAC and not a public-key signature: the only party that ever checks a signature is
the deployment that made it (at record time and when it serves a figure), so a shared
secret is enough, the standard library has it, and checking costs about a microsecond on
the match path. A fleet that shares one ledger shares the key like any other deployment
secret; ``Signature.scheme`` leaves room for per-box Ed25519 keys if that ever changes.

What the signature is made over: a purpose tag (``report``, ``result``,
``reverification``) and the canonical JSON (sorted keys, no spaces) of the exact content
stored, which for a result includes the card, shape, platform, verdict, figures, the
report digest and the harness digest. A genuine report re-used for another card, shape
or platform therefore does not produce a verified record for that claim.

The key: 32 random bytes, hex, in ``<state dir>/signing.key``, created on first use with
mode 0600 (folder 0700). A key file that exists but cannot be used (unreadable, malformed,
readable by others) raises ``KeyUnavailable``; the server then refuses every write and
never falls back to writing unsigned "verified" records. Reads without a usable key serve
every record as ``reported``.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import stat
import threading
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from skill_server.locations import STATE_ENV as STATE_DIR_ENV
from skill_server.settings import settings

EvidenceLevel = Literal["verified", "reported", "transcribed"]
StoredLevel = Literal["verified", "reported"]
SCHEME = "hmac-sha256"
KEY_FILE = "signing.key"
KEY_ENV = "SKILL_SERVER_KEY"
_KEY_BYTES = 32


class KeyUnavailable(RuntimeError):
    """The signing key exists but cannot be used; the message says how to fix it."""


class Signature(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    scheme: Literal["hmac-sha256"] = SCHEME
    key_id: str = Field(pattern=r"^[0-9a-f]{16}$", description="first 16 hex of sha256(key): which key signed")
    value: str = Field(pattern=r"^[0-9a-f]{64}$")


class Evidence(BaseModel):
    """How far a stored record can be trusted (see the module docstring). Frozen: a record's
    evidence is replaced (``model_copy(update=...)``), never edited, so answers built from
    rows the ledger remembers cannot change what the next reader is told."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    level: EvidenceLevel
    report_digest: str | None = Field(None, description="sha256 of the verifier report the record comes from")
    harness_digest: str | None = Field(None, description="sha256 of the verifier harness that produced the report")
    signature: Signature | None = None
    note: str | None = Field(None, max_length=500, description="why the level is what it is")


def canonical_json(data: Any) -> bytes:
    """One byte string per value: sorted keys, no whitespace, inf/NaN as JSON5 literals."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=True).encode()


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _message(purpose: str, content: Any) -> bytes:
    return b"skill-server/" + purpose.encode() + b"/v1\0" + canonical_json(content)


class SigningKey:
    """The deployment's HMAC key, held in memory once read."""

    def __init__(self, secret: bytes, path: Path | None = None):
        if len(secret) < _KEY_BYTES:
            raise KeyUnavailable(f"signing key {path}: {len(secret)} bytes, expected {_KEY_BYTES}")
        self._secret = secret
        self.path = path
        self.key_id = sha256_hex(secret)[:16]

    def sign(self, purpose: str, content: Any) -> Signature:
        value = hmac.new(self._secret, _message(purpose, content), hashlib.sha256).hexdigest()
        return Signature(key_id=self.key_id, value=value)

    def check(self, signature: Signature | None, purpose: str, content: Any) -> bool:
        if signature is None or signature.scheme != SCHEME or signature.key_id != self.key_id:
            return False
        want = hmac.new(self._secret, _message(purpose, content), hashlib.sha256).hexdigest()
        return hmac.compare_digest(want, signature.value)


def read_key(path: Path) -> SigningKey | None:
    """The key at ``path``; None when there is no file. Raises KeyUnavailable when a file
    is there but cannot be trusted or read."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise KeyUnavailable(f"signing key {path}: cannot read it ({exc.strerror}); fix the path or its "
                             "permissions (writes are refused until then)") from None
    if not stat.S_ISREG(st.st_mode):
        raise KeyUnavailable(f"signing key {path} is not a regular file; remove it or point "
                             f"${KEY_ENV} at the key file")
    if st.st_mode & 0o077:
        raise KeyUnavailable(f"signing key {path} is readable by other users (mode {stat.S_IMODE(st.st_mode):o}): "
                             f"run `chmod 600 {path}`; writes are refused until then")
    try:
        text = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise KeyUnavailable(f"signing key {path}: cannot read it ({getattr(exc, 'strerror', None) or exc}); "
                             "fix its permissions (the server's user needs read access); writes are refused "
                             "until then") from None
    try:
        secret = bytes.fromhex(text)
    except ValueError:
        raise KeyUnavailable(f"signing key {path}: not a hex key; restore it from backup, or move it away to "
                             "let the server create a new one (records signed with the old key then count "
                             "as reported)") from None
    return SigningKey(secret, path)


def create_key(path: Path) -> SigningKey:
    """Create a new key file (0600) without ever replacing one another process created."""
    secret = secrets.token_bytes(_KEY_BYTES)
    # written whole to a private temporary name, then linked into place: the link fails
    # when another process made the key first, and nobody ever reads a half-written key
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as fh:
            fh.write(secret.hex() + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.link(tmp, path)
    except FileExistsError:
        found = read_key(path)  # another process won the race
        if found is None:
            raise KeyUnavailable(f"signing key {path} vanished while it was created; try again") from None
        return found
    except OSError as exc:
        raise KeyUnavailable(f"signing key {path}: cannot create it ({exc.strerror}); give the server a "
                             f"writable state folder (${STATE_DIR_ENV})") from None
    finally:
        tmp.unlink(missing_ok=True)
    return SigningKey(secret, path)


class KeyStore:
    """Where the deployment's key lives; loads it once, creates it on the first write
    unless ``create`` is False (a shared ledger: the fleet's key is provisioned, never
    made up by one server; see docs/ledger.md)."""

    def __init__(self, path: Path, create: bool = True):
        self.path = Path(path)
        self.create = create
        self._lock = threading.Lock()
        self._key: SigningKey | None = None

    def for_writing(self) -> SigningKey:
        """The key, created when missing (if allowed); KeyUnavailable when it cannot be used."""
        with self._lock:
            if self._key is None:
                found = read_key(self.path)
                if found is None and not self.create:
                    raise KeyUnavailable(self._not_provisioned())
                self._key = found or create_key(self.path)
            return self._key

    def _not_provisioned(self) -> str:
        return (f"signing key {self.path} does not exist, and a shared ledger never gets a key made up by one "
                f"server: create the fleet's key once (`skill-server ledger-key --create {self.path}`) and install "
                f"that same file (mode 0600) on every server writing to this ledger (${KEY_ENV} names it)")

    def for_reading(self) -> SigningKey | None:
        """The key when one exists and can be used; None otherwise (nothing is created)."""
        with self._lock:
            if self._key is None:
                try:
                    self._key = read_key(self.path)
                except KeyUnavailable:
                    return None
            return self._key

    def problem(self) -> str | None:
        """Why writes would be refused, or None."""
        try:
            found = read_key(self.path)
        except KeyUnavailable as exc:
            return str(exc)
        return self._not_provisioned() if found is None and not self.create else None


def default_key_path(state_dir: Path) -> Path:
    explicit = settings().key
    return Path(explicit).expanduser().resolve() if explicit else Path(state_dir) / KEY_FILE
