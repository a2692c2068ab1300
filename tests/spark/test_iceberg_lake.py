"""A dataset switched to Apache Iceberg through its dataset.json only (`"table_format": "iceberg"`), run by the local
runner (subprocesses: the Iceberg runtime is a static setting of their own sessions) and read back by a reader the
project did not write (pyiceberg's SQL catalog over the same SQLite file the runner's JDBC catalog writes) and by
Spark, and maintained by the hourly job between and after its micro-batches. Kill tests: SIGKILL while the batch's data files exist but its commit cannot happen, right after the commit,
and after the dead letters are published; every valid record once, every dead letter once, every batch tag once."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import pytest

from glue_jobs.lake.iceberg_lake import IcebergTarget, batch_tag, table_ddl
from glue_jobs.lake.lake_table import LakeTable
from tests.processes import kill_group

from .iceberg_support import (
    DATASET,
    REPO,
    _data_files,
    _env,
    _generate,
    _pyiceberg_table,
    _runner,
    _spark_read,
    _tags,
)


def test_the_table_is_the_lake_columns_partitioned_by_the_hour_of_event_time():
    table = LakeTable.of(DATASET)
    ddl = table_ddl(table, IcebergTarget("lake", "ns", DATASET))
    assert ddl.startswith("CREATE TABLE IF NOT EXISTS lake.ns.orders (`order_id` string, ")
    assert "`items` array<struct<`sku`:string,`quantity`:int,`unit_price`:decimal(10,2)>>" in ddl
    assert "`event_date` date, `event_hour` integer)" in ddl  # as the writes hold them: no cast on append
    assert ddl.endswith("USING iceberg PARTITIONED BY (hours(`ordered_at`)) "
                        "TBLPROPERTIES ('format-version'='2', 'write.spark.accept-any-schema'='true', "
                        "'write.metadata.delete-after-commit.enabled'='true', 'write.metadata.previous-versions-max'='100')")
    assert [c for c in table.column_names() if f"`{c}` " not in ddl] == []
    assert batch_tag("orders", "1a2b3c4d", 7) == "orders:1a2b3c4d:7"
    located = table_ddl(table, IcebergTarget("glue_catalog", "db", DATASET, location="s3://lake/orders/iceberg"))
    assert "PARTITIONED BY (hours(`ordered_at`)) LOCATION 's3://lake/orders/iceberg' TBLPROPERTIES" in located
    with pytest.raises(ValueError, match="identifiers"):
        IcebergTarget("lake", "ns; drop", DATASET)


BATCHES = 4  # micro-batches of each of the first two runs of the end-to-end test


def _dead_payloads(spark, tmp_path: Path) -> list[str]:
    from glue_jobs.schema import spark_dead_letter_schema

    dead = spark.read.schema(spark_dead_letter_schema()).parquet(str(tmp_path / "dead"))
    return sorted(r.payload for r in dead.select("payload").collect())


def _assert_every_record_once(spark, tmp_path: Path, expect: dict) -> list[str]:
    table = _pyiceberg_table(tmp_path)
    rows = table.scan().to_arrow()
    keys = rows.column("order_id").to_pylist()
    assert len(keys) == len(set(keys)), f"{len(keys) - len(set(keys))} key(s) twice"
    assert sorted(keys) == sorted(expect["valid_keys"])
    assert _dead_payloads(spark, tmp_path) == sorted(expect["bad_payloads"])
    tags = [t for t in _tags(table) if t is not None]
    assert len(tags) == len(set(tags)), Counter(tags).most_common(3)
    return tags


def _counts(tmp_path: Path) -> dict[str, int]:
    table = _pyiceberg_table(tmp_path)
    return {"data_files": len(list(table.scan().plan_files())), "snapshots": len(table.snapshots()),
            "manifests": len(table.inspect.manifests()), "rows": table.scan().to_arrow().num_rows}


def _run(command: list[str], datasets: Path, **env: str) -> str:
    done = subprocess.run(command, env=_env(datasets, **env), capture_output=True, text=True, timeout=600, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _maintain(tmp_path: Path, datasets: Path, *extra: str) -> str:
    return _run([sys.executable, "-m", "compaction", "run-local", "--dataset", DATASET, "--lake", str(tmp_path / "lake"),
                 "--target-file-mb", "64", *extra], datasets)


def _summary(stdout: str) -> tuple[int, int]:
    """(duplicates, batches) of a runner's summary line."""
    found = re.search(r"^summary: .*duplicates=(\d+).* batches=(\d+)", stdout, re.MULTILINE)
    assert found, stdout[-2000:]
    return int(found.group(1)), int(found.group(2))


@pytest.mark.e2e
def test_an_iceberg_dataset_runs_locally_is_maintained_and_evolves_read_back_by_pyiceberg_and_spark(tmp_path, spark, iceberg_orders):
    """The local runner's micro-batches on an Iceberg table, read back by pyiceberg and Spark; the hourly maintenance
    (compaction/iceberg_maintenance.py, through `python -m compaction run-local --dataset`) between micro-batches and
    after them (that command's `main` in the JVM of the Spark read), counted by pyiceberg: live data files, snapshots,
    manifests, orphan files older than a day removed and younger kept, snapshots past the retention expired down to
    the last ten; a schema version committed as files and a run over the same checkpoint on the rewritten table; every
    valid record once throughout. (One table for the local
    run and its maintenance: each was a test of its own starting the same JVMs.)"""
    # Four micro-batches a run: with the first maintenance's two commits and the evolved run's one, 11 snapshots, more
    # than the ten kept whatever their age (RETAIN_LAST), as the retention claims below need.
    expect = _generate(iceberg_orders, tmp_path / "all", records=1600, files=2 * BATCHES, seed=31)
    assert expect["duplicates"] > 0  # copies across batches: the anti join must collapse them
    (tmp_path / "in").mkdir()
    files = sorted((tmp_path / "all").glob("*.json"))
    for path in files[:BATCHES]:
        shutil.copy(path, tmp_path / "in")
    first_duplicates, batches = _summary(_run(_runner(tmp_path, "--once"), iceberg_orders))  # one file per micro-batch
    assert batches == BATCHES
    before = _counts(tmp_path)
    assert before["snapshots"] == BATCHES and before["manifests"] == BATCHES
    table = _pyiceberg_table(tmp_path)
    assert [f.name for f in table.spec().fields] == ["ordered_at_hour"]
    assert table.properties["write.metadata.previous-versions-max"] == "100"  # metadata.json files bounded
    schema = table.schema()
    assert str(schema.find_field("items.element.unit_price").field_type) == "decimal(10, 2)"
    assert str(schema.find_field("items.element.quantity").field_type) == "int"

    out = _maintain(tmp_path, iceberg_orders)
    first = _counts(tmp_path)
    assert "maintained table=lake.streamlake_local.orders" in out
    assert first["rows"] == before["rows"] and first["data_files"] < before["data_files"]
    assert first["manifests"] <= 2  # one per batch became one (the rewrite's own may add one)

    # The stream goes on after maintenance committed: more micro-batches on the rewritten table.
    for path in files[BATCHES:]:
        shutil.copy(path, tmp_path / "in")
    duplicates, batches = _summary(_run(_runner(tmp_path, "--once"), iceberg_orders))
    assert batches == BATCHES and first_duplicates + duplicates == expect["duplicates"]
    tags = _assert_every_record_once(spark, tmp_path, expect)
    stream = tags[0].split(":")[1]
    # one append per batch, its id in the summary
    assert tags == [batch_tag("local", stream, b) for b in range(2 * BATCHES)]

    # Schema evolution, then a run over the same checkpoint: version 2 adds `items[].discount` (optional decimal) and
    # a top-level `channel`, committed as files only, and one new input file carries them. The run commits that file's
    # batch alone (none of the first eight again), and the new fields are in the table's schema after it; the rows
    # written before read them as null.
    _evolve(tmp_path, iceberg_orders, expect["valid_keys"][0])
    again = _run(_runner(tmp_path, "--once"), iceberg_orders)
    assert "dead_letters=0" in again.splitlines()[-2]
    # Three copies dropped: one within the batch and two by the append; the two whose content differs are counted.
    assert "duplicates=3 (2 differing from the copy kept) batches=1" in again, again[-2000:]
    table = _pyiceberg_table(tmp_path)
    assert [t for t in _tags(table) if t] == [*tags, batch_tag("local", stream, 2 * BATCHES)]
    assert str(table.schema().find_field("items.element.discount").field_type) == "decimal(10, 2)"
    assert str(table.schema().find_field("channel").field_type) == "string"
    rows = {r["order_id"]: r for r in table.scan().to_arrow().to_pylist()}
    valid = len(expect["valid_keys"]) + 2 + len(EXTREMES)
    assert len(rows) == valid
    assert rows["evolved-2"]["status"] == "paid" and rows[expect["valid_keys"][0]]["customer_id"] != "c-changed"
    assert [(rows[f"extreme-{n}"]["delivered_by"], rows[f"extreme-{n}"]["shipping"]["eta"]) for n in range(len(EXTREMES))] == [
        (datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(microseconds=micros), date.fromisoformat(day))
        for micros, day in EXTREMES]  # read back equal by a reader the project did not write (pyiceberg, pyarrow)
    assert rows["evolved-1"]["channel"] == "web" and str(rows["evolved-1"]["items"][0]["discount"]) == "1.25"
    assert rows["evolved-1"]["source"] == "local" and rows["evolved-1"]["currency"] == "EUR"  # by name, not position
    old = rows[expect["valid_keys"][0]]
    assert old["channel"] is None and all(item["discount"] is None for item in old["items"])

    # An orphan two days old (a batch's files left by a kill before its commit) and one written a minute ago.
    (live,) = list(_data_files(tmp_path))[:1]
    old_orphan = live.with_name("00000-orphan-old.parquet")
    young_orphan = live.with_name("00000-orphan-young.parquet")
    shutil.copy(live, old_orphan)
    shutil.copy(live, young_orphan)
    two_days_ago = time.time() - 2 * 86400
    os.utime(old_orphan, (two_days_ago, two_days_ago))
    after_stream = _counts(tmp_path)
    # The CLI's maintenance with a retention of one hour, then the same maintenance as of eight days later (its
    # `now`): every snapshot is past the 7-day retention, the last ten are kept, and the table still reads every row;
    # then the table as Spark reads it through the Iceberg catalog. One JVM for the three (the CLI's `main` in the
    # session the read starts; its session is that one): the CLI as a user runs it, a process of its own, is the first
    # maintenance above. Between the two maintenances pyiceberg counts the table and the orphans are looked for.
    out = _spark_read(tmp_path, iceberg_orders, before=(
        "import io, os\n"
        "from contextlib import redirect_stdout\n"
        "from datetime import datetime, timedelta, timezone\n"
        "from pathlib import Path\n"
        "from compaction import __main__ as cli\n"
        "from compaction.iceberg_maintenance import MaintenanceSettings, maintain\n"
        "from glue_jobs.local_runner import local_iceberg_target\n"
        "from tests.spark.test_iceberg_lake import _counts\n"
        "printed = io.StringIO()\n"
        "with redirect_stdout(printed):\n"
        f"    code = cli.main(['run-local', '--dataset', {DATASET!r}, '--lake', {str(tmp_path / 'lake')!r},"
        " '--target-file-mb', '64', '--snapshot-retention-hours', '1'])\n"
        f"print('CLI ' + json.dumps({{'code': code, 'stdout': printed.getvalue(),"
        f" 'counts': _counts(Path({str(tmp_path)!r})),"
        f" 'orphans': [os.path.exists(p) for p in ({str(old_orphan)!r}, {str(young_orphan)!r})]}}))\n"
        f"result = maintain(s, local_iceberg_target({DATASET!r}), MaintenanceSettings(64, 168),"
        " now=datetime.now(timezone.utc) + timedelta(days=8))\n"
        "print(result.render())\n"))
    (cli_line,) = [line for line in out["stdout"].splitlines() if line.startswith("CLI ")]
    cli = json.loads(cli_line.removeprefix("CLI "))
    final = cli["counts"]
    assert cli["code"] == 0, cli["stdout"]
    assert "orphan_files_removed=1" in cli["stdout"] and cli["orphans"] == [False, True]  # the old one, not the young
    assert final["rows"] == valid and final["data_files"] < after_stream["data_files"]
    assert final["manifests"] <= 2
    # Snapshots are all younger than an hour: retention keeps them.
    assert final["snapshots"] >= after_stream["snapshots"] > 10
    expired = _counts(tmp_path)
    assert expired["snapshots"] == 10 and expired["rows"] == valid
    eight_days = out["stdout"].splitlines()[-1]
    assert "manifest_lists_expired=" in eight_days and "manifest_lists_expired=0 " not in eight_days, out["stdout"]
    assert out["rows"] == out["keys"] == valid and out["items"] > out["rows"]
    # The duplicate check reads only the batch's hours: the bounds reach Iceberg's scan as filters on the column.
    assert "filters=ordered_at IS NOT NULL, ordered_at >= 1763596800000000, ordered_at < 1763600400000000" in out["plan"]
    print(f"counts: before {before}, after first maintenance {first}, after the stream {after_stream}, final {final}, "
          f"eight days later {expired}")


def _kill_when_files_appear_while_the_commit_is_blocked(tmp_path: Path, datasets: Path) -> int:
    """SIGKILL between the batch's data files written and its commit: the test holds SQLite's write lock on the
    catalog (readers go on; the JDBC catalog's commit, an UPDATE of the table's row, cannot), so once a new data
    file appears the commit cannot have happened; then the process group is killed. Returns new files seen."""
    before = _data_files(tmp_path)
    lock = sqlite3.connect(tmp_path / "lake" / "catalog.sqlite", timeout=30, isolation_level=None)
    lock.execute("BEGIN IMMEDIATE")
    process = subprocess.Popen(_runner(tmp_path), env=_env(datasets), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               cwd=REPO, start_new_session=True)
    try:
        deadline = time.time() + 300
        while not (_data_files(tmp_path) - before) and time.time() < deadline and process.poll() is None:
            time.sleep(0.02)
        written = _data_files(tmp_path) - before
    finally:
        kill_group(process)
        lock.execute("ROLLBACK")
        lock.close()
    return len(written)


def _run_until_crash(tmp_path: Path, datasets: Path, point: str) -> None:
    done = subprocess.run(_runner(tmp_path), env=_env(datasets, STREAMLAKE_CRASH_AT=point), capture_output=True, text=True,
                          timeout=600, cwd=REPO, start_new_session=True)
    assert done.returncode == -signal.SIGKILL, (done.returncode, done.stderr[-3000:])


@pytest.mark.e2e
def test_killed_before_the_commit_after_it_and_after_the_dead_letters_then_every_record_once(spark, tmp_path, iceberg_orders):
    expect = _generate(iceberg_orders, tmp_path / "in", records=1500, files=5, seed=12)
    (tmp_path / "lake").mkdir()
    boot = subprocess.run(_runner(tmp_path, "--once"), env=_env(iceberg_orders, STREAMLAKE_CRASH_AT="after_lake_commit:0"),
                          capture_output=True, text=True, timeout=600, cwd=REPO, start_new_session=True)
    assert boot.returncode == -signal.SIGKILL, boot.stderr[-3000:]
    table = _pyiceberg_table(tmp_path)
    (committed,) = [t for t in _tags(table) if t]  # batch 0's rows are committed, its marker is not
    stream = committed.split(":")[1]
    assert committed == batch_tag("local", stream, 0) and not list((tmp_path / "dead").rglob("*.parquet"))

    # 1. Batch 0 again (replayed: its rows are committed, nothing appended), then batch 1's files written, its commit
    #    blocked, killed.
    assert _kill_when_files_appear_while_the_commit_is_blocked(tmp_path, iceberg_orders) > 0
    assert _tags(_pyiceberg_table(tmp_path)).count(batch_tag("local", stream, 1)) == 0
    # 2. Killed right after batch 1's commit; 3. killed after batch 2's dead letters are published, before its marker.
    _run_until_crash(tmp_path, iceberg_orders, "after_lake_commit:1")
    _run_until_crash(tmp_path, iceberg_orders, "after_publish:2")
    done = subprocess.run(_runner(tmp_path, "--once"), env=_env(iceberg_orders), capture_output=True, text=True, timeout=600,
                          cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    tags = _assert_every_record_once(spark, tmp_path, expect)
    assert tags == [batch_tag("local", stream, b) for b in range(5)]
    # The killed attempt's data files belong to no snapshot: readers never see them (remove_orphan_files deletes them).
    live = {Path(str(p.file.file_path).removeprefix("file:")) for p in _pyiceberg_table(tmp_path).scan().plan_files()}
    assert _data_files(tmp_path) - live


def _commit_version(datasets: Path, schema: dict) -> None:
    """What a team commits for a new schema version: the file and its pinned digest (datasets/<name>/)."""
    import hashlib

    folder = datasets / DATASET
    number = len(list(folder.glob("schema.v*.avsc"))) + 1
    text = json.dumps(schema, indent=2)
    (folder / f"schema.v{number}.avsc").write_text(text)
    lock = json.loads((folder / "schemas.lock.json").read_text())
    lock[f"schema.v{number}.avsc"] = hashlib.sha256(text.encode()).hexdigest()
    (folder / "schemas.lock.json").write_text(json.dumps(lock, indent=2))


def _evolve(tmp_path: Path, datasets: Path, key: str) -> None:
    """Version 2 of orders committed as files (`items[].discount`, `channel`), and an input file of one order using
    both, orders with extreme values, and copies (one within the file, two of `key`, an order already committed)."""
    schema = json.loads((datasets / DATASET / "schema.v1.avsc").read_text())
    (items,) = [f for f in schema["fields"] if f["name"] == "items"]
    items["type"]["items"]["fields"].append({"name": "discount", "type": ["null", {"type": "bytes", "logicalType": "decimal",
                                                                                   "precision": 10, "scale": 2}], "default": None})
    schema["fields"].append({"name": "channel", "type": ["null", "string"], "default": None})
    # Issue 57's row 5: a time and a date a team adds, with values at the ends of their range (years 1 and 9999, the
    # Julian-Gregorian switch, 1899-12-31); Spark 3.x refused to write the ancient ones (WRITE_ANCIENT_DATETIME).
    schema["fields"].append({"name": "delivered_by", "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}],
                             "default": None})
    (shipping,) = [f for f in schema["fields"] if f["name"] == "shipping"]
    record = next(t for t in shipping["type"] if isinstance(t, dict)) if isinstance(shipping["type"], list) else shipping["type"]
    record["fields"].append({"name": "eta", "type": ["null", {"type": "int", "logicalType": "date"}], "default": None})
    _commit_version(datasets, schema)
    line = {"order_id": "evolved-1", "ordered_at": "2026-11-20T10:00:00+01:00", "customer_id": "c-1", "status": "paid",
            "currency": "EUR", "total": 10.5, "channel": "web",
            "items": [{"sku": "s-1", "quantity": 1, "unit_price": 10.5, "discount": 1.25}]}
    extremes = [{**line, "order_id": f"extreme-{n}", "delivered_by": micros, "shipping": {"country": "DE", "eta": day}}
                for n, (micros, day) in enumerate(EXTREMES)]
    # Copies (docs/datasets.md "Duplicates"): evolved-2 twice in the batch, the later one with another status (dropped
    # within the batch, differing); two copies of an order committed by the first run, one as it was sent (left out by
    # the append, the same) and one with another customer (left out, differing).
    copies = [{**line, "order_id": "evolved-2"}, {**line, "order_id": "evolved-2", "status": "shipped"}]
    committed = _first_line_of(tmp_path / "in", key)
    copies += [committed, {**committed, "customer_id": "c-changed"}]
    (tmp_path / "in" / "evolved.json").write_text("\n".join(json.dumps(x) for x in [line, *extremes, *copies]) + "\n")


def _first_line_of(folder: Path, order_id: str) -> dict:
    """The first input record (JSON lines under `folder`) of `order_id`, as it was sent."""
    for path in sorted(folder.glob("*.json")):
        for text in path.read_text().splitlines():
            try:
                record = json.loads(text)
            except ValueError:
                continue
            if isinstance(record, dict) and record.get("order_id") == order_id:
                return record
    raise AssertionError(f"no input record of {order_id}")


def _micros(text: str) -> int:
    return (datetime.fromisoformat(text) - datetime(1970, 1, 1)) // timedelta(microseconds=1)


# (delivered_by as epoch micros, shipping.eta): the ends of each type's documented range and the calendar switch.
EXTREMES = [(_micros("0001-01-01T00:00:00"), "0001-01-01"), (_micros("1582-10-04T12:00:00"), "1582-10-04"),
            (_micros("1582-10-15T00:00:00"), "1582-10-15"), (_micros("1899-12-31T23:59:59.999999"), "1899-12-31"),
            (_micros("9999-12-31T23:59:59.999999"), "9999-12-31")]
