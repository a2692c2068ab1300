"""Issue 57's table, one row per line: what a team did on 1d225b0, what happened then (asserted here where the old
behaviour can still be produced), and what happens now: stored as sent, a dead letter with its reason and path, or a
refusal with a clear message; none is silent.

Rows whose proof needs a runner subprocess, a kill, the JVM decoder or a CLI run are proven by the test the row names;
this table checks that test is still in the suite (renamed or removed, the row fails). The others run here, on every
Spark line.
"""

from __future__ import annotations

import ast
import base64
import dataclasses
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from glue_jobs import datasets
from glue_jobs.contract.typed_contract import validate
from glue_jobs.sources import from_local_files
from tests.spark.streaming_support import json_envelope

TESTS = Path(__file__).resolve().parent
NOW_MS = 1_800_000_000_000  # 2027-01-15T08:00:00Z
ORDER = {"order_id": "o-1", "ordered_at": "2027-01-15T07:15:00+01:00", "customer_id": "c-9", "status": "paid",
         "currency": "EUR", "total": 25.5, "items": [{"sku": "a", "quantity": 2, "unit_price": 10.25}],
         "shipping": {"country": "DE", "city": "Bonn"}}


@dataclasses.dataclass(frozen=True)
class Row:
    done: str  # what the team did (issue 57's first column)
    before: str  # what 1d225b0 did
    after: str  # what happens now
    check: Callable | str  # a check run here, or "file.py::test_name" that proves it


def _order(**changes) -> dict:
    record = json.loads(json.dumps(ORDER))
    for path, value in changes.items():
        target, keys = record, path.split(".")
        for key in keys[:-1]:
            target = target[int(key)] if isinstance(target, list) else target[key]
        target[keys[-1]] = value
    return record


def _verdicts(spark, dataset, records: list[dict]) -> list[tuple]:
    rows = validate(json_envelope(spark, [json.dumps(r) for r in records]), dataset, now_ms=NOW_MS).collect()
    return [(r.reason, r.detail) for r in rows]


def _unknown_at_depths(spark, tmp_path) -> None:
    orders = datasets.load("orders")
    records = [_order(note="x"), _order(**{"shipping.floor": 3}), _order(**{"items.0.color": "red"})]
    assert orders.unknown_fields == "reject"
    assert _verdicts(spark, orders, records) == [("unknown_field", f"{path}: field not in the schema")
                                                 for path in ("note", "shipping.floor", "items[0].color")]
    # Before: stored without the field. `drop` stores exactly that, and now counts it.
    dropped = validate(json_envelope(spark, [json.dumps(r) for r in records]), dataclasses.replace(orders, unknown_fields="drop"),
                       now_ms=NOW_MS).collect()
    assert [(r.reason, r._unknown_count) for r in dropped] == [(None, 1)] * 3


def _misspelled_optional(spark, tmp_path) -> None:
    orders = datasets.load("orders")
    misspelled = {k: v for k, v in _order().items() if k != "shipping"} | {"shiping": ORDER["shipping"]}
    assert _verdicts(spark, orders, [misspelled]) == [("unknown_field", "shiping: field not in the schema")]
    kept = validate(json_envelope(spark, [json.dumps(misspelled)]), dataclasses.replace(orders, unknown_fields="drop"),
                    now_ms=NOW_MS).collect()
    assert (kept[0].reason, kept[0].shipping) == (None, None)  # before: valid, shipping null, the value gone unseen


def _invalid_utf8_line(spark, tmp_path) -> None:
    line = json.dumps(_order()).encode().replace(b'"c-9"', b'"cu\xc3(\xff\xfe"')
    (tmp_path / "part.json").write_bytes(line + b"\n")
    raw = spark.read.format("text").option("wholetext", "true").load(str(tmp_path))
    [row] = from_local_files(raw, "local", NOW_MS).collect()
    assert (row.problem.reason, base64.b64decode(row.payload)) == ("malformed_json", line)


ROWS = [
    Row("a field the schema does not know, at depth 0, 1 or 2", "valid; the field is gone",
        "dead letter unknown_field with the field's path (orders: reject; keep and drop are declared choices)",
        _unknown_at_depths),
    Row('a misspelled optional field ("shiping")', "valid, stored with shipping null; the value is gone",
        "dead letter unknown_field naming the misspelling", _misspelled_optional),
    Row("a record with an invalid UTF-8 byte (local file)", "valid, stored with U+FFFD in place of the byte",
        "dead letter malformed_json, payload the line's bytes in base64", _invalid_utf8_line),
    Row("a record with an invalid UTF-8 byte (Kinesis)", "valid, stored with U+FFFD (Glue decodes before the job)",
        "counted: ReplacementCharacters per source (what Glue does is unverified: docs/streaming-job.md)",
        "test_streaming_batch.py::test_a_kinesis_batch_counts_the_payloads_holding_a_replacement_character"),
    Row("a Kafka frame whose Avro string is not UTF-8", "stored as cu\\ufffd(\\ufffd\\ufffd",
        "dead letter malformed_record with the value's bytes",
        "test_registry_frames.py::test_undecodable_values_are_dead_letters_with_their_bytes_and_reason"),
    Row("dates and times in years 1 and 9999, at the calendar switch, 1899-12-31 (Parquet)",
        "the batch fails with WRITE_ANCIENT_DATETIME on every retry: the source is stuck",
        "written and read back equal by Spark and pyarrow",
        "test_typed_contract.py::test_extreme_valid_dates_and_timestamps_read_back_equal_with_pyarrow"),
    Row("the same values added as orders v2 fields through files only (Iceberg)", "the batch fails for good",
        "written and read back equal by pyiceberg",
        "test_iceberg_lake.py::test_an_iceberg_dataset_runs_locally_is_maintained_and_evolves_read_back_by_pyiceberg_and_spark"),
    Row("a valid record no write takes", "the batch fails on every retry: the source is stuck",
        "dead letter unwritable with the write's error; the source goes on (kill and restart included)",
        "test_streaming_runner.py::test_sigkill_mid_stream_three_times_then_finish_exactly_once"),
    Row("compact-local or run-local without --dataset where several exist", "clickstream's contract, exit 0, files deleted",
        "refused: --dataset is required, naming the datasets",
        "test_streaming_runner.py::test_run_local_generate_and_compact_local_name_no_dataset_for_you_where_there_are_several"),
    Row("another dataset's --dataset on a lake, or another source's on a checkpoint", "0 records or every one dead, exit 0",
        "refused, naming both owners",
        "test_ownership.py::test_a_lake_or_checkpoint_of_another_dataset_or_source_is_refused_by_run_local_and_compact_local"),
    Row("files in a subfolder, named _x or .x; lines appended to a file already read", "skipped without a word",
        "named in the run's summary; a warning for a file changed after it was read",
        "test_ownership.py::test_every_input_the_local_source_does_not_read_is_said_in_the_summary"),
    Row("orders rows in the sensor lake, then compact-local --dataset sensor_readings",
        "the orders file deleted; rows kept with a null key", "compaction's check fails: the inputs stay, the run fails",
        "test_compaction_verify.py::test_an_input_file_of_another_dataset_fails_the_check"),
    Row("the same key twice in an hour with different values", "the later copy dropped, counted nowhere",
        "the first arrival kept (docs/datasets.md), the differing copy counted (metric and summary)",
        "test_compaction_verify.py::test_differing_duplicates_are_counted"),
    Row("the same key twice in one micro-batch with different values", "the later copy dropped by the streaming job, "
        "counted nowhere (the compaction never sees it)", "the first arrival kept, the differing copy counted "
        "(DifferingDuplicates, the batch's marker and the run summary)",
        "test_dropped_copies.py::test_the_dropped_copies_that_differ_from_the_kept_one_are_counted"),
    Row("an Iceberg dataset: a key the table holds for the hour sent again with different values",
        "left out of the append, counted as a duplicate only", "left out, and counted as differing when it differs",
        "test_iceberg_lines.py::test_the_iceberg_lake_step_on_this_spark_line"),
    Row("dataset check where every record fails", "exit 0", "exit 3 above --max-failure-rate (default 0)",
        "test_dataset_check.py::test_check_exits_non_zero_when_records_fail_so_it_can_gate_a_pull_request"),
    Row("dataset new Sensor-Readings; Avro names, enum symbols, defaults and rule ranges that cannot work",
        "written; synth fails for every dataset, or the failure comes later or never",
        "refused before anything is written, naming the file and field",
        "../ops/test_dataset_draft.py::test_a_name_or_field_avro_refuses_is_refused_before_anything_is_written"),
    Row("the same problems in files a team wrote by hand", "accepted", "refused when read, naming the file and field",
        "../ops/test_dataset_draft.py::test_dataset_files_avro_or_the_contract_would_refuse_later_are_refused_when_read"),
    Row("a file where --lake or --checkpoint wants a folder", "a Python traceback", "one line naming the option",
        "test_streaming_runner.py::test_a_file_where_a_folder_is_wanted_is_one_line_not_a_traceback"),
]


def _test_names(path: Path) -> set[str]:
    return {node.name for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")}


@pytest.mark.parametrize("row", ROWS, ids=[row.done[:60] for row in ROWS])
def test_each_line_of_the_table_is_stored_as_sent_dead_lettered_or_refused(row, spark, tmp_path):
    assert row.before and row.after and row.before != row.after
    if callable(row.check):
        row.check(spark, tmp_path)
        return
    file, _, name = row.check.partition("::")
    assert name in _test_names((TESTS / file).resolve()), f"{row.check} proves this row: it is not in the suite"
