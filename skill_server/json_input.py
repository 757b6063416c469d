"""One reader for a JSON object that a person or a client hands the application (a CLI option,
a submitted report): a value that is not JSON, or not an object, is a one-line error naming
where it came from."""
from __future__ import annotations

import json
from typing import Any


def json_object(name: str, value: Any, what: str, error: type[ValueError] = ValueError) -> dict[str, Any]:
    """``value`` as a JSON object: text (``str``/``bytes``) is parsed first, a value an MCP
    client sent already decoded is checked as it is. Raises ``error`` naming ``name`` (the
    flag, the argument); ``what`` says what the object holds."""
    data = value
    if isinstance(value, (str, bytes)):
        try:
            data = json.loads(value)
        except json.JSONDecodeError as exc:
            raise error(f"{name}: not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    if not isinstance(data, dict):
        raise error(f"{name}: expected a JSON object ({what}), got {type(data).__name__}")
    return data
