"""`streamlake`: one console script over the project's commands (streamlake/cli.py)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from streamlake import cli

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_help_lists_every_command_grouped_by_who_runs_it(capsys):
    assert cli.main(["--help"]) == 0
    text = capsys.readouterr().out
    for name, command in cli.COMMANDS.items():
        assert f"  {name:<14} {command.help}" in text
    assert text.index("Local development") < text.index("Operating an environment") < text.index("Planning and review")
    expected = {"dataset", "generate", "run-local", "produce", "job", "compact", "schema-evolve", "sizing", "diff"}
    assert expected <= set(cli.COMMANDS)  # what issue 34 names, and more


@pytest.mark.parametrize("name", sorted(cli.COMMANDS))
def test_each_command_explains_itself(name, capsys):
    assert cli.main([name, "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage:") and len(out.splitlines()) > 3, out


def test_a_command_runs_the_projects_tool_with_the_rest_of_the_line(capsys):
    from devtools import sizing

    args = ["--events-per-second", "2000", "--record-kb", "1", "--latency-seconds", "120", "--environment", "prod",
            "--records-per-core-per-second", "5000"]
    assert sizing.main(args) == 0
    direct = capsys.readouterr().out
    assert cli.main(["sizing", *args]) == 0
    assert capsys.readouterr().out == direct and "shard" in direct.lower()


def test_usage_errors_exit_2_and_name_the_problem(capsys):
    assert cli.main(["frobnicate"]) == 2
    assert "unknown command 'frobnicate'" in capsys.readouterr().err
    assert cli.main([]) == 2
    assert cli.main(["job", "stop"]) == 2  # argparse: --environment and --source are required
    assert "required" in capsys.readouterr().err


def test_the_console_script_is_installed_by_bootstrap():
    """make bootstrap: pip install -e . (pyproject [project.scripts]); `python -m streamlake` is the same."""
    script = shutil.which("streamlake", path=str(Path(sys.executable).parent))
    assert script, "streamlake is not in the virtualenv: run make bootstrap"
    for command in ([script, "--help"], [sys.executable, "-m", "streamlake", "--help"]):
        done = subprocess.run(command, capture_output=True, text=True, cwd=REPO_ROOT, timeout=120)
        assert done.returncode == 0 and "schema-evolve" in done.stdout, done.stderr


@pytest.mark.parametrize("command", [["generate", "--out", "{tmp}/in", "--records", "5"],
                                     ["compact-local", "--lake", "{tmp}/lake"]])
def test_a_dataset_whose_files_are_wrong_is_one_message_not_a_traceback(command, tmp_path, monkeypatch, capsys):
    """A drafted schema not pinned yet (what `dataset new` leaves): every command that loads the dataset says so, with
    the line to add and how to pin it, exit 1 or 2, and no traceback."""
    shutil.copytree(REPO_ROOT / "datasets", tmp_path / "datasets")
    (tmp_path / "datasets" / "orders" / "schemas.lock.json").write_text("{}")
    (tmp_path / "lake").mkdir()
    monkeypatch.setenv("STREAMLAKE_DATASETS", str(tmp_path / "datasets"))
    code = cli.main([*(a.format(tmp=tmp_path) for a in command), "--dataset", "orders"])
    err = capsys.readouterr().err
    assert code in (1, 2) and "Traceback" not in err
    assert f"streamlake {command[0]}: error: " in err and 'orders: schema.v1.avsc has no digest in schemas.lock.json: add' in err
