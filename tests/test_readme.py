"""README's commands, as a newcomer types them on a fresh clone: every `streamlake` line of its code blocks that needs no
AWS account runs, in README's order, in a scratch directory (the datasets folder a copy of the project's, so the
drafted dataset stays out of the repository), and must exit 0 with what README says it does; the lines that need an
environment's stack run with --help, so an option README names that the command does not take fails here."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
LOCAL = {"dataset", "generate", "run-local", "compact-local", "sizing", "diff"}  # need no AWS account
NEEDS_AWS = {"produce", "job", "compact", "schema-evolve"}


def readme_commands() -> list[list[str]]:
    """The `streamlake ...` lines of README's indented code blocks (a trailing `# comment` cut), in order."""
    commands = []
    for line in README.read_text(encoding="utf-8").splitlines():
        match = re.match(r"^ {4,}(streamlake .*?)(\s+#.*)?$", line)
        if match:
            commands.append(shlex.split(match.group(1))[1:])
    return commands


def test_readme_is_short_and_names_no_file_outside_the_repository():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 150
    assert "../" not in text


def test_every_streamlake_line_of_readme_is_a_command_this_test_runs():
    names = {command[0] for command in readme_commands()}
    assert names <= LOCAL | NEEDS_AWS, names - LOCAL - NEEDS_AWS
    assert LOCAL <= names


@pytest.mark.e2e
def test_readme_commands_run_on_a_clone_in_readme_order(tmp_path):
    shutil.copytree(REPO / "datasets", tmp_path / "datasets")
    shutil.copytree(REPO / "docs" / "examples", tmp_path / "docs" / "examples")
    env = {**os.environ, "STREAMLAKE_DATASETS": str(tmp_path / "datasets")}
    outputs = {}
    for command in readme_commands():
        if command[0] in NEEDS_AWS:
            argv = [*command[:2], "--help"] if command[0] == "job" else [command[0], "--help"]
        else:
            argv = command
        done = subprocess.run([sys.executable, "-m", "streamlake", *argv], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=600)
        assert done.returncode == 0, f"streamlake {shlex.join(argv)} exited {done.returncode}:\n{done.stderr[-3000:]}"
        if command[0] in NEEDS_AWS:  # every option README gives is one the command takes
            for option in (a for a in command if a.startswith("--")):
                assert option in done.stdout, f"README gives {option} to `streamlake {command[0]}`"
        outputs[" ".join(command[:2])] = done.stdout
        if command[0] == "run-local":  # Spark takes seconds to start: the command says so first, then a line per batch
            assert "starting a local Spark session" in done.stderr and "batch 0: in=" in done.stdout

    drafted = tmp_path / "datasets" / "sensor_readings"
    assert (drafted / "dataset.json").exists() and (drafted / "schemas.lock.json").exists()  # drafted, then pinned
    assert "pinned schema.v1.avsc" in outputs["dataset check"]
    assert re.search(r"summary: records=2000 written=\d+ dead_letters=\d+", outputs["run-local --dataset"])
    assert re.search(r"\d+ partition\(s\) compacted, .* 0 failed", outputs["compact-local --dataset"])
    assert list((tmp_path / "try" / "lake").glob("event_date=*/event_hour=*/*.parquet"))
    assert "config fragment" in outputs["sizing --events-per-second"]
    assert "# Infrastructure diff against `HEAD`" in outputs["diff --base"]
    assert not (REPO / "datasets" / "sensor_readings").exists()
