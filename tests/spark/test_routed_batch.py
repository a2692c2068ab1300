"""One stream, several datasets: a routed source's batch splits by a declared field (glue_jobs/decoding/routes.py,
glue_jobs/routed_batch.py). Three datasets added as files only; a share of records no route takes."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from glue_jobs import datasets
from glue_jobs.decoding.routes import RouteError, RouteTable
from glue_jobs.routed_batch import DatasetTarget, RoutedWriter
from glue_jobs.schema import spark_dead_letter_schema
from tests.processes import kill_group

from .routing_support import DATASETS, ROUTES, checkout, page_view, reading, routed_files, write_routed_datasets
from .streaming_support import json_envelope

REPO = Path(__file__).resolve().parents[2]
NOW = 1_700_000_000.0
PAYLOADS = [
    page_view("p1"), checkout("c1"), reading("r1"), page_view("p2", minute=5),
    checkout("c2", total=1.234),  # routed to checkouts, which refuses 3 fraction digits: its dead letter
    json.dumps({"event_id": "x1", "kind": "refund", "at": 1}),  # a kind no route names
    json.dumps({"event_id": "x2", "at": 1}),  # no kind at all
    "not json",
    json.dumps({"event_id": "x3", "kind": 5, "at": 1}),  # a number, not a string: no route matches
    page_view("p1"),  # a duplicate of p1: collapsed in page_views
    reading("r2", kind="reading", device={"id": "d-2", "extra": 1}),  # routed; sensor_readings rejects the unknown field
]


@pytest.fixture
def routed(tmp_path, monkeypatch):
    monkeypatch.setenv(datasets.ROOT_VARIABLE, str(write_routed_datasets(tmp_path)))
    return RouteTable.of("kind", ROUTES)


def _writer(spark, tmp_path: Path, routes: RouteTable) -> RoutedWriter:
    targets = {name: DatasetTarget(str(tmp_path / "lake" / name), str(tmp_path / "dead" / name)) for name in routes.datasets}
    return RoutedWriter(spark, source_name="events", routes=routes, targets=targets, dead_letter_path=str(tmp_path / "dead" / "unroutable"),
                        checkpoint_path=str(tmp_path / "cp"), clock=lambda: NOW, stream_id="abcd1234")


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*.parquet"))
            if not any(part.startswith((".", "_")) for part in p.relative_to(root).parts)}


def _rows(spark, root: Path, files: dict[str, bytes]) -> dict[str, list]:
    """Each file's rows, read from the bytes given (a copy, so files rewritten since do not matter)."""
    import tempfile

    found = {}
    with tempfile.TemporaryDirectory() as copy:
        for n, (name, data) in enumerate(sorted(files.items())):
            (Path(copy) / f"{n}.parquet").write_bytes(data)
            found[name] = sorted(spark.read.parquet(str(Path(copy) / f"{n}.parquet")).collect(), key=repr)
    return found


def _dead(spark, folder: Path) -> list[tuple]:
    rows = spark.read.schema(spark_dead_letter_schema()).parquet(str(folder)).collect()
    return sorted((r.payload, r.reason, r.detail, r.source, r.source_offset, r.batch_id) for r in rows)


def test_each_dataset_gets_its_records_and_the_unroutable_are_the_sources_dead_letters(spark, tmp_path, routed):
    writer = _writer(spark, tmp_path, routed)
    before = {key: spark.conf.get(key, None) for key in writer.part_settings}
    every = writer(json_envelope(spark, PAYLOADS, source="events", arrival_ms=int(NOW * 1000)), 4)
    assert {key: spark.conf.get(key, None) for key in writer.part_settings} == before  # the parts' settings: for the batch only
    by = {stats.dataset: stats for stats in every}
    assert [s.dataset for s in every] == ["checkouts", "page_views", "sensor_readings", ""]
    assert {name: (s.records_in, s.records_written, s.dead_letters, s.duplicates_collapsed, s.dead_letters_by_reason)
            for name, s in by.items()} == {
        "checkouts": (2, 1, 1, 0, {"out_of_range": 1}),
        "page_views": (3, 2, 0, 1, {}),
        "sensor_readings": (2, 1, 1, 0, {"unknown_field": 1}),
        "": (4, 0, 4, 0, {"unroutable": 4}),
    }
    assert all(s.reconciles and s.source == "events" and s.batch_id == 4 for s in every)
    assert sum(s.records_in for s in every) == len(PAYLOADS)  # every record is in exactly one part
    lakes = {name: sorted(r.event_id for r in spark.read.parquet(str(tmp_path / "lake" / name)).collect())
             for name in routed.datasets}
    assert lakes == {"checkouts": ["c1"], "page_views": ["p1", "p2"], "sensor_readings": ["r1"]}
    totals = spark.read.parquet(str(tmp_path / "lake" / "checkouts")).collect()[0]
    assert (str(totals.total), totals.kind) == ("12.50", "checkout")  # typed by its own contract
    assert [r[1] for r in _dead(spark, tmp_path / "dead" / "checkouts")] == ["out_of_range"]
    assert [r[1] for r in _dead(spark, tmp_path / "dead" / "sensor_readings")] == ["unknown_field"]
    assert _dead(spark, tmp_path / "dead" / "unroutable") == sorted([
        (PAYLOADS[5], "unroutable", 'kind "refund" routes to no dataset (routed: "checkout", "page_view", "reading")', "events", "6", 4),
        (PAYLOADS[6], "unroutable", "kind is absent or null", "events", "7", 4),
        ("not json", "unroutable", "the payload is not one JSON object", "events", "8", 4),
        (PAYLOADS[8], "unroutable", 'kind "5" routes to no dataset (routed: "checkout", "page_view", "reading")', "events", "9", 4),
    ])
    names = sorted(_files(tmp_path / "dead" / "unroutable"))
    assert names == ["ingest_date=2023-11-14/part-events-abcd1234-b0000000004-0000.snappy.parquet"]


def test_a_replay_writes_only_the_parts_whose_marker_is_missing(spark, tmp_path, routed):
    """A crash after the checkouts' part committed and before the others' started (the state `after_route` leaves: the
    other parts' files and markers not there): the replay skips checkouts and writes the rest once; a whole replay
    after that writes nothing."""
    envelope = json_envelope(spark, PAYLOADS, source="events", arrival_ms=int(NOW * 1000))
    _writer(spark, tmp_path, routed)(envelope, 7)
    expected = _files(tmp_path)
    state = tmp_path / "cp" / "_routes"
    for part, folders in (("page_views", ("lake/page_views", "dead/page_views")),
                          ("sensor_readings", ("lake/sensor_readings", "dead/sensor_readings")), ("_unroutable", ("dead/unroutable",))):
        (state / part / "_streamlake" / "batch-0000000007.committed.json").unlink()
        for folder in folders:
            for name in _files(tmp_path / folder):
                (tmp_path / folder / name).unlink()
    assert set(_files(tmp_path)) < set(expected)
    again = _writer(spark, tmp_path, routed)(envelope, 7)
    assert [s.replayed for s in again] == [True, False, False, False]
    # The same files with the same rows. Not the same bytes: a file's Parquet encodings (a column's dictionary page or
    # not) once differed between the first write and the replay, with the parts written at once under load (the rows
    # did not).
    rewritten = _files(tmp_path)
    assert sorted(rewritten) == sorted(expected) and _rows(spark, tmp_path, rewritten) == _rows(spark, tmp_path, expected)
    last = _writer(spark, tmp_path, routed)(envelope, 7)
    assert all(s.replayed for s in last) and _files(tmp_path) == rewritten
    assert [s.records_in for s in last] == [s.records_in for s in again]


def test_a_dataset_that_joins_before_a_replay_gets_none_of_the_partly_committed_batch(spark, tmp_path, routed):
    """Routed by kind to page views and checkouts only (readings unroutable), batch 7 crashes with its checkouts part
    not committed. A dataset joins (reading -> sensor_readings) before the replay: the replay routes batch 7 with the
    table it was first routed with, so the readings already committed as unroutable dead letters are not written to
    the new lake as well; batch 8 takes the new table. A table that dropped a dataset a partly committed batch was
    routed to is refused, naming it."""
    before = RouteTable.of("kind", {"page_view": "page_views", "checkout": "checkouts"})
    envelope = json_envelope(spark, PAYLOADS, source="events", arrival_ms=int(NOW * 1000))
    first = _writer(spark, tmp_path, before)(envelope, 7)
    assert [s.dataset for s in first] == ["checkouts", "page_views", ""] and first[-1].records_in == 6  # r1, r2 among them
    (tmp_path / "cp" / "_routes" / "checkouts" / "_streamlake" / "batch-0000000007.committed.json").unlink()
    for name in _files(tmp_path / "lake" / "checkouts"):
        (tmp_path / "lake" / "checkouts" / name).unlink()
    for name in _files(tmp_path / "dead" / "checkouts"):
        (tmp_path / "dead" / "checkouts" / name).unlink()

    with pytest.raises(RouteError, match=r"batch 7 is partly committed, routed to \['checkouts'\] too"):
        _writer(spark, tmp_path, RouteTable.of("kind", {"page_view": "page_views"}))(envelope, 7)

    joined = _writer(spark, tmp_path, routed)
    again = joined(envelope, 7)
    assert [(s.dataset, s.records_in, s.replayed) for s in again] == [
        ("checkouts", 2, False), ("page_views", 3, True), ("sensor_readings", 0, False), ("", 6, True)]
    assert not _files(tmp_path / "lake" / "sensor_readings")
    assert [r[0] for r in _dead(spark, tmp_path / "dead" / "unroutable")].count(reading("r1")) == 1

    later = joined(json_envelope(spark, [reading("r3")], source="events", arrival_ms=int(NOW * 1000)), 8)
    assert [(s.dataset, s.records_written) for s in later] == [("checkouts", 0), ("page_views", 0), ("sensor_readings", 1), ("", 0)]
    recorded = sorted(p.name for p in (tmp_path / "cp" / "_routes" / "_tables").glob("batch-*"))
    assert recorded == ["batch-0000000007.json", "batch-0000000008.json"]


def test_a_line_the_adapter_already_judged_keeps_its_reason(spark, tmp_path, routed):
    from pyspark.sql import functions as F

    envelope = json_envelope(spark, [page_view("p1"), "\ufffd"], source="events").withColumn(
        "problem", F.when(F.col("source_offset") == "2", F.struct(F.lit("malformed_json").alias("reason"),
                                                                  F.lit("not UTF-8").alias("detail"))))
    every = _writer(spark, tmp_path, routed)(envelope, 0)
    assert every[-1].dead_letters_by_reason == {"malformed_json": 1}
    assert [(r[1], r[2]) for r in _dead(spark, tmp_path / "dead" / "unroutable")] == [("malformed_json", "not UTF-8")]


@pytest.mark.parametrize(("field", "routes", "message"), [
    ("kind.", {"a": "page_views"}, "routes.field: 'kind.' is not a field path"),
    ("kind", {}, "routes.values: must map at least one value"),
    ("kind", {"": "page_views"}, "the value '' is not a non-empty string"),
    ("kind", {"a": 3}, "routes.values a: 3 is not a dataset name"),
    ("kind", {"a": "unroutable"}, "'unroutable' is reserved"),
])
def test_a_route_table_that_cannot_route_is_refused_naming_the_key(field, routes, message):
    with pytest.raises(RouteError, match=message.replace(".", r"\.").replace("(", r"\(")):
        RouteTable.of(field, routes)


def test_every_routed_dataset_must_declare_the_field_as_a_string_or_an_enum_holding_its_values(spark, tmp_path, routed):
    loaded = {name: datasets.load(name) for name in routed.datasets}
    assert routed.problems(loaded) == []
    assert RouteTable.of("url", {"x": "page_views", "y": "checkouts"}).problems(loaded) == [
        "dataset checkouts: the route field url must be a string or enum field of its schema (version 1), so its contract "
        "checks it; it is absent"]
    assert RouteTable.of("device.id", {"d": "sensor_readings"}).problems(loaded) == []
    assert RouteTable.of("at", {"1": "page_views"}).problems(loaded)[0].endswith("it is long")
    assert RouteTable.of("kind", {"refund": "checkouts"}).problems(loaded) == [
        "dataset checkouts: route value(s) ['refund'] are not symbols of its enum kind ['checkout', 'refund_requested']: "
        "every routed record would be its dead letter"]
    assert RouteTable.of("referrer", {"r": "page_views"}).problems(loaded) == []  # an optional string: a route all the same
    with pytest.raises(RouteError, match="source events: dataset checkouts: the route field url"):
        _writer(spark, tmp_path, RouteTable.of("url", {"x": "page_views", "y": "checkouts"}))


def test_generate_writes_a_routed_mix_the_writer_splits_as_it_says(spark, tmp_path, routed, capsys):
    """`streamlake generate --route-field --route` (what a team sends to try a routed stream end to end): one batch of
    its mix through the routed writer gives each dataset exactly the records, bad ones and copies --expect names, and
    the source the unroutable ones; a route the datasets cannot take is refused before a record is written."""
    from glue_jobs.__main__ import main

    routes = [arg for value, dataset in ROUTES.items() for arg in ("--route", f"{value}={dataset}")]
    assert main(["generate", "--out", str(tmp_path / "in"), "--records", "400", "--files", "2", "--bad-ratio", "0.05",
                 "--duplicate-ratio", "0.02", "--seed", "5", "--expect", str(tmp_path / "expect.json"),
                 "--route-field", "kind", *routes]) == 0
    expect = json.loads((tmp_path / "expect.json").read_text())
    assert capsys.readouterr().out.startswith(f"wrote 400 records routed by kind in 2 files to {tmp_path / 'in'}: checkouts ")
    lines = [line for path in sorted((tmp_path / "in").glob("*.json")) for line in path.read_text().splitlines()]
    writer = RoutedWriter(spark, source_name="events", routes=routed, targets={
        name: DatasetTarget(str(tmp_path / "lake" / name), str(tmp_path / "dead" / name)) for name in routed.datasets},
        dead_letter_path=str(tmp_path / "dead" / "unroutable"), checkpoint_path=str(tmp_path / "cp"), stream_id="abcd1234")
    by = {s.dataset: s for s in writer(json_envelope(spark, lines, source="events", arrival_ms=int(time.time() * 1000)), 0)}
    assert by[""].records_in == by[""].dead_letters == len(expect["unroutable"]) > 0
    for name, part in expect["parts"].items():
        stats = by[name]
        assert (stats.records_in, stats.records_written, stats.duplicates_collapsed, stats.dead_letters_by_reason) == (
            part["records"], len(part["valid_keys"]), part["duplicates"], part["bad_by_reason"]), name
        assert part["valid_keys"] and part["bad_payloads"] and part["duplicates"], name  # every kind of record, each dataset
        lake = [r.event_id for r in spark.read.parquet(str(tmp_path / "lake" / name)).select("event_id").collect()]
        assert sorted(lake) == sorted(part["valid_keys"]), name
    assert sorted(r[0] for r in _dead(spark, tmp_path / "dead" / "unroutable")) == sorted(expect["unroutable"])
    with pytest.raises(SystemExit) as refused:
        main(["generate", "--out", str(tmp_path / "never"), "--records", "5", "--route-field", "url", *routes])
    assert refused.value.code == 2 and "the route field url must be a string or enum field" in capsys.readouterr().err
    assert not (tmp_path / "never").exists()


def _routed_command(tmp_path: Path, *extra: str) -> list[str]:
    routes = [arg for value, dataset in ROUTES.items() for arg in ("--route", f"{value}={dataset}")]
    return [sys.executable, "-m", "glue_jobs", "run-local", "--input", str(tmp_path / "in"), "--lake", str(tmp_path / "lake"),
            "--dead-letter", str(tmp_path / "dead"), "--checkpoint", str(tmp_path / "cp"), "--source-name", "events",
            "--route-field", "kind", *routes, *extra]


def _routed_env(datasets_root: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "PYSPARK_PYTHON": sys.executable, "STREAMLAKE_SPARK_MASTER": "local[2]",
            "STREAMLAKE_DRIVER_MEMORY": "1g", datasets.ROOT_VARIABLE: str(datasets_root), **extra}


@pytest.mark.e2e
@pytest.mark.parametrize("seed", [int(os.environ.get("STREAMLAKE_KILL_SEED", "0")) or random.randrange(1_000_000)])
def test_sigkill_at_three_seeded_moments_then_each_dataset_holds_its_records_once(spark, tmp_path, seed):
    """The routed runner (the CLI, a process group of its own) killed three times: first at `after_route` of batch 0 or
    1 (one dataset's part committed, the others not), then twice a seeded time after a seeded batch; a last run to the
    end. Every valid record is once in its own dataset's lake, every bad one once in its own dead letters, every
    unroutable one once in the source's. Rerun a seed with STREAMLAKE_KILL_SEED."""
    root = write_routed_datasets(tmp_path / "team")
    expect = routed_files(tmp_path / "in", files=6, per_file=50, seed=seed)
    rng = random.Random(seed)
    for attempt in range(3):
        crash = {"STREAMLAKE_CRASH_AT": f"after_route:{rng.randrange(2)}"} if attempt == 0 else {}
        process = subprocess.Popen(_routed_command(tmp_path, "--max-files-per-batch", "1", "--trigger-seconds", "1"),
                                   env=_routed_env(root, **crash), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                   cwd=REPO, start_new_session=True)  # its own group: SIGKILL takes the JVM down too
        try:
            wanted, seen, deadline = rng.randint(1, 2), 0, time.time() + 300
            while (attempt == 0 or seen < wanted) and time.time() < deadline:
                line = process.stdout.readline()
                if not line:
                    break
                seen += line.startswith("batch ") and " unroutable:" in line  # a batch's last part line
            if attempt == 0:
                assert process.wait(timeout=120) == -signal.SIGKILL, f"seed {seed}: the crash point did not kill the run"
            time.sleep(rng.uniform(0, 1.5))
        finally:
            kill_group(process)
    done = subprocess.run(_routed_command(tmp_path, "--once"), env=_routed_env(root), capture_output=True, text=True,
                          timeout=600, cwd=REPO)
    assert done.returncode == 0, f"seed {seed}: {done.stderr[-3000:]}"
    for name in DATASETS:
        ids = [r.event_id for r in spark.read.parquet(str(tmp_path / "lake" / name)).select("event_id").collect()]
        assert sorted(ids) == sorted(expect.valid[name]), f"seed {seed}: {name}'s lake"
        dead = [r[0] for r in _dead(spark, tmp_path / "dead" / name)]
        assert dead == sorted(expect.bad[name]), f"seed {seed}: {name}'s dead letters"
    unroutable = _dead(spark, tmp_path / "dead" / "unroutable")
    assert [r[0] for r in unroutable] == sorted(expect.unroutable), f"seed {seed}: the unroutable dead letters"
    assert {r[1] for r in unroutable} == {"unroutable"}


@pytest.mark.parametrize(("arguments", "message"), [
    (["--route-field", "kind"], "--route-field and --route go together"),
    (["--route", "page_view=page_views"], "--route-field and --route go together"),
    (["--route-field", "kind", "--route", "page_view"], "'page_view' is not VALUE=DATASET"),
    (["--route-field", "kind", "--route", "page_view=pages"], "'pages' is not a dataset (datasets: checkouts, page_views, sensor_readings)"),
    (["--route-field", "kind", "--route", "a=page_views", "--route", "a=checkouts"], "--route a= names two datasets (page_views, checkouts)"),
    (["--route-field", "kind", "--route", "a=page_views", "--dataset", "checkouts"], "--dataset names the one dataset of an unrouted run"),
    (["--route-field", "kind.", "--route", "a=page_views"], "--route-field: 'kind.' is not a field path"),
])
def test_the_cli_refuses_a_route_it_cannot_follow_before_spark_starts(routed, tmp_path, capsys, arguments, message):
    from glue_jobs.__main__ import main

    with pytest.raises(SystemExit) as exit_info:
        main(["run-local", "--input", str(tmp_path), "--lake", "l", "--dead-letter", "d", "--checkpoint", "c", "--once", *arguments])
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.parametrize(("arguments", "message"), [
    ([], "run-kafka needs --schema-name and --dataset (a topic of one dataset) or --route-schema (several)"),
    (["--schema-name", "pv"], "run-kafka needs --schema-name and --dataset"),
    (["--route-schema", "pv=page_views", "--dataset", "page_views"], "--schema-name and --dataset are for a topic of one"),
    (["--route-schema", "pv=pages"], "'pages' is not a dataset (datasets: checkouts, page_views, sensor_readings)"),
    (["--route-schema", "pv=page_views", "--route-schema", "pv=checkouts"], "--route-schema pv= names two datasets"),
    (["--route-schema", "pv=page_views", "--route-schema", "pv2=page_views"], "--route-schema: schemas pv and pv2 are both bound"),
    (["--route-schema", "p v=page_views"], "--route-schema: 'p v' is not a Schema Registry schema name"),
    (["--route-schema", "page_views"], "argument --route-schema: 'page_views' is not SCHEMA=DATASET"),
])
def test_run_kafka_refuses_bindings_it_cannot_follow_before_spark_starts(routed, capsys, arguments, message):
    from glue_jobs.__main__ import main

    with pytest.raises(SystemExit) as exit_info:
        main(["run-kafka", "--bootstrap-servers", "127.0.0.1:9", "--topic", "t", "--registry-name", "r", "--lake", "l",
              "--dead-letter", "d", "--checkpoint", "c", "--once", *arguments])
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


def test_a_source_bound_to_one_dataset_does_not_become_routed_on_its_checkpoint(spark, tmp_path, routed):
    """Its last batch's marker is where a routed part would not look: a replay would write that batch again. Refused
    before anything is read, naming both owners."""
    from glue_jobs.batch import MicroBatchWriter
    from glue_jobs.commit.ownership import OwnershipError

    MicroBatchWriter(spark, source_name="events", lake_path=str(tmp_path / "lake" / "page_views"), dataset="page_views",
                     dead_letter_path=str(tmp_path / "dead" / "page_views"), checkpoint_path=str(tmp_path / "cp"))
    with pytest.raises(OwnershipError, match=r"checkpoint .*/cp belongs to datasets page_views, source events, not to "
                                             r"routed_by kind, source events"):
        _writer(spark, tmp_path, routed)


def test_the_glue_entrypoint_runs_a_routed_source_from_the_keys_the_stack_writes(spark, tmp_path, routed):
    """The `--sources` entry of a routed Kinesis source (infra/streaming_job.py, glue_jobs/job_arguments.py ROUTED_KEYS):
    accepted as the stack writes it, refused naming the key where it could not run; each dataset's digest checked
    against the zip's files; the writer built from it puts each dataset's rows in the lake path its key names, the dead
    letters under the source's folder, and publishes each dataset's share and the unroutable records."""
    from glue_jobs import glue_entry
    from glue_jobs.metrics import UNROUTABLE_RECORDS, metric_data

    names = sorted(ROUTES.values())
    source = {"source_name": "events", "source_type": "kinesis", "route_field": "kind", "routes": json.dumps(ROUTES),
              "datasets": ",".join(names), "dead_letter_path": str(tmp_path / "dead"),
              "checkpoint_path": str(tmp_path / "cp"), "starting_position": "TRIM_HORIZON",
              "max_fetch_records_per_shard": "100000", "max_fetch_time_ms": "2000", "source_table": "source_events",
              "min_partitions": "2",
              **{f"dataset_digest.{n}": datasets.load(n).digest for n in names},
              **{f"lake_path.{n}": str(tmp_path / "lakes" / f"{n}-lake") for n in names}}
    (args,) = glue_entry.job_sources({"sources": json.dumps([source]), "environment": "dev"})
    refused = {
        r"missing key\(s\) \['lake_path.page_views'\]": {k: v for k, v in source.items() if k != "lake_path.page_views"},
        r"unknown key\(s\) \['dataset'\]": {**source, "dataset": "page_views"},
        "a routed source is a Kinesis one": {**source, "source_type": "kafka"},
    }
    for message, bad in refused.items():
        with pytest.raises(ValueError, match=message):
            glue_entry.job_sources({"sources": json.dumps([bad])})
    with pytest.raises(ValueError, match="dataset checkouts: the job zip's files have digest"):
        glue_entry.dataset_table({**args, "dataset_digest.checkouts": "0" * 64})
    with pytest.raises(ValueError, match=r"routes name datasets \['checkouts', 'page_views'\], datasets says"):
        glue_entry.dataset_table({**args, "routes": json.dumps({"checkout": "checkouts", "page_view": "page_views"})})
    routes = glue_entry.dataset_table(args)
    assert routes == routed

    class Published:
        def __init__(self):
            self.data = []

        def emit(self, stats):
            self.data += metric_data(stats, "dev", routed=True)

    published = Published()
    (tmp_path / "cp").mkdir()  # what the query writes when it starts: the stream id the file names carry
    (tmp_path / "cp" / "metadata").write_text('{"id":"abcd1234-0000-4000-8000-000000000000"}\n')
    writer = glue_entry.routed_writer(spark, args, routes, published)
    every = writer(json_envelope(spark, PAYLOADS, source="events", arrival_ms=int(NOW * 1000)), 0, frame_anomalies=1)
    lakes = {n: sorted(r.event_id for r in spark.read.parquet(str(tmp_path / "lakes" / f"{n}-lake")).collect()) for n in names}
    assert lakes == {"checkouts": ["c1"], "page_views": ["p1", "p2"], "sensor_readings": ["r1"]}
    assert [r[1] for r in _dead(spark, tmp_path / "dead" / "checkouts")] == ["out_of_range"]
    assert len(_dead(spark, tmp_path / "dead" / "unroutable")) == 4
    parts = {d["Dimensions"][1]["Value"]: d["Value"] for d in published.data
             if d["MetricName"] == "RecordsIn" and len(d["Dimensions"]) == 3}
    (unroutable,) = [d["Value"] for d in published.data if d["MetricName"] == UNROUTABLE_RECORDS]
    assert parts == {"checkouts": 2, "page_views": 3, "sensor_readings": 2} and unroutable == 4
    assert sum(parts.values()) + unroutable == len(PAYLOADS)  # the parts and the unroutable reconcile with the batch
    assert [s.frame_anomalies for s in every] == [0, 0, 0, 1]  # the frame's, counted once, with the part every batch has


@pytest.mark.parametrize("part", ["checkouts", "unroutable"])
def test_a_routed_source_stopped_while_one_part_writes_stops_clean_and_its_restart_writes_each_record_once(
        spark, tmp_path, routed, monkeypatch, caplog, part):
    """A stop as a routed query meets it: one part is running a Spark job (held in a long job of the query's own job group,
    which the part's thread inherits) while the other parts run or have committed: the checkouts part's lake write (its
    MicroBatchWriter turns the cancellation into unwritable.QueryStopped), or the unroutable records' part (whose error
    only RoutedWriter's own unwritable.stops_seen turns into one; without it no warning names the stop, which is how this
    test failed, and on Spark 3.3 and 3.5 the query ends clean only when the stop's interrupt reaches its thread before
    the batch's raw error does). The query ends as stopped (no error), the held part publishes nothing, and the query started
    again on the same checkpoint leaves every valid record once in its own dataset's lake, every bad one once in its dead
    letters, every unroutable one once."""
    import logging
    import threading
    import types

    from glue_jobs.batch import MicroBatchWriter
    from glue_jobs.routed_batch import UnroutableWriter
    from glue_jobs.sources import from_local_files

    expect = routed_files(tmp_path / "in", files=1, per_file=40, seed=5)
    checkpoint = tmp_path / "cp"
    checkpoint.mkdir()
    (checkpoint / "metadata").write_text('{"id":"abcd1234-0000-4000-8000-000000000000"}\n')
    writing = threading.Event()
    owner, method = (MicroBatchWriter, "_write_lake") if part == "checkouts" else (UnroutableWriter, "__call__")
    original = getattr(owner, method)

    def held_first_time(self, *args, **kwargs):
        if (part == "unroutable" or self.table.name == part) and not writing.is_set():
            writing.set()  # three tasks, which no other stage here has: the test waits for this job and no other
            spark.range(0, 10**11, numPartitions=3).selectExpr("sum(id)").collect()
        return original(self, *args, **kwargs)

    def start():
        writer = RoutedWriter.under(spark, source_name="events", routes=routed, lake_root=str(tmp_path / "lake"),
                                    dead_letter_root=str(tmp_path / "dead"), checkpoint_path=str(checkpoint), icebergs={})
        stream = spark.readStream.format("text").option("wholetext", "true").load(str(tmp_path / "in"))
        return stream.writeStream.foreachBatch(
            lambda raw, batch_id: writer(from_local_files(raw, "events", int(time.time() * 1000)), batch_id)).option(
            "checkpointLocation", str(checkpoint)).start()

    monkeypatch.setattr(owner, method, held_first_time)
    caplog.set_level(logging.INFO, logger="glue_jobs")
    query = start()
    tracker, deadline = spark.sparkContext.statusTracker(), time.monotonic() + 120

    def held() -> bool:
        return any((tracker.getStageInfo(stage) or types.SimpleNamespace(numTasks=0)).numTasks == 3
                   for stage in tracker.getActiveStageIds())

    while not (writing.is_set() and held()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert writing.is_set() and held(), f"the {part} part never started its held job"
    query.stop()
    assert query.exception() is None
    assert any("as a query's stop does" in r.getMessage() for r in caplog.records)
    held_output = tmp_path / ("lake/checkouts" if part == "checkouts" else "dead/unroutable")
    assert not list(held_output.rglob("*.parquet"))

    monkeypatch.setattr(owner, method, original)
    query = start()
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    for name in DATASETS:
        ids = [r.event_id for r in spark.read.parquet(str(tmp_path / "lake" / name)).select("event_id").collect()]
        assert sorted(ids) == sorted(expect.valid[name]), f"{name}'s lake"
        assert [r[0] for r in _dead(spark, tmp_path / "dead" / name)] == sorted(expect.bad[name]), f"{name}'s dead letters"
    assert [r[0] for r in _dead(spark, tmp_path / "dead" / "unroutable")] == sorted(expect.unroutable)
