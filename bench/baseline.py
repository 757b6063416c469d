"""A baseline revision's code beside this branch's, for benchmarks that compare both in one run."""
from __future__ import annotations

import subprocess
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def baseline_tree(rev: str, *paths: str) -> Path:
    """``paths`` of revision ``rev`` (``git archive``) extracted into a new temp dir."""
    dest = Path(tempfile.mkdtemp(prefix=f"baseline-{rev.replace('/', '_')}-"))
    data = subprocess.run(["git", "-C", str(REPO), "archive", rev, *paths], check=True, capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        tar.extractall(dest, filter="data")
    return dest


def short_rev(rev: str = "HEAD") -> str:
    return subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", rev], capture_output=True,
                          text=True).stdout.strip()
