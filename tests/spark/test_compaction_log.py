"""Compaction driven by the partitions log: late data of any age is compacted and deduplicated.

The lake here is written by the streaming job's own MicroBatchWriter, so it carries the partitions log the
default run reads (glue_jobs/lake/partitions_log.py): events three weeks old, one file per hour per micro-batch.
"""

from __future__ import annotations

import math
import shutil
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from compaction import layout
from compaction.faults import LOG_PHASES, FaultInjector
from compaction.job import Compactor
from compaction.metrics import LogMetricSink
from compaction.settings import CompactionSettings
from compaction.transforms import data_schema
from glue_jobs.batch import MicroBatchWriter
from glue_jobs.lake.partitions_log import LOG_DIR

from .compaction_support import run_compaction_killed_at
from .streaming_support import json_envelope

NOW = datetime(2026, 1, 22, 12, tzinfo=timezone.utc)  # the streaming job's clock and compaction's "now"
OLD_HOURS = [datetime(2026, 1, 1, h, tzinfo=timezone.utc) for h in (3, 4, 5)]  # three weeks before NOW
# 6 micro-batches, each with 6 events in each of the three hours; a run killed after advancing 5 entries (the
# log_advance:5 kill case) leaves one. Each batch is a streaming write of its own, the cost of this module's setup.
BATCHES, PER_HOUR = 6, 6
TARGET_BYTES = 12 * 1024


def _payload(event_id: str, hour: datetime, minute: int) -> str:
    millis = int((hour + timedelta(minutes=minute)).timestamp() * 1000)
    return f'{{"event_id":"{event_id}","event_type":"click","event_time":{millis},"user_id":"u-{event_id}"}}'


def _stream_old_events(spark, root: Path) -> set[str]:
    """Write BATCHES micro-batches through the streaming writer; the last batch repeats two earlier ids
    (a producer retry). Returns every distinct event id."""
    ids = set()
    writer = MicroBatchWriter(spark, source_name="clickstream", lake_path=str(root / "lake"),
                              dead_letter_path=str(root / "dead"), checkpoint_path=str(root / "cp"),
                              clock=NOW.timestamp, stream_id="0a1b2c3d")
    for batch in range(BATCHES):
        payloads = []
        for hour in OLD_HOURS:
            for i in range(PER_HOUR):
                event_id = f"e-{hour:%H}-{batch}-{i}"
                ids.add(event_id)
                payloads.append(_payload(event_id, hour, i + batch))
        if batch == BATCHES - 1:
            payloads += [_payload("e-03-0-0", OLD_HOURS[0], 0), _payload("e-05-1-1", OLD_HOURS[2], 2)]
        stats = writer(json_envelope(spark, payloads, source="clickstream", arrival_ms=int(NOW.timestamp() * 1000)), batch)
        # The retried ids repeat earlier batches, not this one: the streaming job writes them; compaction drops them.
        assert (stats.records_written, stats.dead_letters) == (len(payloads), 0)
    return ids


@pytest.fixture(scope="module")
def streamed_lake(spark, tmp_path_factory) -> tuple[Path, set[str]]:
    root = tmp_path_factory.mktemp("streamed")
    return root / "lake", _stream_old_events(spark, root)


def _copy(streamed: Path, tmp_path: Path) -> Path:
    lake = tmp_path / "lake"
    shutil.copytree(streamed, lake)
    return lake


def _hour_files(lake: Path) -> dict[str, list[Path]]:
    return {f"{d.name}/{h.name}": sorted(p for p in h.iterdir() if layout.is_data_file(p.name))
            for d in sorted(lake.glob("event_date=*")) for h in sorted(d.glob("event_hour=*"))}


def _entries(lake: Path) -> list[Path]:
    return sorted((lake / LOG_DIR).rglob("*.json"))


def _event_ids(spark, lake: Path) -> list[str]:
    files = [str(p) for files in _hour_files(lake).values() for p in files]
    return sorted(r.event_id for r in spark.read.schema(data_schema()).parquet(*files).select("event_id").collect())


def _run(spark, lake: Path, **kw) -> Compactor:
    settings = CompactionSettings(lake_path=str(lake), target_file_bytes=TARGET_BYTES, delete_threads=2, **kw)
    return Compactor(spark, settings, sink=LogMetricSink("test"), faults=FaultInjector(""), now=NOW)


def test_three_week_old_events_are_compacted_and_deduplicated_by_one_default_run(spark, streamed_lake, tmp_path):
    streamed, ids = streamed_lake
    lake = _copy(streamed, tmp_path)
    before = _hour_files(lake)
    assert [len(files) for files in before.values()] == [BATCHES] * 3  # one file per hour per micro-batch
    assert len(_entries(lake)) == BATCHES
    bytes_before = {hour: sum(p.stat().st_size for p in files) for hour, files in before.items()}

    compactor = _run(spark, lake)  # the defaults: lookback 48 h, so these hours are far outside it
    lake_listings, entry_reads = [], []  # listings of the lake outside the hidden areas; log entries read
    storage = compactor.storage
    listing, read_text = storage.list, storage.read_text  # every listing, a directory's or a glob's

    def record(path):
        if "/_" not in path.split("/lake", 1)[-1]:
            lake_listings.append(path.split("/lake", 1)[-1])

    storage.list = lambda path, **kw: (record(path), listing(path, **kw))[1]
    storage.read_text = lambda path: (entry_reads.append(path) if f"/{LOG_DIR}/" in path else None, read_text(path))[1]
    summary = compactor.run()

    assert sorted(r.partition for r in summary.of("compacted")) == sorted(before)
    after = _hour_files(lake)
    for hour, files in after.items():
        assert 1 <= len(files) <= math.ceil(bytes_before[hour] / TARGET_BYTES), hour
        assert all(p.name.startswith(layout.OUTPUT_PREFIX) for p in files)
    assert _event_ids(spark, lake) == sorted(ids)  # every event id exactly once, the retries collapsed
    assert _entries(lake) == []  # every entry's partitions compacted: the log is empty again
    # The lake is listed only at the partitions touched (3, although BATCHES entries name each): once to find their
    # files, once after publishing (the inputs to delete); never a date folder or the root, whatever the age.
    # Reading the log costs one read per entry.
    assert sorted(set(lake_listings)) == sorted(f"/{hour}" for hour in before)
    assert len(lake_listings) == 2 * len(before)
    assert len(entry_reads) == BATCHES


def test_a_partition_not_closed_yet_stays_in_the_log_for_the_next_run(spark, streamed_lake, tmp_path):
    streamed, _ = streamed_lake
    lake = _copy(streamed, tmp_path)
    settings = CompactionSettings(lake_path=str(lake), target_file_bytes=TARGET_BYTES, delete_threads=2)
    early = OLD_HOURS[1] + timedelta(minutes=70)  # hour 3 closed (15 min grace), hours 4 and 5 not
    summary = Compactor(spark, settings, sink=LogMetricSink("test"), faults=FaultInjector(""), now=early).run()
    assert [r.partition for r in summary.of("compacted")] == ["event_date=2026-01-01/event_hour=3"]
    import json

    remaining = {p for entry in _entries(lake) for p in json.loads(entry.read_text())["partitions"]}
    assert remaining == {"event_date=2026-01-01/event_hour=4", "event_date=2026-01-01/event_hour=5"}
    assert len(_entries(lake)) == BATCHES


def test_the_time_window_scan_stays_an_operators_tool(spark, streamed_lake, tmp_path):
    """--scan looks at the lookback window only: three-week-old hours are outside it, and the log is kept."""
    streamed, _ = streamed_lake
    lake = _copy(streamed, tmp_path)
    summary = _run(spark, lake, scan=True).run()
    assert summary.of("compacted") == [] and len(_entries(lake)) == BATCHES


# ---- kill tests: the log steps ----------------------------------------------------------------

LOG_KILL_CASES = ["log_read", "log_compacted", "log_advance:1", "log_advance:5"]


def test_log_kill_cases_cover_every_log_phase():
    assert {spec.split(":")[0] for spec in LOG_KILL_CASES} == set(LOG_PHASES)


@pytest.mark.e2e
@pytest.mark.parametrize("spec", LOG_KILL_CASES)
def test_a_run_killed_in_a_log_step_loses_nothing_and_the_next_run_finishes(spark, streamed_lake, tmp_path, spec):
    streamed, ids = streamed_lake
    lake = _copy(streamed, tmp_path)
    run_compaction_killed_at(spec, "--lake", str(lake), "--target-file-mb", str(TARGET_BYTES / 1024 / 1024),
                             "--grace-minutes", "15")

    entries_left = len(_entries(lake))
    if spec in ("log_read", "log_compacted"):
        assert entries_left == BATCHES  # nothing advanced: the next run reads every entry again
    else:
        assert entries_left == BATCHES - int(spec.split(":")[1])  # the entries advanced before the kill are gone
    assert _event_ids(spark, lake) == sorted(ids) or spec == "log_read"  # compacted already (or not yet)

    _run(spark, lake).run()
    assert _entries(lake) == []
    assert _event_ids(spark, lake) == sorted(ids)  # nothing lost, no row twice
    assert all(p.name.startswith(layout.OUTPUT_PREFIX) for files in _hour_files(lake).values() for p in files)
    control = lake / layout.CONTROL_DIR
    assert not list((control / "journal").glob("*")) and not list((control / "staging").glob("*"))
