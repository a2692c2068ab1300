"""`make bench`'s verdict (bench/report.py): one table of every benchmark's rows, a failing row named."""

from __future__ import annotations

import importlib
import json
import os
import sys
from pathlib import Path

import pytest

from bench import report
from bench.rows import BENCH_LOCAL_FS, at_least, at_most, jit_quiet, measured, met, use_local_fs
from glue_jobs.session import LOCAL_FS_VARIABLE


def _write(path, rows, **extra):
    path.write_text(json.dumps({"rows": rows, **extra}))
    return path


@pytest.mark.parametrize(("row", "expected"), [
    (at_least("r", 0.8, 0.8), True),
    (at_least("r", 0.799, 0.8), False),
    (at_most("r", 1.1, 1.1), True),
    (at_most("r", 1.101, 1.1), False),
    (measured("r", 3.0, "s"), None),
])
def test_met_compares_in_the_row_direction(row, expected):
    assert met(row) is expected


def test_every_row_in_one_table_and_a_missed_target_fails_naming_its_row(tmp_path, capsys):
    streaming = _write(tmp_path / "streaming.json",
                       [at_least("warm (b)/(a)", 0.81, 0.8), measured("40k batch", 1.2, "s")],
                       runner_records_per_second_per_core=60000, spark="3.5.4")
    compaction = _write(tmp_path / "compaction.json", [at_most("compaction/bare", 1.31, 1.1)])
    markdown = tmp_path / "docs" / "benchmarks.md"

    status = report.main([str(streaming), str(compaction), "--out-dir", str(tmp_path / "out"), "--markdown", str(markdown)])

    assert status == 1
    assert "NOT met: compaction/bare: 1.31, target <= 1.1" in capsys.readouterr().err
    table = markdown.read_text()
    assert "| warm (b)/(a) | **0.81** | >= 0.8 | yes |" in table
    assert "| compaction/bare | **1.31** | <= 1.1 | **NO** |" in table
    assert "| 40k batch | **1.2 s** | — | — |" in table
    assert "- commit: " in table and "- machine: " in table and "- measured: 20" in table
    assert "targets NOT met" in table
    combined = json.loads((tmp_path / "out" / "bench.json").read_text())
    # devtools.sizing reads the streaming result's per-core rate from here
    assert combined["streaming"]["runner_records_per_second_per_core"] == 60000
    assert [row["row"] for row in combined["rows"]] == ["warm (b)/(a)", "40k batch", "compaction/bare"]


def test_all_met_passes(tmp_path):
    result = _write(tmp_path / "cold.json", [at_least("cold", 0.76, 0.75)])
    assert report.main([str(result), "--out-dir", str(tmp_path / "out")]) == 0
    assert "every target met" in (tmp_path / "out" / "bench.md").read_text()


def test_a_benchmark_that_wrote_no_result_fails_the_verdict(tmp_path, capsys):
    result = _write(tmp_path / "cold.json", [at_least("cold", 0.76, 0.75)])
    status = report.main([str(result), str(tmp_path / "orders.json"), "--out-dir", str(tmp_path / "out")])
    assert status == 1
    assert f"missing: {tmp_path / 'orders.json'}" in capsys.readouterr().err
    assert "Results missing" in (tmp_path / "out" / "bench.md").read_text()


def test_make_bench_length_is_timed_per_benchmark_and_judged_against_its_target(tmp_path, capsys):
    """bench/timed.py times each benchmark's whole process (a failing one too, its exit code passed on); the report adds
    the row of make bench's length, judged against 25 minutes, and each benchmark's seconds under the table."""
    from bench import timed

    log = tmp_path / "lengths.jsonl"
    quick, failing = tmp_path / "bench_quick.py", tmp_path / "bench_failing.py"
    quick.write_text("import sys, time; time.sleep(0.2); sys.exit(0)\n")
    failing.write_text("import sys; sys.exit(3)\n")
    assert timed.main(["--log", str(log), "--", str(quick), "--records", "5"]) == 0
    assert timed.main(["--log", str(log), "--", str(failing)]) == 3
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(e["script"], e["arguments"], e["exit"]) for e in entries] == [
        ("bench_quick.py", ["--records", "5"], 0), ("bench_failing.py", [], 3)]
    assert entries[0]["seconds"] >= 0.2
    with pytest.raises(SystemExit):
        timed.main(["--log", str(log), "--", "--records", "5"])  # no script named: refused, nothing run

    result = _write(tmp_path / "cold.json", [at_least("cold", 0.76, 0.75)])
    log.write_text("\n".join(json.dumps({"script": name, "arguments": [], "seconds": seconds, "exit": code})
                             for name, seconds, code in [("bench_cold.py", 900.4, 0), ("bench_kafka.py", 700.2, 1)]) + "\n")
    assert report.main([str(result), "--lengths", str(log), "--out-dir", str(tmp_path / "out")]) == 1
    assert "NOT met: make bench's 2 benchmarks one after another" in capsys.readouterr().err
    table = (tmp_path / "out" / "bench.md").read_text()
    assert "whole processes (target: 25 minutes on the 2-core machine it was set on), seconds | **1601 s** | <= 1500 s | **NO** |" in table
    assert "Each benchmark's whole process, seconds: bench_cold.py 900.4, bench_kafka.py 700.2 (exit 1)." in table
    log.write_text("")  # a run that timed nothing: the row is missing, and so the verdict fails
    assert report.main([str(result), "--lengths", str(log), "--out-dir", str(tmp_path / "out")]) == 1
    assert f"missing: {log}" in capsys.readouterr().err


def test_the_commit_is_marked_by_changes_to_anything_but_the_table_it_writes(tmp_path, monkeypatch):
    import subprocess

    def git(*args: str) -> None:
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=tmp_path, check=True,
                       capture_output=True)

    table, code = tmp_path / "docs" / "benchmarks.md", tmp_path / "job.py"
    table.parent.mkdir()
    table.write_text("old table\n")
    code.write_text("x = 1\n")
    git("init", "-q")
    git("add", ".")
    git("commit", "-qm", "first")
    monkeypatch.setattr(report, "ROOT", tmp_path)
    table.write_text("the table of the run before\n")
    assert not report.commit(table).endswith("uncommitted changes")  # a back-to-back run: only its own table differs
    assert report.commit().endswith(" + uncommitted changes")  # no table named: any change counts
    code.write_text("x = 2\n")
    assert report.commit(table).endswith(" + uncommitted changes")


@pytest.mark.parametrize("script", sorted(p.stem for p in (Path(__file__).resolve().parents[2] / "bench").glob("bench_*.py")))
def test_importing_a_benchmark_leaves_the_local_file_system_alone(script, monkeypatch):
    # A benchmark sets STREAMLAKE_LOCAL_FS in its main (bench/rows.py use_local_fs), never on import: an import once set
    # it for every later test in the process, and the Spark lines' file system tests failed.
    for module in (f"bench.{script}", "bench.rows"):  # imported again, as a new process would
        monkeypatch.delitem(sys.modules, module, raising=False)
    monkeypatch.delenv(LOCAL_FS_VARIABLE, raising=False)
    importlib.import_module(f"bench.{script}")
    assert LOCAL_FS_VARIABLE not in os.environ


def test_a_benchmark_picks_its_file_system_in_main_and_a_misspelt_one_fails(monkeypatch):
    monkeypatch.delenv(LOCAL_FS_VARIABLE, raising=False)
    use_local_fs()
    assert os.environ[LOCAL_FS_VARIABLE] == BENCH_LOCAL_FS
    monkeypatch.setenv(LOCAL_FS_VARIABLE, "forkless")
    use_local_fs()  # the operator's choice stands
    assert os.environ[LOCAL_FS_VARIABLE] == "forkless"
    use_local_fs("hadoop")  # a benchmark that must measure one file system says which
    assert os.environ[LOCAL_FS_VARIABLE] == "hadoop"
    monkeypatch.setenv(LOCAL_FS_VARIABLE, "Forkless")
    with pytest.raises(ValueError, match="STREAMLAKE_LOCAL_FS"):
        use_local_fs()


@pytest.mark.parametrize(("pairs", "quiet"), [
    ([(1.0, 150)] * 5, True),  # 15% of the time compiling, under 20%
    ([(1.0, 150)] * 4 + [(1.0, 300)], True),  # 18% over the window
    ([(1.0, 150)] * 4 + [(1.0, 410)], False),  # 20.2%
    ([(1.0, 900)] * 10 + [(1.0, 100)] * 5, True),  # only the last window counts
    ([(1.0, 100)] * 4, False),  # fewer pairs than the window
    ([(1.0, 100)] * 4 + [(1.0, None)], False),  # no compiler figures: never quiet, the cap ends the warm-up
])
def test_the_warm_up_ends_when_the_compiler_is_quiet(pairs, quiet):
    assert jit_quiet(pairs, window=5, share=0.2) is quiet
