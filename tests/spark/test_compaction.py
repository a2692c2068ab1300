"""Compaction on real Spark: rows exactly once, duplicates removed, sizes near target, discovery,
late data, and (e2e) a run SIGKILLed at every phase then recovered by the next run."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from compaction import layout
from compaction.discovery import compaction_reason
from compaction.faults import LOG_PHASES, PHASES, FaultInjector
from compaction.job import Compactor
from compaction.metrics import METRIC_NAMES, LogMetricSink
from compaction.settings import CompactionSettings
from compaction.transforms import data_columns, data_schema, deduplicate_events
from glue_jobs.lake.storage import FileInfo

from .compaction_support import run_compaction_killed_at

HOUR = datetime(2026, 1, 1, 5, tzinfo=timezone.utc)
AFTER_HOUR = HOUR + timedelta(hours=2)  # "now" for most tests: HOUR is closed, grace included
KB = 1024


def event(event_id, *, hour=HOUR, arrival_s=0, offset=0, amount=1.0, source="clickstream"):
    return {
        "event_id": event_id,
        "event_type": "click",
        "event_time": (hour + timedelta(minutes=7)).replace(tzinfo=None),
        "user_id": f"user-{event_id}",
        "amount": amount,
        "currency": "EUR",
        "metadata": '{"page": "/home"}',
        "source": source,
        "source_partition": "0",
        "source_offset": str(offset),
        "arrival_time": (hour + timedelta(minutes=8, seconds=arrival_s)).replace(tzinfo=None),
        "batch_id": 1,
    }


def as_tuple(row: dict, columns: list[str]) -> tuple:
    return tuple(row[c] for c in columns)


def sql_frame(spark, rows: list[dict], extra=()):
    """A frame of exactly the lake data schema (plus `extra` (name, type) columns) holding `rows`, in one partition,
    from one SQL text (a VALUES table of typed literals) parsed in the JVM in one call. Each value is the one
    F.lit(value).cast(type) gives, but a frame of those (spark.createDataFrame pickles a function, which pyspark 3.3
    cannot do on Python 3.11) made a few Py4J calls per value, about 13 s for 145 rows before Spark ran anything.
    Values: None, str, int, float (NaN and the infinities too), and datetime after 1900 as F.lit takes it (naive: the
    Python process's local time); anything else is refused rather than coerced."""
    fields = [(f.name, f.dataType.simpleString()) for f in data_schema().fields] + list(extra)
    values = ", ".join("(" + ", ".join(f"CAST({_sql_literal(row.get(name))} AS {kind})" for name, kind in fields) + ")"
                       for row in rows)
    names = ", ".join(f"`{name}`" for name, _ in fields)
    # One partition: a local table is split over the default parallelism, and write_files writes one file per
    # `file_no` only from one partition.
    return spark.sql(f"SELECT * FROM VALUES {values} AS t({names})").coalesce(1)


def _sql_literal(value) -> str:
    import math

    from pyspark.sql.types import TimestampType

    if value is None:
        return "NULL"
    if isinstance(value, str) and "${" not in value:  # spark.sql would substitute a ${conf.key} in the text
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if isinstance(value, int) and not isinstance(value, bool) and -(2**63) <= value < 2**63:
        return str(value)  # an INT or BIGINT literal, as F.lit's Java Integer or Long
    if isinstance(value, float):
        # a DOUBLE, as F.lit's, from its shortest round-trip text (the same double, -0.0 too) or Java's name for NaN
        # and the infinities, which Spark's cast reads as those doubles
        text = repr(value) if math.isfinite(value) else {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}[str(value)]
        return f"CAST('{text}' AS DOUBLE)"
    if isinstance(value, datetime) and value.year > 1900:
        return f"TIMESTAMP_MICROS({TimestampType().toInternal(value)})"  # F.lit's instant (pyspark's DatetimeConverter)
    raise TypeError(f"sql_frame takes no {type(value).__name__} value {value!r}: it cannot hold it exactly")


def _move_into_partitions(scratch: Path, lake: Path, hours: list, first_batch: int, key: str | None) -> list[Path]:
    """Part i of `scratch` (the one file of its `key`=i folder, or without a key its i-th file) becomes file
    first_batch + i of the partition of hours[i]."""
    if key:
        parts = [_only((scratch / f"{key}={i}").glob("*.parquet")) for i in range(len(hours))]
    else:
        parts = sorted(scratch.glob("*.parquet"))
    written = []
    for i, (part, hour) in enumerate(zip(parts, hours, strict=True)):
        partition = lake / f"event_date={hour:%Y-%m-%d}" / f"event_hour={hour.hour}"
        partition.mkdir(parents=True, exist_ok=True)
        target = partition / f"part-clickstream-b{first_batch + i}-0.snappy.parquet"
        shutil.move(part, target)
        written.append(target)
    shutil.rmtree(scratch)
    return written


def _only(paths) -> Path:
    (path,) = paths  # a second file would be rows left behind
    return path


def write_files(spark, lake: Path, files: list[list[dict]], *, hour=HOUR, first_batch=0, hours: list | None = None,
                frame=sql_frame) -> list[Path]:
    """Write each list of rows as one streaming-style file into the hour partition (`hours`: each file's own), in one
    Spark job. `frame(spark, rows, extra)` makes the rows a frame (sql_frame's kinds of values)."""
    rows = [{**r, "file_no": i} for i, rows in enumerate(files) for r in rows]
    scratch = lake.parent / f"scratch-{os.urandom(4).hex()}"
    frame(spark, rows, extra=[("file_no", "int")]).write.partitionBy("file_no").parquet(str(scratch))
    return _move_into_partitions(scratch, lake, hours or [hour] * len(files), first_batch, "file_no")


def write_rows(spark, lake: Path, files: list[list[dict]], **kw) -> list[Path]:
    """write_files with sql_frame (this file's rows are all of its kinds): one Py4J call for the frame."""
    return write_files(spark, lake, files, frame=sql_frame, **kw)


def write_generated(spark, lake: Path, *, files: int, rows_per_file: int, replays: int) -> list[Path]:
    """files x rows_per_file rows made in the JVM; the last `replays` rows repeat the first event_ids,
    arriving later from higher offsets (so the first copies survive)."""
    from pyspark.sql import functions as F

    total = files * rows_per_file
    start = int(HOUR.timestamp())
    columns = {
        "event_id": F.concat(F.lit("e"), (F.col("id") % (total - replays)).cast("string")),
        "event_type": F.lit("click"),
        "event_time": (F.lit(start) + F.col("id") % 3600).cast("timestamp"),
        "user_id": F.concat(F.lit("user-"), (F.col("id") * 7919 % 5000).cast("string")),
        "amount": (F.col("id") * 31 % 100_000) / 100.0,
        "currency": F.lit("EUR"),
        "metadata": F.concat(F.lit('{"page": "/p/'), (F.col("id") % 50).cast("string"), F.lit('"}')),
        "source": F.lit("clickstream"),
        "source_partition": F.lit("0"),
        "source_offset": F.col("id").cast("string"),
        "arrival_time": (F.lit(start + 60) + F.col("id")).cast("timestamp"),
        "batch_id": (F.col("id") / rows_per_file).cast("long"),
    }
    scratch = lake.parent / f"scratch-{os.urandom(4).hex()}"
    frame = spark.range(0, total, numPartitions=files).select(*[columns[c].alias(c) for c in data_columns()])
    frame.write.parquet(str(scratch))
    return _move_into_partitions(scratch, lake, [HOUR] * files, 0, None)


def lake_rows(spark, lake: Path) -> list[tuple]:
    frame = spark.read.schema(data_schema()).parquet(*[str(p) for p in lake.glob("event_date=*/event_hour=*/*.parquet")])
    return sorted(tuple(r) for r in frame.collect())


def data_file_names(lake: Path, hour=HOUR) -> list[str]:
    return sorted(p.name for p in (lake / f"event_date={hour:%Y-%m-%d}" / f"event_hour={hour.hour}").glob("*.parquet"))


def expected_after_dedup(rows: list[dict]) -> list[tuple]:
    """The documented survivor rule, in plain Python: earliest arrival, then lowest offset."""
    columns = data_columns()  # once: a call per row (0.4 ms each, it loads the dataset) took 20 s for 60,000 rows
    best: dict[str, dict] = {}
    for r in rows:
        key = (r["arrival_time"], r["source"], r["source_partition"], len(r["source_offset"]), r["source_offset"])
        current = best.get(r["event_id"])
        if current is None or key < (current["arrival_time"], current["source"], current["source_partition"],
                                     len(current["source_offset"]), current["source_offset"]):
            best[r["event_id"]] = r
    return sorted(as_tuple(r, columns) for r in best.values())


def assert_clean(lake: Path) -> None:
    """No unfinished journal and no staging left behind."""
    control = lake / layout.CONTROL_DIR
    assert not list((control / "journal").glob("*")), "an unfinished journal entry is left"
    assert not list((control / "staging").glob("*")), "staging is left"


def compact(spark, lake: Path, *, now=AFTER_HOUR, hour=None, target_bytes=128 * KB * KB, hook=None, scan=True, **kw):
    """The lakes here are written file by file, not by the streaming job, so they have no partitions log: the
    run scans the lookback window (test_compaction_log.py covers the log-driven default)."""
    settings = CompactionSettings(lake_path=str(lake), target_file_bytes=target_bytes, grace_minutes=15,
                                  lookback_hours=kw.pop("lookback_hours", 48), hour=hour, delete_threads=2, scan=scan)
    sink = LogMetricSink("test")
    summary = Compactor(spark, settings, sink=sink, faults=FaultInjector("", hook), now=now).run()
    return summary, sink


# ---- rows, duplicates, sizes --------------------------------------------------------------------


def test_compaction_keeps_every_row_once_and_writes_files_near_target(spark, tmp_path):
    # With the functions jar (RankInRuns), as on Glue. The window that finds the survivors without it, and its counts,
    # run in test_compaction_verify.py (its `ranking` fixture: rows in, duplicates, differing copies, rows out) and
    # test_compaction_ranks.py (the same copies kept as RankInRuns); the file sizes do not depend on which ranks.
    # 15,000 rows in 10 files (about 540 KB) at a 160 KB target make 3 output files on every Spark line (1.03-1.04 of
    # the target, 0.94 of the input bytes): more than one, fewer than the inputs. The bytes go down because an output
    # file holds more rows than event_time has values (3,600, each then stored once in the file's dictionary) and an
    # input file fewer: 10 x 1,000 rows at a 96 KB target wrote 4 files of 2,500 rows and more bytes than they replaced.
    lake = tmp_path / "lake"
    write_generated(spark, lake, files=10, rows_per_file=1500, replays=25)
    before = [row.asDict() for row in spark.read.schema(data_schema()).parquet(*map(str, lake.rglob("*.parquet"))).collect()]
    before_bytes = sum(p.stat().st_size for p in lake.rglob("*.parquet"))

    summary, sink = compact(spark, lake, target_bytes=160 * KB)

    (result,) = summary.of("compacted")
    assert (result.files_before, result.rows_in, result.duplicates, result.rows_out) == (10, 15_000, 25, 14_975)
    assert lake_rows(spark, lake) == expected_after_dedup(before)
    outputs = data_file_names(lake)
    assert outputs == [layout.output_name(summary.run_id, i) for i in range(len(outputs))]
    sizes = [p.stat().st_size for p in lake.rglob("compacted-*.parquet")]
    assert 1 < len(sizes) < 10 and sum(sizes) < before_bytes
    assert all(0.5 * 160 * KB <= s <= 1.5 * 160 * KB for s in sizes), sizes
    assert_clean(lake)
    history = json.loads((lake / "_compaction/history/event_date=2026-01-01/event_hour=5.json").read_text())
    assert (history["rows_in"], history["duplicates"], len(history["inputs"])) == (15_000, 25, 10)
    published = {m.name: m.value for m in sink.published}
    assert set(published) == set(METRIC_NAMES)
    assert (published["CompactionPartitions"], published["CompactionFilesBefore"], published["CompactionFilesAfter"],
            published["CompactionDuplicatesRemoved"], published["CompactionSucceeded"]) == (1, 10, len(sizes), 25, 1)


def test_survivor_is_earliest_arrival_then_lowest_offset(spark):
    rows = [
        event("a", arrival_s=5, offset=1), event("a", arrival_s=2, offset=7),  # earliest arrival wins
        event("b", arrival_s=1, offset=10), event("b", arrival_s=1, offset=9),  # "9" < "10" as numbers
        event(None, offset=1), event(None, offset=2),  # no event_id: never treated as duplicates
        event("c"),
    ]
    frame = sql_frame(spark, rows)
    kept = sorted((r.event_id or "", r.source_offset) for r in deduplicate_events(frame).collect())
    assert kept == [("", "1"), ("", "2"), ("a", "7"), ("b", "9"), ("c", "0")]


def test_verification_failure_publishes_nothing_and_leaves_inputs(spark, tmp_path, monkeypatch):
    from compaction import staging

    lake = tmp_path / "lake"
    write_rows(spark, lake, [[event("a"), event("b")], [event("c")]])
    before = data_file_names(lake)
    real = staging.survivors_in_runs  # a row lost between the dedup and the write: the counts still say 3 went in

    def losing_b(rows, table, **options):
        survivors = real(rows, table, **options)
        return dataclasses.replace(survivors, frame=survivors.frame.filter("event_id != 'b'"))

    monkeypatch.setattr(staging, "survivors_in_runs", losing_b)

    summary, sink = compact(spark, lake)

    (failed,) = summary.of("failed")
    assert "staged 2 rows" in failed.error and "expected 3" in failed.error
    assert data_file_names(lake) == before
    assert_clean(lake)
    assert {m.name: m.value for m in sink.published}["CompactionSucceeded"] == 0


# ---- discovery ----------------------------------------------------------------------------------


def test_discovery_closed_hours_late_data_and_already_compacted(spark, tmp_path):
    lake = tmp_path / "lake"
    now = datetime(2026, 1, 3, 6, 10, tzinfo=timezone.utc)
    open_hour = datetime(2026, 1, 3, 5, tzinfo=timezone.utc)  # ends 06:00, grace 15 min: still open
    closed = datetime(2026, 1, 3, 4, tzinfo=timezone.utc)
    older = datetime(2026, 1, 2, 1, tzinfo=timezone.utc)  # 29 h ago: inside the 48 h lookback
    too_old = datetime(2026, 1, 1, 5, tzinfo=timezone.utc)  # outside the lookback
    hours = [hour for hour in (open_hour, closed, older, too_old) for _ in (1, 2)]  # two files an hour, one Spark job
    write_rows(spark, lake, [[event(f"{hour:%d%H}-{i % 2 + 1}", hour=hour)] for i, hour in enumerate(hours)],
               hours=hours)

    first, _ = compact(spark, lake, now=now)
    assert [r.partition for r in first.of("compacted")] == [
        "event_date=2026-01-02/event_hour=1", "event_date=2026-01-03/event_hour=4"]
    assert len(data_file_names(lake, open_hour)) == 2 and len(data_file_names(lake, too_old)) == 2

    # Late data lands in the older hour; the next run compacts it again, the other hour is skipped.
    write_rows(spark, lake, [[event("late", hour=older)]], hour=older, first_batch=50)
    second, _ = compact(spark, lake, now=now + timedelta(hours=1))
    by_partition = {r.partition: r for r in second.results}
    assert by_partition["event_date=2026-01-02/event_hour=1"].action == "compacted"
    assert "late data" in by_partition["event_date=2026-01-02/event_hour=1"].reason
    assert (by_partition["event_date=2026-01-03/event_hour=4"].action,
            by_partition["event_date=2026-01-03/event_hour=4"].reason) == ("skipped", "already compacted")
    assert by_partition["event_date=2026-01-03/event_hour=5"].action == "compacted"  # closed by now
    assert len(data_file_names(lake, older)) == 1

    # --hour reaches outside the lookback; an hour that is not closed is refused.
    third, _ = compact(spark, lake, now=now, hour=too_old)
    assert [r.partition for r in third.of("compacted")] == ["event_date=2026-01-01/event_hour=5"]
    with pytest.raises(ValueError, match="not closed yet"):
        compact(spark, lake, now=now, hour=open_hour)


@pytest.mark.parametrize(
    ("names_sizes", "needed", "reason"),
    [
        ([], False, "no data files"),
        ([("compacted-20260101T060000Z-abcdef-00000.snappy.parquet", 10)], False, "already compacted"),
        ([("compacted-20260101T060000Z-abcdef-00000.snappy.parquet", 100),
          ("compacted-20260101T060000Z-abcdef-00001.snappy.parquet", 5)], False, "already compacted"),
        ([("part-a-b1-0.snappy.parquet", 80)], False, "one file near the target size"),
        ([("part-a-b1-0.snappy.parquet", 10)], True, "one file under the target size"),
        ([("part-a-b1-0.snappy.parquet", 10), ("part-a-b2-0.snappy.parquet", 10)], True, "2 files"),
        ([("compacted-20260101T060000Z-abcdef-00000.snappy.parquet", 100), ("part-a-b9-0.snappy.parquet", 1)],
         True, "2 files, late data since the last compaction"),
        ([("compacted-20260101T060000Z-abcdef-00000.snappy.parquet", 10),
          ("compacted-20260101T070000Z-123456-00000.snappy.parquet", 10)], True, "2 files"),
    ],
)
def test_compaction_reason(names_sizes, needed, reason):
    files = [FileInfo(path=f"/p/{n}", name=n, size=s, modified_ms=0, is_dir=False) for n, s in names_sizes]
    assert compaction_reason(files, target_file_bytes=100) == (needed, reason)


# ---- files that change while a run is going -------------------------------------------------------


def test_late_file_written_during_a_run_survives_and_is_compacted_next_time(spark, tmp_path):
    lake = tmp_path / "lake"
    write_rows(spark, lake, [[event("a"), event("b")], [event("c")]])
    late_rows = [event("late-1"), event("a", arrival_s=500, offset=500)]  # a late copy of "a" too
    late_files = []

    def write_late_file(phase, context):
        if phase == "after_plan":  # inputs are listed and journaled; the streaming job writes more
            late_files.extend(write_rows(spark, lake, [late_rows], first_batch=90))

    first, _ = compact(spark, lake, hook=write_late_file)
    late = late_files[0]
    assert late.exists() and first.of("compacted")[0].files_before == 2
    assert sorted(data_file_names(lake)) == sorted([late.name, layout.output_name(first.run_id, 0)])
    assert len(lake_rows(spark, lake)) == 5

    second, _ = compact(spark, lake, now=AFTER_HOUR + timedelta(hours=1))
    (result,) = second.of("compacted")
    assert (result.files_before, result.duplicates) == (2, 1)
    assert lake_rows(spark, lake) == expected_after_dedup([event("a"), event("b"), event("c"), *late_rows])


def test_input_rewritten_after_listing_is_kept_for_the_next_run(spark, tmp_path):
    lake = tmp_path / "lake"
    first_file, _ = write_rows(spark, lake, [[event("a")], [event("b")]])

    def replay_batch(phase, context):
        if phase == "after_commit":  # a replayed batch rewrites its file under the same name
            replacement = write_rows(spark, tmp_path / "other", [[event("a"), event("a2")]])[0]
            first_file.unlink()
            shutil.move(replacement, first_file)

    summary, _ = compact(spark, lake, hook=replay_batch)
    assert summary.of("compacted")[0].inputs_left == 1 and first_file.exists()
    compact(spark, lake, now=AFTER_HOUR + timedelta(hours=1))
    assert [r[0] for r in lake_rows(spark, lake)] == ["a", "a2", "b"]


# ---- kill tests: SIGKILL at every phase, then the next run recovers ---------------------------------

KILL_CASES = [
    ("after_plan", "rolled_back"),
    ("staging_write", "rolled_back"),
    ("after_stage", "rolled_back"),
    ("after_commit", "rolled_forward"),
    ("publish:1", "rolled_forward"),
    ("after_publish", "rolled_forward"),
    ("delete:2", "rolled_forward"),
    ("after_delete", "rolled_forward"),
    ("after_history", "rolled_forward"),
]


def test_kill_cases_cover_every_phase():
    """The partition phases here; the partitions-log phases in test_compaction_log.py."""
    assert {spec.split(":")[0] for spec, _ in KILL_CASES} == set(PHASES) - set(LOG_PHASES)


def run_cli_killed_at(lake: Path, spec: str) -> str:
    return run_compaction_killed_at(spec, "--lake", str(lake), "--hour", f"{HOUR:%Y-%m-%dT%H}", "--target-file-mb", "0.012")


@pytest.mark.e2e
@pytest.mark.parametrize(("spec", "recovery"), KILL_CASES)
def test_killed_run_is_recovered_by_the_next_run_with_every_row_once(spark, tmp_path, spec, recovery):
    lake = tmp_path / "lake"
    inputs = write_generated(spark, lake, files=4, rows_per_file=300, replays=5)
    expected = expected_after_dedup(
        [row.asDict() for row in spark.read.schema(data_schema()).parquet(*map(str, inputs)).collect()])

    output = run_cli_killed_at(lake, spec)

    published = [n for n in data_file_names(lake) if n.startswith(layout.OUTPUT_PREFIX)]
    remaining_inputs = [p for p in inputs if p.exists()]
    phase = spec.split(":")[0]
    if phase in ("after_plan", "staging_write", "after_stage", "after_commit"):
        assert not published and len(remaining_inputs) == 4
    elif phase == "publish":
        assert len(published) == 1 and len(remaining_inputs) == 4
    elif phase == "after_publish":
        assert len(published) >= 2 and len(remaining_inputs) == 4
    elif phase == "delete":  # the project's JVM functions are on the CLI's classpath, as in Glue: four inputs go in
        # four bulk calls of one path, so the kill after the second deleted input leaves exactly two
        from glue_jobs.lake.storage import BULK_DELETE_CLASS

        assert f"deleting files with {BULK_DELETE_CLASS}: one JVM call per chunk" in output
        assert len(published) >= 2 and len(remaining_inputs) == 2
    else:
        assert len(published) >= 2 and not remaining_inputs

    summary, _ = compact(spark, lake, hour=HOUR, target_bytes=int(0.012 * 1024 * 1024))

    assert [r.action for r in summary.of("rolled_forward", "rolled_back")] == [recovery]
    assert lake_rows(spark, lake) == expected
    assert not [p for p in inputs if p.exists()]
    assert all(n.startswith(layout.OUTPUT_PREFIX) for n in data_file_names(lake))
    assert_clean(lake)


