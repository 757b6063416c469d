"""Property-based fuzzing of the served surface through the real MCP client: every tool's
arguments (drawn from its published inputSchema, then broken: wrong types, missing and
unknown fields, huge, hostile and path-like values), every resource template and the
prompt. Each answer is a result or a clear error (never a crash's bare "Error executing
tool", never a traceback, never an internal error, never a megabyte of echo), and the
server answers the next request.

Arguments come two ways: generated from the schema, and mutated from one valid call per
tool (one or two values replaced by an extreme, hostile or ill-typed one), so that fuzzed
calls also get past the first check and reach the matcher, the profile readers, the
ledger and the verifier's argument checks. The bulk runs in memory (``Client(server)``);
a smaller run goes over real HTTP.
``SKILL_SERVER_FUZZ_EXAMPLES`` sets the examples per tool (default 25; e.g. 500 for a
deep run), ``SKILL_SERVER_FUZZ_HTTP_EXAMPLES`` those over HTTP (default 4).
"""
from __future__ import annotations

import base64
import copy
import gzip
import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anyio.from_thread
import httpx2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import INTERNAL_ERROR
from ledger_support import record
from mcp_support import BLOCKSCALE, BLOCKSCALE_OP, PROFILES, SKILLS, serve_http, stop, text

EXAMPLES = int(os.environ.get("SKILL_SERVER_FUZZ_EXAMPLES", "25"))
HTTP_EXAMPLES = int(os.environ.get("SKILL_SERVER_FUZZ_HTTP_EXAMPLES", "4"))
MAX_ERROR_CHARS = 5000
CARDS = sorted(p.name for p in SKILLS.iterdir() if (p / "SKILL.md").is_file())
TOOLS = ["check_overlap", "doctor", "draft_card", "get_recipe", "get_validation_history", "list_skills",
         "match_profile", "match_skill", "record_result", "reload_skills", "reverify", "run_verifier"]
# tools that run code: never given a real card, so a fuzzed call cannot start a real run
EXEC_TOOLS = {"run_verifier", "reverify"}
TOKEN = "fuzz-token-0123456789"

HOSTILE = ["", " ", "..", "../../etc/passwd", "/etc/passwd", "/proc/self/environ", "/dev/zero", "%2E%2E%2F",
           "\x00", "a\x00b", "\u202e", "😀" * 10, "x" * 5000, "{", "'\"", "MxNxK", "0x0x0", "-1x2x3",
           "1" * 30 + "x1x1", "arm:", "arm:torch_dequant", "os:system", "tests/fixtures/profiles/../../x.py:build",
           str(PROFILES / "rocprofv3_kernel_trace.csv"), "rocprofv3_kernel_trace.csv", "YWJj", "H4sI",
           "null", "None", "NaN", "Bearer x"]
REAL = [*CARDS, BLOCKSCALE_OP, "fused_moe_kernel", "moe_sum_reduce", "gfx950", "MI355X", "H200", "fp8_e4m3",
        "mxfp8", "fp32_block", "ue8m0_1x32", "prefill", "decode", "dense_gemm", "4096x2048x7168", "Procedure",
        "pitfalls", "rocm/gfx950", "verifier_report"]


# valid values per argument name, so fuzzed calls get past the first check and reach deeper code
HINTS = {"card_id": CARDS, "from_card": CARDS, "op_name": [BLOCKSCALE_OP, "fused_moe_kernel", "mxfp8_gemm"],
         "gen": ["gfx950", "MI355X", "H200", "gfx942"], "dtype": ["fp8_e4m3", "bf16", "mxfp8"],
         "scale_format": ["fp32_block", "ue8m0_1x32"], "operator": ["dense_gemm", "grouped_gemm_moe"],
         "shape": ["4096x2048x7168", "1x1x1", "128x256x512"], "section": ["Procedure", "pitfalls", "recipes"],
         "platform": ["rocm/gfx950", "cuda", "MI355X"], "format": ["rocprof_trace", "torch_trace", "kernel_stats"],
         "path": ["rocprofv3_kernel_trace.csv", str(PROFILES / "rocprofv3_kernel_trace.csv")],
         "candidate": ["arm:torch_dequant", "cand.py:build"], "new_id": ["fuzz_card"]}


def strings(real: bool = True, hint: str | None = None) -> st.SearchStrategy[str]:
    pool = HOSTILE + (REAL if real else [r for r in REAL if r not in CARDS])
    generic = st.one_of(st.sampled_from(pool), st.text(max_size=40), st.text(max_size=3000).map(lambda s: s * 2))
    valid = [v for v in HINTS.get(hint or "", []) if real or v not in CARDS]
    return st.one_of(st.sampled_from(valid), st.sampled_from(valid), generic) if valid else generic


def json_values(real: bool = True) -> st.SearchStrategy[Any]:
    scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.sampled_from([2**31, 2**63, -(2**63), 10**30, 10**400]),
                        st.floats(allow_nan=False, allow_infinity=False), strings(real))
    return st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                         st.dictionaries(strings(real), inner, max_size=4)),
                        max_leaves=12)


def from_schema(schema: dict, defs: dict, real: bool, depth: int = 0, hint: str | None = None) -> st.SearchStrategy[Any]:
    """Values shaped by a JSON schema, mostly inside it, sometimes anything at all;
    ``hint`` is the argument's name (see HINTS)."""
    if depth > 4:
        return json_values(real)
    if "$ref" in schema:
        return from_schema(defs[schema["$ref"].rsplit("/", 1)[-1]], defs, real, depth + 1, hint)
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            return st.one_of([from_schema(s, defs, real, depth + 1, hint) for s in schema[key]])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if "const" in schema:
        return st.just(schema["const"])
    kind = schema.get("type")
    if isinstance(kind, list):
        return st.one_of([from_schema({**schema, "type": k}, defs, real, depth) for k in kind])
    if kind == "string":
        return strings(real, hint)
    if kind == "integer":
        lo, hi = schema.get("minimum"), schema.get("maximum")
        return st.one_of(st.integers(min_value=lo, max_value=hi), st.integers(), st.sampled_from([0, -1, 2**31, 10**30, 10**400]))
    if kind == "number":
        return st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.integers(min_value=-(10**6), max_value=10**6))
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    if kind == "array":
        items = from_schema(schema.get("items", {}), defs, real, depth + 1, hint)
        return st.lists(items, max_size=3)
    if kind == "object" or "properties" in schema:
        return object_from_schema(schema, defs, real, depth)
    return json_values(real)


def object_from_schema(schema: dict, defs: dict, real: bool, depth: int = 0) -> st.SearchStrategy[dict]:
    props = schema.get("properties", {})
    required = set(schema.get("required", ()))

    @st.composite
    def build_object(draw: st.DrawFn) -> dict:
        out = {}
        for name, sub in props.items():
            if name in required or draw(st.booleans()):
                out[name] = draw(from_schema(sub, defs, real, depth + 1, name))
        mutation = draw(st.sampled_from(["none", "none", "none", "drop", "extra", "garbage"]))
        if mutation == "drop" and out:
            out.pop(draw(st.sampled_from(sorted(out))))
        elif mutation == "extra":
            out[draw(strings(real))] = draw(json_values(real))
        elif mutation == "garbage" and props:
            out[draw(st.sampled_from(sorted(props)))] = draw(json_values(real))
        return out

    return build_object()


def assert_clear(name: str, outcome: Any) -> None:
    """A result, or an error an agent can read: short, specific, no traceback, no crash text."""
    if isinstance(outcome, MCPError):
        message = outcome.error.message
        assert outcome.error.code != INTERNAL_ERROR, f"{name}: internal error {message[:300]!r}"
        assert len(message) <= MAX_ERROR_CHARS and len(str(outcome.error.data)) <= MAX_ERROR_CHARS
        assert "Traceback" not in message
        return
    body = text(outcome)
    if outcome.is_error:
        assert body.strip(), f"{name}: empty error"
        assert not re.fullmatch(r"Error executing tool \S+", body.strip()), f"{name}: a crash ({body!r})"
        assert "Traceback" not in body and 'File "' not in body, body[:500]
        assert len(body) <= MAX_ERROR_CHARS, f"{name}: {len(body)} characters of error"
    else:
        assert outcome.structured_content is not None, f"{name}: result without structured content"


class Session:
    """One client session driven from synchronous hypothesis examples (a blocking portal)."""

    def __init__(self, portal: anyio.from_thread.BlockingPortal, client: Any):
        self.portal, self.client = portal, client
        self.tools: dict[str, Any] = {t.name: t for t in portal.call(client.list_tools).tools}

    def __repr__(self) -> str:  # hypothesis prints the fixture in a falsifying example
        return f"Session({len(self.tools)} tools)"

    def _run(self, fn, *args, **kwargs) -> Any:
        async def call() -> Any:
            try:
                return await fn(*args, **kwargs)
            except MCPError as exc:
                return exc

        return self.portal.call(call)

    def call_tool(self, name: str, args: dict) -> Any:
        return self._run(self.client.call_tool, name, args)

    def read(self, uri: str) -> Any:
        return self._run(self.client.read_resource, uri)

    def prompt(self, name: str, args: dict) -> Any:
        return self._run(self.client.get_prompt, name, args)

    def still_serving(self) -> None:
        answer = self.call_tool("match_skill", {"hotspot": {"op_name": BLOCKSCALE_OP}})
        assert not isinstance(answer, MCPError) and not answer.is_error, "the server stopped answering"


@contextmanager
def session(make_client) -> Iterator[Session]:
    with anyio.from_thread.start_blocking_portal() as portal:
        with portal.wrap_async_context_manager(make_client()) as client:
            yield Session(portal, client)


@pytest.fixture(scope="module")
def fuzz_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz")
    shutil.copytree(SKILLS, root / "skills")
    shutil.copy(PROFILES / "rocprofv3_kernel_trace.csv", root / "rocprofv3_kernel_trace.csv")
    return root


@pytest.fixture(scope="module")
def memory(fuzz_root):
    from skill_server.mcp.app import ServerSettings, build_server
    from skill_server.service.facade import SkillService

    service = SkillService(fuzz_root / "skills", ledger_path=fuzz_root / "ledger.sqlite")
    server = build_server(service, ServerSettings(allow_exec_tools=True, allow_write_tools=True, file_roots=(fuzz_root,)))
    with session(lambda: Client(server)) as s:
        yield s


TRACE_TEXT = (PROFILES / "rocprofv3_kernel_trace.csv").read_text()
HOTSPOT = {"op_name": BLOCKSCALE_OP, "gen": "MI355X", "dtype": "fp8_e4m3", "scale_format": "fp32_block",
           "regime": "prefill", "shape": {"M": 4096, "N": 2048, "K": 7168}, "segment_kernels": ["moe_sum_reduce"],
           "pct_gpu": 40.0}
# one valid call per tool (exec tools name no real card, so nothing runs)
SEEDS: dict[str, list[dict]] = {
    "list_skills": [{"gen": "gfx950", "operator": "dense_gemm", "dtype": "fp8_e4m3", "limit": 5, "cursor": "1"}],
    "match_skill": [{"hotspot": HOTSPOT}],
    "match_profile": [{"path": "rocprofv3_kernel_trace.csv", "gen": "MI355X", "top": 3, "min_pct": 1.0},
                      {"content": TRACE_TEXT, "format": "kernel_trace", "regime": "prefill"},
                      {"content_base64": base64.b64encode(gzip.compress(TRACE_TEXT.encode())).decode()}],
    "get_recipe": [{"card_id": BLOCKSCALE, "shape": "4096x2048x7168"},
                   {"card_id": BLOCKSCALE, "shape": {"M": 4096, "N": 2048, "K": 7168}, "section": "Procedure"},
                   {"card_id": BLOCKSCALE, "full": True}],
    "reload_skills": [{}],
    "get_validation_history": [{"card_id": BLOCKSCALE, "shape": "4096x2048x7168", "platform": "rocm/gfx950",
                                "source": "manual", "limit": 5}],
    "check_overlap": [{"card_id": BLOCKSCALE}, {"draft_text": (SKILLS / BLOCKSCALE / "SKILL.md").read_text()},
                      {"match_spec": {"operator": ["dense_gemm"], "gens": ["gfx950"], "dtypes": ["fp8_e4m3"]}}],
    "record_result": [{"records": [record()]}],
    "draft_card": [{"new_id": "fuzz_card", "from_card": BLOCKSCALE, "shape": "4096x2048x7168"}],
    "run_verifier": [{"card_id": "fuzz_no_card", "candidate": "arm:torch_dequant", "baseline": "torch_dequant",
                      "shapes": ["128x256x512"], "options": {"rounds": 5, "timing": False}}],
    "reverify": [{"card_id": "fuzz_no_card", "gates": False, "verifier": False}],
    "doctor": [{"checks": ["install", "cards"]}],
}
EXTREMES = [None, "", [], {}, True, "Z" * 20_000, "../../etc/passwd", "/proc/self/environ", "\x00", "%s%n"]
NUMBER_EXTREMES = [0, -1, 2**31, 2**63, 10**400, -(10**400), 1e308, 5e-324]


def extreme_for(value: Any) -> st.SearchStrategy[Any]:
    """Extremes of the value's own kind first (a huge int where an int was), then any."""
    own = NUMBER_EXTREMES if isinstance(value, (int, float)) and not isinstance(value, bool) else EXTREMES
    return st.one_of(st.sampled_from(own), st.sampled_from(own), st.sampled_from(EXTREMES + NUMBER_EXTREMES))


def leaves(value: Any, path: tuple = ()) -> list[tuple]:
    """Every path into a JSON value (dict keys and list indexes), the root excluded."""
    out = []
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, sub in items:
        out.append((*path, key))
        out += leaves(sub, (*path, key))
    return out


@st.composite
def mutated(draw: st.DrawFn, seeds: list[dict], real: bool) -> dict:
    args = copy.deepcopy(draw(st.sampled_from(seeds)))
    for _ in range(draw(st.integers(1, 2))):
        paths = leaves(args)
        if not paths:
            args[draw(strings(real))] = draw(json_values(real))
            continue
        path = draw(st.sampled_from(paths))
        parent = args
        for key in path[:-1]:
            parent = parent[key]
        action = draw(st.sampled_from(["extreme", "extreme", "hostile", "garbage", "delete"]))
        if action == "delete":
            del parent[path[-1]]
        else:
            parent[path[-1]] = draw(extreme_for(parent[path[-1]]) if action == "extreme" else
                                    strings(real, str(path[-1])) if action == "hostile" else json_values(real))
    return args


def tool_arguments(tool: Any) -> st.SearchStrategy[dict]:
    schema = tool.input_schema
    real = tool.name not in EXEC_TOOLS
    generated = object_from_schema(schema, schema.get("$defs", {}), real)
    args = st.one_of(generated, mutated(SEEDS[tool.name], real), mutated(SEEDS[tool.name], real),
                     st.dictionaries(strings(real), json_values(real), max_size=3))
    if tool.name == "reverify":  # never every card: always one that does not exist
        args = args.map(lambda a: {**a, "card_id": f"fuzz_{a.get('card_id')!r}"[:80]})
    if tool.name == "doctor":  # never every check (seconds): at least one named, maybe bad
        args = args.map(lambda a: a if a.get("checks") else {**a, "checks": ["install"]})
    if tool.name == "run_verifier":  # never a real card, whatever the mutation did
        args = args.map(lambda a: {**a, "card_id": "fuzz_" + a["card_id"]} if a.get("card_id") in CARDS else a)
    return args


def test_the_fuzz_covers_every_published_tool(memory):
    assert sorted(memory.tools) == TOOLS


FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])


@pytest.mark.parametrize("name", TOOLS)
@FUZZ
@given(data=st.data())
def test_every_tool_answers_any_arguments_with_a_result_or_a_clear_error(memory, name, data):
    s = memory
    args = data.draw(tool_arguments(s.tools[name]), label="arguments")
    assert_clear(name, s.call_tool(name, args))
    s.still_serving()


DELETE = object()


def single_mutations(seed: dict) -> list[dict]:
    """The seed with one value replaced by each extreme of its kind (or deleted), for every
    value in it: a systematic sweep where random draws would rarely land."""
    out = []
    for path in leaves(seed):
        holder = seed
        for key in path[:-1]:
            holder = holder[key]
        value = holder[path[-1]]
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        for replacement in [*(NUMBER_EXTREMES if number else EXTREMES), DELETE]:
            args = copy.deepcopy(seed)
            parent = args
            for key in path[:-1]:
                parent = parent[key]
            if replacement is DELETE:
                del parent[path[-1]]
            else:
                parent[path[-1]] = replacement
            out.append(args)
    return out


@pytest.mark.parametrize("name", TOOLS)
def test_every_value_of_a_valid_call_replaced_by_an_extreme_gets_a_clear_answer(memory, name):
    s = memory
    for seed in SEEDS[name]:
        for args in single_mutations(seed):
            if name in EXEC_TOOLS and args.get("card_id") in CARDS:
                continue
            if name == "reverify" and not args.get("card_id"):
                continue  # no card_id means every card: a real run
            if name == "doctor" and not args.get("checks"):
                continue  # every check: seconds, and covered by the doctor's own tests
            assert_clear(name, s.call_tool(name, args))
        s.still_serving()


URI_PART = st.one_of(strings(), st.sampled_from(["SKILL.md", "validation_gfx950.yaml", "..%2F..%2Fpyproject.toml",
                                                  "%2Fetc%2Fpasswd", "x.yaml", ".hidden.yaml", "a/b.yaml"]))


@FUZZ
@given(card=URI_PART, artifact=URI_PART, template=st.sampled_from(["skill://{c}/SKILL.md", "skill://{c}/{a}",
                                                                   "skill://index", "skill://{c}", "{c}://{a}"]))
def test_every_resource_template_answers_any_values_and_serves_only_card_files(memory, card, artifact, template):
    s = memory
    uri = template.replace("{c}", card).replace("{a}", artifact)
    outcome = s.read(uri)
    if isinstance(outcome, MCPError):
        assert_clear(uri, outcome)
    else:
        for content in outcome.contents:
            assert "[project]" not in (getattr(content, "text", "") or "")  # never pyproject.toml or alike
            assert "root:" not in (getattr(content, "text", "") or "")
    s.still_serving()


@FUZZ
@given(args=st.dictionaries(st.sampled_from(["op_name", "gen", "shape", "pct_gpu", "extra"]), strings(), max_size=5),
       name=st.one_of(st.just("optimize_hotspot"), strings()))
def test_the_prompt_answers_any_arguments(memory, name, args):
    s = memory
    outcome = s.prompt(name, args)
    if isinstance(outcome, MCPError):
        assert_clear(name, outcome)
    s.still_serving()


# ------------------------------------------------------------------- over real HTTP
@pytest.fixture(scope="module")
def over_http(fuzz_root):
    proc, port = serve_http("--enable-write-tools", token=TOKEN, cwd=fuzz_root, skills_dir=fuzz_root / "skills",
                            ledger=fuzz_root / "ledger-http.sqlite")
    async def make_http():
        return httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60)

    try:
        with anyio.from_thread.start_blocking_portal() as portal:
            http = portal.call(make_http)
            mcp_client = Client(streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http))
            with portal.wrap_async_context_manager(mcp_client) as c:
                yield Session(portal, c)
            portal.call(http.aclose)
    finally:
        stop(proc)


@pytest.mark.parametrize("name", [t for t in TOOLS if t not in EXEC_TOOLS])
@settings(max_examples=HTTP_EXAMPLES, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_over_http_every_tool_answers_with_a_result_or_a_clear_error(over_http, name, data):
    s = over_http
    args = data.draw(tool_arguments(s.tools[name]), label="arguments")
    assert_clear(name, s.call_tool(name, args))
    s.still_serving()
