"""Literal fragments a regular expression cannot match without.

Used to pre-filter thousands of op-name regexes with dictionary look-ups before any
regex runs. The scan is deliberately conservative: anything it does not understand
ends a literal run (never creates one), so a name the regex matches always contains
every fragment reported for at least one of its top-level alternatives.
"""
from __future__ import annotations

SPECIAL = set(".^$*+?{}[]()|\\")
OPTIONAL_AFTER = set("?*{")
ESCAPED_CLASSES = set("dDwWsSbBAZzGnrtfv0123456789")


def split_top_level(pattern: str) -> list[str] | None:
    """Split on '|' outside groups and classes; None if brackets do not balance."""
    parts, depth, start, i, in_class = [], 0, 0, 0, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
            if pattern[i + 1 : i + 2] == "]":
                i += 1
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth < 0:
                return None
        elif c == "|" and depth == 0:
            parts.append(pattern[start:i])
            start = i + 1
        i += 1
    if depth != 0 or in_class:
        return None
    parts.append(pattern[start:])
    return parts


def branch_literals(branch: str) -> list[str]:
    """Literal runs (lower-case) every match of this alternative contains."""
    runs: list[str] = []
    run: list[str] = []
    i, depth, in_class = 0, 0, False

    def flush() -> None:
        if run:
            runs.append("".join(run).lower())
            run.clear()

    while i < len(branch):
        c = branch[i]
        if in_class:
            if c == "\\":
                i += 1
            elif c == "]":
                in_class = False
            i += 1
            continue
        if depth:
            if c == "\\":
                i += 1
            elif c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
            elif c == "[":
                in_class = True
            i += 1
            continue
        nxt = branch[i + 1] if i + 1 < len(branch) else ""
        if c == "\\":
            esc = branch[i + 1 : i + 2]
            after = branch[i + 2 : i + 3]
            if not esc or esc in ESCAPED_CLASSES or esc.isalpha():
                flush()
            elif after in OPTIONAL_AFTER:
                flush()
            else:
                run.append(esc)
                if after == "+":
                    flush()
            i += 2
            continue
        if c in SPECIAL:
            flush()
            if c == "(":
                depth = 1
            elif c == "[":
                in_class = True
            elif c == "{":
                close = branch.find("}", i)
                i = close if close > 0 else i
            i += 1
            continue
        if nxt in OPTIONAL_AFTER:
            flush()  # this character may be absent or repeated
        else:
            run.append(c)
            if nxt == "+":
                flush()
        i += 1
    flush()
    return [r for r in runs if r]


def required_literals(pattern: str) -> list[list[str]] | None:
    """Per top-level alternative, the literals it needs; None when some alternative
    has no literal of 3+ characters to index on (then always run the regex)."""
    branches = split_top_level(pattern)
    if branches is None:
        return None
    out = []
    for b in branches:
        lits = branch_literals(b)
        if not lits or max(len(x) for x in lits) < 3:
            return None
        out.append(lits)
    return out
