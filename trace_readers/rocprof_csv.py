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
from operator import is_, itemgetter, lt, methodcaller

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

    def of(self, cells: tuple, line: int) -> Resources | None:
        """``cells``: the row's cells at ``indexes``, in that order (a trailing extra cell is ignored)."""
        known = self._seen.get(cells, False)
        if known is not False:
            return known  # type: ignore[return-value]
        t = self.table
        at = dict(zip(self.indexes, cells))
        values = {name: t.integer(_unquote(at[i]), col, line, optional=True) for name, col, i in self.fields}
        if self.has_workgroup:
            dims = [t.integer(_unquote(at[i]), c, line, optional=True) for i, c in zip(self.workgroup, _WORKGROUP)]
            if all(v is not None for v in dims):
                values["workgroup_size"] = tuple(dims)
        res = Resources(**values) if any(v is not None for v in values.values()) else None
        self._seen[cells] = res
        return res


def _unquote(cell: str) -> str:
    return cell[1:-1].replace('""', '"') if len(cell) >= 2 and cell[0] == '"' and cell[-1] == '"' else cell


_UNSEEN = object()


class _Irregular(Exception):
    """A block the bulk path does not take; the per-line path reads it (and words any error)."""


class _KernelTraceReader:
    """Fills ``Columns`` from kernel-trace rows.

    Blocks of well-formed rows go through ``bulk``: Kernel_Name is the only field that may
    hold commas (template arguments), so each line is split from the left up to it and
    from the right back to it (``str.split`` / ``rsplit`` in C), and every column is then
    taken and converted for the whole block at once (``map`` over the rows, also in C).
    A block with anything else (a quoted comma or line break in another field, a short or
    long row, a bad number) is read line by line with the csv module, which keeps the
    exact line of any error."""

    def __init__(self, table: CsvTable) -> None:
        self.table = table
        self.label = table.label
        self.width = len(table.header)
        self.i_name, self.i_start, self.i_end = (table.col(c) for c in TRACE_REQUIRED)
        self.i_kind = table.col("Kind")
        self.lane_cols = [table.col(c) for c in ("Agent_Id", "Queue_Id", "Stream_Id")]
        self.i_corr, self.i_disp = table.col("Correlation_Id"), table.col("Dispatch_Id")
        self.resources = _ResourceCells(table)
        self.before, self.after = self.i_name, self.width - self.i_name - 1
        self.cols = Columns()
        self.skipped: Counter = Counter()
        self.names: dict[str, str] = {}  # raw field -> interned name (one copy of each, however long)
        self.lanes: dict[tuple, tuple] = {}
        self.kinds: dict[str, str] = {KERNEL_DISPATCH: KERNEL_DISPATCH, f'"{KERNEL_DISPATCH}"': KERNEL_DISPATCH}
        self.quoted: list[int] | None = None  # the columns rocprofv3 quotes, learned from the first row
        self._by_rest: dict[str, Resources | None] = {}  # the rest of a line after the per-row fields -> resources

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
            lane = self.lanes[cells] = tuple(_unquote(next(it).strip()) if i is not None else None for i in self.lane_cols)
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

    def _standard_plan(self) -> int | None:
        """rocprofv3's own layout: the rows start with the quoted Kind, Kernel_Name is the only
        other quoted field, and every resource column comes after the columns read per row.
        Then a row needs only ``k`` fields after the name split off; the rest of the line is
        one string, the key its resources are parsed from once. Returns ``k``, or None."""
        if self.quoted != [0, self.i_name] or self.i_kind != 0:
            return None
        after = [c - self.i_name for c in (self.i_start, self.i_end, self.i_corr, self.i_disp, *self.lane_cols)
                 if c is not None and c > self.i_name]
        k = max(after, default=0)
        if any(i <= self.i_name + k for i in self.resources.indexes):
            return None
        return k

    def _standard(self, block: str, n: int, k: int) -> dict | None:
        segs = block.split('"')
        if len(segs) != 4 * n + 1 or segs[0]:
            return None
        mids, tails = segs[2::4], segs[4::4]
        if set(map(str.count, mids, repeat(","))) != {self.i_name}:
            return None
        flat_mid = "".join(mids).split(",")  # mids are ",f1,...,f(name-1),": joined, one row every `name` fields
        split_tails = list(map(methodcaller("split", ",", k + 1), tails))  # ["", f, ..., f, rest of the line]
        if set(map(len, split_tails)) != {k + 2}:
            return None  # (the rest of each line is checked field by field when its resources are parsed)
        return {"kinds": segs[1::4], "names": segs[3::4], "mid": flat_mid, "tails": split_tails}

    def bulk(self, block: str) -> None:
        """Take every row of ``block`` (whole lines, quotes balanced) or raise _Irregular."""
        if "\r" in block:
            block = block.replace("\r\n", "\n")
        n = block.count("\n") + 1
        if self.quoted is None and "\r" not in block:
            self._layout(block[: block.find("\n")] if "\n" in block else block, 1)  # learn the quoted columns
        k = self._standard_plan() if "\r" not in block else None
        std = self._standard(block, n, k) if k is not None else None
        layout = self._layout(block, n) if std is None and "\r" not in block else None
        rest_keys = None
        if std is not None:
            i_name = stride = self.i_name
            rows_n = n
            rest_keys = list(map(itemgetter(k + 1), std["tails"]))

            def column(c: int):
                if c == 0:
                    return iter(std["kinds"])
                if c == i_name:
                    return iter(std["names"])
                if c < i_name:
                    return iter(std["mid"][c::stride])
                return map(itemgetter(c - i_name), std["tails"])
        elif layout is not None:
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
        if rest_keys is not None and not res_idx:  # no resources to parse: still check each distinct rest once
            width_rest = self.width - (self.i_name + k + 1)
            for key in set(rest_keys).difference(self._by_rest):
                if key.count(",") != width_rest - 1:
                    raise _Irregular
                self._by_rest[key] = None
        if res_idx and rest_keys is not None:
            keys = list(compress(rest_keys, keep)) if keep is not None else rest_keys
            res = list(map(self._by_rest.get, keys, repeat(_UNSEEN)))
            if any(map(is_, res, repeat(_UNSEEN))):
                first_rest = self.i_name + k + 1
                try:
                    for key in set(keys).difference(self._by_rest):
                        fields = key.rstrip("\n").split(",")
                        if len(fields) != self.width - first_rest:
                            raise _Irregular  # a row with a field too many or too few
                        cells = tuple(fields[i - first_rest] for i in res_idx) + (fields[res_idx[0] - first_rest],)
                        self._by_rest[key] = self.resources.of(cells, 0)
                except (TraceReadError, IndexError):
                    raise _Irregular from None
                res = list(map(self._by_rest.__getitem__, keys))
        elif res_idx:
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
