"""dataset.json `unknown_fields` (glue_jobs/contract/unknown_fields.py): a JSON field the schema does not know, at any depth, is
rejected (dead letter unknown_field, with its path), kept (its JSON text in `_unknown_fields`) or dropped (counted),
and never silently lost. The same verdicts through the shipped contract (the JVM proof), the screen's Spark
expressions and the strict path alone, on every Spark line.

The `sensor` dataset is written as files, as a team would add one: a nested record, an array of records with a
decimal, a map of records and a json_text field.

A validate costs its planning, not its records: the records the first two tests judge are validated together, one
query per choice and way (`judged`, module-scoped), each row matched back to its case by its offset; each assertion
compares dicts keyed by payload. The batch tests
run the writer once per dataset and batch they claim something of.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from glue_jobs import datasets
from tests.spark.streaming_support import json_envelope

NOW_MS = 1_800_000_000_000
SCHEMA = {"type": "record", "name": "Reading", "namespace": "test.sensor", "fields": [
    {"name": "id", "type": "string"},
    {"name": "at", "type": "long"},
    {"name": "battery_pct", "type": ["null", "int"], "default": None},
    {"name": "location", "type": {"type": "record", "name": "Location", "fields": [
        {"name": "lat", "type": "double"}, {"name": "lon", "type": "double"}]}},
    {"name": "readings", "type": {"type": "array", "items": {"type": "record", "name": "Value", "fields": [
        {"name": "kind", "type": "string"},
        {"name": "value", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 3}}]}}},
    {"name": "probes", "type": {"type": "map", "values": "Location"}},
    {"name": "extra", "type": ["null", "string"], "default": None},
]}
BASE = {"id": "s-1", "at": NOW_MS - 60_000, "battery_pct": 80, "location": {"lat": 1.5, "lon": 2.5},
        "readings": [{"kind": "t", "value": 21.5}, {"kind": "h", "value": 40.125}], "probes": {"north": {"lat": 0.5, "lon": 0.25}},
        "extra": None}


def _dataset(root, choice: str | None, **more):
    name = f"sensor_{choice or 'default'}"
    folder = root / name
    folder.mkdir()
    (folder / "schema.v1.avsc").write_text(json.dumps(SCHEMA), encoding="utf-8")
    contract = {"description": "sensor readings", "key": ["id"], "json_text": ["extra"],
                "event_time": {"field": "at", "format": "epoch_millis"}}
    if choice:
        contract["unknown_fields"] = choice
    contract.update(more)
    (folder / "dataset.json").write_text(json.dumps(contract), encoding="utf-8")
    (folder / "schemas.lock.json").write_text(json.dumps({"schema.v1.avsc": datasets.file_digest((folder / "schema.v1.avsc").read_bytes())}))
    return name


@pytest.fixture(scope="module")
def sensors(tmp_path_factory):
    root = tmp_path_factory.mktemp("datasets")
    names = {choice: _dataset(root, choice) for choice in ("reject", "keep", "drop", None)}
    mp = pytest.MonkeyPatch()
    mp.setenv(datasets.ROOT_VARIABLE, str(root))
    yield {choice: datasets.load(name) for choice, name in names.items()}
    mp.undo()


def _with(**changes) -> str:
    """BASE with raw JSON texts added: `a.b` adds key b to the object at a (`readings.1.note`: the second reading)."""
    record = json.loads(json.dumps(BASE))
    marks = {}
    for i, (path, raw) in enumerate(changes.items()):
        target, keys = record, path.split(".")
        for key in keys[:-1]:
            target = target[int(key)] if isinstance(target, list) else target[key]
        target[keys[-1]] = marks[f"__{i}__"] = f"__{i}__"
        marks[f"__{i}__"] = raw
    text = json.dumps(record, separators=(",", ":"))
    for mark, raw in marks.items():
        text = text.replace(f'"{mark}"', raw)
    return text


# (payload, the unknown fields in order as {path: JSON text}); none of these is otherwise invalid.
CASES = [
    (_with(), {}),
    (_with(batery_pct="80"), {"batery_pct": "80"}),  # a misspelled optional field: battery_pct is 80 in BASE anyway
    (json.dumps({**{k: v for k, v in BASE.items() if k != "battery_pct"}, "batery_pct": 80}), {"batery_pct": "80"}),
    (_with(**{"location.altitude": "12.5"}), {"location.altitude": "12.5"}),
    (_with(**{"readings.1.note": '"warm \\"inside\\""'}), {"readings[1].note": '"warm \\"inside\\""'}),
    (_with(**{"probes.north.depth": '{"m":[1,null,"x"]}'}), {'probes["north"].depth': '{"m":[1,null,"x"]}'}),
    (_with(fw="null", **{"location.src": "true", "readings.0.unit": '"\\u00b0C"'}),
     {"fw": "null", "location.src": "true", "readings[0].unit": '"\u00b0C"'}),
    (_with(**{"location.note": "null"}), {"location.note": "null"}),  # only a null: the screen leaves it to the strict path
    (_with(extra='{"anything":{"at":["any depth"]}}'), {}),  # inside a json_text field: any JSON value is its value
    (_with(**{"probes.south": '{"lat":1,"lon":2}'}), {}),  # a map's key is the map's
]


CHOICES = ("reject", "keep", "drop", None)
WAYS = ("shipped", "screened", "strict")
# A misspelled required field (test_an_unknown_field_comes_before_the_types): judged in the same query as CASES.
MISSPELLED = json.dumps({**{k: v for k, v in BASE.items() if k != "location"}, "locaton": BASE["location"]})


@pytest.fixture(scope="module")
def judged(spark, sensors):
    """Every payload (CASES, then MISSPELLED) validated on every choice in each of `_three_ways`' three ways: the shipped
    contract (the JVM function proving), the screen's Spark expressions proving, the strict path alone. A validate is
    planned when it is called (the patches take effect then), so the twelve frames are built under `_three_ways`'
    patches, then each collected once; the contract judges every record on its own.
    {(choice, way): (the frame's columns, {payload: row as a dict of those columns}, the payloads in row order)}."""
    from pyspark.sql import functions as F

    from glue_jobs.contract import strict_json, typed_contract, typed_screen
    from glue_jobs.contract.typed_contract import validate

    payloads = [p for p, _ in CASES] + [MISSPELLED]
    assert len(set(payloads)) == len(payloads)  # a payload names its case
    envelope = json_envelope(spark, payloads)
    frames = {}
    # As _three_ways (tests/spark/test_typed_screen.py) builds them: the stages are built once per dataset and function
    # (typed_contract._selects), so they are cleared to build them again with the JVM function off (the screen's Spark
    # expressions prove), then with the screen off too (the strict path alone). The shipped frames are built last, after
    # a clear, so no patched stage stays in the cache.
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(strict_json, "register", lambda session, dataset: None)
            typed_contract._selects.cache_clear()
            for choice in CHOICES:
                frames[choice, "screened"] = validate(envelope, sensors[choice], now_ms=NOW_MS)
            mp.setattr(typed_screen, "proven", lambda text_name, wrapped: F.lit(False))
            typed_contract._selects.cache_clear()
            for choice in CHOICES:
                frames[choice, "strict"] = validate(envelope, sensors[choice], now_ms=NOW_MS)
    finally:
        typed_contract._selects.cache_clear()
    for choice in CHOICES:
        frames[choice, "shipped"] = validate(envelope, sensors[choice], now_ms=NOW_MS)
    judged = {}
    for (choice, way), frame in frames.items():
        # One query per frame: a union of the twelve (tagged by choice and way) measured slower than twelve collects.
        columns = frame.columns
        rows = [r.asDict(recursive=True) for r in frame.collect()]
        order = [payloads[int(r["source_offset"]) - 1] for r in rows]
        judged[choice, way] = (columns, dict(zip(order, rows, strict=True)), order)
    return judged


def test_the_three_choices_on_every_json_path(judged):
    for choice in CHOICES:
        (columns, shipped, order), (_, screened, _), (_, strict, _) = (judged[choice, way] for way in WAYS)
        assert order == [p for p, _ in CASES] + [MISSPELLED], choice  # one row per record, in order
        assert all(judged[choice, way][2] == order for way in WAYS), choice
        assert shipped == strict, choice
        assert screened == strict, choice
        verdicts = {p: (shipped[p]["reason"], shipped[p]["detail"]) for p, _ in CASES}
        if choice in ("reject", None):
            assert verdicts == {p: ("unknown_field", f"{next(iter(unknown))}: field not in the schema") if unknown else (None, None)
                                for p, unknown in CASES}, choice
            assert "_unknown_fields" not in columns and "_unknown_count" not in columns
        else:
            assert verdicts == {p: (None, None) for p, _ in CASES}, choice
            assert {p: shipped[p]["_unknown_count"] for p, _ in CASES} == {p: len(unknown) or None for p, unknown in CASES}, choice
            if choice == "keep":
                stored = {p: shipped[p]["_unknown_fields"] for p, _ in CASES}
                assert {p: json.loads(s) if s else {} for p, s in stored.items()} == {
                    p: {k: json.loads(v) for k, v in unknown.items()} for p, unknown in CASES}
                assert {p: list(json.loads(s)) for p, s in stored.items() if s is not None} == {
                    p: list(unknown) for p, unknown in CASES if stored[p] is not None}
            else:
                assert "_unknown_fields" not in columns


def test_an_unknown_field_comes_before_the_types(judged):
    """Rejected, a record with an unknown field and a type problem says unknown_field (a misspelled required field
    names the misspelling, not only the absence); kept or dropped, the type problem is its reason. (MISSPELLED, through
    the shipped contract: `judged`.)"""
    assert all(judged[choice, "shipped"][2].count(MISSPELLED) == 1 for choice in ("reject", "keep", "drop"))  # one row
    verdicts = {choice: (judged[choice, "shipped"][1][MISSPELLED]["reason"], judged[choice, "shipped"][1][MISSPELLED]["detail"])
                for choice in ("reject", "keep", "drop")}
    assert verdicts == {"reject": ("unknown_field", "locaton: field not in the schema"),
                        "keep": ("missing_required_field", "location: required field absent, null or empty"),
                        "drop": ("missing_required_field", "location: required field absent, null or empty")}


def _batch(spark, dataset, tmp_path, payloads):
    from glue_jobs.batch import MicroBatchWriter

    writer = MicroBatchWriter(spark, source_name="sensors", lake_path=str(tmp_path / "lake"), dead_letter_path=str(tmp_path / "dead"),
                              checkpoint_path=str(tmp_path / "cp"), dataset=dataset, clock=lambda: NOW_MS / 1000,
                              stream_id="abcd1234")
    return writer(json_envelope(spark, payloads), 0)


def test_kept_fields_are_a_declared_column_a_foreign_reader_reads(spark, sensors, tmp_path):
    """keep: the lake's Parquet files hold `_unknown_fields` as a string column (pyarrow reads it, and the JSON in it);
    the batch counts the records that had one."""
    payloads = [p for p, _ in CASES]
    stats = _batch(spark, sensors["keep"], tmp_path, payloads)
    with_unknown = sum(1 for _, unknown in CASES if unknown)
    # One key: the copies collapse to one row; every valid record that had unknown fields is counted, copies too.
    assert (stats.records_written, stats.dead_letters, stats.unknown_fields) == (1, 0, with_unknown)
    assert stats.duplicates_collapsed == len(payloads) - 1 and with_unknown > 1
    ids = [json.dumps({**json.loads(p), "id": f"s-{i}"}) for i, p in enumerate(payloads)]
    stats = _batch(spark, sensors["keep"], tmp_path / "distinct", ids)
    assert (stats.records_written, stats.unknown_fields) == (len(ids), with_unknown)
    lake = str(tmp_path / "distinct" / "lake")
    try:  # pyarrow on the default Spark line; Spark itself on the others (no pyarrow there)
        import pyarrow.parquet as pq
    except ImportError:
        frame = spark.read.parquet(lake)
        assert dict(frame.dtypes)["_unknown_fields"] == "string"
        stored = {r.id: r._unknown_fields for r in frame.select("id", "_unknown_fields").collect()}
    else:
        table = pq.read_table(lake)
        assert str(table.schema.field("_unknown_fields").type) == "string"
        stored = dict(zip(table.column("id").to_pylist(), table.column("_unknown_fields").to_pylist(), strict=True))
    assert {i: json.loads(stored[f"s-{i}"]) if stored[f"s-{i}"] else {} for i in range(len(ids))} == {
        i: {k: json.loads(v) for k, v in unknown.items()} for i, (_, unknown) in enumerate(CASES)}


def test_dropped_fields_are_counted_in_the_batch_and_its_metrics(spark, sensors, tmp_path):
    from glue_jobs.metrics import UNKNOWN_FIELDS, metric_data

    ids = [json.dumps({**json.loads(p), "id": f"s-{i}"}) for i, (p, _) in enumerate(CASES)]
    stats = _batch(spark, sensors["drop"], tmp_path, ids)
    assert (stats.records_written, stats.unknown_fields) == (len(ids), sum(1 for _, unknown in CASES if unknown))
    [metric] = [m for m in metric_data(stats, "dev") if m["MetricName"] == UNKNOWN_FIELDS]
    assert metric["Value"] == stats.unknown_fields and {"Name": "Dataset", "Value": "sensor_drop"} in metric["Dimensions"]
    rejected = _batch(spark, sensors["reject"], tmp_path / "reject", ids)
    assert rejected.dead_letters_by_reason == {"unknown_field": stats.unknown_fields} and rejected.unknown_fields == 0


@pytest.mark.e2e
def test_kept_fields_on_an_iceberg_lake_read_back_by_pyiceberg(tmp_path):
    """keep on Iceberg: the table the runner creates declares `_unknown_fields` and its rows hold them (pyiceberg
    reads the table, a reader the project did not write)."""
    from devtools.iceberg_demo import local_catalog
    from glue_jobs.local_runner import LOCAL_ICEBERG_NAMESPACE
    from tests.spark.iceberg_support import REPO, _env

    root = tmp_path / "datasets"
    root.mkdir()
    name = _dataset(root, "keep", table_format="iceberg")
    (tmp_path / "in").mkdir()
    at = int(time.time() * 1000) - 60_000  # the runner's processing time is now
    lines = [json.dumps({**json.loads(p), "id": f"s-{i}", "at": at}) for i, (p, _) in enumerate(CASES)]
    (tmp_path / "in" / "part-0.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    command = [sys.executable, "-m", "glue_jobs", "run-local", "--dataset", name, "--input", str(tmp_path / "in"), "--lake",
               str(tmp_path / "lake"), "--dead-letter", str(tmp_path / "dead"), "--checkpoint", str(tmp_path / "cp"), "--once"]
    done = subprocess.run(command, env=_env(root), capture_output=True, text=True, timeout=600, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    with_unknown = sum(1 for _, unknown in CASES if unknown)
    assert f"written={len(lines)} dead_letters=0" in done.stdout and f"unknown_fields={with_unknown} " in done.stdout
    table = local_catalog(tmp_path / "lake").load_table(f"{LOCAL_ICEBERG_NAMESPACE}.{name}")
    assert str(table.schema().find_field("_unknown_fields").field_type) == "string"
    rows = table.scan(selected_fields=("id", "_unknown_fields")).to_arrow().to_pylist()
    stored = {r["id"]: json.loads(r["_unknown_fields"]) if r["_unknown_fields"] else {} for r in rows}
    assert stored == {f"s-{i}": {k: json.loads(v) for k, v in unknown.items()} for i, (_, unknown) in enumerate(CASES)}
