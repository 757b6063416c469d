#!/usr/bin/env bash
# One-time set-up on a fresh machine (idempotent; fast when nothing changed).
# Installs: the project (editable) with its kernel/test/fleet extras, CPU torch (the build that
# lies on disk here; on a GPU box install the platform's torch first and it is kept),
# triton, flydsl (pinned), psycopg and ray (the fleet extra), lld-22 from the system packages
# for FlyDSL's gfx950 link step, and the PostgreSQL server the ledger tests start a
# throw-away cluster of (tests/pg_cluster.py).
set -euo pipefail
cd "$(dirname "$0")/.."
# Everything installs into the project's own virtual environment (.venv), never the system
# interpreter; the Makefile runs the server and the tests from it. $PYTHON picks the
# interpreter that creates it (3.11+).
BASE_PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "== setup: creating .venv with $BASE_PY" >&2
  "$BASE_PY" -m venv .venv
fi
PY=.venv/bin/python
stamp=.setup-stamp
want=$( (cat pyproject.toml setup.py scripts/setup.sh; readlink -f .venv/bin/python) | sha256sum | cut -c1-16)
# find_spec, not import: importing torch, triton, flydsl and ray costs ~7 s, and `make serve`
# runs this check before every start
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && "$PY" -c "
import importlib.util as u, sys
sys.exit(any(u.find_spec(m) is None for m in ('skill_server', 'torch', 'triton', 'flydsl', 'mcp', 'psycopg', 'ray', 'xdist')))" 2>/dev/null; then
  exit 0
fi
echo "== setup: installing project and dependencies" >&2
if ! "$PY" -c "import torch" 2>/dev/null; then
  "$PY" -m pip install -q "torch==2.13.0"     # CPU build (a plain 'torch' pulls a multi-GB CUDA build)
fi
"$PY" -m pip install -q -e ".[kernels,flydsl,dev,fleet]"
# FlyDSL links gfx950 code objects with $ROCM_PATH/llvm/bin/ld.lld; verifiers/gfx950 builds
# that folder from lld-22 when there is no ROCm install. The gfx950 emulator decodes code
# objects with llvm-22's llvm-objdump.
if { ! command -v ld.lld-22 >/dev/null 2>&1 && [ ! -x /usr/lib/llvm-22/bin/ld.lld ]; } \
   || [ ! -x /usr/lib/llvm-22/bin/llvm-objdump ]; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    (apt-get update -qq && apt-get install -y -qq lld-22 llvm-22) >/dev/null 2>&1 \
      || { echo "setup: could not install lld-22 and llvm-22 (apt-get install lld-22 llvm-22): the gfx950 compile step and the emulator need them" >&2; exit 1; }
  else
    echo "setup: lld-22 / llvm-22 missing: run 'apt-get install lld-22 llvm-22' as root (the gfx950 compile step and the emulator need them)" >&2
    exit 1
  fi
  { command -v ld.lld-22 >/dev/null 2>&1 || [ -x /usr/lib/llvm-22/bin/ld.lld ]; } && [ -x /usr/lib/llvm-22/bin/llvm-objdump ] \
    || { echo "setup: lld-22 / llvm-22 still missing after apt-get install lld-22 llvm-22" >&2; exit 1; }
fi
# The PostgreSQL server binaries (initdb, pg_ctl, postgres) for the ledger's PostgreSQL tests.
if ! "$PY" tests/pg_cluster.py check >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    (apt-get update -qq && apt-get install -y -qq postgresql) >/dev/null 2>&1 \
      || echo "setup: warning: could not install postgresql; the PostgreSQL ledger tests will be skipped" >&2
  else
    echo "setup: warning: PostgreSQL server missing (apt-get install postgresql); its ledger tests will be skipped" >&2
  fi
fi
echo "$want" > "$stamp"
