"""The local runner end to end (subprocesses, real checkpoints), its CLI errors, and the kill-and-restart proof."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from glue_jobs.__main__ import main
from glue_jobs.generate import generate
from glue_jobs.schema import spark_dead_letter_schema, spark_lake_schema
from tests.processes import kill_group

REPO = Path(__file__).resolve().parents[2]


def _runner_command(tmp_path: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "glue_jobs", "run-local", "--dataset", "clickstream", "--input", str(tmp_path / "in"), "--lake",
            str(tmp_path / "lake"), "--dead-letter", str(tmp_path / "dead"), "--checkpoint", str(tmp_path / "cp"),
            *extra]


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "PYSPARK_PYTHON": sys.executable,
            "STREAMLAKE_SPARK_MASTER": "local[2]", "STREAMLAKE_DRIVER_MEMORY": "1g", **extra}


def _assert_exactly_once(spark, tmp_path: Path, expect) -> None:
    lake = spark.read.schema(spark_lake_schema()).parquet(str(tmp_path / "lake"))
    ids = [r.event_id for r in lake.select("event_id").collect()]
    assert len(ids) == len(set(ids)), "an event was written twice"
    assert sorted(ids) == sorted(expect.valid_event_ids)
    dead = spark.read.schema(spark_dead_letter_schema()).parquet(str(tmp_path / "dead"))
    assert sorted(r.payload for r in dead.select("payload").collect()) == sorted(expect.bad_lines)


def test_cli_rejects_bad_arguments(capsys, tmp_path):
    with pytest.raises(SystemExit) as exit_info:
        main(["run-local", "--dataset", "clickstream", "--input", str(tmp_path), "--lake", "l", "--dead-letter", "d", "--checkpoint", "c",
              "--max-files-per-batch", "0"])
    assert exit_info.value.code == 2 and "must be at least 1" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        main(["run-local", "--dataset", "clickstream", "--input", str(tmp_path / "nope"), "--lake", "l", "--dead-letter", "d",
              "--checkpoint", "c"])
    assert exit_info.value.code == 2 and "nope does not exist" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["run-local", "--lake", "l"])
    assert "--input" in capsys.readouterr().err


def test_generate_writes_every_bad_kind_and_reports_expectations(tmp_path, capsys):
    assert main(["generate", "--dataset", "clickstream", "--out", str(tmp_path / "g"), "--records", "2000", "--files", "3", "--bad-ratio", "0.2",
                 "--expect", str(tmp_path / "e.json")]) == 0
    expect = json.loads((tmp_path / "e.json").read_text())
    assert set(expect["bad_by_reason"]) == {"malformed_json", "missing_required_field", "invalid_type", "out_of_range"}
    lines = sum(len(p.read_text().splitlines()) for p in (tmp_path / "g").iterdir())
    assert lines == 2000 == len(expect["valid_event_ids"]) + len(expect["bad_lines"]) + expect["duplicates"]


def test_generate_shapes_records_like_producers_for_clickstream_only(tmp_path, capsys):
    from glue_jobs.generate import PRODUCER_SHAPES

    assert main(["generate", "--dataset", "clickstream", "--shape", "producers", "--out", str(tmp_path / "g"), "--records",
                 "3000", "--files", "1", "--expect", str(tmp_path / "e.json")]) == 0
    expect = json.loads((tmp_path / "e.json").read_text())
    valid = len(expect["valid_event_ids"])
    for name, share in PRODUCER_SHAPES:  # each shape near its declared share of the valid records
        assert abs(expect["shapes"][name] / valid - share) < 0.03, (name, expect["shapes"][name], valid)
    text = (tmp_path / "g" / "events-00000.json").read_text(encoding="utf-8")
    assert "\\u00e9" in text and "é" in text and '\\"' in text  # both spellings of non-ASCII, and escaped quotes
    with pytest.raises(SystemExit) as refused:
        main(["generate", "--dataset", "orders", "--shape", "producers", "--out", str(tmp_path / "o"), "--records", "10"])
    assert refused.value.code == 2 and "clickstream's generator only" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_the_summary_line_totals_the_micro_batches():
    from glue_jobs.batch import BatchStats
    from glue_jobs.local_runner import RunSummary

    summary = RunSummary(seconds=2.0)
    summary.add(BatchStats(source="s", batch_id=0, records_in=10, records_written=7, dead_letters=2,
                           duplicates_collapsed=1, dead_letters_by_reason={"malformed_json": 2}))
    summary.add(BatchStats(source="s", batch_id=1, records_in=5, records_written=3, dead_letters=1,
                           duplicates_collapsed=1, dead_letters_by_reason={"invalid_type": 1}, replayed=True, unknown_fields=2))
    assert summary.render() == ("summary: records=15 written=10 dead_letters=3 (invalid_type=1, malformed_json=2) "
                                "duplicates=2 unknown_fields=2 batches=2 (replayed 1) seconds=2.0 records_per_second=8")
    assert summary.totals() == {"batches": 2, "replayed_batches": 1, "records_in": 15, "records_written": 10,
                                "dead_letters": 3, "duplicates_collapsed": 2, "differing_duplicates": 0, "unknown_fields": 2,
                                "dead_letters_by_reason": {"invalid_type": 1, "malformed_json": 2}, "seconds": 2.0}
    assert RunSummary().render() == ("summary: records=0 written=0 dead_letters=0 (none) duplicates=0 batches=0 "
                                     "seconds=0.0 records_per_second=0")


@pytest.mark.e2e
def test_run_once_end_to_end_in_another_time_zone(spark, tmp_path):
    """The runner subprocess runs with TZ=America/Los_Angeles: partitions must still be UTC."""
    expect = generate(tmp_path / "in", records=600, files=3, bad_ratio=0.05, seed=3)
    # One line with a known UTC hour: 2023-11-14T23:30Z is 15:30 in Los Angeles.
    with open(tmp_path / "in" / "events-00000.json", "a", encoding="utf-8") as handle:
        handle.write('{"event_id":"tz-probe","event_type":"x","event_time":1700004600000}\n')
    expect.valid_event_ids.append("tz-probe")
    done = subprocess.run(_runner_command(tmp_path, "--once", "--max-files-per-batch", "2"), env=_env(TZ="America/Los_Angeles"),
                          capture_output=True, text=True, timeout=600, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "summary: records=601 " in done.stdout and "batches=2" in done.stdout
    assert f"dead_letters={len(expect.bad_lines)} " in done.stdout
    _assert_exactly_once(spark, tmp_path, expect)
    assert list((tmp_path / "lake").glob("event_date=2023-11-14/event_hour=23/part-local-*-b0000000000-0000.snappy.parquet"))


@pytest.mark.e2e
def test_sigkill_mid_stream_three_times_then_finish_exactly_once(spark, tmp_path):
    """Three kills, then a run to the end: every valid record once, every bad one a dead letter once. One valid record
    of the first batch no write takes (injected: STREAMLAKE_UNWRITABLE), and the first kill comes right after the batch
    found it (glue_jobs/lake/unwritable.py): after the restarts it is a dead letter (reason unwritable, payload as sent)
    and the source went on past it, instead of failing that batch on every retry."""
    expect = generate(tmp_path / "in", records=1200, files=12, bad_ratio=0.05, seed=5)
    files = [f.read_text(encoding="utf-8").splitlines() for f in sorted((tmp_path / "in").iterdir())]
    everywhere = [line for lines in files for line in lines]
    stuck = next(line for line in files[0] if line.startswith("{") and json.loads(line).get("event_id") in expect.valid_event_ids
                 and sum(f'"{json.loads(line)["event_id"]}"' in other for other in everywhere) == 1)  # no copy elsewhere
    expect.valid_event_ids.remove(json.loads(stuck)["event_id"])
    expect.bad_lines.append(stuck)
    unwritable = {"STREAMLAKE_UNWRITABLE": json.loads(stuck)["event_id"]}
    kills = 0
    for attempt in range(3):
        # A new process group, so SIGKILL takes the Spark JVM down with the Python driver: a real crash.
        crash = {"STREAMLAKE_CRASH_AT": "after_isolation:0"} if attempt == 0 else {}
        process = subprocess.Popen(_runner_command(tmp_path, "--max-files-per-batch", "1", "--trigger-seconds", "1"),
                                   env=_env(**unwritable, **crash), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                   cwd=REPO, start_new_session=True)
        try:
            batches_seen = 0
            deadline = time.time() + 300
            while batches_seen < 1 + attempt % 2 and time.time() < deadline:
                line = process.stdout.readline()
                if not line:
                    break
                batches_seen += line.startswith("batch ")
            time.sleep(0.3 * attempt)  # land in different phases: between batches, mid-write, mid-publish
            if attempt == 0:  # the crash point killed it before batch 0 committed (its line would follow the commit)
                assert (batches_seen, process.wait(timeout=120)) == (0, -signal.SIGKILL)
        finally:
            kill_group(process)
            kills += 1
    assert kills == 3
    done = subprocess.run(_runner_command(tmp_path, "--once"), env=_env(**unwritable), capture_output=True, text=True,
                          timeout=600, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    _assert_exactly_once(spark, tmp_path, expect)
    dead = spark.read.schema(spark_dead_letter_schema()).parquet(str(tmp_path / "dead")).filter("reason = 'unwritable'").collect()
    assert [r.payload for r in dead] == [stuck] and "no retry can write it" in dead[0].detail


def test_runner_reads_several_partitions_of_whole_files_per_core_and_restores_the_session(spark, tmp_path, monkeypatch):
    import io

    from glue_jobs import local_runner

    partitions, live, adapter = [], [], local_runner.from_local_files

    def recording_adapter(raw, *args):
        partitions.append(raw.rdd.getNumPartitions())
        live.append({key: spark.conf.get(key) for key in local_runner._session_settings(spark)})
        return adapter(raw, *args)

    monkeypatch.setattr(local_runner, "from_local_files", recording_adapter)
    spark.conf.set("spark.sql.files.openCostInBytes", "0")  # pack by size only, so the count is exact
    before = {key: spark.conf.get(key, None) for key in local_runner._session_settings(spark)}
    (tmp_path / "in").mkdir()
    for i in range(4):
        (tmp_path / "in" / f"f{i}.json").write_text(
            "".join(json.dumps({"event_id": f"e{i}-{j}", "event_type": "t", "event_time": 1700000000000}) + "\n"
                    for j in range(20))
        )
    try:
        summary = local_runner.run_local(
            input_dir=str(tmp_path / "in"), lake_dir=str(tmp_path / "lake"), dead_letter_dir=str(tmp_path / "dead"),
            checkpoint_dir=str(tmp_path / "cp"), once=True, spark=spark, out=io.StringIO(),
        )
    finally:
        spark.conf.unset("spark.sql.files.openCostInBytes")
    assert (summary.total("records_in"), summary.total("records_written")) == (80, 80)
    # At least 4 x 2 cores = 8 partitions asked for: each ~1.3 KB file is one (a partition holds whole files);
    # Spark's default, one per core, packs them two by two.
    assert partitions == [4]
    # During the batch: the minimum partitions, files listed on the driver; afterwards the session's own values.
    assert live == [{"spark.sql.files.minPartitionNum": str(local_runner.READ_TASKS_PER_CORE * 2),
                     "spark.sql.sources.parallelPartitionDiscovery.threshold": str(local_runner.DRIVER_LISTING_MAX_PATHS)}]
    assert {key: spark.conf.get(key, None) for key in before} == before


def test_micro_batches_of_known_shapes_compile_no_generated_class(spark, tmp_path):
    """Every stage of a micro-batch (validation, cache, counts, both writers, duplicate ranking) is generated
    from code that repeats from batch to batch, and the session keeps what a batch needs: batches of shapes
    seen before compile no class. A per-batch literal in any plan, or a codegen cache too small for the ~75
    classes of a batch, makes every batch compile again and run cold (1M-record benchmark batches with
    Spark's default cache of 100 entries in 4 segments: 21 classes per batch; with the local session's
    session.CODEGEN_CACHE_ENTRIES: none). At this test's size the default cache happens to suffice."""
    import io

    from glue_jobs import local_runner, session

    assert spark.conf.get("spark.sql.codegen.cache.maxEntries") == str(session.CODEGEN_CACHE_ENTRIES)
    compilations = spark.sparkContext._jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME()
    shapes = {
        # bad records and duplicates over 48 hours: both writers, the duplicate ranking, the write by slot
        "mixed": {"bad_ratio": 0.1, "duplicate_ratio": 0.05},
        # valid records only, no duplicates: the lake writer alone
        "clean": {"bad_ratio": 0.0, "duplicate_ratio": 0.0},
    }

    def compiled_by_run(name: str, shape: str) -> int:
        work = tmp_path / name
        expect = generate(work / "in", records=600, files=3, seed=len(name), **shapes[shape])
        before = compilations.getCount()
        summary = local_runner.run_local(
            input_dir=str(work / "in"), lake_dir=str(work / "lake"), dead_letter_dir=str(work / "dead"),
            checkpoint_dir=str(work / "cp"), once=True, spark=spark, out=io.StringIO(),
        )
        assert (summary.total("records_written"), summary.total("dead_letters")) == (len(expect.valid_event_ids),
                                                                              len(expect.bad_lines))
        return compilations.getCount() - before

    for shape in shapes:
        compiled_by_run(f"first-{shape}", shape)
    again = [compiled_by_run(f"again-{shape}", shape) for shape in shapes]
    if again != [0, 0]:
        # The count is the JVM's, for every thread. In the whole suite (CI on 2026-11-27, one SparkSession shared by
        # every test before this one) the mixed shape's repeat once compiled 4 classes; alone it compiled none, and the
        # cause was not found (a codegen cache entry evicted, or another thread compiling meanwhile). A per-batch
        # literal compiles on every repeat, so a third run of each shape must compile none.
        again = [compiled_by_run(f"third-{shape}", shape) for shape in shapes]
    assert again == [0, 0]


def test_run_local_generate_and_compact_local_name_no_dataset_for_you_where_there_are_several(tmp_path, capsys, monkeypatch):
    """1d225b0 defaulted --dataset to clickstream: a sensor lake was compacted as clickstream (its files deleted, all
    columns null) and a sensor stream dead-lettered whole, exit 0. Now the command refuses, naming the datasets; with
    one dataset there is nothing to choose."""
    from compaction.__main__ import main as compact_main
    from glue_jobs import datasets

    for argv, run in ((["run-local", "--input", str(tmp_path), "--lake", "l", "--dead-letter", "d", "--checkpoint", "c"], main),
                      (["generate", "--out", str(tmp_path / "g"), "--records", "10"], main),
                      (["run-local", "--lake", str(tmp_path)], compact_main)):
        with pytest.raises(SystemExit) as exit_info:
            run(argv)
        assert exit_info.value.code == 2
        assert "--dataset is required: 4 datasets exist (checkouts, clickstream, orders, page_views)" in capsys.readouterr().err
    only = tmp_path / "datasets"
    only.mkdir()
    shutil.copytree(datasets.root() / "orders", only / "orders")
    monkeypatch.setenv(datasets.ROOT_VARIABLE, str(only))
    assert datasets.chosen(None) == "orders"


def test_a_file_where_a_folder_is_wanted_is_one_line_not_a_traceback(tmp_path, capsys):
    """1d225b0 answered `--lake <a file>` (or --checkpoint) with a Python traceback."""
    from compaction.__main__ import main as compact_main

    (tmp_path / "in").mkdir()
    a_file = tmp_path / "lake.txt"
    a_file.write_text("not a folder")
    for option in ("--lake", "--dead-letter", "--checkpoint"):
        folders = {"--lake": str(tmp_path / "l"), "--dead-letter": str(tmp_path / "d"), "--checkpoint": str(tmp_path / "c"),
                   option: str(a_file)}
        with pytest.raises(SystemExit) as exit_info:
            main(["run-local", "--dataset", "clickstream", "--input", str(tmp_path / "in"),
                  *[part for pair in folders.items() for part in pair]])
        err = capsys.readouterr().err
        assert exit_info.value.code == 2 and f"error: {option} {a_file} is a file; it must be a folder" in err
        assert "Traceback" not in err
    assert compact_main(["run-local", "--dataset", "clickstream", "--lake", str(a_file)]) == 2
    assert f"error: --lake {a_file} is a file; it must be the lake's folder" in capsys.readouterr().err
