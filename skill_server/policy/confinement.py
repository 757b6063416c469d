"""Files a client names (a profile path, a candidate kernel file): which may be opened, and
what an error about one may say.

The one rule, whatever the transport: a client-named path is opened only when, with every
symlink resolved, it is a regular file inside one of the operator's roots, with no hidden
component (``.ssh``, ``.env``) below the root and a suffix of its kind (``.csv``,
``.json[.gz]`` for profiles, ``.py`` for candidates). The file is opened without following
a final symlink and without blocking (a FIFO cannot hang the server), checked with
``fstat`` to be a regular file, and the path the kernel actually opened is checked again
against the roots, so a folder renamed or swapped for a symlink between the check and the
open cannot lead out. Readers then read the opened file through ``/proc/self/fd``, never
the path again.

Roots are validated when the server starts: never ``/`` and never inside or above
``/proc``, ``/sys`` or ``/dev``, so neither the server's environment nor a device can
be named.

Errors name the path as the client gave it (shortened) and the roots, never the file's
content: ``withhold_file_text`` removes from a parser's message every fragment that
occurs in the file.
"""
from __future__ import annotations

import gzip
import os
import re
import stat
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

MAX_PATH_CHARS = 4096
SYSTEM_FOLDERS = (Path("/proc"), Path("/sys"), Path("/dev"))
WITHHELD = "<withheld: quotes the file>"


class ConfinementError(ValueError):
    """A client-named file the server will not open; the message says why and what to do."""


@dataclass(frozen=True)
class FileKind:
    """What a client-named file must be: a noun for messages, the suffixes it may have
    (lower case, matched on the whole name, so ``.json.gz`` works) and a size cap."""

    noun: str
    suffixes: tuple[str, ...]
    max_bytes: int | None = None


PROFILE_FILE = FileKind("profile", (".csv", ".json", ".csv.gz", ".json.gz", ".db"))  # .db: rocpd
CANDIDATE_FILE = FileKind("candidate file", (".py",), max_bytes=4 << 20)


@dataclass(frozen=True)
class ConfinedFile:
    """An open, checked, client-named file. ``read_path`` reopens exactly this file."""

    shown: str  # the path as the client gave it, quoted and shortened for messages
    label: str  # the same, unquoted: the file name in a parser's message
    real: Path
    fd: int
    size: int

    @property
    def read_path(self) -> str:
        proc = f"/proc/self/fd/{self.fd}"
        return proc if os.path.exists(proc) else str(self.real)


def shown_path(path: object, limit: int = 100) -> str:
    text = path if isinstance(path, str) else repr(path)
    return repr(text) if len(text) <= limit else repr(text[: limit - 20]) + f"... ({len(text)} characters)"


def check_roots(roots: Sequence[Path | str]) -> tuple[Path, ...]:
    """The roots as resolved absolute folders; refuses ``/`` and system folders."""
    out: list[Path] = []
    for given in roots:
        root = Path(os.path.realpath(Path(given).expanduser()))
        if root == Path(root.anchor):
            raise ConfinementError(f"root {str(given)!r} is the file-system root: name the folder that holds "
                                   "the profiles or candidates, never /")
        for system in SYSTEM_FOLDERS:
            if root == system or root.is_relative_to(system) or system.is_relative_to(root):
                raise ConfinementError(f"root {str(given)!r} is or holds {system}: refused (it exposes the server's "
                                       "environment and devices)")
        if root not in out:
            out.append(root)
    return tuple(out)


def resolve_confined(path: object, roots: Sequence[Path], kind: FileKind) -> Path:
    """The real path of a client-named file after the checks that need no open; raises
    ``ConfinementError``. Relative paths are taken relative to the first root."""
    shown = shown_path(path)
    if not roots:
        raise ConfinementError(f"this server does not read {kind.noun} files by path (path {shown}): "
                               "pass the file's text as content (or its bytes as content_base64) instead")
    if not isinstance(path, str) or not path.strip():
        raise ConfinementError(f"path {shown}: expected a file path")
    if len(path) > MAX_PATH_CHARS or "\x00" in path or any(ord(c) < 32 for c in path):
        raise ConfinementError(f"path {shown}: not a usable file path (over {MAX_PATH_CHARS} characters or "
                               "control characters)")
    given = Path(path).expanduser()
    real = Path(os.path.realpath(given if given.is_absolute() else roots[0] / given))
    _check_inside(real, roots, shown, kind)
    return real


def _check_inside(real: Path, roots: Sequence[Path], shown: str, kind: FileKind) -> None:
    root = next((r for r in roots if real.is_relative_to(r)), None)
    if root is None or any(real.is_relative_to(s) for s in SYSTEM_FOLDERS):
        raise ConfinementError(
            f"path {shown} is outside the folders this server reads {kind.noun} files from "
            f"({', '.join(str(r) for r in roots)}; symlinks resolved): move the file there, or pass its text "
            "as content (or its bytes as content_base64)")
    if any(part.startswith(".") for part in real.relative_to(root).parts):
        raise ConfinementError(f"path {shown} goes through a hidden file or folder under {root}: refused")
    if not real.name.lower().endswith(kind.suffixes):
        raise ConfinementError(f"path {shown}: a {kind.noun} must be named *{', *'.join(kind.suffixes)}")


@contextmanager
def open_confined(path: object, roots: Sequence[Path], kind: FileKind) -> Iterator[ConfinedFile]:
    """Open a client-named file under the rules above; the descriptor closes on exit."""
    real = resolve_confined(path, roots, kind)
    shown = shown_path(path)
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | \
        getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(real, flags)
    except FileNotFoundError:
        raise ConfinementError(f"path {shown}: no such file") from None
    except OSError as exc:
        raise ConfinementError(f"path {shown}: cannot open ({exc.strerror or type(exc).__name__})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ConfinementError(f"path {shown}: not a regular file (a folder, device, FIFO or socket): refused")
        _check_inside(_opened_path(fd, real), roots, shown, kind)
        if kind.max_bytes is not None and st.st_size > kind.max_bytes:
            raise ConfinementError(f"path {shown}: {st.st_size} bytes, over the {kind.max_bytes}-byte limit "
                                   f"for a {kind.noun}")
        label = path if len(path) <= 160 else path[:140] + f"... ({len(path)} characters)"  # type: ignore[arg-type]
        yield ConfinedFile(shown=shown, label=label, real=real, fd=fd, size=st.st_size)
    finally:
        os.close(fd)


def _opened_path(fd: int, fallback: Path) -> Path:
    """Where the descriptor really points (Linux); a deleted file reads '... (deleted)'
    and so fails the suffix check."""
    try:
        return Path(os.readlink(f"/proc/self/fd/{fd}"))
    except OSError:
        return fallback


# ------------------------------------------------------------ errors about a file
_QUOTED = re.compile(r"'(?:[^'\\\n]|\\.){1,400}'|\"(?:[^\"\\\n]|\\.){1,400}\"")
_TOKEN = re.compile(r"[^\s'\",;:()\[\]{}=<>|]{3,}")


def withhold_file_text(message: str, opened: ConfinedFile, exempt: str = "", scan_bytes: int = 1 << 30) -> str:
    """``message`` with every fragment that occurs in the opened file replaced.

    Fragments are the quoted literals and the words (3+ characters) of the message; each
    is looked up in the file's text (gunzipped if needed, up to ``scan_bytes``). A quoted
    literal that contains anything found is withheld whole. Words that also occur in
    ``exempt`` (the code's own text, e.g. what was expected) are kept: they say nothing
    about the file. Runs only on the error path."""
    words = {w for w in _TOKEN.findall(message) if w not in exempt}
    quoted = {q[1:-1] for q in _QUOTED.findall(message)}
    needles = {s.encode("utf-8", "replace") for s in words | quoted if len(s) >= 3}
    found = {n.decode("utf-8", "replace") for n in _occurring(needles, opened, scan_bytes)}
    if not found:
        return message

    def literal(m: re.Match[str]) -> str:
        inner = m.group(0)[1:-1]
        return WITHHELD if inner in found or any(w in found for w in _TOKEN.findall(inner)) else m.group(0)

    out = _QUOTED.sub(literal, message)
    for word in sorted(found & words, key=len, reverse=True):
        out = re.sub(rf"(?<![^\s'\",;:()\[\]{{}}=<>|]){re.escape(word)}(?![^\s'\",;:()\[\]{{}}=<>|])", "…", out)
    return out


def _occurring(needles: set[bytes], opened: ConfinedFile, scan_bytes: int) -> set[bytes]:
    """Which needles occur in the file (streamed in 1 MiB chunks with an overlap)."""
    if not needles:
        return set()
    overlap = max(len(n) for n in needles) - 1
    found: set[bytes] = set()
    try:
        with open(opened.read_path, "rb") as raw:
            magic = raw.read(2)
            raw.seek(0)
            stream = gzip.GzipFile(fileobj=raw) if magic == b"\x1f\x8b" else raw
            tail, seen = b"", 0
            while seen < scan_bytes and len(found) < len(needles):
                chunk = stream.read(1 << 20)
                if not chunk:
                    break
                seen += len(chunk)
                window = tail + chunk
                found.update(n for n in needles - found if n in window)
                tail = window[-overlap:] if overlap else b""
    except (OSError, EOFError, zlib.error):
        # an unreadable rest cannot be searched: treat every needle as quoting the file
        return needles
    return found
