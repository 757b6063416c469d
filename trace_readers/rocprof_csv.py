"""rocprofv3 CSV: ``--kernel-trace`` (``<pid>_kernel_trace.csv``, one row per dispatch) and
``--stats`` (``<pid>_kernel_stats.csv`` / older ``results.stats.csv``, one row per kernel).

Kernel trace columns (ROCm 6.2+)::

    Kind, Agent_Id, Queue_Id, Stream_Id, Thread_Id, Dispatch_Id, Kernel_Id, Kernel_Name,
    Correlation_Id, Start_Timestamp, End_Timestamp, LDS_Block_Size, Scratch_Size,
    VGPR_Count, Accum_VGPR_Count, SGPR_Count, Workgroup_Size_X/Y/Z, Grid_Size_X/Y/Z

Timestamps are ns. Older releases write ``Private_Segment_Size`` / ``Group_Segment_Size``
instead of ``Scratch_Size`` / ``LDS_Block_Size``, ``Arch_VGPR_Count`` for ``VGPR_Count``,
and may lack ``Stream_Id`` and the register columns; ROCm 7 adds columns and may write
agents as ``"Agent 4"``. Only ``Kernel_Name``, ``Start_Timestamp`` and ``End_Timestamp``
are required. Rows whose ``Kind`` is not ``KERNEL_DISPATCH`` (a merged or converted
trace can mix in memory copies) are counted in ``skipped`` and otherwise ignored.

Stats columns: ``Name, Calls, TotalDurationNs, AverageNs, Percentage, MinNs, MaxNs,
StdDev`` (numbers possibly written as floats such as ``2.920e-03``). Only ``Name``,
``Calls`` and ``TotalDurationNs`` are required; shares are recomputed from the totals.
``hip_api_stats.csv`` and ``domain_stats.csv`` share this header; a file whose every name
is a HIP/HSA API call or an upper-case domain is refused rather than ranked as kernels.
"""
from __future__ import annotations

import csv
import io
import re
from collections import Counter
from collections.abc import Iterator
from itertools import compress, repeat
from operator import is_, itemgetter, lt

from trace_readers.csv_table import CsvTable
from trace_readers.errors import TraceReadError
from trace_readers.records import KERNEL_DISPATCH, Columns, KernelTotals, Resources, Trace
from trace_readers.source import READ_ERRORS, SizeLimitExceeded, Source, read_error

KERNEL_TRACE = "rocprofv3_kernel_trace"
KERNEL_STATS = "rocprofv3_kernel_stats"
TRACE_REQUIRED = ("Kernel_Name", "Start_Timestamp", "End_Timestamp")
STATS_REQUIRED = ("Name", "Calls", "TotalDurationNs")

# our field -> rocprofv3 column names, newest first
_RESOURCE_COLUMNS = {
    "vgpr_count": ("VGPR_Count", "Arch_VGPR_Count"),
    "accum_vgpr_count": ("Accum_VGPR_Count",),
    "sgpr_count": ("SGPR_Count",),
    "scratch_bytes": ("Scratch_Size", "Private_Segment_Size"),
    "lds_bytes": ("LDS_Block_Size", "Group_Segment_Size", "LDS_Size"),
}
_WORKGROUP = ("Workgroup_Size_X", "Workgroup_Size_Y", "Workgroup_Size_Z")
_NOT_KERNELS = re.compile(r"^(?:hip|hsa_|__hip|roctx|rccl|nccl)|^[A-Z][A-Z0-9_]*$")


def looks_like_kernel_trace(header: list[str]) -> bool:
    return set(TRACE_REQUIRED).issubset(h.strip() for h in header)


def looks_like_kernel_stats(header: list[str]) -> bool:
    return set(STATS_REQUIRED).issubset(h.strip() for h in header)


class _ResourceCells:
    """Turns a row's resource cells into an interned ``Resources`` (checked once per distinct set)."""

    def __init__(self, table: CsvTable) -> None:
        self.table = table
        self.fields = [
            (name, col, table.col(col))
            for name, names in _RESOURCE_COLUMNS.items()
            if (col := table.first_present(*names)) is not None
        ]
        self.workgroup = [table.col(c) for c in _WORKGROUP]
        self.has_workgroup = all(i is not None for i in self.workgroup)
        self.indexes: list[int] = [i for _, _, i in self.fields] + (self.workgroup if self.has_workgroup else [])
        self._seen: dict[tuple, Resources | None] = {}
        self._by_values: dict[tuple, Resources | None] = {}

    def of_values(self, values: tuple) -> Resources | None:
        """``values``: the integers (or None) at ``indexes``, in that order; one instance per distinct set."""
        known = self._by_values.get(values, False)
        if known is not False:
            return known  # type: ignore[return-value]
        fields = {name: v for (name, _, _), v in zip(self.fields, values)}
        if self.has_workgroup:
            dims = values[len(self.fields):]
            if all(v is not None for v in dims):
                fields["workgroup_size"] = tuple(dims)
        res = Resources(**fields) if any(v is not None for v in fields.values()) else None
        self._by_values[values] = res
        return res

    def of(self, cells: tuple, line: int) -> Resources | None:
        """``cells``: the row's cells at ``indexes``, in that order (a trailing extra cell is ignored)."""
        known = self._seen.get(cells, False)
        if known is not False:
            return known  # type: ignore[return-value]
        t = self.table
        at = dict(zip(self.indexes, cells))
        values = [t.integer(_unquote(at[i]), col, line, optional=True) for _, col, i in self.fields]
        if self.has_workgroup:
            values += [t.integer(_unquote(at[i]), c, line, optional=True) for i, c in zip(self.workgroup, _WORKGROUP)]
        res = self._seen[cells] = self.of_values(tuple(values))
        return res


def _lane_id(cell: str) -> str:
    """An agent/queue/stream cell as one spelling (``04`` and ``4`` are the same queue)."""
    text = _unquote(cell.strip()).strip()
    return str(int(text)) if text.isascii() and text.lstrip("+").isdigit() else text


def _unquote(cell: str) -> str:
    return cell[1:-1].replace('""', '"') if len(cell) >= 2 and cell[0] == '"' and cell[-1] == '"' else cell


_UNSEEN = object()


class _Irregular(Exception):
    """A block the bulk path does not take; the per-line path reads it (and words any error)."""


class _KernelTraceReader:
    """Fills ``Columns`` from kernel-trace rows.

    Blocks of whole lines go through ``bulk``, which takes the quoted fields (Kind,
    Kernel_Name: names hold commas) apart from the rest with one ``str.split`` and then
    reads every column of the block at once: numpy parses the unquoted cells when all of
    them are integers (``numeric``, rocprofv3's own output), else ``map`` over the split
    fields converts them (``_layout``), else the csv module splits the block. A block with
    anything else (a short or long row, a bad number, an empty name) is read line by line,
    which keeps the exact line of any error. Every path yields the same records."""

    def __init__(self, table: CsvTable) -> None:
        self.table = table
        self.label = table.label
        self.width = len(table.header)
        self.i_name, self.i_start, self.i_end = (table.col(c) for c in TRACE_REQUIRED)
        self.i_kind = table.col("Kind")
        self.lane_cols = [table.col(c) for c in ("Agent_Id", "Queue_Id", "Stream_Id")]
        self.i_corr, self.i_disp = table.col("Correlation_Id"), table.col("Dispatch_Id")
        self.resources = _ResourceCells(table)
        self.cols = Columns()
        self.skipped: Counter = Counter()
        self.names: dict[str, str] = {}  # raw field -> interned name (one copy of each, however long)
        self.lanes: dict[tuple, tuple] = {}
        self.kinds: dict[str, str] = {KERNEL_DISPATCH: KERNEL_DISPATCH, f'"{KERNEL_DISPATCH}"': KERNEL_DISPATCH}
        self.quoted: list[int] | None = None  # the columns rocprofv3 quotes, learned from the first row

    # -- shared ------------------------------------------------------------------------------
    def _kind(self, raw: str) -> str:
        kind = self.kinds.get(raw)
        if kind is None:
            kind = self.kinds[raw] = _unquote(raw.strip()).strip() or "(empty Kind)"
        return kind

    def _lane(self, cells: tuple) -> tuple:
        """``cells``: the present lane columns' cells, plus the first again (a key of one fixed shape)."""
        lane = self.lanes.get(cells)
        if lane is None:
            it = iter(cells)
            lane = self.lanes[cells] = tuple(_lane_id(next(it)) if i is not None else None for i in self.lane_cols)
        return lane

    def _name(self, raw: str, line: int) -> str:
        name = self.names.get(raw)
        if name is None:
            stripped = raw.strip()
            if not stripped:
                raise TraceReadError("empty kernel name", file=self.label, line=line, where="column Kernel_Name",
                                     expected="the dispatched kernel's name")
            name = self.names[raw] = self.names.setdefault(stripped, stripped)
        return name

    # -- bulk --------------------------------------------------------------------------------
    def _layout(self, block: str, n: int) -> tuple[list[str], list[str]] | None:
        """``block`` taken apart with three C calls: split on quotes (the quoted fields), then
        the text outside them, each quoted field left as a NUL placeholder, split on commas
        and line breaks. Returns (quoted values, flat fields), or None when the rows do not
        all have the quoted columns the first row of the trace has (or any quote doubling)."""
        if "\x00" in block:
            return None
        segs = block.split('"')
        inside, outside = segs[1::2], segs[0::2]
        flat = "\x00".join(outside).replace("\n", ",").split(",")
        width = self.width
        if len(flat) != n * width:
            return None
        if self.quoted is None:  # learn which columns rocprofv3 quoted, from the first row
            first = flat[:width]
            if any("\x00" in f and f != "\x00" for f in first):
                return None
            self.quoted = [c for c, f in enumerate(first) if f == "\x00"]
        nq = len(self.quoted)
        if len(inside) != nq * n or flat.count("\x00") != nq * n:
            return None
        if any(set(flat[c::width]) != {"\x00"} for c in self.quoted):
            return None
        return inside, flat

    def numeric(self, block: str, n: int) -> bool:
        """Take ``block`` (``n`` whole lines) in bulk when every unquoted field is a non-negative
        integer (rocprofv3 writes nothing else outside quotes): numpy parses all of them in one
        C call, and lanes and resources become one record per distinct set. Returns False,
        having added nothing, for any other block (or one cut inside a quoted field): the
        generic paths then read it."""
        np = _numpy()
        if np is None or "\x00" in block:
            return False
        if "\r" in block:  # CRLF lines (the block was cut at the last "\n": its "\r" is still there)
            block = block.replace("\r\n", "\n")
            if block.endswith("\r"):
                block = block[:-1]
            if "\r" in block:
                return False
        if self.quoted is None:
            self._layout(block[: block.find("\n")] if "\n" in block else block, 1)  # learn the quoted columns
        quoted = self.quoted
        if not quoted or any(c in quoted for c in (self.i_start, self.i_end, self.i_corr, self.i_disp)):
            return False  # (a quoted timestamp or id would read as its placeholder: the generic paths take those)
        width = self.width
        strung = quoted  # the quoted columns still in quotes
        all_dispatch = False
        if self.i_kind in quoted:  # rocprofv3 quotes Kind: the common all-dispatch block needs no Kind strings
            unkinded = block.replace(_QUOTED_DISPATCH, "-1")
            if len(block) - len(unkinded) == n * (len(_QUOTED_DISPATCH) - 2):
                block, all_dispatch = unkinded, True
                strung = [c for c in quoted if c != self.i_kind]
        nq = len(strung)
        segs = block.split('"')
        if len(segs) != 2 * nq * n + 1:
            return False  # a doubled quote, or a row with other quoted fields than the first row's
        inside = segs[1::2]
        text = "-1".join(segs[0::2]).replace("\n", ",")  # each quoted field a -1 (no real cell may be negative)
        del segs
        try:
            flat = np.fromstring(text, dtype=np.int64, sep=",")
        except ValueError:
            return False  # an empty, fractional or non-numeric cell
        del text
        if flat.size != n * width or flat.max() == _INT64_MAX:  # numpy saturates what int64 cannot hold
            return False
        table = flat.reshape(n, width)
        if not (table[:, quoted] == -1).all() or np.count_nonzero(flat < 0) != n * len(quoted):
            return False  # a negative cell, or quoted fields in other columns than the first row's
        at = {c: k for k, c in enumerate(strung)}

        def strings(c: int) -> list[str]:
            return inside[at[c]::nq]

        keep = None
        if self.i_kind is not None and not all_dispatch:
            if self.i_kind not in at:
                return False
            kinds = strings(self.i_kind)
            if set(kinds) != {KERNEL_DISPATCH}:
                kinds = list(map(self._kind, kinds))
                keep = np.fromiter(map(KERNEL_DISPATCH.__eq__, kinds), dtype=bool, count=n)
                self.skipped.update(k for k in kinds if k != KERNEL_DISPATCH)
                table = table[keep]
        raw_names = strings(self.i_name)
        if keep is not None:
            raw_names = list(compress(raw_names, keep.tolist()))
        rows_n = len(raw_names)
        if not rows_n:
            return True
        for raw in set(raw_names).difference(self.names):
            if not raw.strip():
                return False  # an empty name: the per-line path says where
        starts, ends = table[:, self.i_start], table[:, self.i_end]
        if (ends < starts).any():
            return False
        res_idx = self.resources.indexes
        if res_idx and not any(i in at for i in res_idx):
            reps, codes = _row_codes(np, table[:, res_idx])
            objs = [self.resources.of_values(tuple(r)) for r in reps]
            res = list(map(objs.__getitem__, codes))
        elif res_idx:  # a quoted resource column: its cells go through the checked path
            columns = [map(str, table[:, i].tolist()) if i not in at else
                       (compress(strings(i), keep.tolist()) if keep is not None else strings(i)) for i in res_idx]
            try:
                res = [self.resources.of(c + (c[0],), 0) for c in zip(*columns)]
            except TraceReadError:
                return False  # the per-line path names the line
        else:
            res = [None] * rows_n
        lanes = self._numeric_lanes(np, table, strings, keep, at, rows_n)
        for raw in set(raw_names).difference(self.names):
            self.names[raw] = self.names.setdefault(raw.strip(), raw.strip())
        cols = self.cols
        cols.name += map(self.names.__getitem__, raw_names)
        cols.start_ns += starts.tolist()
        cols.end_ns += ends.tolist()
        cols.lane += lanes
        cols.correlation_id += table[:, self.i_corr].tolist() if self.i_corr is not None else repeat(None, rows_n)
        cols.dispatch_id += table[:, self.i_disp].tolist() if self.i_disp is not None else repeat(None, rows_n)
        cols.resources += res
        return True

    def _numeric_lanes(self, np, table, strings, keep, at, rows_n: int) -> list[tuple]:
        present = [c for c in self.lane_cols if c is not None]
        if not present:
            lane = self._lane(())
            return [lane] * rows_n
        if any(c in at for c in present):  # a quoted lane cell ("Agent 4"): per distinct key, in Python
            columns = [map(str, table[:, c].tolist()) if c not in at else
                       (compress(strings(c), keep.tolist()) if keep is not None else strings(c)) for c in present]
            keys = list(zip(*columns))
            return list(map(self._lane, (k + (k[0],) for k in keys)))
        reps, codes = _row_codes(np, table[:, present])
        objs = [self._lane(tuple(map(str, r)) + (str(r[0]),)) for r in reps]
        return list(map(objs.__getitem__, codes))

    def bulk(self, block: str) -> None:
        """Take every row of ``block`` (whole lines, quotes balanced) or raise _Irregular."""
        if "\r" in block:
            block = block.replace("\r\n", "\n")
        n = block.count("\n") + 1
        if self.quoted is None and "\r" not in block:
            self._layout(block[: block.find("\n")] if "\n" in block else block, 1)  # learn the quoted columns
        layout = self._layout(block, n) if "\r" not in block else None
        if layout is not None:
            inside, flat = layout
            width, quoted = self.width, self.quoted
            nq = len(quoted)
            cols_at = {c: (inside, quoted.index(c), nq) if c in quoted else (flat, c, width) for c in range(width)}
            rows_n = n

            def column(c: int):
                seq, start, step = cols_at[c]
                return iter(seq[start::step])
        else:
            try:
                rows = list(csv.reader(io.StringIO(block, newline="")))
            except csv.Error:
                raise _Irregular from None
            if set(map(len, rows)) != {self.width}:
                raise _Irregular  # blank, short or long rows: the per-line path says which
            rows_n = len(rows)

            def column(c: int):
                return map(itemgetter(c), rows)

        raw_names = list(column(self.i_name))
        for raw in set(raw_names).difference(self.names):
            if not raw.strip():
                raise _Irregular
            self.names[raw] = self.names.setdefault(raw.strip(), raw.strip())
        keep = None
        if self.i_kind is not None:
            kinds = list(column(self.i_kind))
            if set(kinds) != {KERNEL_DISPATCH}:
                kinds = list(map(self._kind, kinds))
                keep = [k == KERNEL_DISPATCH for k in kinds]
                self.skipped.update(k for k in kinds if k != KERNEL_DISPATCH)
                raw_names = list(compress(raw_names, keep))
                rows_n = len(raw_names)
        if not rows_n:
            return

        def kept(c: int):
            return compress(column(c), keep) if keep is not None else column(c)

        try:
            starts = list(map(int, kept(self.i_start)))
            ends = list(map(int, kept(self.i_end)))
            corrs = list(map(int, kept(self.i_corr))) if self.i_corr is not None else None
            disps = list(map(int, kept(self.i_disp))) if self.i_disp is not None else None
        except ValueError:
            raise _Irregular from None
        if min(starts) < 0 or min(ends) < 0 or any(map(lt, ends, starts)):
            raise _Irregular
        present = [c for c in self.lane_cols if c is not None]
        lane_keys = list(zip(*map(kept, present), kept(present[0]))) if present else [()] * rows_n
        lanes = list(map(self.lanes.get, lane_keys))
        if None in lanes:
            lanes = list(map(self._lane, lane_keys))
        res_idx = self.resources.indexes
        n = rows_n
        if res_idx:
            cells = list(zip(*map(kept, res_idx), kept(res_idx[0])))
            res = list(map(self.resources._seen.get, cells, repeat(_UNSEEN)))
            if any(map(is_, res, repeat(_UNSEEN))):  # new combinations: check each once (a bad cell: the per-line path names its line)
                try:
                    for cell in set(cells).difference(self.resources._seen):
                        self.resources.of(cell, 0)
                except TraceReadError:
                    raise _Irregular from None
                res = list(map(self.resources._seen.__getitem__, cells))
        else:
            res = [None] * n
        cols = self.cols
        cols.name += map(self.names.__getitem__, raw_names)
        cols.start_ns += starts
        cols.end_ns += ends
        cols.lane += lanes
        cols.correlation_id += corrs if corrs is not None else repeat(None, n)
        cols.dispatch_id += disps if disps is not None else repeat(None, n)
        cols.resources += res

    # -- per line ------------------------------------------------------------------------------
    def per_line(self, lines, line_no: int) -> None:
        """Read ``lines`` (raw, with their newlines) one by one; ``line_no`` is the line before."""
        width, label = self.width, self.label
        while True:
            try:
                line = next(lines)
            except StopIteration:
                return
            except READ_ERRORS + (SizeLimitExceeded,) as exc:
                raise read_error(exc, label, line=line_no + 1) from None
            line_no += 1
            first_line = line_no
            if line.count('"') % 2:  # a quoted field runs over the line break: gather the rest of it
                parts = [line]
                while sum(p.count('"') for p in parts) % 2:
                    try:
                        nxt = next(lines)
                    except StopIteration:
                        raise TraceReadError("malformed CSV (a quoted field is never closed); the file may be "
                                             "truncated", file=label, line=first_line) from None
                    except READ_ERRORS + (SizeLimitExceeded,) as exc:
                        raise read_error(exc, label, line=line_no + 1) from None
                    line_no += 1
                    parts.append(nxt)
                line = "".join(parts)
            if not line.strip():
                continue  # blank line
            try:
                row = next(csv.reader([line]), [])
            except csv.Error as exc:
                raise TraceReadError(f"malformed CSV ({exc}); the file may be truncated", file=label,
                                     line=first_line) from None
            if len(row) != width:
                raise TraceReadError(
                    f"row has {len(row)} fields but the header has {width}"
                    + ("; the file looks truncated" if len(row) < width else ""),
                    file=label, line=first_line, expected=f"{width} comma-separated fields per row",
                )
            self.row(row, first_line)

    def row(self, row: list[str], line: int) -> None:
        table = self.table
        if self.i_kind is not None:
            kind = self._kind(row[self.i_kind])
            if kind != KERNEL_DISPATCH:
                self.skipped[kind] += 1
                return
        name = self._name(row[self.i_name], line)
        start = table.integer(_unquote(row[self.i_start]), "Start_Timestamp", line)
        end = table.integer(_unquote(row[self.i_end]), "End_Timestamp", line)
        if end < start:
            raise TraceReadError(f"End_Timestamp {end} is before Start_Timestamp {start}", file=self.label,
                                 line=line, expected="End_Timestamp >= Start_Timestamp (ns)")
        cols = self.cols
        cols.name.append(name)
        cols.start_ns.append(start)
        cols.end_ns.append(end)
        present = [c for c in self.lane_cols if c is not None]
        cols.lane.append(self._lane(tuple(row[c] for c in present) + ((row[present[0]],) if present else ())))
        cols.correlation_id.append(_int_or_none(row[self.i_corr]) if self.i_corr is not None else None)
        cols.dispatch_id.append(_int_or_none(row[self.i_disp]) if self.i_disp is not None else None)
        idx = self.resources.indexes
        cols.resources.append(self.resources.of(tuple(row[i] for i in idx) + (row[idx[0]],), line) if idx else None)


def _int_or_none(cell: str) -> int | None:
    try:
        return int(_unquote(cell))
    except ValueError:
        return None


_BLOCK_CHARS = 4 << 20
_INT64_MAX = (1 << 63) - 1
_QUOTED_DISPATCH = f'"{KERNEL_DISPATCH}"'
_HASH = (0x9E3779B97F4A7C15 - (1 << 64), 0x7F4A7C159E3779B9, 0x2545F4914F6CDD1D, 0x5851F42D4C957F2D,
         0x14057B7EF767814F, 0x27BB2EE687B0B0FD, 0x61C8864680B583EB, 0x1B873593CC9E2D51,
         0x3C6EF372FE94F82B, 0x0A54FF53A5F1D36F, 0x510E527FADE682D1, 0x1F83D9ABFB41BD6B)


def _numpy():
    """numpy, when installed (the bulk parser's accelerator; without it the generic paths read everything)."""
    try:
        import numpy
    except ImportError:
        return None
    return numpy


def _row_codes(np, rows) -> tuple[list[list[int]], list[int]]:
    """The distinct rows of a 2-D int64 array and, per row, the index of its distinct row.
    Rows are hashed to one int64 (a sort of n numbers, not of n tuples) and every row is then
    compared with its representative, so a hash collision falls back to an exact sort."""
    k = rows.shape[1]
    if k > len(_HASH):
        key = None
    else:
        key = rows[:, 0] if k == 1 else rows @ np.array(_HASH[:k], dtype=np.int64)
    if key is not None:
        _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
        reps = rows[first]
        inverse = inverse.reshape(-1)
        if not np.array_equal(reps[inverse], rows):
            key = None
    if key is None:
        _, first, inverse = np.unique(rows, axis=0, return_index=True, return_inverse=True)
        reps, inverse = rows[first], inverse.reshape(-1)
    return reps.tolist(), inverse.tolist()


def read_kernel_trace(source: Source) -> Trace:
    """Every KERNEL_DISPATCH row, in file order (``_KernelTraceReader`` says how)."""
    table = CsvTable(source, what="a rocprofv3 kernel_trace.csv")
    table.require(TRACE_REQUIRED)
    reader = _KernelTraceReader(table)
    line_no = table.header_line  # the header is the last line sniffing read: the rest is in the stream
    stream = source.stream
    carry = ""
    while True:
        try:
            chunk = stream.read(_BLOCK_CHARS)
        except READ_ERRORS + (SizeLimitExceeded,) as exc:
            raise read_error(exc, table.label, line=line_no + 1) from None
        data = carry + chunk
        if not chunk:
            if data:
                reader.per_line(iter([data]), line_no)
            break
        cut = data.rfind("\n")
        if cut >= 0:  # the common case: the block is rocprofv3's own rows (no quote counting needed)
            n = data.count("\n", 0, cut) + 1
            if reader.numeric(data[:cut], n):
                carry = data[cut + 1:]
                line_no += n
                continue
        quotes = data.count('"', 0, cut) if cut >= 0 else 0
        for _ in range(64):  # never cut inside a quoted field (a line break in a kernel name)
            if cut < 0 or quotes % 2 == 0:
                break
            prev = data.rfind("\n", 0, cut)
            quotes -= data.count('"', max(prev, 0), cut)
            cut = prev
        if cut < 0 or quotes % 2:
            if len(data) < 4 * _BLOCK_CHARS and cut < 0:
                carry = data
                continue
            reader.per_line(_lines_from(data, stream), line_no)  # unbalanced quotes: the csv module decides
            break
        block, carry = data[:cut], data[cut + 1:]
        try:
            reader.bulk(block)
        except _Irregular:
            reader.per_line(_lines_from(block + "\n" + carry, stream), line_no)
            break
        line_no += block.count("\n") + 1
    if not len(reader.cols):
        skipped = reader.skipped
        kinds = f" (only {', '.join(f'{n} {k}' for k, n in skipped.items())} rows)" if skipped else ""
        raise TraceReadError(f"no KERNEL_DISPATCH rows{kinds}", file=table.label,
                             expected="a kernel trace from rocprofv3 --kernel-trace with at least one dispatch")
    return Trace(format=KERNEL_TRACE, source=table.label, columns=reader.cols, skipped=dict(reader.skipped))


def _lines_from(text: str, stream) -> Iterator[str]:
    """The lines of ``text`` and then of ``stream``, a line cut at the end of ``text`` joined up."""
    lines = io.StringIO(text, newline="").readlines()
    last = lines.pop() if lines and not lines[-1].endswith(("\n", "\r")) else ""
    yield from lines
    first = stream.readline()
    if last or first:
        yield last + first
    yield from stream


def read_kernel_stats(source: Source) -> Trace:
    """One ``KernelTotals`` per row of a ``--stats`` kernel summary."""
    table = CsvTable(source, what="a rocprofv3 kernel_stats.csv")
    table.require(STATS_REQUIRED)
    i_name, i_calls, i_total = (table.col(c) for c in STATS_REQUIRED)
    i_min, i_max = table.col("MinNs"), table.col("MaxNs")
    totals: list[KernelTotals] = []
    for line, row in table.rows():
        name = row[i_name].strip()
        if not name:
            raise TraceReadError("empty kernel name", file=table.label, line=line, where="column Name",
                                 expected="a kernel name")
        calls = table.integer(row[i_calls], "Calls", line)
        if calls == 0:
            raise TraceReadError("Calls is 0", file=table.label, line=line, where="column Calls",
                                 expected="at least one call per listed kernel")
        total = table.number(row[i_total], "TotalDurationNs", line)
        lo = table.number(row[i_min], "MinNs", line, optional=True) if i_min is not None else None
        hi = table.number(row[i_max], "MaxNs", line, optional=True) if i_max is not None else None
        totals.append(KernelTotals(name=name, calls=calls, total_ns=round(total),
                                   min_ns=None if lo is None else round(lo), max_ns=None if hi is None else round(hi)))
    if not totals:
        raise TraceReadError("no kernel rows", file=table.label, expected="a kernel_stats.csv with at least one kernel")
    if all(_NOT_KERNELS.search(t.name) for t in totals):
        raise TraceReadError(
            "every name is an API call or a domain (e.g. hipLaunchKernel, KERNEL_DISPATCH): this looks like "
            "hip_api_stats.csv or domain_stats.csv", file=table.label,
            expected="kernel_stats.csv (rocprofv3 --kernel-trace --stats)",
        )
    return Trace(format=KERNEL_STATS, source=table.label, totals=totals)
