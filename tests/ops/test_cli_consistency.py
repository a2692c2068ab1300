"""Every `streamlake <command>` (and nested subcommand) spells its options one way, explains each, refuses an
abbreviated option, names itself `streamlake <command>` and says its exit codes. No Spark, no AWS: the parsers are
built and parsed, or a command is run only as far as its --help or a usage error."""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from unittest import mock

import pytest
import tomllib

from streamlake import cli, options

REPO_ROOT = Path(__file__).resolve().parents[2]

# Spellings an option must not have (the canonical one on the right). An old spelling may live on only as a hidden
# alias (help=SUPPRESS) that warns; streamlake.options.CANONICAL lists those aliases.
NOT_SPELLED = {
    "--env": "--environment", "--environment-name": "--environment", "--stage": "--environment",
    "--dataset-name": "--dataset", "--datasets": "--dataset",
    "--config-file": "--config", "--lake-dir": "--lake", "--lake-path": "--lake",
    "--src": "--source", "--output": "--out", "--output-dir": "--out", "--dry_run": "--dry-run",
}
# devtools/diff.py is another change's (its allow_abbrev, help and prog): until it lands, its cases fail only there.
NOT_YET: set[str] = set()


class _Captured(Exception):
    pass


def _top_parser(name: str) -> argparse.ArgumentParser:
    """The parser the module of `streamlake <name>` builds, taken as `streamlake <name>` runs it (so with the prog
    the dispatcher passes), stopped before it parses anything."""
    captured = []

    def capture(self, args=None, namespace=None):
        captured.append(self)
        raise _Captured

    with mock.patch.object(argparse.ArgumentParser, "parse_args", capture), \
            mock.patch.object(options.Parser, "parse_args", capture), pytest.raises(_Captured):
        cli.main([name])
    return captured[0]


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _walk(parser, path):
    yield path, parser
    for name, sub in _subparsers(parser).items():
        yield from _walk(sub, (*path, name))


def _command_parsers() -> list[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """(path, parser) of every command and nested subcommand, e.g. (("job", "status"), <its parser>)."""
    found = []
    for name, command in cli.COMMANDS.items():
        parser = _top_parser(name)
        for step in command.prefix:
            parser = _subparsers(parser)[step]
        found += list(_walk(parser, (name,)))
    return found


COMMAND_PARSERS = _command_parsers()
PATHS = [path for path, _ in COMMAND_PARSERS]


def _param(path):
    marks = [pytest.mark.xfail(reason="devtools/diff.py: prog, allow_abbrev, epilog are another change's",
                               strict=False)] if path[0] in NOT_YET else []
    return pytest.param(path, id=" ".join(path), marks=marks)


def _parser(path):
    return dict(COMMAND_PARSERS)[path]


def test_the_walk_reaches_nested_subcommands():
    assert {("job", "status"), ("job", "stop"), ("job", "start"), ("job", "reset-checkpoint"), ("dataset", "new"),
            ("dataset", "check")} <= set(PATHS)
    assert {(name,) for name in cli.COMMANDS} <= set(PATHS)


@pytest.mark.parametrize("path", [_param(p) for p in PATHS])
def test_help_exits_0_and_names_the_command_as_streamlake(path, capsys):
    assert cli.main([*path, "--help"]) == 0
    out = capsys.readouterr().out
    expected = "streamlake " + " ".join(path)
    assert out.startswith(f"usage: {expected} "), out.splitlines()[0]
    assert _parser(path).prog == expected
    assert "python -m" not in out, "help says `python -m`: it should say `streamlake <command>`"


@pytest.mark.parametrize("path", PATHS, ids=" ".join)
def test_every_option_and_argument_says_what_it_is_for(path):
    missing = []
    for action in _parser(path)._actions:
        if isinstance(action, options._Deprecated):
            assert action.help == argparse.SUPPRESS  # an old spelling is hidden, and nothing else is
            continue
        if not action.help or action.help == argparse.SUPPRESS or not str(action.help).strip():
            missing.append("/".join(action.option_strings) or action.dest)
    assert not missing, f"streamlake {' '.join(path)}: no help for {', '.join(missing)}"


@pytest.mark.parametrize("path", [_param(p) for p in PATHS])
def test_no_option_is_matched_by_its_prefix(path):
    assert _parser(path).allow_abbrev is False


@pytest.mark.parametrize("name", [_param((n,)) for n in cli.COMMANDS])
def test_each_command_says_its_exit_codes(name, capsys):
    assert cli.main([*name, "--help"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"exit codes: 0 .*; 1 .*; 2 usage error", " ".join(out.split())), out


def test_streamlake_help_says_the_exit_codes_every_command_uses(capsys):
    assert cli.main(["--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    for code in ("0 done", "1 failed", "2 usage error", "130 interrupted", "3 (dataset check", "4 (diff"):
        assert code in text


def test_one_spelling_per_option_across_every_command():
    visible: dict[str, set[str]] = {}  # dest -> its visible option strings, over every command
    for path, parser in COMMAND_PARSERS:
        for action in parser._actions:
            if isinstance(action, options._Deprecated):
                # an old spelling: hidden, of the canonical option's dest, and listed as its alias
                assert action.new in options.CANONICAL and set(action.option_strings) <= set(options.CANONICAL[action.new])
                assert action.dest == action.new.lstrip("-").replace("-", "_")
                continue
            for spelling in action.option_strings:
                assert spelling not in NOT_SPELLED, \
                    f"streamlake {' '.join(path)} takes {spelling}: spell it {NOT_SPELLED[spelling]}"
                assert not any(spelling in aliases for aliases in options.CANONICAL.values()), spelling
            if action.option_strings and action.dest != "help":
                visible.setdefault(action.dest, set()).add(max(action.option_strings, key=len))
    assert {dest: spellings for dest, spellings in visible.items() if len(spellings) > 1} == {}
    for canonical in options.CANONICAL:
        assert visible.get(canonical.lstrip("-").replace("-", "_")) in (None, {canonical})
    assert visible["environment"] == {"--environment"}


def test_every_command_taking_an_environment_spells_it_environment():
    takes = {path for path, parser in COMMAND_PARSERS
             if any(action.dest == "environment" for action in parser._actions)}
    assert {("produce",), ("job", "status"), ("compact",), ("schema-evolve",), ("outputs",), ("rehearse",),
            ("compact-local",), ("sizing",)} <= takes


def test_version_prints_the_projects_version_and_exits_0(capsys):
    expected = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out == f"streamlake {expected}\n"


def test_version_falls_back_to_pyproject_when_not_installed():
    import importlib.metadata

    import streamlake

    expected = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["version"]

    def not_installed(name):
        raise importlib.metadata.PackageNotFoundError(name)

    with mock.patch.object(importlib.metadata, "version", not_installed):
        assert streamlake.version() == expected


@pytest.mark.parametrize("argv, command", [
    (["schema-evolve", "--environment", "dev", "--data", "orders"], "streamlake schema-evolve"),
    (["produce", "--environment", "dev", "--source", "clickstream", "--file", "x.jsonl", "--data", "orders"],
     "streamlake produce"),
    (["generate", "--out", "unused", "--records", "1", "--data", "orders"], "streamlake generate"),
    (["compact-local", "--lake", "unused", "--data", "orders"], "streamlake compact-local"),
    (["run-local", "--input", "i", "--lake", "l", "--dead-letter", "d", "--checkpoint", "c", "--data", "orders"],
     "streamlake run-local"),
    (["job", "stop", "--environment", "dev", "--source", "clickstream", "--no-w", "x"], "streamlake job stop"),
    (["dataset", "check", "orders", "--sample", "s.jsonl", "--max-fail", "5"], "streamlake dataset check"),
])
def test_an_abbreviated_option_is_refused_with_exit_2(argv, command, capsys):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err  # one line
    assert err.startswith(f"{command}: error: unrecognized arguments: {argv[-2]}") and f"`{command} --help`" in err


def test_the_old_env_spelling_still_works_and_warns(capsys):
    from operations.cli import build_parser
    from rehearsal.__main__ import build_parser as rehearsal_parser

    args = build_parser("streamlake").parse_args(["job", "status", "--env", "dev", "--source", "clickstream"])
    assert args.environment == "dev"
    assert capsys.readouterr().err == ("streamlake job status: warning: --env is deprecated and will be removed; "
                                       "use --environment\n")
    assert rehearsal_parser("streamlake rehearse").parse_args(["--env", "staging"]).environment == "staging"
    assert "--env is deprecated" in capsys.readouterr().err
    assert build_parser().parse_args(["outputs", "--environment", "dev"]).environment == "dev"
    assert capsys.readouterr().err == ""  # the new spelling: no warning


def test_the_old_spelling_runs_the_command_to_its_own_error_in_one_line(capsys):
    """`streamlake outputs --env qa`: warned, then refused before any AWS call (qa is not configured)."""
    assert cli.main(["outputs", "--env", "qa"]) == 1
    lines = capsys.readouterr().err.splitlines()
    assert lines == ["streamlake outputs: warning: --env is deprecated and will be removed; use --environment",
                     "error: --environment 'qa' is not an environment of the config; configured: dev, staging, prod"]


def test_both_spellings_at_once_and_neither_are_usage_errors(capsys):
    assert cli.main(["outputs", "--env", "dev", "--environment", "prod"]) == 2
    assert "not allowed with" in capsys.readouterr().err
    assert cli.main(["job", "stop", "--source", "clickstream"]) == 2
    err = capsys.readouterr().err
    assert err == ("streamlake job stop: error: the following arguments are required: --environment "
                   "(see `streamlake job stop --help`)\n")


def test_an_unknown_command_is_one_line_saying_what_to_do(capsys):
    assert cli.main(["frobnicate"]) == 2
    assert capsys.readouterr().err == ("streamlake: error: unknown command 'frobnicate': run `streamlake --help` "
                                       "for the list\n")
