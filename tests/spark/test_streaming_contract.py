"""clickstream's event contract: strict types, every reason code, normalization, UTC partitions. Written for the
hand-tuned flat contract, which clickstream ran until 2026-11-27; since then every assertion holds through the
typed contract every dataset runs (LakeTable.validate)."""
# ruff: noqa: UP031 - JSON payload literals read better with %-formatting than with doubled f-string braces

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from glue_jobs.contract import UNKNOWN_COUNT, VALIDATED_EXTRA_COLUMNS, VALIDATED_INGESTION_COLUMNS
from glue_jobs.lake.lake_layout import lake_write_columns
from glue_jobs.lake.lake_table import LakeTable
from glue_jobs.schema import PROBLEM_DDL, contract_fields, envelope_schema, spark_source_schema

from .streaming_support import json_envelope, literal_frame


def validate(envelope, *, now_ms):
    """clickstream's contract, as the jobs run it."""
    return LakeTable.of("clickstream").validate(envelope, now_ms=now_ms)

NOW_MS = 1_700_000_000_000  # 2023-11-14T22:13:20Z
T = 1_699_999_200_123  # 2023-11-14T22:00:00.123Z


def _validate(spark, payloads):
    return validate(json_envelope(spark, payloads), now_ms=NOW_MS).collect()


def _written(spark, payloads, batch_id=7):
    """The lake rows the valid records become: validate(), then the write-time columns (glue_jobs.lake.lake_layout)."""
    validated = validate(json_envelope(spark, payloads), now_ms=NOW_MS)
    lake = lake_write_columns(validated.where("reason IS NULL"), batch_id=batch_id)
    return lake.select(*(F.col(c).cast("string").alias(c) if c == "event_date" else c for c in lake.columns)).collect()


def test_validate_returns_exactly_the_written_columns_but_the_write_time_ones(spark):
    frame = validate(json_envelope(spark, []), now_ms=NOW_MS)
    fields = tuple(f.name for f in contract_fields())
    # clickstream drops unknown fields (dataset.json), counting them: UNKNOWN_COUNT, which no write stores.
    assert tuple(frame.columns) == (*fields, *VALIDATED_INGESTION_COLUMNS, UNKNOWN_COUNT, *VALIDATED_EXTRA_COLUMNS)


def _one(spark, payload):
    (row,) = _validate(spark, [payload])
    return row


def test_valid_record_is_typed_normalized_and_partitioned_in_utc(spark):
    row = _one(spark, '{"event_id":"e-1","event_type":"  Page_View ","event_time":%d,"user_id":"123",'
                      '"amount":12.5,"currency":"EUR","metadata":{"a": [1, 2], "b": {"c": null}}}' % T)
    assert row.asDict() == {
        "event_id": "e-1",
        "event_type": "page_view",
        "event_time": row.event_time,
        "user_id": "123",
        "amount": 12.5,
        "currency": "EUR",
        "metadata": '{"a":[1,2],"b":{"c":null}}',
        "source": "test",
        "source_partition": "p0",
        "source_offset": "1",
        "arrival_time": row.arrival_time,
        UNKNOWN_COUNT: None,
        "reason": None,
        "detail": None,
        "payload": row.payload,
    }
    (written,) = _written(spark, [row.payload])
    assert written.asDict() == {**{k: v for k, v in row.asDict().items() if k not in (*VALIDATED_EXTRA_COLUMNS, UNKNOWN_COUNT)},
                                "batch_id": 7, "event_date": "2023-11-14", "event_hour": 22}


def test_event_time_is_exact_to_the_millisecond(spark):
    frame = validate(json_envelope(spark, ['{"event_id":"e","event_type":"x","event_time":%d}' % T]), now_ms=NOW_MS)
    (millis,) = frame.select(F.expr("unix_millis(event_time)")).first()
    assert millis == T


@pytest.mark.parametrize(
    ("payload", "reason", "detail"),
    [
        ("not json", "malformed_json", "payload is not one JSON object"),
        ("", "malformed_json", "payload is not one JSON object"),
        ('{"event_id":"e","event_type":"x"', "malformed_json", "payload is not one JSON object"),
        ('[{"event_id":"e","event_type":"x","event_time":%d}]' % T, "malformed_json", "payload is not one JSON object"),
        ('{"event_id":"e","event_type":"x","event_time":%d} trailing' % T, "malformed_json", "payload is not one JSON object"),
        ('{"event_id":"e","event_type":"x","event_time":%d,"amount":NaN}' % T, "malformed_json", "payload is not one JSON object"),
        ('{"event_id":"e","event_type":"x","event_time":%d,"amount":-Infinity}' % T, "malformed_json", "payload is not one JSON object"),
        ("{'event_id':'e','event_type':'x','event_time':%d}" % T, "malformed_json", "payload is not one JSON object"),
        ('{"event_id":\'e\',"event_type":"x","event_time":%d}' % T, "malformed_json", "payload is not one JSON object"),
        ('{"event_type":"x","event_time":%d}' % T, "missing_required_field", "event_id: required field absent, null or empty"),
        ('{"event_id":null,"event_type":"x","event_time":%d}' % T, "missing_required_field", "event_id: required field absent, null or empty"),
        ('{"event_id":"","event_type":"x","event_time":%d}' % T, "missing_required_field", "event_id: required field absent, null or empty"),
        ('{"event_id":"e","event_type":"  ","event_time":%d}' % T, "missing_required_field", "event_type: required field absent, null or empty"),
        ('{"event_id":"e","event_type":"x"}', "missing_required_field", "event_time: required field absent, null or empty"),
        ('{"event_id":123,"event_type":"x","event_time":%d}' % T, "invalid_type", "event_id: wrong JSON type"),
        ('{"event_id":"e","event_type":true,"event_time":%d}' % T, "invalid_type", "event_type: wrong JSON type"),
        ('{"event_id":"e","event_type":"x","event_time":%d,"user_id":42}' % T, "invalid_type", "user_id: wrong JSON type"),
        ('{"event_id":"e","event_type":"x","event_time":%d,"user_id":{"id":"u"}}' % T, "invalid_type", "user_id: wrong JSON type"),
        ('{"event_id":"e","event_type":"x","event_time":%d,"currency":["EUR"]}' % T, "invalid_type", "currency: wrong JSON type"),
        ('{"event_id":"e","event_type":"x","event_time":"%d"}' % T, "invalid_type", "event_time: wrong JSON type"),
        ('{"event_id":"e","event_type":"x","event_time":%d.5}' % T, "invalid_type", "event_time: wrong JSON type"),
        ('{"event_id":"e","event_type":"x","event_time":%de0}' % T, "invalid_type", "event_time: wrong JSON type"),
        ('{"event_id":"e","event_type":"x","event_time":%d,"amount":"12.5"}' % T, "invalid_type", "amount: wrong JSON type"),
        ('{"event_id":"e","event_type":"x","event_time":%d,"amount":"NaN"}' % T, "invalid_type", "amount: wrong JSON type"),
        ('{"event_id":"e","event_type":"x","event_time":%d,"amount":false}' % T, "invalid_type", "amount: wrong JSON type"),
        ('{"event_id":"e","event_type":"x","event_time":946684799999}', "out_of_range", "event_time: value out of range"),
        ('{"event_id":"e","event_type":"x","event_time":%d}' % (NOW_MS + 86_400_001), "out_of_range", "event_time: value out of range"),
        ('{"event_id":"e","event_type":"x","event_time":-5}', "out_of_range", "event_time: value out of range"),
        ('{"event_id":"e","event_type":"x","event_time":99999999999999999999}', "out_of_range", "event_time: value out of range"),
        ('{"event_id":"e","event_type":"x","event_time":9223372036854775807}', "out_of_range", "event_time: value out of range"),
        ('{"event_id":"e","event_type":"x","event_time":%d,"amount":1e400}' % T, "out_of_range", "amount: value out of range"),
    ],
)
def test_invalid_records_get_their_reason_and_keep_the_payload(spark, payload, reason, detail):
    row = _one(spark, payload)
    assert (row.reason, row.detail, row.payload) == (reason, detail, payload)
    assert row.event_time is None and _written(spark, [payload]) == []


GOOD = '{"event_id":"e","event_type":"x","event_time":%d}' % T


@pytest.mark.parametrize(
    "payload",
    [
        GOOD + GOOD,  # two records on one line
        GOOD + " " + GOOD,
        GOOD + "," + GOOD,
        GOOD + "\n" + GOOD,
        GOOD + "}",
        GOOD + "]{}",  # text after the object that starts with "]"
        GOOD + '}{"b":{}}',
        GOOD + ' x}',
        GOOD[:-1] + ',"v":{"a":[1]}}]{"w":1}',
        '{"event_id":"e","event_id":"f","event_type":"x","event_time":%d}' % T,  # a repeated key: which id?
        '{"event_id":"e","event_type":"x","event_time":%d,"event_time":%d}' % (T, T),  # even with the same value
        '{"event_id":"e","event_type":"x","event_time":%d,"note":1,"note":2}' % T,  # a field outside the contract too
        '{"event_id":"e","event_type":"x","event_time":%d,"event\\u005fid":"f"}' % T,  # the same key, escaped
        '{"event_id":"e","event_type":"x","event_time":"not a number","event_type":"y"}',  # before any type check
        # An escaped colon in a value would let counting characters miss the second event_id: escapes re-parse.
        '{"event_id":"a","event_id":"b","event_type":"x","event_time":%d,"metadata":"\\u003a"}' % T,
    ],
)
def test_a_payload_that_is_not_exactly_one_object_with_unique_keys_is_malformed(spark, payload):
    row = _one(spark, payload)
    assert (row.reason, row.detail, row.payload) == ("malformed_json", "payload is not one JSON object", payload)


@pytest.mark.parametrize(
    "payload",
    [
        GOOD + "\n",
        "  " + GOOD + " \t",
        GOOD[:-1] + ',"metadata":{"a":1,"a":2}}',  # nested keys are the metadata's own text, stored as written
        GOOD[:-1] + ',"metadata":{"list":[{"x":1},{"x":2}],"s":"}] {"}}',
        GOOD[:-1] + ',"user_id":"u}1]"}',
        GOOD[:-1] + ',"extra":"a:b}","more":{"k":[1]}}',  # keys outside the contract: parsed again, still valid
    ],
)
def test_one_object_with_unique_top_level_keys_stays_valid(spark, payload):
    row = _one(spark, payload)
    assert (row.reason, row.event_id) == (None, "e")


def test_reason_priority_missing_before_type_before_range(spark):
    rows = _validate(spark, [
        '{"event_type":"x","event_time":"1","amount":1e400}',
        '{"event_id":"e","event_type":"x","event_time":1,"amount":"1"}',
    ])
    assert [r.reason for r in rows] == ["missing_required_field", "invalid_type"]


def test_range_bounds_are_inclusive(spark):
    rows = _written(spark, [
        '{"event_id":"a","event_type":"x","event_time":946684800000}',
        '{"event_id":"b","event_type":"x","event_time":%d}' % (NOW_MS + 86_400_000),
    ])
    assert sorted((r.event_id, r.event_date, r.event_hour) for r in rows) == [("a", "2000-01-01", 0), ("b", "2023-11-15", 22)]


def test_strings_that_look_like_other_json_types_stay_strings(spark):
    row = _one(spark, '{"event_id":"123","event_type":"true","event_time":%d,"user_id":"{\\"x\\":1}",'
                      '"currency":"[1]","metadata":"\\"quoted\\""}' % T)
    assert (row.reason, row.event_id, row.event_type, row.user_id, row.currency) == (None, "123", "true", '{"x":1}', "[1]")
    assert row.metadata == '"\\"quoted\\""'


@pytest.mark.parametrize(
    ("metadata", "stored"),
    [('{"k": "v"}', '{"k":"v"}'), ('[1, "a", null]', '[1,"a",null]'), ('"note"', '"note"'), ("42", "42"),
     ("true", "true"), ("null", None), ('"caf\\u00e9 \\n"', '"café \\n"'),
     ('"café /p/1 <b> \u2028 ☃ 𝄞"', '"café /p/1 <b> \u2028 ☃ 𝄞"')],  # no backslash: the text in quotes
)
def test_metadata_is_stored_as_its_json_text(spark, metadata, stored):
    row = _one(spark, '{"event_id":"e","event_type":"x","event_time":%d,"metadata":%s}' % (T, metadata))
    assert (row.reason, row.metadata) == (None, stored)


def test_a_string_s_json_literal_is_written_as_to_json_writes_it(spark):
    """json_tokens.json_string_literal (a json_text field holding a string): the text in quotes for every text without
    '"', backslash or control character (Jackson's generator leaves non-ASCII and '/' as they are)."""
    from glue_jobs.decoding import json_tokens

    texts = ["", "plain", "café", "/p/1 <b>&amp;</b>", "\u2028\u2029", "☃ 𝄞", "\x7f", "'single'", "{not: json}"]
    frame = spark.range(1).select(F.explode(F.array(*(F.lit(t) for t in texts))).alias("t"))
    got = frame.select(json_tokens.json_string_literal(F.col("t")).alias("jackson")).collect()
    assert [r.jackson for r in got] == ['"%s"' % t for t in texts]


def test_integral_amount_is_a_number(spark):
    row = _one(spark, '{"event_id":"e","event_type":"x","event_time":%d,"amount":3}' % T)
    assert (row.reason, row.amount) == (None, 3.0)


def test_partitions_are_utc_whatever_the_session_time_zone(spark):
    # 2023-11-14T23:30Z is 15:30 on the 14th in Los Angeles and 08:30 on the 15th in Tokyo.
    payload = '{"event_id":"e","event_type":"x","event_time":1700004600000}'
    seen = set()
    for zone in ("America/Los_Angeles", "Asia/Tokyo", "UTC"):
        spark.conf.set("spark.sql.session.timeZone", zone)
        try:
            validated = validate(json_envelope(spark, [payload]), now_ms=NOW_MS)
            row = lake_write_columns(validated, batch_id=0).select(
                F.col("event_date").cast("string"), "event_hour", F.expr("unix_millis(event_time)").alias("ms")).first()
            seen.add(tuple(row))
        finally:
            spark.conf.set("spark.sql.session.timeZone", "UTC")
    assert seen == {("2023-11-14", 23, 1700004600000)}


def _avro_envelope(spark, records):
    schema = spark_source_schema()
    decoded = literal_frame(spark, records, schema)
    return decoded.select(
        F.to_json(F.struct(*schema.fieldNames())).alias("payload"),
        F.struct(*schema.fieldNames()).alias("record"),
        F.lit("orders").alias("source"),
        F.lit("3").alias("source_partition"),
        F.lit("42").alias("source_offset"),
        F.expr("timestamp_millis(0)").alias("arrival_time"),
        F.lit(None).cast(PROBLEM_DDL).alias("problem"),
    ).select(*envelope_schema().fieldNames())


def test_decoded_avro_records_are_validated_without_json_parsing(spark):
    frame = _avro_envelope(spark, [
        {"event_id": "a", "event_type": " Buy ", "event_time": T, "amount": 2.5, "metadata": '{"k":1}'},
        {"event_id": None, "event_type": "x", "event_time": T},
        {"event_id": "c", "event_type": "x", "event_time": 5},
        {"event_id": "d", "event_type": "x", "event_time": T, "amount": float("nan")},
    ])
    rows = validate(frame, now_ms=NOW_MS).collect()
    assert [(r.event_id, r.event_type, r.amount, r.metadata, r.reason) for r in rows] == [
        ("a", "buy", 2.5, '{"k":1}', None),
        (None, "x", None, None, "missing_required_field"),
        ("c", "x", None, None, "out_of_range"),
        ("d", "x", rows[3].amount, None, "out_of_range"),
    ]
    assert rows[1].payload == '{"event_type":"x","event_time":%d}' % T  # to_json of the decoded record


def test_a_batch_constant_is_a_reference_in_the_generated_code_where_a_long_literal_is_text(spark):
    """glue_jobs/batch_constants.py relies on it: Spark keeps an array literal as a referenced object, a long as text."""
    from glue_jobs.batch_constants import with_batch_constants

    def body(frame) -> str:
        code = spark._jvm.org.apache.spark.sql.execution.debug.package.codegenString(frame._jdf.queryExecution().executedPlan())
        return code.split("Generated code:", 1)[1]

    ours = with_batch_constants(spark.range(3), {"b": 987_654_321_123}).selectExpr("id + b AS x")
    literal = spark.range(3).selectExpr("id + CAST(987654321123 AS BIGINT) AS x")
    assert "987654321123" not in body(ours) and "references[" in body(ours)
    assert "987654321123" in body(literal)  # the control: a long literal is written into the code
    assert [r.x for r in ours.collect()] == [987_654_321_123, 987_654_321_124, 987_654_321_125]


def test_per_batch_values_leave_the_generated_code_unchanged(spark, tmp_path, monkeypatch):
    """Processing time, batch id and arrival time reach the rows as data (glue_jobs.batch_constants), so a
    new micro-batch reuses the compiled stages. Control: the same values as literals compile anew."""
    from glue_jobs import sources
    from glue_jobs.contract import typed_contract
    from glue_jobs.lake import lake_layout

    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.json").write_text('{"event_id":"e1","event_type":"x","event_time":%d}\nnot json\n' % T)
    compilations = spark.sparkContext._jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME()

    def batch(n: int) -> list:
        raw = spark.read.option("wholetext", "true").text(str(tmp_path / "in"))
        envelope = sources.from_local_files(raw, "local", NOW_MS + n)
        validated = validate(envelope, now_ms=NOW_MS + n * 1000)
        lake = lake_layout.lake_write_columns(validated.where("reason IS NULL"), batch_id=n)
        dead = lake_layout.dead_letter_write_columns(validated.where("reason IS NOT NULL"), batch_id=n,
                                                     processing_date="2023-11-14")
        columns = ("batch_id", F.expr("unix_millis(arrival_time)").alias("arrival_ms"))
        return lake.select(F.lit(None).cast("string").alias("reason"), *columns).union(
            dead.select("reason", *columns)).collect()

    def compiled_by(n: int) -> int:
        before = compilations.getCount()
        rows = batch(n)
        assert sorted((r["reason"] or "", r["batch_id"]) for r in rows) == [("", n), ("malformed_json", n)]
        assert {r["arrival_ms"] for r in rows} == {NOW_MS + n}
        return compilations.getCount() - before

    compiled_by(1)
    assert compiled_by(2) == 0 and compiled_by(3) == 0

    def as_literals(frame, values):
        return frame.select("*", *(F.lit(int(v)).cast("long").alias(k) for k, v in values.items()))

    for module in (typed_contract, lake_layout, sources):
        monkeypatch.setattr(module, "with_batch_constants", as_literals)
    compiled_by(4)
    assert compiled_by(5) > 0
