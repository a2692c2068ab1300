"""The micro-batch writer: duplicates, reconciliation, layout, replay safety, metrics (glue_jobs.batch)."""
# ruff: noqa: UP031 - JSON payload literals read better with %-formatting than with doubled f-string braces

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from pathlib import Path

import pytest

from glue_jobs.batch import BatchStats, MicroBatchWriter
from glue_jobs.metrics import METRIC_NAMES, CloudWatchMetricsSink, metric_data
from glue_jobs.schema import spark_dead_letter_schema, spark_lake_schema

from .streaming_support import json_envelope

NOW = 1_700_000_000.0
T = 1_699_999_200_000  # 2023-11-14T22:00Z


def _event(event_id, *, hour_offset=0, event_type="click"):
    return '{"event_id":"%s","event_type":"%s","event_time":%d}' % (event_id, event_type, T + hour_offset * 3_600_000)


class Recorder:
    def __init__(self):
        self.emitted = []

    def emit(self, stats):
        self.emitted.append(stats)


def _writer(spark, tmp_path, metrics=None):
    return MicroBatchWriter(
        spark, source_name="clicks", lake_path=str(tmp_path / "lake"), dead_letter_path=str(tmp_path / "dead"),
        checkpoint_path=str(tmp_path / "cp"), metrics=metrics, clock=lambda: NOW, stream_id="abcd1234",
    )


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not any(part.startswith((".", "_")) for part in p.relative_to(root).parts)
    }


PAYLOADS = [
    _event("a", event_type=" Click "),
    _event("b", hour_offset=1),
    _event("a", event_type="second-copy"),  # duplicate of a, later offset
    "not json",
    '{"event_id":"c","event_type":"x","event_time":"1"}',
    _event("d"),
]


def _payloads_envelope(spark):
    return json_envelope(spark, PAYLOADS, source="clicks", arrival_ms=int(NOW * 1000))


@pytest.fixture(scope="module")
def written(spark, tmp_path_factory):
    """PAYLOADS written once as batch 3 (one writer run the tests below share): its stats, what the metrics sink got,
    and the folder holding lake, dead and cp. Read it only; a test that changes files works on `_copy_of(written, ...)`."""
    root = tmp_path_factory.mktemp("written")
    recorder = Recorder()
    stats = _writer(spark, root, recorder)(_payloads_envelope(spark), 3)
    return stats, recorder.emitted, root


def _copy_of(written, tmp_path: Path) -> Path:
    """The committed batch 3 of `written`, copied whole (markers and checksums too) into `tmp_path`."""
    for folder in ("lake", "dead", "cp"):
        shutil.copytree(written[2] / folder, tmp_path / folder)
    return tmp_path


def test_batch_writes_lake_and_dead_letters_and_reconciles(spark, written):
    stats, emitted, tmp_path = written
    assert stats == BatchStats(
        source="clicks", batch_id=3, records_in=6, records_written=3, dead_letters=2, duplicates_collapsed=1,
        dead_letters_by_reason={"malformed_json": 1, "invalid_type": 1}, duration_ms=0, files_written=stats.files_written,
        differing_duplicates=1,  # a's second copy says "second-copy"
    )
    assert stats.reconciles and emitted == [stats]
    assert sorted(_files(tmp_path / "lake")) == [
        "event_date=2023-11-14/event_hour=22/part-clicks-abcd1234-b0000000003-0000.snappy.parquet",
        "event_date=2023-11-14/event_hour=23/part-clicks-abcd1234-b0000000003-0000.snappy.parquet",
    ]
    assert sorted(_files(tmp_path / "dead")) == [
        "ingest_date=2023-11-14/part-clicks-abcd1234-b0000000003-0000.snappy.parquet"
    ]
    lake = spark.read.schema(spark_lake_schema()).parquet(str(tmp_path / "lake"))
    assert sorted((r.event_id, r.event_type, r.source_offset, r.event_hour) for r in lake.collect()) == [
        ("a", "click", "1", 22), ("b", "click", "2", 23), ("d", "click", "6", 22)]
    dead = spark.read.schema(spark_dead_letter_schema()).parquet(str(tmp_path / "dead"))
    assert sorted((r.payload, r.reason, r.source, r.source_offset, r.batch_id, r.ingest_date) for r in dead.collect()) == [
        ("not json", "malformed_json", "clicks", "4", 3, "2023-11-14"),
        ('{"event_id":"c","event_type":"x","event_time":"1"}', "invalid_type", "clicks", "5", 3, "2023-11-14"),
    ]


def test_duplicate_keeps_the_lowest_offset_compared_as_a_number(spark, tmp_path):
    payloads = [_event("x", event_type="from-10"), _event("x", event_type="from-9"), _event("x", event_type="from-100")]
    envelope = json_envelope(spark, payloads, offsets=["10", "9", "100"])
    stats = _writer(spark, tmp_path)(envelope, 0)
    assert (stats.records_written, stats.duplicates_collapsed) == (1, 2)
    (row,) = spark.read.parquet(str(tmp_path / "lake")).collect()
    assert (row.event_type, row.source_offset) == ("from-9", "9")


def test_duplicate_keeps_the_lowest_partition_then_offset_and_unknown_positions_last(spark, tmp_path):
    no_position = json_envelope(spark, [_event("y", event_type="no-position")], partition=None, offsets=[None])
    shard_b = json_envelope(spark, [_event("y", event_type="b-1"), _event("z", event_type="b-7")], partition="b",
                            offsets=["1", "7"])
    shard_a = json_envelope(spark, [_event("y", event_type="a-5"), _event("z", event_type="a-no-offset")],
                            partition="a", offsets=["5", None])
    stats = _writer(spark, tmp_path)(no_position.unionByName(shard_b).unionByName(shard_a), 0)
    assert (stats.records_written, stats.duplicates_collapsed) == (2, 3) and stats.reconciles
    kept = {r.event_id: r.event_type for r in spark.read.parquet(str(tmp_path / "lake")).collect()}
    assert kept == {"y": "a-5", "z": "a-no-offset"}


def test_batch_of_many_partitions_writes_one_file_per_core_and_hour(spark, tmp_path):
    payloads = [_event(f"e{i}", hour_offset=i % 2) for i in range(40)]
    envelope = json_envelope(spark, payloads).repartition(8)
    stats = _writer(spark, tmp_path)(envelope, 0)
    assert (stats.records_in, stats.records_written) == (40, 40)
    per_hour = {}
    for name in _files(tmp_path / "lake"):
        per_hour.setdefault(name.rsplit("/", 1)[0], []).append(name)
    assert sorted(per_hour) == ["event_date=2023-11-14/event_hour=22", "event_date=2023-11-14/event_hour=23"]
    assert all(1 <= len(files) <= spark.sparkContext.defaultParallelism for files in per_hour.values())


def _files_per_hour(root: Path) -> dict[str, int]:
    per_hour: dict[str, int] = {}
    for name in _files(root):
        hour = name.rsplit("/", 1)[0]
        per_hour[hour] = per_hour.get(hour, 0) + 1
    return per_hour


def test_batch_over_many_even_hours_writes_each_hour_from_one_task(spark, tmp_path):
    cores = spark.sparkContext.defaultParallelism
    assert cores >= 2, "the Spark tests run on local[2]"
    payloads = [_event(f"e{i}", hour_offset=i % 8) for i in range(80)]
    stats = _writer(spark, tmp_path)(json_envelope(spark, payloads).repartition(8), 0)
    assert (stats.records_in, stats.records_written) == (80, 80) and stats.reconciles
    assert _files_per_hour(tmp_path / "lake") == {
        f"event_date=2023-11-{14 + (22 + h) // 24}/event_hour={(22 + h) % 24}": 1 for h in range(8)
    }
    assert stats.files_written == 8


@pytest.mark.parametrize("rows_per_task", [10, 50_000])
def test_batch_of_one_hour_is_written_by_a_task_per_share_of_rows_at_most_every_core(spark, tmp_path, monkeypatch, rows_per_task):
    """A write gets a task per ROWS_PER_WRITE_TASK rows, at most one per core (packed_batch.writing_tasks): a small
    batch's hour is one file, not one per core; a large one is written by every core. Dead letters alike."""
    from glue_jobs.lake import packed_batch

    monkeypatch.setattr(packed_batch, "ROWS_PER_WRITE_TASK", rows_per_task)
    payloads = [_event(f"e{i}") for i in range(40)] + ["not json"] * 12
    stats = _writer(spark, tmp_path)(json_envelope(spark, payloads).repartition(8), 0)
    assert (stats.records_in, stats.records_written, stats.dead_letters) == (52, 40, 12)
    cores = spark.sparkContext.defaultParallelism
    assert _files_per_hour(tmp_path / "lake") == {"event_date=2023-11-14/event_hour=22": cores if rows_per_task == 10 else 1}
    assert len(_files(tmp_path / "dead")) == (cores if rows_per_task == 10 else 1)


@pytest.mark.parametrize(("rows", "tasks", "expected"), [(0, 2, 1), (4_000, 2, 1), (50_000, 2, 1), (50_001, 2, 2),
                                                         (1_000_000, 2, 2), (1_000_000, 8, 8), (120_000, 8, 3)])
def test_writing_tasks_is_one_per_share_of_rows_at_most_the_cores(rows, tasks, expected):
    from glue_jobs.lake.packed_batch import ROWS_PER_WRITE_TASK, writing_tasks

    assert ROWS_PER_WRITE_TASK == 50_000
    assert writing_tasks(rows, tasks) == expected


def test_duplicate_with_copies_in_two_write_slots_is_kept_once(spark, tmp_path):
    payloads = [_event(f"e{i}", hour_offset=i % 8) for i in range(160)]  # even enough to write by slot
    payloads += [_event("dup", hour_offset=3, event_type="later-offset"), _event("dup", hour_offset=0, event_type="latest")]
    payloads.insert(0, _event("dup", hour_offset=1, event_type="first"))
    stats = _writer(spark, tmp_path)(json_envelope(spark, payloads).repartition(4), 0)
    assert (stats.records_in, stats.records_written, stats.duplicates_collapsed) == (163, 161, 2) and stats.reconciles
    # The anti join reaches every slot's branch; the losers' observation still counts each dropped copy once.
    assert stats.differing_duplicates == 2
    lake = spark.read.parquet(str(tmp_path / "lake"))
    assert [(r.event_type, r.event_hour) for r in lake.where("event_id = 'dup'").collect()] == [("first", 23)]
    assert all(count == 1 for count in _files_per_hour(tmp_path / "lake").values())


@pytest.mark.parametrize(("one_task", "inline_keys"), [(True, True), (False, True), (True, False)])
def test_duplicates_are_ranked_alike_in_one_task_or_in_every_core(spark, tmp_path, monkeypatch, one_task, inline_keys):
    """A small batch ranks its duplicates in one task, with no shuffle before the window; a large one in every core
    (packed_batch.ranking_tasks). Its candidates are picked by an IN list of key hashes in the plan, or past
    KEYS_INLINE_UP_TO by a broadcast of them. The same copies survive every way."""
    from glue_jobs.lake import dropped_copies, packed_batch
    from glue_jobs.lake.lake_table import LakeTable
    from glue_jobs.lake.packed_batch import PackedBatch

    monkeypatch.setattr(packed_batch, "RANK_IN_ONE_TASK_UP_TO", 10_000 if one_task else 0)
    monkeypatch.setattr(dropped_copies, "KEYS_INLINE_UP_TO", 10_000 if inline_keys else 1)
    payloads = [_event(f"e{i}", hour_offset=i % 3) for i in range(40)]
    payloads += [_event("e7", event_type="second"), _event("e9", event_type="second"), _event("e9", event_type="third")]
    envelope = json_envelope(spark, payloads).repartition(3)
    table = LakeTable.of("clickstream")
    with PackedBatch(table.validate(envelope, now_ms=int(NOW * 1000)), tasks=2, table=table) as batch:
        counts = batch.counts()
        rows = batch.lake_rows(counts, batch_id=0)
        plan = rows._jdf.queryExecution().executedPlan().toString()
        kept = sorted((r.event_id, r.event_type, r.source_offset) for r in rows.collect())
    assert ("Exchange hashpartitioning" in plan) is not one_task
    assert ("LeftSemi" in plan) is not inline_keys  # the IN list is a filter (an InSet past 10 hashes), not a join
    assert len(kept) == 40 and [k for k in kept if k[0] in ("e7", "e9")] == [("e7", "click", "8"), ("e9", "click", "10")]


@pytest.mark.parametrize(
    ("slot_rows", "expected"),
    [
        ((10,) * 8, True),
        ((12, 8, 10, 10, 10, 10, 10, 10), True),  # 12 <= 1.25 * 10
        ((13, 7, 10, 10, 10, 10, 10, 10), False),
        ((80, 0, 0, 0, 0, 0, 0, 0), False),  # one hour: every core writes its share of it instead
        ((0,) * 8, False),
        ((10, 10, 10, 10, 10, 10, 10, 0), True),  # seven hours over eight slots: 10 <= 1.25 * 70 / 8
        ((20, 20, 20, 20, 0, 0, 0, 0), False),  # four hours
    ],
)
def test_write_by_slot_needs_valid_rows_spread_evenly_over_the_slots(slot_rows, expected):
    from glue_jobs.lake.packed_batch import WRITE_SLOTS, write_by_slot

    assert WRITE_SLOTS == 8
    assert write_by_slot(slot_rows) is expected
    with pytest.raises(ValueError, match="expected 8 slot counts"):
        write_by_slot(slot_rows[:2])


def test_the_write_slots_do_not_change_with_the_executor_count(spark, tmp_path, monkeypatch):
    """Glue auto scaling changes the executor count between batches: which hours share a write slot, the
    slot counts and so the lake's files must not follow it."""
    from glue_jobs import batch
    from glue_jobs.lake.packed_batch import PackedBatch

    payloads = [_event(f"e{i}", hour_offset=i % 13) for i in range(104)]
    seen = {}
    counts = PackedBatch.counts

    def recording_counts(self):
        result = counts(self)
        seen[self.tasks] = result.slot_rows
        return result

    monkeypatch.setattr(PackedBatch, "counts", recording_counts)
    layouts = []
    for tasks in (1, 2, 5):
        monkeypatch.setattr(batch, "write_tasks", lambda spark, n=tasks: n)
        stats = _writer(spark, tmp_path / str(tasks))(json_envelope(spark, payloads).repartition(3), 0)
        assert (stats.records_in, stats.records_written) == (104, 104)
        layouts.append(_files_per_hour(tmp_path / str(tasks) / "lake"))
    # 13 hours over 8 slots: 5 slots hold two hours (16 rows), 3 hold one (8): 16 <= 1.25 * 104 / 8, by slot.
    assert seen == {1: seen[2], 2: seen[2], 5: seen[2]} and sorted(seen[2]) == [8] * 3 + [16] * 5
    assert layouts[0] == layouts[1] == layouts[2] and set(layouts[0].values()) == {1} and len(layouts[0]) == 13


def _column_encodings(spark, path: Path) -> dict[str, set[str]]:
    """Encodings of each column chunk, from the Parquet footer (parquet-mr in the Spark JVM)."""
    jvm = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    footer = jvm.org.apache.parquet.hadoop.ParquetFileReader.readFooter(conf, jvm.org.apache.hadoop.fs.Path(str(path)))
    encodings: dict[str, set[str]] = {}
    for block in footer.getBlocks():
        for chunk in block.getColumns():
            encodings.setdefault(chunk.getPath().toDotString(), set()).update(str(e) for e in chunk.getEncodings())
    return encodings


def test_lake_files_use_dictionaries_only_for_low_cardinality_columns(spark, tmp_path):
    _writer(spark, tmp_path)(json_envelope(spark, [_event(f"id-{i}") for i in range(20)]), 0)
    (name,) = _files(tmp_path / "lake")
    encodings = _column_encodings(spark, tmp_path / "lake" / name)
    assert "PLAIN_DICTIONARY" in encodings["event_type"] or "RLE_DICTIONARY" in encodings["event_type"]
    for unique_per_row in ("event_id", "source_offset", "event_time"):
        assert not encodings[unique_per_row] & {"PLAIN_DICTIONARY", "RLE_DICTIONARY"}, unique_per_row


def test_staging_writes_leave_no_success_marker(spark, tmp_path, monkeypatch):
    """The batch's own commit marker is what counts; Spark's _SUCCESS files in staging would only be more files."""
    from glue_jobs.commit import BatchCommit

    monkeypatch.setattr(BatchCommit, "_delete_staging", lambda self, batch_id: None)
    stats = _writer(spark, tmp_path)(json_envelope(spark, PAYLOADS, source="clicks", arrival_ms=int(NOW * 1000)), 4)
    assert stats.records_written == 3 and stats.dead_letters == 2
    staged = [p for root in ("lake", "dead") for p in (tmp_path / root / "_staging").rglob("*")]
    assert [p for p in staged if p.is_dir()], "the staging directories were kept for inspection"
    assert [p.name for p in staged if p.name == "_SUCCESS"] == []
    assert (tmp_path / "cp" / "_streamlake" / "batch-0000000004.committed.json").exists()


def test_replayed_batch_after_commit_writes_nothing_again(spark, tmp_path, written):
    first = written[0]
    _copy_of(written, tmp_path)  # batch 3 committed
    before = _files(tmp_path / "lake") | _files(tmp_path / "dead")
    assert before
    again = _writer(spark, tmp_path)(_payloads_envelope(spark), 3)
    assert again.replayed and again.records_in == first.records_in
    assert _files(tmp_path / "lake") | _files(tmp_path / "dead") == before


def test_replay_after_a_crash_mid_publish_leaves_identical_files(spark, tmp_path, written):
    """Crash after some files moved: no commit marker, a manifest, a half-moved staging dir."""
    _copy_of(written, tmp_path)  # batch 3 written
    expected = _files(tmp_path / "lake") | _files(tmp_path / "dead")
    state = tmp_path / "cp" / "_streamlake"
    committed = state / "batch-0000000003.committed.json"
    finals = [str(p) for root in ("lake", "dead") for p in sorted((tmp_path / root).rglob("part-*.parquet"))]
    committed.unlink()
    (state / "batch-0000000003.manifest.json").write_text(json.dumps({"files": [{"staged": "gone", "final": f} for f in finals]}))
    # One file of the interrupted publish was already moved; junk is left in staging.
    junk = tmp_path / "lake" / "_staging" / "clicks" / "batch=3" / "event_date=2023-11-14" / "event_hour=22"
    junk.mkdir(parents=True)
    (junk / "part-00000-junk.c000.snappy.parquet").write_bytes(b"partial")

    stats = _writer(spark, tmp_path)(_payloads_envelope(spark), 3)
    assert not stats.replayed and stats.records_written == 3
    assert _files(tmp_path / "lake") | _files(tmp_path / "dead") == expected
    assert not (tmp_path / "lake" / "_staging" / "clicks" / "batch=3").exists()
    assert committed.exists() and not (state / "batch-0000000003.manifest.json").exists()
    assert spark.read.parquet(str(tmp_path / "lake")).count() == 3


def test_a_commit_marker_cut_off_while_written_is_redone_not_trusted(spark, tmp_path, written):
    """Killed while the marker was being written (a local file is visible before it is closed): the publish
    manifest is still there, so the replay removes the published files and writes the batch again once."""
    _copy_of(written, tmp_path)  # batch 3 written
    expected = _files(tmp_path / "lake") | _files(tmp_path / "dead")
    state = tmp_path / "cp" / "_streamlake"
    finals = [str(p) for root in ("lake", "dead") for p in sorted((tmp_path / root).rglob("part-*.parquet"))]
    (state / "batch-0000000003.manifest.json").write_text(json.dumps({"files": [{"staged": "gone", "final": f} for f in finals]}))
    committed = state / "batch-0000000003.committed.json"
    recorded = json.loads(committed.read_text())
    committed.write_text(committed.read_text()[:17])
    (state / ".batch-0000000003.committed.json.crc").unlink()  # its checksum was of the whole text

    stats = _writer(spark, tmp_path)(_payloads_envelope(spark), 3)
    assert not stats.replayed and stats.records_written == 3 and stats.dead_letters == 2
    assert _files(tmp_path / "lake") | _files(tmp_path / "dead") == expected
    redone = json.loads(committed.read_text())
    assert {k: redone[k] for k in ("records_in", "records_written", "dead_letters", "duplicates_collapsed")} == {
        k: recorded[k] for k in ("records_in", "records_written", "dead_letters", "duplicates_collapsed")}
    assert spark.read.parquet(str(tmp_path / "lake")).count() == 3


def test_empty_batch_writes_no_files(spark, tmp_path):
    stats = _writer(spark, tmp_path)(json_envelope(spark, []), 0)
    assert (stats.records_in, stats.files_written, stats.reconciles) == (0, 0, True)
    assert not (tmp_path / "lake").exists() or _files(tmp_path / "lake") == {}


def test_stream_id_comes_from_the_checkpoint_metadata(spark, tmp_path):
    (tmp_path / "cp").mkdir()
    (tmp_path / "cp" / "metadata").write_text('{"id":"5fa5ceb7-1111-2222-3333-444455556666"}\n')
    writer = MicroBatchWriter(spark, source_name="s", lake_path=str(tmp_path / "l"), dead_letter_path=str(tmp_path / "d"),
                              checkpoint_path=str(tmp_path / "cp"))
    assert writer.stream_id == "5fa5ceb7"


def test_cloudwatch_metric_data_names_dimensions_and_units():
    stats = BatchStats(source="clicks", batch_id=1, records_in=10, records_written=7, dead_letters=2,
                       duplicates_collapsed=1, duration_ms=1500)
    data = metric_data(stats, "prod")
    assert [(d["MetricName"], d["Value"], d["Unit"]) for d in data] == [
        ("RecordsIn", 10.0, "Count"), ("RecordsWritten", 7.0, "Count"), ("DeadLetters", 2.0, "Count"),
        ("DuplicatesCollapsed", 1.0, "Count"), ("BatchDurationMs", 1500.0, "Milliseconds")]
    assert {tuple((x["Name"], x["Value"]) for x in d["Dimensions"]) for d in data} == {
        (("Source", "clicks"), ("Environment", "prod"))}
    assert METRIC_NAMES == tuple(d["MetricName"] for d in data)
    # Frame anomalies the Kinesis adapter worked around: published only when there were any.
    noted = metric_data(dataclasses.replace(stats, frame_anomalies=2), "prod")
    assert [(d["MetricName"], d["Value"]) for d in noted[len(data):]] == [("FrameAnomalies", 2.0)]


def test_cloudwatch_sink_publishes_through_the_client_and_never_raises():
    calls = []

    class Client:
        def put_metric_data(self, **kwargs):
            calls.append(kwargs)
            raise RuntimeError("throttled")

    stats = BatchStats(source="s", batch_id=0, records_in=1, records_written=1, dead_letters=0, duplicates_collapsed=0)
    CloudWatchMetricsSink(environment="dev", client=Client()).emit(stats)
    assert calls[0]["Namespace"] == "StreamLake" and len(calls[0]["MetricData"]) == 5


@pytest.mark.skipif(os.name != "posix", reason="POSIX paths")
def test_monitoring_alarms_use_the_metric_names_the_job_emits():
    """infra/monitoring.py is parsed, not imported (this venv may not have the CDK): it takes the namespace and
    the names it alarms on from this module, and writes none of them out again."""
    import ast

    from glue_jobs import metrics

    tree = ast.parse((Path(__file__).resolve().parents[2] / "infra" / "monitoring.py").read_text())
    imported = {(node.module, alias.name) for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                for alias in node.names}
    for name in ("RECORDS_IN", "RECORDS_WRITTEN", "DEAD_LETTERS", "BATCH_DURATION_MS", "METRICS_NAMESPACE"):
        assert ("glue_jobs.metrics", name) in imported and hasattr(metrics, name), name
    literals = {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)}
    assert not literals & {*METRIC_NAMES, metrics.METRICS_NAMESPACE}


def test_dead_letter_ingest_date_is_the_utc_arrival_date_or_else_the_processing_date(spark):
    from pyspark.sql import functions as F

    from glue_jobs.lake.lake_table import LakeTable
    from glue_jobs.lake.packed_batch import PackedBatch

    validate = LakeTable.of("clickstream").validate

    last_ms_of_day = 1_700_006_399_999  # 2023-11-14T23:59:59.999Z
    envelope = json_envelope(spark, ["not json", "{}"], arrival_ms=last_ms_of_day)
    envelope = envelope.withColumn(
        "arrival_time", F.when(F.col("source_offset") == "2", F.lit(None).cast("timestamp")).otherwise(F.col("arrival_time"))
    )
    with PackedBatch(validate(envelope, now_ms=int(NOW * 1000)), tasks=2) as batch:
        dead = batch.dead_letters(batch.counts(), batch_id=4, processing_date="2030-01-02").collect()
    assert sorted((r.source_offset, r.reason, r.batch_id, str(r.ingest_date)) for r in dead) == [
        ("1", "malformed_json", 4, "2023-11-14"),
        ("2", "missing_required_field", 4, "2030-01-02"),
    ]


def test_the_batch_shuffles_into_one_partition_per_core_and_restores_the_session(spark, tmp_path, monkeypatch):
    """Inside a streaming query adaptive execution is off, so Spark's 200 shuffle partitions would stay 200 (a
    400-record batch took 6 s in the deploy rehearsal): the batch plans its shuffles with one per core."""
    from glue_jobs import batch
    from glue_jobs.lake.packed_batch import PackedBatch

    seen = []
    counts = PackedBatch.counts

    def recording_counts(self):
        seen.append(self._frame.sparkSession.conf.get(batch.SHUFFLE_PARTITIONS))
        return counts(self)

    monkeypatch.setattr(PackedBatch, "counts", recording_counts)
    envelope = json_envelope(spark, PAYLOADS)
    session = envelope.sparkSession
    before = session.conf.get(batch.SHUFFLE_PARTITIONS)
    session.conf.set(batch.SHUFFLE_PARTITIONS, "200")
    try:
        stats = _writer(spark, tmp_path)(envelope, 1)
        assert session.conf.get(batch.SHUFFLE_PARTITIONS) == "200"
    finally:
        session.conf.set(batch.SHUFFLE_PARTITIONS, before)
    cores = spark.sparkContext.defaultParallelism
    assert seen == [str(cores)] and stats.records_written == 3


def test_each_batch_records_its_lake_partitions_after_publishing_and_before_committing(spark, tmp_path):
    """The partitions log entry (glue_jobs/lake/partitions_log.py) names the hours the batch's lake files went to;
    it is written after the files are published and before the commit marker, and a replay rewrites it."""
    writer = _writer(spark, tmp_path)
    order = []
    real_write, real_rename = writer.storage.write_text, writer.storage.rename_files

    def write_text(path, text):
        order.append(path.rsplit("/", 2)[-2] + "/" + path.rsplit("/", 1)[-1])
        if path.endswith(".committed.json"):
            raise OSError("killed before the commit marker")
        real_write(path, text)

    writer.storage.write_text = write_text
    writer.storage.rename_files = lambda moves, **kw: (order.append("publish"), real_rename(moves, **kw))[1]
    with pytest.raises(OSError, match="killed before the commit marker"):
        writer(json_envelope(spark, PAYLOADS, source="clicks", arrival_ms=int(NOW * 1000)), 3)
    assert order == ["_streamlake/batch-0000000003.manifest.json", "publish", "clicks/abcd1234-b0000000003.json",
                     "_streamlake/batch-0000000003.committed.json"]
    entry = tmp_path / "lake" / "_partitions" / "clicks" / "abcd1234-b0000000003.json"
    expected = {"format": 1, "source": "clicks", "stream_id": "abcd1234", "batch_id": 3,
                "partitions": ["event_date=2023-11-14/event_hour=22", "event_date=2023-11-14/event_hour=23"]}
    assert json.loads(entry.read_text()) == expected

    replayed = _writer(spark, tmp_path)(json_envelope(spark, PAYLOADS, source="clicks", arrival_ms=int(NOW * 1000)), 3)
    assert replayed.records_written == 3 and not replayed.replayed
    assert json.loads(entry.read_text()) == expected
    assert [p.name for p in entry.parent.iterdir() if not p.name.startswith(".")] == [entry.name]

    only_invalid = _writer(spark, tmp_path)(json_envelope(spark, ["not json"], source="clicks"), 4)
    assert only_invalid.records_written == 0
    assert not (entry.parent / "abcd1234-b0000000004.json").exists()  # no lake file, no entry


def test_two_sources_feeding_one_dataset_never_share_staging_names_or_markers(spark, tmp_path):
    """Several sources may carry one dataset: each writes into the dataset's lake with its own staging
    directories, file names, partitions-log entries and markers, so the same batch id from both never collides."""
    writers = {
        source: MicroBatchWriter(spark, source_name=source, lake_path=str(tmp_path / "lake"), dead_letter_path=str(tmp_path / "dead"),
                                 checkpoint_path=str(tmp_path / f"cp-{source}"), clock=lambda: NOW, stream_id="abcd1234")
        for source in ("web", "app")
    }
    assert writers["web"].commit.lake_staging(0) != writers["app"].commit.lake_staging(0)
    assert writers["web"].commit.dead_letter_staging(0) != writers["app"].commit.dead_letter_staging(0)
    stats = {source: writer(json_envelope(spark, [_event(f"{source}-1"), "not json"], source=source), 0)
             for source, writer in writers.items()}
    assert {s: (st.records_written, st.dead_letters) for s, st in stats.items()} == {"web": (1, 1), "app": (1, 1)}
    lake = sorted(p.name for p in (tmp_path / "lake").rglob("*.parquet") if "_" not in p.parent.name[:1])
    assert lake == ["part-app-abcd1234-b0000000000-0000.snappy.parquet", "part-web-abcd1234-b0000000000-0000.snappy.parquet"]
    assert sorted(r.event_id for r in spark.read.parquet(str(tmp_path / "lake")).collect()) == ["app-1", "web-1"]
    assert spark.read.parquet(str(tmp_path / "dead")).count() == 2


def test_a_batch_reports_its_dataset_freshness_and_publishes_it_per_dataset(spark, tmp_path, written):
    """The newest event time written (T + 1 hour here) against the processing time (NOW): the freshness metric,
    published with the Dataset dimension; a batch that writes no row publishes none."""
    stats = written[0]
    assert stats.dataset == "clickstream"
    assert stats.newest_event_age_seconds == pytest.approx(NOW - (T + 3_600_000) / 1000)
    data = metric_data(stats, "dev")
    (freshness,) = [d for d in data if d["MetricName"] == "NewestEventAgeSeconds"]
    assert freshness["Dimensions"] == [{"Name": "Dataset", "Value": "clickstream"}, {"Name": "Environment", "Value": "dev"}]
    assert freshness["Unit"] == "Seconds" and freshness["Value"] == pytest.approx(stats.newest_event_age_seconds)
    rejected_only = _writer(spark, tmp_path / "other")(json_envelope(spark, ["not json"], source="clicks"), 0)
    assert rejected_only.newest_event_age_seconds is None
    assert "NewestEventAgeSeconds" not in {d["MetricName"] for d in metric_data(rejected_only, "dev")}


def test_a_batch_reports_how_long_its_oldest_record_waited_in_the_source(spark, tmp_path):
    """ArrivalLagMs: processing time minus the earliest arrival time of any row, valid or not (the Kafka jobs'
    consumer-lag metric); a batch that read nothing publishes none."""
    arrival_ms = int(NOW * 1000) - 90_000
    stats = _writer(spark, tmp_path)(json_envelope(spark, [*PAYLOADS, "not json"], source="clicks", arrival_ms=arrival_ms), 4)
    assert stats.arrival_lag_ms == 90_000
    (lag,) = [d for d in metric_data(stats, "dev") if d["MetricName"] == "ArrivalLagMs"]
    assert lag["Unit"] == "Milliseconds" and lag["Value"] == 90_000.0
    assert lag["Dimensions"] == [{"Name": "Source", "Value": "clicks"}, {"Name": "Environment", "Value": "dev"}]
    empty = BatchStats(source="clicks", batch_id=5, records_in=0, records_written=0, dead_letters=0, duplicates_collapsed=0)
    assert "ArrivalLagMs" not in {d["MetricName"] for d in metric_data(empty, "dev")}


def test_the_batch_reads_its_cache_as_one_plan_node(spark):
    """PackedBatch's queries (counts, lake rows, dead letters) are planned on the cache's own node, not on the
    validation's plan beneath it, on every Spark line the project runs; the rows are the persisted frame's."""
    from glue_jobs.lake.lake_table import LakeTable
    from glue_jobs.lake.packed_batch import PackedBatch

    validate = LakeTable.of("clickstream").validate

    validated = validate(json_envelope(spark, [*PAYLOADS, "not json"]), now_ms=int(NOW * 1000))
    rejected = validated.filter("reason IS NOT NULL").count()
    assert rejected >= 1
    with PackedBatch(validated, tasks=2) as batch:
        analyzed = batch._frame._jdf.queryExecution().analyzed()
        assert analyzed.getClass().getSimpleName() == "InMemoryRelation"
        assert analyzed.children().isEmpty()
        assert sorted(map(repr, batch._frame.collect())) == sorted(map(repr, batch._persisted.collect()))
        counts = batch.counts()
        assert (counts.records_in, counts.rejected) == (len(PAYLOADS) + 1, rejected)
        assert batch._persisted.storageLevel.useMemory
    assert not batch._persisted.is_cached


@pytest.mark.parametrize("partitions, stages", [(1, 1), (2, 3)])
def test_a_batch_cached_in_one_partition_is_counted_in_one_stage(spark, tmp_path, partitions, stages):
    """The counts' two aggregations need no exchange over a cache of one partition (cache_leaf.one_stage): its job runs
    one stage, not three, and counts what the three stages count over the same records in two partitions. The records
    come from files, one partition each (a scan Spark does not know as a single partition, as a source's batch).
    Adaptive execution off, as in a streaming query's batch (with it on, Spark 3.5 fills the cache in a job of its own)."""
    import uuid

    from glue_jobs.lake.lake_table import LakeTable
    from glue_jobs.lake.packed_batch import PackedBatch
    from glue_jobs.session import session_conf
    from glue_jobs.sources import from_local_files

    for number in range(partitions):
        (tmp_path / f"part-{number}.json").write_text("".join(f"{p}\n" for p in PAYLOADS[number::partitions]))
    envelope = from_local_files(spark.read.option("wholetext", "true").text(str(tmp_path)), "clicks", int(NOW * 1000))
    assert envelope.rdd.getNumPartitions() == partitions
    context, group = spark.sparkContext, f"counts-{uuid.uuid4().hex}"
    validated = LakeTable.of("clickstream").validate(envelope, now_ms=int(NOW * 1000))
    with session_conf(spark, {"spark.sql.adaptive.enabled": "false"}), PackedBatch(validated, tasks=2) as batch:
        context.setJobGroup(group, "the counts")
        try:
            counts = batch.counts()
        finally:
            context.setLocalProperty("spark.jobGroup.id", None)
    tracker = context.statusTracker()
    (job,) = tracker.getJobIdsForGroup(group)
    assert len(tracker.getJobInfo(job).stageIds) == stages
    assert (counts.records_in, counts.valid, counts.by_reason, len(json.loads(counts.duplicate_keys))) == (
        6, 4, {"malformed_json": 1, "invalid_type": 1}, 1)


def test_a_frame_that_is_no_cache_is_counted_as_it_is_and_said_once(spark, caplog, monkeypatch):
    """one_stage reads the partitions of a cache; handed anything else (the persisted frame, where the cache's node was
    not reachable), it leaves the frame alone and logs it once."""
    import logging

    from glue_jobs.lake import cache_leaf

    monkeypatch.setattr(cache_leaf, "_WARNED", set())
    frame = spark.range(5).coalesce(1)
    with caplog.at_level(logging.WARNING, logger="glue_jobs.lake.packed_batch"):
        assert cache_leaf.one_stage(frame) is frame and cache_leaf.one_stage(frame) is frame
    assert caplog.text.count("counted in three stages") == 1


def test_a_kinesis_batch_counts_the_payloads_holding_a_replacement_character(spark, tmp_path):
    """Glue hands the job Kinesis records as text (inferSchema=true): a byte that was not UTF-8 may arrive as U+FFFD
    (unverified: no AWS page says what its reader does), where the job cannot tell it from one a producer sent. So the
    Kinesis job counts them (count_replacements: glue_entry sets it for Kinesis), valid and dead letters alike, and
    publishes ReplacementCharacters per source; the records themselves are judged as they arrive."""
    payloads = [_event("a", event_type="cu\ufffd("), _event("b"), '{"broken\ufffd', _event("c", event_type="x\ufffd")]
    writer = MicroBatchWriter(spark, source_name="clicks", lake_path=str(tmp_path / "lake"), dead_letter_path=str(tmp_path / "dead"),
                              checkpoint_path=str(tmp_path / "cp"), clock=lambda: NOW, stream_id="abcd1234", count_replacements=True)
    stats = writer(json_envelope(spark, payloads), 0)
    assert (stats.records_written, stats.dead_letters, stats.replacement_characters) == (3, 1, 3)
    [metric] = [m for m in metric_data(stats, "dev") if m["MetricName"] == "ReplacementCharacters"]
    assert metric["Value"] == 3 and {"Name": "Source", "Value": "clicks"} in metric["Dimensions"]
    plain = _writer(spark, tmp_path / "plain")(json_envelope(spark, payloads), 0)
    assert plain.replacement_characters == 0 and "ReplacementCharacters" not in {m["MetricName"] for m in metric_data(plain, "dev")}


def test_a_record_no_write_takes_is_a_dead_letter_and_the_batch_commits(spark, tmp_path, monkeypatch):
    """A valid record whose lake write fails every time (injected: the write raises for its event_id, as Spark 3.x's
    ancient-date refusal did) would fail its batch on every retry. The batch finds it by bisection and dead-letters
    it and its copies (reason unwritable, payload as sent); every other record is written once, the counts reconcile."""
    from glue_jobs.commit import crash_points

    monkeypatch.setenv(crash_points.UNWRITABLE_ENV, "bad")
    payloads = [_event(i) for i in ("a", "b", "bad", "c", "d")] + [_event("bad", event_type="copy"), _event("e"), "{oops"]
    recorder = Recorder()
    stats = _writer(spark, tmp_path, recorder)(json_envelope(spark, payloads), 0)
    assert (stats.records_written, stats.dead_letters, stats.duplicates_collapsed) == (5, 3, 0) and stats.reconciles
    assert stats.dead_letters_by_reason == {"malformed_json": 1, "unwritable": 2}
    lake = spark.read.schema(spark_lake_schema()).parquet(str(tmp_path / "lake"))
    assert sorted(r.event_id for r in lake.select("event_id").collect()) == ["a", "b", "c", "d", "e"]
    dead = spark.read.schema(spark_dead_letter_schema()).parquet(str(tmp_path / "dead")).filter("reason = 'unwritable'").collect()
    assert sorted(r.payload for r in dead) == sorted(payloads[i] for i in (2, 5))
    assert all("no retry can write it" in r.detail and "cannot be written" in r.detail for r in dead)
    assert not list((tmp_path / "lake").rglob("_probe"))


def test_a_write_that_fails_for_every_record_is_not_blamed_on_one(spark, tmp_path, monkeypatch):
    """No probe writes (the sink fails, not a record): the batch fails as it did, nothing is published or dead-lettered."""
    from glue_jobs.commit import crash_points

    monkeypatch.setenv(crash_points.UNWRITABLE_ENV, "bad")
    with pytest.raises(Exception, match="cannot be written"):
        _writer(spark, tmp_path)(json_envelope(spark, [_event("bad")]), 0)
    assert not list((tmp_path / "lake").rglob("*.parquet")) and not list((tmp_path / "dead").rglob("*.parquet"))


def test_the_bisection_finds_each_row_no_write_takes_and_blames_none_when_none_writes():
    from glue_jobs.lake.unwritable import MAX_UNWRITABLE, bisect

    calls = []

    def probe_refusing(bad):
        def probe(low, high):
            calls.append((low, high))
            if any(low <= b <= high for b in bad):
                raise RuntimeError(f"refused {low}..{high}")
        return probe

    ids = list(range(0, 2000, 2))  # row ids are increasing, not dense
    assert bisect(ids, probe_refusing({})) == ([], None) and calls == [(0, 1998)]
    failing, last = bisect(ids, probe_refusing({10, 1500}))
    assert failing == [10, 1500] and str(last) == "refused 1500..1500"
    assert len(calls) - 1 < 4 * 10 + 2  # about two probes per level per bad row: log2(1000) = 10 levels
    with pytest.raises(RuntimeError, match="no probe wrote"):
        bisect([4], probe_refusing({4}))
    with pytest.raises(RuntimeError, match=f"more than {MAX_UNWRITABLE}"):
        bisect(ids, probe_refusing(set(ids[:MAX_UNWRITABLE + 1])))


def test_a_write_failed_by_its_query_stopping_is_raised_without_probing(spark):
    """A query's stop (Spark's MicroBatchExecution.stop) cancels its job group, then interrupts its thread: the batch's
    write fails with the job cancelled. No record is to blame: nothing is probed (the stop is not held up by a search
    that rewrites the batch) and the error is raised, so the batch is not committed and replays. Here a real job is
    cancelled as a stop cancels it; a record's failure is still searched for (the tests above)."""
    import threading
    import time

    from glue_jobs.lake.unwritable import QueryStopped, isolate, query_stopping, stops_seen

    context, group, failed = spark.sparkContext, "test-a-stopping-query", []

    def long_job() -> None:
        context.setJobGroup(group, "a job cancelled as a query's stop cancels it", interruptOnCancel=True)
        try:
            # Long enough to be running when it is cancelled, short enough (about 20 s here) that a cancellation
            # that never came would fail the assertions below instead of hanging the run.
            spark.range(0, 10**11, numPartitions=2).selectExpr("sum(id)").collect()
        except Exception as error:  # noqa: BLE001 - the cancellation is what the test looks at
            failed.append(error)

    worker = threading.Thread(target=long_job, daemon=True)
    worker.start()
    deadline = time.monotonic() + 60
    while not context.statusTracker().getJobIdsForGroup(group) and time.monotonic() < deadline:
        time.sleep(0.05)
    context.cancelJobGroup(group)
    worker.join(60)
    assert len(failed) == 1 and query_stopping(failed[0])
    probed: list[tuple[int, int]] = []
    with pytest.raises(type(failed[0])) as raised:
        isolate(None, 7, failed[0], lambda low, high: probed.append((low, high)))
    assert raised.value is failed[0] and not probed

    with pytest.raises(Exception) as refused:  # noqa: PT011 - the class differs between Spark lines
        spark.range(1).selectExpr("raise_error('a record cannot be written')").collect()
    assert not query_stopping(refused.value)
    assert not query_stopping(RuntimeError("Job 3 cancelled part of cancelled job group"))  # no Java side: not known

    # What Spark itself makes of the batch function's error: py4j hands it the Python traceback as a Py4JException's text,
    # and StreamExecution.isInterruptionException decides whether a TERMINATED query stopped or failed (unwritable.STOP_TEXT).
    with pytest.raises(QueryStopped) as stopped, stops_seen(7, "clicks"):
        raise failed[0]
    with pytest.raises(type(refused.value)) as passed_on, stops_seen(7, "clicks"):
        raise refused.value
    assert passed_on.value is refused.value
    assert spark_counts_as_stop(spark, stopped.value)
    assert not spark_counts_as_stop(spark, refused.value)
    if spark.version < "4":  # the defect QueryStopped mends: before 4.1 a cancelled job's own text is a failure, not a stop
        assert not spark_counts_as_stop(spark, failed[0])


def spark_counts_as_stop(spark, error: BaseException) -> bool:
    """Spark's own verdict on a Python foreachBatch function that raised `error`, as the query thread gets it: py4j sends
    the JVM `traceback.format_exc()` (clientserver.py `_call_proxy`) in a Py4JException ("An exception was raised by the
    Python Proxy. Return Message: ", py4j Protocol.getReturnValue), and StreamExecution.isInterruptionException reads it
    (in execution.streaming on 3.3 and 3.5, execution.streaming.runtime on 4.1, the lines this project tests)."""
    import traceback

    jvm = spark.sparkContext._jvm
    try:
        raise error
    except BaseException:  # noqa: BLE001 - the traceback text is what py4j sends
        text = traceback.format_exc()
    proxied = jvm.py4j.Py4JException("An exception was raised by the Python Proxy. Return Message: " + text)
    package = "org.apache.spark.sql.execution.streaming" + (".runtime" if spark.version >= "4" else "")
    return bool(getattr(jvm, f"{package}.StreamExecution").isInterruptionException(proxied, spark.sparkContext._jsc.sc()))


def test_a_query_stopped_mid_write_stops_clean_and_its_restart_writes_each_record_once(spark, tmp_path, monkeypatch, caplog):
    """The stop as a query meets it: the batch's lake write is running a Spark job when `query.stop()` comes (the test
    holds the write in a long job of the query's own job group). Nothing is probed or published, the query ends as stopped
    (no error), and the query started again on the same checkpoint writes every record once."""
    import logging
    import threading
    import time
    import types
    import uuid

    from glue_jobs.sources import from_local_files

    inputs, checkpoint = tmp_path / "in", tmp_path / "cp"
    inputs.mkdir()
    checkpoint.mkdir()
    (checkpoint / "metadata").write_text(json.dumps({"id": str(uuid.uuid4())}) + "\n")
    (inputs / "0.json").write_text("\n".join(_event(i) for i in ("a", "b", "c")) + "\n")
    writing, original = threading.Event(), MicroBatchWriter._write_lake

    def held_first_time(self, *args, **kwargs):
        if not writing.is_set():
            writing.set()  # a job the stop cancels: it runs in the batch's thread, in the query's job group (finite, as above);
            # three tasks, which no other stage of this test has, so the test waits for this job and no other
            self.spark.range(0, 10**11, numPartitions=3).selectExpr("sum(id)").collect()
        return original(self, *args, **kwargs)

    def start():
        writer = MicroBatchWriter(spark, source_name="clicks", lake_path=str(tmp_path / "lake"),
                                  dead_letter_path=str(tmp_path / "dead"), checkpoint_path=str(checkpoint))
        stream = spark.readStream.format("text").option("wholetext", "true").load(str(inputs))
        return stream.writeStream.foreachBatch(
            lambda raw, batch_id: writer(from_local_files(raw, "clicks", int(time.time() * 1000)), batch_id)).option(
            "checkpointLocation", str(checkpoint)).start()

    monkeypatch.setattr(MicroBatchWriter, "_write_lake", held_first_time)
    caplog.set_level(logging.INFO, logger="glue_jobs")
    query = start()
    tracker, deadline = spark.sparkContext.statusTracker(), time.monotonic() + 120

    def held() -> bool:  # the held job's stage is running (an active job seen by the tracker may be one just ended)
        return any((tracker.getStageInfo(stage) or types.SimpleNamespace(numTasks=0)).numTasks == 3
                   for stage in tracker.getActiveStageIds())

    while not (writing.is_set() and held()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert writing.is_set() and held(), "the batch's lake write never started its held job"
    query.stop()
    # Clean whichever of the stop's cancellation or interrupt reached the batch first (unwritable.QueryStopped; before it,
    # 1 run in 7 ended with the cancelled job's error).
    assert query.exception() is None
    assert any("as a query's stop does" in r.getMessage() for r in caplog.records)
    assert not any("looking for records" in r.getMessage() for r in caplog.records)
    assert not list((tmp_path / "lake").rglob("*.parquet"))

    monkeypatch.setattr(MicroBatchWriter, "_write_lake", original)
    query = start()
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    lake = spark.read.schema(spark_lake_schema()).parquet(str(tmp_path / "lake"))
    assert sorted(r.event_id for r in lake.select("event_id").collect()) == ["a", "b", "c"]
