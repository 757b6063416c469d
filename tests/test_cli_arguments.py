"""The CLI's typed arguments: every command has a model that takes exactly what its parser
fills, settings supply the defaults that are settings, and a value without its form is one
line on stderr with exit code 2 (never a traceback)."""
from __future__ import annotations

import pytest
from pydantic import ValidationError

from skill_server.cli.common import CommandArgs
from skill_server.cli.entry import COMMANDS, build_parser, command_parsers, main
from skill_server.cli.verify_support import VerifyArgs
from skill_server.settings import Settings, env_name

CARD = "flydsl_fp8_blockscale_gemm"


def test_every_command_has_a_model_that_takes_what_its_parser_fills():
    parser = build_parser()
    parsers = command_parsers(parser)
    assert set(parsers) == set(COMMANDS)
    global_dests = {a.dest for a in parser._actions} - {"help", "command"}
    for name, sub in parsers.items():
        model, handler = COMMANDS[name]
        assert issubclass(model, CommandArgs) and callable(handler)
        dests = {a.dest for a in sub._actions if a.dest != "help"} | global_dests
        assert dests <= set(model.model_fields), f"{name}: no field for {sorted(dests - set(model.model_fields))}"
        for field, info in model.model_fields.items():
            assert info.annotation is not None, f"{name}.{field} untyped"


def _args(argv: list[str], environ: dict[str, str] | None = None) -> CommandArgs:
    ns = build_parser().parse_args(argv)
    return COMMANDS[ns.command][0].from_namespace(ns, Settings.from_environ(environ or {}))


def test_defaults_that_are_settings_come_from_the_settings_object(tmp_path):
    env = {env_name("ledger"): str(tmp_path / "l.sqlite"), env_name("skills_dir"): str(tmp_path),
           env_name("profile_max_bytes"): "4096", env_name("token"): "t0k", env_name("ray_address"): "h:1"}
    prof = _args(["match-profile", "-"], env)
    assert prof.ledger == str(tmp_path / "l.sqlite") and prof.skills_dir == tmp_path and prof.max_bytes == 4096
    assert _args(["--ledger", "x.sqlite", "match-profile", "-", "--max-bytes", "7"], env).max_bytes == 7
    assert _args(["--ledger", "x.sqlite", "history", CARD], env).ledger == "x.sqlite"  # the flag wins
    serve = _args(["serve"], env)
    assert serve.token == "t0k" and not serve.token_on_command_line and serve.ray_address == "h:1"
    assert _args(["serve", "--token", "cli"], env).token_on_command_line


def test_typed_values_and_verify_options_are_built_once_from_the_flags():
    match = _args(["match", "--op", "k", "--shape", "M=64,N=32,K=16"])
    assert (match.shape.M, match.shape.N, match.shape.K) == (64, 32, 16)
    v = _args(["verify", CARD, "--candidate", "arm:torch_mm", "--seed", "3", "--seed", "4", "--no-timing",
               "--device", "CUDA:1", "--options", '{"rounds": 9}', "--require-sandbox"])
    assert isinstance(v, VerifyArgs)
    opts = v.verify_options()
    assert opts.seeds == [3, 4] and opts.timing is False and opts.rounds == 9 and opts.require_sandbox
    with pytest.raises(ValidationError):
        v.card = "another"  # frozen: a handler cannot edit its input


@pytest.mark.parametrize("argv,needle", [
    (["match", "--op", "k", "--shape", "4096x2048"], "--shape: shape '4096x2048': 2 values"),
    (["show", CARD, "--shape", "1x2x"], "--shape: shape '1x2x'"),
    (["verify", CARD, "--candidate", "kernel.py"], "--candidate: candidate 'kernel.py': expected FILE.py:FUNCTION"),
    (["verify", CARD, "--candidate", "arm:"], "--candidate: candidate 'arm:' needs an arm name"),
    (["verify", CARD, "--candidate", "k.py:build", "--device", "tpu"], "--device 'tpu': expected auto, cpu"),
    (["verify", CARD, "--candidate", "k.py:build", "--rounds", "2"], "--rounds: Input should be greater than or equal to 5"),
    (["verify", CARD, "--candidate", "k.py:build", "--options", '{"python": "/bin/sh"}'], "--options python: Extra"),
    (["verify", CARD, "--candidate", "k.py:build", "--options", "[1]"], "--options: expected a JSON object"),
    (["verify", "no_such_card", "--candidate", "arm:x", "--device", "cpu", "--no-record", "--quiet"],
     "unknown card 'no_such_card'"),
    (["verify", CARD, "--candidate", "arm:torch_dequant", "--shape", "64x64", "--device", "cpu", "--no-record", "--quiet"],
     "expected 3 values"),
    (["doctor", "--check-timeout", "-1"], "--check-timeout must be a positive number of seconds"),
    (["serve", "--port", "70000"], "--port 70000: expected 1-65535"),
    (["serve", "--verify-options", '{"rounds": 1}'], "--verify-options: "),
    (["overlap"], "give a draft SKILL.md or --card ID"),
    (["reverify", "--platform", "gfx950"], "apply to a fleet run: add --ray"),
    (["fleet-node", "--head", "--generation", "gfx950", "--print"], "--generation needs --vendor"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, argv, needle):
    rc = main(argv)
    err = capsys.readouterr().err
    assert rc == 2, err
    assert needle in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith(f"skill-server {argv[0]}: error: ")


def test_a_bad_setting_is_one_line_and_exit_2(capsys, monkeypatch):
    monkeypatch.setenv(env_name("profile_max_bytes"), "lots")
    assert main(["match-profile", "-"]) == 2
    err = capsys.readouterr().err
    assert "SKILL_SERVER_PROFILE_MAX_BYTES" in err and len(err.strip().splitlines()) == 1
