"""The typed contract (glue_jobs/contract/typed_contract.py) on every Spark line: the strictness table of each type at
depth 0, 1 and 2, the event-time formats, the rules with their paths, and orders stored typed.

The `strict` dataset is written as files into a temporary datasets folder (STREAMLAKE_DATASETS), as a team
would add one: every leaf type at the top level (depth 0), in a nested record `one` (depth 1) and in the
records of an array inside a record `two.rows[]` (depth 2).

A validate costs its planning on this deep schema, not its records: the JSON records the tests judge on `strict`
(`_strict_groups`) are validated in one query (`strict_rows`, module-scoped), each row keyed by its source_offset back to
its group, and each test asserts its own group's rows. The contract judges every record on its own.
"""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from pyspark.sql import functions as F

from glue_jobs import datasets
from glue_jobs.contract import strict_json
from glue_jobs.contract.typed_contract import validate
from tests.spark.streaming_support import json_envelope

NOW_MS = 1_800_000_000_000  # 2027-01-15T08:00:00Z
LEAVES = [
    {"name": "s", "type": "string"},
    {"name": "b", "type": "boolean"},
    {"name": "i", "type": "int"},
    {"name": "l", "type": "long"},
    {"name": "f", "type": "float"},
    {"name": "d", "type": "double"},
    {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["red", "green"]}},
    {"name": "m", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "us", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "counts", "type": {"type": "map", "values": "int"}},
]
GOOD_LEAVES = {"s": "x", "b": True, "i": 7, "l": 2**40, "f": 1.5, "d": 2.25, "e": "red", "m": 12.5, "day": "2024-02-29",
               "ts": 1_700_000_000_123, "us": 1_700_000_000_123_456, "tags": ["a"], "counts": {"k": 1}}
AT_DEPTH = {0: "", 1: "one.", 2: "two.rows[0]."}


def _schema() -> dict:
    # E is defined once (at the top level) and referred to by name in Leaves: Avro refuses a redefinition.
    leaf_record = {"type": "record", "name": "Leaves", "fields": [{**f, "type": "E"} if f["name"] == "e" else f for f in LEAVES]}
    return {"type": "record", "name": "Strict", "namespace": "test.strict", "fields": [
        {"name": "id", "type": "string"},
        {"name": "at", "type": "long"},
        *LEAVES,
        {"name": "one", "type": leaf_record},
        {"name": "two", "type": {"type": "record", "name": "Two", "fields": [
            {"name": "rows", "type": {"type": "array", "items": "Leaves"}}]}},
        {"name": "opt", "type": ["null", "Leaves"], "default": None},
    ]}


@pytest.fixture(scope="module")
def strict(tmp_path_factory):
    root = tmp_path_factory.mktemp("datasets")
    folder = root / "strict"
    folder.mkdir()
    (folder / "schema.v1.avsc").write_text(json.dumps(_schema()), encoding="utf-8")
    (folder / "dataset.json").write_text(json.dumps({
        "description": "every type at three depths", "key": ["id"],
        "event_time": {"field": "at", "format": "epoch_millis", "not_before": "2000-01-01T00:00:00Z", "max_future": "PT24H"},
        "rules": {"e": {"normalize": ["trim", "lower"]}, "i": {"min": 0, "max": 100}, "two.rows[].i": {"max": 50},
                  "s": {"pattern": "^[a-z]+$", "max_length": 3}, "tags": {"min_items": 1}},
    }), encoding="utf-8")
    (folder / "schemas.lock.json").write_text(json.dumps({"schema.v1.avsc": datasets.file_digest((folder / "schema.v1.avsc").read_bytes())}))
    mp = pytest.MonkeyPatch()
    mp.setenv(datasets.ROOT_VARIABLE, str(root))
    yield datasets.load("strict")
    mp.undo()


def _record(**changes) -> dict:
    record = {"id": "r1", "at": 1_700_000_000_000, **GOOD_LEAVES, "one": dict(GOOD_LEAVES), "two": {"rows": [dict(GOOD_LEAVES)]}}
    for path, value in changes.items():
        target, keys = record, path.split(".")
        for key in keys[:-1]:
            target = target[int(key)] if isinstance(target, list) else target[key]
        if value is _ABSENT:
            del target[keys[-1]]
        else:
            target[keys[-1]] = value
    return record


_ABSENT = object()


def _leaf_path(depth: int, leaf: str) -> str:
    return {0: leaf, 1: f"one.{leaf}", 2: f"two.rows.0.{leaf}"}[depth]


# (leaf, wire value as JSON text, reason, detail suffix after the field path)
TABLE = [
    ("s", "12", "invalid_type", "wrong JSON type"),
    ("s", '""', "missing_required_field", "required field absent, null or empty"),
    ("b", '"true"', "invalid_type", "wrong JSON type"),
    ("b", "1", "invalid_type", "wrong JSON type"),
    ("i", '"12"', "invalid_type", "wrong JSON type"),
    ("i", "12.5", "invalid_type", "wrong JSON type"),
    ("i", "2147483648", "out_of_range", "value out of range"),
    ("l", "9223372036854775808", "out_of_range", "value out of range"),
    ("l", "1e3", "invalid_type", "wrong JSON type"),
    ("f", '"1.5"', "invalid_type", "wrong JSON type"),
    ("f", "1e39", "out_of_range", "value out of range"),
    ("d", '"12.5"', "invalid_type", "wrong JSON type"),
    ("d", '"NaN"', "invalid_type", "wrong JSON type"),
    ("d", "1e400", "out_of_range", "value out of range"),
    ("e", '"blue"', "out_of_range", "value out of range"),
    ("e", "1", "invalid_type", "wrong JSON type"),
    ("m", "12.345", "out_of_range", "value out of range"),
    ("m", '"12.5"', "invalid_type", "wrong JSON type"),
    ("m", "123456789.5", "out_of_range", "value out of range"),
    # Rounded to the scale these carry into a ninth integer digit: the declared type cannot hold them (a null that
    # passed outside ANSI mode, an error failing the batch in it, before 2026-11-27).
    ("m", "99999999.999", "out_of_range", "value out of range"),
    ("m", "-99999999.995", "out_of_range", "value out of range"),
    # Fraction digits the strict parse's wide type (decimal(38,30) here) rounds away, and 30 of them, which it keeps but
    # the diagnosis reads through a double: the JVM reads them as written (InexactDecimal; stored as 1.00, and dead-
    # lettered without a path, before 2026-11-27).
    ("m", "1.0000000000000000000000000000001", "out_of_range", "value out of range"),
    ("m", "-1." + "0" * 40 + "1", "out_of_range", "value out of range"),
    ("m", "1.000000000000000000000000000001", "out_of_range", "value out of range"),
    ("day", '"2024-02-30"', "out_of_range", "value out of range"),
    ("day", '"2024/02/01"', "invalid_type", "wrong JSON type"),
    ("day", "19000", "invalid_type", "wrong JSON type"),
    ("ts", '"2024-01-01T00:00:00Z"', "invalid_type", "wrong JSON type"),
    ("ts", "253402300800000", "out_of_range", "value out of range"),
    ("us", "1.5", "invalid_type", "wrong JSON type"),
    ("tags", '"a"', "invalid_type", "wrong JSON type"),
    ("tags", '["a", null]', "missing_required_field", "required field absent, null or empty"),
    ("tags", '["a", 1]', "invalid_type", "wrong JSON type"),
    ("counts", '{"k": "1"}', "invalid_type", "wrong JSON type"),
    ("counts", "[1]", "invalid_type", "wrong JSON type"),
]
_NESTED_INDEX = {"tags": {'["a", null]': "[1]", '["a", 1]': "[1]"}, "counts": {'{"k": "1"}': '["k"]'}}


def _payload(record: dict, path: str, wire: str) -> str:
    """The record as JSON with the value at `path` replaced by the raw JSON text `wire`."""
    placeholder = "__WIRE__"
    text = json.dumps(_record(**{path: placeholder}) if record is None else record)
    return text.replace(f'"{placeholder}"', wire)


def _run(spark, strict, payloads: list[str]):
    return validate(json_envelope(spark, payloads), strict, now_ms=NOW_MS).collect()


def _strict_groups() -> dict[str, list[str]]:
    """The payloads each test below judges on `strict`, by group (the module's constants, defined beside the tests)."""
    return {"valid": VALID, "largest decimals": LARGEST_DECIMALS, "jvm checks": list(JVM_CHECKED.values()),
            "not from the decoder": NOT_FROM_DECODER, **{f"strictness at depth {d}": STRICTNESS[d] for d in AT_DEPTH},
            "missing at depth": MISSING_AT_DEPTH, "rules": RULES, "malformed": MALFORMED, "first problem": FIRST_PROBLEM}


@pytest.fixture(scope="module")
def strict_rows(spark, strict) -> dict[str, list]:
    """Every group of `_strict_groups` validated in one query (offsets 1..n in group order): group -> its rows, in order."""
    groups = _strict_groups()
    payloads = [payload for group in groups.values() for payload in group]
    by_offset = {int(row.source_offset): row for row in _run(spark, strict, payloads)}
    assert sorted(by_offset) == list(range(1, len(payloads) + 1)), "one row per record"
    found, offset = {}, 1
    for name, group in groups.items():
        found[name] = [by_offset[offset + i] for i in range(len(group))]
        offset += len(group)
    return found


VALID = [json.dumps(_record(e=" RED "))]


def test_a_valid_record_is_stored_typed_at_every_depth(strict_rows):
    [row] = strict_rows["valid"]
    assert (row.reason, row.detail) == (None, None)
    assert row.m == Decimal("12.50") and row.one.m == Decimal("12.50") and row.two.rows[0].m == Decimal("12.50")
    assert str(row.day) == "2024-02-29" and str(row.two.rows[0].day) == "2024-02-29"
    assert row.ts.isoformat() == "2023-11-14T22:13:20.123000" and row.us.isoformat() == "2023-11-14T22:13:20.123456"
    assert row.e == "red" and row.one.e == "red"  # normalize applies to the top-level path only
    assert row.counts == {"k": 1} and row.two.rows[0].counts == {"k": 1} and row.opt is None


LARGEST_DECIMALS = [_payload(None, _leaf_path(depth, "m"), wire) for depth in AT_DEPTH for wire in ("99999999.99", "-99999999.990")]


def test_the_largest_decimals_are_valid_and_exact_at_every_depth(strict_rows):
    rows = strict_rows["largest decimals"]
    assert [(r.reason, r.detail) for r in rows] == [(None, None)] * len(LARGEST_DECIMALS)
    assert [(r.m, r.one.m, r.two.rows[0].m) for r in rows] == [
        (Decimal("99999999.99"), Decimal("12.50"), Decimal("12.50")), (Decimal("-99999999.99"), Decimal("12.50"), Decimal("12.50")),
        (Decimal("12.50"), Decimal("99999999.99"), Decimal("12.50")), (Decimal("12.50"), Decimal("-99999999.99"), Decimal("12.50")),
        (Decimal("12.50"), Decimal("12.50"), Decimal("99999999.99")), (Decimal("12.50"), Decimal("12.50"), Decimal("-99999999.99"))]


JVM_CHECKED = {
    "valid": json.dumps(_record(e=" RED ")),
    "enum normalized only where its rules say": json.dumps(_record(**{"one.e": " RED "})),
    "enum not a symbol": json.dumps(_record(**{"two.rows.0.e": "blue"})),
    "blank required string": json.dumps(_record(**{"two.rows.0.s": " "})),
    "blank array element": json.dumps(_record(**{"one.tags": ["a", "\t"]})),
    "not a calendar day": json.dumps(_record(**{"one.day": "2023-02-29"})),
    "a date with more than its ten characters": json.dumps(_record(day="2024-02-29\n")),
    "timestamp past Spark's range": _payload(None, "two.rows.0.ts", "253402300800000"),
    "timestamp before it": _payload(None, "us", "-62135596800000001"),
}


def test_the_jvm_function_makes_the_decoded_records_checks(spark, strict, strict_rows):
    """What the JVM proof answers needs no further type check (glue_jobs/strict_json.value_checks): it proves the
    valid record (an enum normalized first), and none that the checks of a decoded record would flag, at any depth;
    the contract's verdicts on the same records (from the shared batch) say why each other one is flagged."""
    name = strict_json.register(spark, strict)
    assert name, "the functions jar is not on the test session's classpath"
    payloads = JVM_CHECKED
    proven = {key: row.p for key, row in zip(payloads, json_envelope(spark, list(payloads.values())).select(
        F.expr(f"{name}(payload)").isNotNull().alias("p")).collect(), strict=True)}
    assert proven == {key: key == "valid" for key in payloads}
    rows = strict_rows["jvm checks"]
    assert [r.reason for r in rows] == [None, "out_of_range", "out_of_range", "missing_required_field",
                                        "missing_required_field", "out_of_range", "invalid_type", "out_of_range", "out_of_range"]


NOT_FROM_DECODER = [
    json.dumps(_record()),
    json.dumps(_record(s=None)),
    json.dumps(_record(**{"one.s": None})),
    json.dumps(_record(**{"two.rows.0.b": None})),
    json.dumps(_record(opt=dict(GOOD_LEAVES, s=None))),
    json.dumps(_record(opt=None)),
    json.dumps(_record(**{"one.s": " "})),
    json.dumps(_record(**{"two.rows.0.e": "blue"})),
]


def test_a_typed_record_not_from_the_decoder_gets_every_check(spark, strict, strict_rows):
    """A record of the dataset's type but for nullability (a source other than the decoder) is typed without its
    guarantees: every check is made on it, and each gets the verdict and row its JSON gets (the JSON's rows from the
    shared batch); a NaN (which JSON cannot carry: Spark's to_json writes it bare) is out of range at its path. The
    typed records and the NaN one are validated in one query, the NaN one keyed by an offset of its own."""
    from glue_jobs.decoding import registry_frames

    payloads = NOT_FROM_DECODER
    as_json = [(r.reason, r.detail, r.one, r.two, r.opt) for r in strict_rows["not from the decoder"]]
    assert [reason for reason, *_ in as_json] == [None, "missing_required_field", "missing_required_field",
                                                   "missing_required_field", "missing_required_field", None,
                                                   "missing_required_field", "out_of_range"]
    # The decoder's type with `id` not nullable (a coalesce of a value never null here): another source's record.
    record_type = registry_frames.record_type(strict)
    parsed = F.from_json("payload", record_type)
    typed = json_envelope(spark, payloads).withColumn("record", F.struct(*(
        F.coalesce(parsed.getField(n), F.lit("")).alias(n) if n == "id" else parsed.getField(n).alias(n) for n in record_type.names)))
    assert typed.schema["record"].dataType != record_type
    nan_offset = len(payloads) + 1
    nan = typed.limit(1).withColumn("record", F.col("record").withField("one", F.col("record.one").withField(
        "d", F.lit(float("nan"))))).withColumn("payload", F.to_json("record")).withColumn("source_offset", F.lit(str(nan_offset)))
    found = {int(r.source_offset): r for r in validate(typed.unionByName(nan), strict, now_ms=NOW_MS).collect()}
    assert sorted(found) == list(range(1, nan_offset + 1)), "one row per record"
    got = [(r.reason, r.detail, r.one, r.two, r.opt) for r in (found[i] for i in range(1, nan_offset))]
    assert got == as_json
    row = found[nan_offset]
    assert (row.reason, row.detail) == ("out_of_range", "one.d: value out of range")


def test_the_jvm_reads_decimals_as_written(spark):
    """InexactDecimal (jvm/glue-functions) names the first decimal, in the order written, that its declared type does not
    hold exactly, at the path the diagnosis writes; other values and unknown keys are not its to judge."""
    from pyspark.sql import types as T

    price = T.DecimalType(10, 2)
    line = T.StructType([T.StructField("sku", T.StringType()), T.StructField("unit_price", price)])
    schema = T.StructType([T.StructField("total", price), T.StructField("items", T.ArrayType(line)),
                           T.StructField("fees", T.MapType(T.StringType(), price)), T.StructField("note", T.StringType())])
    function = spark._jvm.com.streamlake.glue.InexactDecimal(schema.json())
    long_tail = "1." + "0" * 40 + "1"
    cases = {
        '{"total": 1.50, "items": [{"unit_price": 2}], "fees": {"EUR": 0.5}}': None,
        '{"total": 1.505}': "total",
        '{"total": 123456789}': "total",
        '{"total": 99999999.999}': "total",
        f'{{"items": [{{"unit_price": 1}}, {{"sku": "a", "unit_price": {long_tail}}}], "total": 1.001}}': "items[1].unit_price",
        '{"fees": {"EUR": 1, "US\\"D": 1e-3}}': 'fees["US"D"]',  # the key decoded, as the diagnosis writes it
        f'{{"note": {long_tail}, "other": {long_tail}, "total": "1.001", "items": 7}}': None,
        '{"total": 1.001': None,
        "[1.001]": None,
    }
    assert {text: function.call(text) for text in cases} == cases
    with pytest.raises(Exception, match="not a struct"):
        spark._jvm.com.streamlake.glue.InexactDecimal(price.json())


STRICTNESS = {depth: [_payload(None, _leaf_path(depth, leaf), wire) for leaf, wire, _, _ in TABLE] for depth in AT_DEPTH}


@pytest.mark.parametrize("depth", [0, 1, 2])
def test_strictness_table(strict_rows, depth):
    """TABLE at one depth; the three depths' records are validated in the shared batch, each depth asserted here."""
    got = [(r.reason, r.detail) for r in strict_rows[f"strictness at depth {depth}"]]
    expected = [(reason, f"{AT_DEPTH[depth]}{leaf}{_NESTED_INDEX.get(leaf, {}).get(wire, '')}: {what}")
                for leaf, wire, reason, what in TABLE]
    assert got == expected


MISSING_AT_DEPTH = [json.dumps(_record(**{"one.i": _ABSENT})), json.dumps(_record(**{"two.rows.0.s": None})),
                    _payload(None, "two.rows", "[null]"), json.dumps(_record(one=None)),
                    json.dumps({**_record(), "opt": {**GOOD_LEAVES, "d": None}})]


def test_missing_and_null_required_fields_at_depth(strict_rows):
    assert [(r.reason, r.detail) for r in strict_rows["missing at depth"]] == [
        ("missing_required_field", "one.i: required field absent, null or empty"),
        ("missing_required_field", "two.rows[0].s: required field absent, null or empty"),
        ("missing_required_field", "two.rows[0]: required field absent, null or empty"),
        ("missing_required_field", "one: required field absent, null or empty"),
        ("missing_required_field", "opt.d: required field absent, null or empty"),
    ]


RULES = [json.dumps(_record(i=101)), json.dumps(_record(**{"two.rows.0.i": 51})), json.dumps(_record(s="abcd")),
         json.dumps(_record(s="AB")), json.dumps(_record(tags=[])), json.dumps(_record(**{"one.i": 101}))]


def test_rules_name_their_path_and_rule(strict_rows):
    assert [(r.reason, r.detail) for r in strict_rows["rules"]] == [
        ("out_of_range", "i: value out of range (max 100)"),
        ("out_of_range", "two.rows[0].i: value out of range (max 50)"),
        ("out_of_range", "s: value out of range (max_length 3)"),
        ("out_of_range", "s: value out of range (pattern ^[a-z]+$)"),
        ("out_of_range", "tags: value out of range (min_items 1)"),
        (None, None),  # the rule names i at the top level only
    ]


_GOOD = json.dumps(_record())
MALFORMED = ['{"id": "r1"', _GOOD + _GOOD, _GOOD[:-1] + ', "id": "r2"}', '{"d": NaN}', "[" + _GOOD + "]", "null"]


def test_malformed_json(strict_rows):
    assert {r.reason for r in strict_rows["malformed"]} == {"malformed_json"}


FIRST_PROBLEM = [json.dumps(_record(i="x", **{"one.d": "y", "two.rows.0.i": 10**12}))]


def test_the_first_problem_in_schema_order_wins(strict_rows):
    [row] = strict_rows["first problem"]
    assert (row.reason, row.detail) == ("invalid_type", "i: wrong JSON type")


EVENT_TIMES = {  # format -> [(wire value, reason, stored event time)]
    "epoch_millis": [("1700000000123", None, "2023-11-14T22:13:20.123000"),
                     ("1700000000", "out_of_range", None)],  # seconds where milliseconds are due: before 2000
    "epoch_seconds": [("1700000000", None, "2023-11-14T22:13:20"),
                      ("1700000000123", "out_of_range", None)],  # milliseconds where seconds are due: far future
    "iso8601": [('"2023-11-14T22:13:20Z"', None, "2023-11-14T22:13:20"),
                ('"2023-11-14T23:13:20.123456+01:00"', None, "2023-11-14T22:13:20.123456"),
                ('"2023-11-14T22:13:20"', "invalid_type", None),  # no offset
                ('"2023-11-14T22:13:20.1234567Z"', "invalid_type", None),  # finer than microseconds
                ('"2023-02-29T22:13:20Z"', "out_of_range", None),
                ('"2099-01-01T00:00:00Z"', "out_of_range", None),  # beyond processing time + max_future
                ("1700000000", "invalid_type", None)],
}


@pytest.mark.parametrize("fmt", sorted(EVENT_TIMES))
def test_event_time_formats(spark, tmp_path, monkeypatch, fmt):
    folder = tmp_path / "timed"
    folder.mkdir()
    kind = "string" if fmt == "iso8601" else "long"
    schema = {"type": "record", "name": "Timed", "fields": [{"name": "id", "type": "string"}, {"name": "at", "type": kind}]}
    (folder / "schema.v1.avsc").write_text(json.dumps(schema))
    (folder / "schemas.lock.json").write_text(json.dumps({"schema.v1.avsc": datasets.file_digest((folder / "schema.v1.avsc").read_bytes())}))
    (folder / "dataset.json").write_text(json.dumps({"description": "t", "key": ["id"], "event_time": {"field": "at", "format": fmt}}))
    monkeypatch.setenv(datasets.ROOT_VARIABLE, str(tmp_path))
    cases = EVENT_TIMES[fmt]
    payloads = ['{"id": "a", "at": ' + wire + "}" for wire, _, _ in cases]
    rows = validate(json_envelope(spark, payloads), datasets.load("timed"), now_ms=NOW_MS).collect()
    assert [(r.reason, r.at.isoformat() if r.at else None) for r in rows] == [(reason, stored) for _, reason, stored in cases]


def test_orders_are_stored_typed(spark, monkeypatch):
    """orders stored typed (nested types, decimals, the event time), and the verdicts on a badly formed event time and
    on an absent optional record: the records are validated in one query, each row keyed back by its source_offset."""
    monkeypatch.delenv(datasets.ROOT_VARIABLE, raising=False)
    orders = datasets.load("orders")
    order = {"order_id": "o-1", "ordered_at": "2026-11-20T10:15:00.25+01:00", "customer_id": "c-9", "status": " Paid",
             "currency": "EUR", "total": 25.5, "items": [{"sku": "a", "quantity": 2, "unit_price": 10.25},
                                                          {"sku": "b", "quantity": 1, "unit_price": 5}],
             "shipping": {"country": "DE"}}
    # an event time with a line terminator after it is not ISO-8601 (Java's $ would let it through to the cast)
    late_order = {**order, "ordered_at": order["ordered_at"] + "\n"}
    # a badly formatted time (no offset, a space for the T) says which form was expected, not "wrong JSON type"
    texts = ["2026-11-20 10:15:00+01:00", "2026-11-20T10:15:00", "20/11/2026 10:15", 1763633700]
    # an absent optional record has nothing below it to check, also when a later field is wrong
    no_shipping = {k: v for k, v in order.items() if k != "shipping"}
    flagged = [{**no_shipping, "coupons": {"X": "1"}}, {**no_shipping, "total": 1.001}]
    records = [order, late_order, *({**order, "ordered_at": t} for t in texts), *flagged]
    frame = validate(json_envelope(spark, [json.dumps(o) for o in records]), orders, now_ms=NOW_MS)
    assert dict(frame.dtypes)["items"] == "array<struct<sku:string,quantity:int,unit_price:decimal(10,2)>>"
    assert dict(frame.dtypes)["total"] == "decimal(12,2)" and dict(frame.dtypes)["ordered_at"] == "timestamp"
    by_offset = {int(r.source_offset): r for r in frame.collect()}
    assert sorted(by_offset) == list(range(1, len(records) + 1)), "one row per record"
    row, late = by_offset[1], by_offset[2]
    found = [by_offset[3 + i] for i in range(len(texts))]
    rows = [by_offset[3 + len(texts) + i] for i in range(len(flagged))]

    assert row.reason is None and row.status == "paid" and row.ordered_at.isoformat() == "2026-11-20T09:15:00.250000"
    assert [(i.sku, i.quantity, i.unit_price) for i in row.items] == [("a", 2, Decimal("10.25")), ("b", 1, Decimal("5.00"))]
    assert (row.shipping.country, row.shipping.city, row.coupons) == ("DE", None, None)

    assert (late.reason, late.detail.split(":")[0]) == ("invalid_type", "ordered_at")
    iso = "ordered_at: not an ISO-8601 date-time with an offset (e.g. 2026-11-20T10:15:00Z or 2026-11-20T10:15:00.25+01:00)"
    # a number where the time's string belongs is the wrong JSON type, as it says
    assert [(r.reason, r.detail) for r in found] == [("invalid_type", iso)] * 3 + [("invalid_type", "ordered_at: wrong JSON type")]

    assert [(r.reason, r.detail) for r in rows] == [("invalid_type", 'coupons["X"]: wrong JSON type'),
                                                   ("out_of_range", "total: value out of range")]


def test_orders_parquet_reads_back_typed_with_pyarrow(spark, monkeypatch, tmp_path):
    """Parquet that Spark writes from the typed contract's valid rows, read by a reader the project did not
    write (pyarrow; installed in the main venv only) and by Spark: nested types, decimals and timestamps."""
    pq = pytest.importorskip("pyarrow.parquet")
    import pyarrow as pa

    monkeypatch.delenv(datasets.ROOT_VARIABLE, raising=False)
    orders = datasets.load("orders")
    order = {"order_id": "o-1", "ordered_at": "2026-11-20T10:15:00Z", "customer_id": "c-9", "status": "paid", "currency": "EUR",
             "total": 25.5, "items": [{"sku": "a", "quantity": 2, "unit_price": 10.25}], "shipping": {"country": "DE", "city": "Bonn"},
             "coupons": {"WELCOME": 150}}
    bad = {**order, "order_id": "o-2", "total": 1.005}
    validated = validate(json_envelope(spark, [json.dumps(order), json.dumps(bad)]), orders, now_ms=NOW_MS)
    names = [name for name, _ in orders.columns()]
    validated.where("reason IS NULL").select(*names).coalesce(1).write.parquet(str(tmp_path / "orders"))
    table = pq.read_table(str(tmp_path / "orders"))
    schema = table.schema
    assert pa.types.is_list(schema.field("items").type)
    assert schema.field("items").type.value_type == pa.struct([("sku", pa.string()), ("quantity", pa.int32()),
                                                               ("unit_price", pa.decimal128(10, 2))])
    assert schema.field("total").type == pa.decimal128(12, 2)
    assert pa.types.is_timestamp(schema.field("ordered_at").type)
    assert schema.field("shipping").type == pa.struct([("country", pa.string()), ("city", pa.string()), ("express", pa.bool_())])
    assert pa.types.is_map(schema.field("coupons").type)
    [row] = table.to_pylist()
    assert row["order_id"] == "o-1" and row["total"] == Decimal("25.50")
    assert row["items"] == [{"sku": "a", "quantity": 2, "unit_price": Decimal("10.25")}]
    assert row["ordered_at"].replace(tzinfo=None).isoformat() == "2026-11-20T10:15:00"
    assert row["coupons"] == [("WELCOME", 150)] and row["shipping"] == {"country": "DE", "city": "Bonn", "express": None}
    assert [r.order_id for r in spark.read.parquet(str(tmp_path / "orders")).collect()] == ["o-1"]


def _epoch(value: str, unit: int) -> int:
    from datetime import datetime, timezone

    moment = datetime.fromisoformat(value).replace(tzinfo=timezone.utc)
    delta = moment - datetime(1970, 1, 1, tzinfo=timezone.utc)
    return (delta.days * 86_400 + delta.seconds) * unit + delta.microseconds * unit // 1_000_000


# The ends of each type's documented range (docs/datasets.md: years 1 to 9999) and the calendar switch: days Spark 3.x
# refused to write by default (WRITE_ANCIENT_DATETIME) although the contract accepts them.
EXTREME_DAYS = ["0001-01-01", "1582-10-04", "1582-10-15", "1899-12-31", "9999-12-31"]
EXTREME_MOMENTS = ["0001-01-01T00:00:00", "1582-10-04T12:00:00.001", "1899-12-31T23:59:59.999", "9999-12-31T23:59:59.999"]


def _extreme_lake(spark, strict, path) -> list:
    """Valid records with the extreme days and moments at every depth, written as Parquet by the job's session
    (glue_jobs/session.CALENDAR_SETTINGS); returns the `us` values written (each moment plus 7 microseconds)."""
    from datetime import datetime

    moments = EXTREME_MOMENTS + EXTREME_MOMENTS[:1]
    records = []
    for i, (day, moment) in enumerate(zip(EXTREME_DAYS, moments, strict=True)):
        leaves = {**GOOD_LEAVES, "day": day, "ts": _epoch(moment, 1000), "us": _epoch(moment, 1_000_000) + 7}
        records.append(json.dumps({**_record(id=f"r{i}"), **leaves, "one": leaves, "two": {"rows": [leaves]}}))
    rows = validate(json_envelope(spark, records), strict, now_ms=NOW_MS)
    assert [(r.reason, r.detail) for r in rows.select("reason", "detail").collect()] == [(None, None)] * len(records)
    rows.select(*[name for name, _ in strict.columns()]).coalesce(1).write.parquet(str(path))
    return [datetime.fromisoformat(m).replace(microsecond=datetime.fromisoformat(m).microsecond + 7) for m in moments]


@pytest.fixture(scope="module")
def extreme_lake(spark, strict, tmp_path_factory):
    """_extreme_lake written once for the tests that read it back: (its folder, the `us` values written)."""
    path = tmp_path_factory.mktemp("extreme") / "lake"
    return path, _extreme_lake(spark, strict, path)


def test_extreme_valid_dates_and_timestamps_are_written_and_read_back_equal(spark, extreme_lake):
    """No valid record can fail its batch on every retry: before CALENDAR_SETTINGS, Spark 3.3 and 3.5 failed this write
    with INCONSISTENT_BEHAVIOR_CROSS_VERSION.WRITE_ANCIENT_DATETIME (the write and its check are the module's
    `extreme_lake`, shared with the pyarrow test). Read back by Spark as text (pyspark's conversion to Python datetimes
    goes through the local time zone and cannot hold year 1 everywhere), on every Spark line."""
    from datetime import datetime

    lake, expected_us = extreme_lake
    back = spark.read.parquet(str(lake)).orderBy("id").select(
        F.col("day").cast("string").alias("day"), F.col("two.rows")[0]["day"].cast("string").alias("nested_day"),
        F.date_format("us", "yyyy-MM-dd'T'HH:mm:ss.SSSSSS").alias("us"),
        F.date_format("ts", "yyyy-MM-dd'T'HH:mm:ss.SSS").alias("ts"),
        F.date_format(F.col("one.us"), "yyyy-MM-dd'T'HH:mm:ss.SSSSSS").alias("one_us")).collect()
    assert [r.day for r in back] == [r.nested_day for r in back] == EXTREME_DAYS
    assert [r.us for r in back] == [r.one_us for r in back] == [m.isoformat(timespec="microseconds") for m in expected_us]
    moments = EXTREME_MOMENTS + EXTREME_MOMENTS[:1]
    assert [r.ts for r in back] == [datetime.fromisoformat(m).isoformat(timespec="milliseconds") for m in moments]


def test_extreme_valid_dates_and_timestamps_read_back_equal_with_pyarrow(extreme_lake):
    """The same lake (the module's `extreme_lake`), read by a reader the project did not write (pyarrow; main venv
    only). Spark writes timestamps as INT96 (its default outputTimestampType); pyarrow reads INT96 as nanoseconds unless
    told otherwise, a range that ends in 1677 and 2262, so a reader of years 1 to 9999 asks for microseconds
    (docs/readers.md)."""
    pq = pytest.importorskip("pyarrow.parquet")
    from datetime import date

    lake, expected_us = extreme_lake
    table = sorted(pq.read_table(str(lake), coerce_int96_timestamp_unit="us").to_pylist(), key=lambda r: r["id"])
    assert [r["day"] for r in table] == [r["two"]["rows"][0]["day"] for r in table] == [date.fromisoformat(d) for d in EXTREME_DAYS]
    assert [r["us"].replace(tzinfo=None) for r in table] == [r["one"]["us"].replace(tzinfo=None) for r in table] == expected_us
