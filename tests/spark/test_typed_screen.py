"""The typed contract's fast path (glue_jobs/contract/typed_screen.py): which records it proves, and that proving never
changes a result.

The screen decides only which parse a record takes: a record it proves is read by the plain parse, any other by
the strict (marked) one. So the one property that matters is that every record comes out the same either way;
`test_the_screen_never_changes_a_result` runs a corpus through both (the screen as shipped, and turned off) and
compares every column of every row. The table below says which shapes take which path, so a change that sends
every record down the strict path (no error, only slower) fails too.

A query costs its planning, not its records: the proofs of the table and of the generated orders are one query each
(`order_proofs`), and the clickstream records of two tests go through the three ways together
(`clickstream_three_ways`); each test asserts its own records' rows.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest
from pyspark.sql import functions as F

from glue_jobs import datasets
from glue_jobs.contract import strict_json, typed_contract, typed_screen
from glue_jobs.contract.typed_contract import validate
from glue_jobs.dataset_generate import generate_dataset
from tests.spark.streaming_support import json_envelope

NOW_MS = 1_800_000_000_000  # 2027-01-15T08:00:00Z
ORDER = {"order_id": "o-1", "ordered_at": "2027-01-15T07:15:00+01:00", "customer_id": "c-9", "status": "paid",
         "currency": "EUR", "total": 25.5, "items": [{"sku": "a", "quantity": 2, "unit_price": 10.25}],
         "shipping": {"country": "DE", "city": "Bonn"}, "coupons": {"WELCOME": 150}}


def _text(**changes) -> str:
    return json.dumps({**ORDER, **changes}, separators=(",", ":"))


def _raw(**wire: str) -> str:
    """The order with fields replaced by raw JSON text."""
    text = _text(**{name: f"__{name}__" for name in wire})
    for name, value in wire.items():
        text = text.replace(f'"__{name}__"', value)
    return text


# (payload, proven by the screen, proven by the JVM function: True = the plain parse, False = the strict parse)
CASES = [
    (_text(), True, True),
    (json.dumps(ORDER), True, True),  # spaces after ':' and ','
    # A key holding null: the screen cannot tell a known field's null from an unknown key's (unknown_fields), Jackson can.
    (_text(shipping=None), False, True),
    (_text(x=None), False, False),  # an unknown key holding null: the strict path finds it
    (_raw(total='"25.5"'), False, False),  # a string where a decimal is due (the plain parse would take it)
    (_raw(total='"Infinity"'), False, False),
    (_raw(total="25.505"), True, False),  # more fraction digits than the scale: the screen's checks flag it, the JVM no proof
    (_raw(total="2.5e1"), True, True),  # an exponent: 25.00 exactly
    (_raw(total="12345678901.5"), False, False),  # 11 integer digits in decimal(12,2): not even the wide parse holds it
    (_raw(customer_id="123"), False, False),  # a number where a string is due (the plain parse renders it "123")
    (_raw(customer_id="true"), False, False),
    (_raw(customer_id='{"a":1}'), False, False),
    (_raw(customer_id="[1]"), False, False),
    (_text(customer_id="12345"), False, True),  # a string that reads like a number: the screen cannot tell, Jackson can
    (_raw(items='[{"sku":"a","quantity":"2","unit_price":1}]'), False, False),  # the parse fails: corrupt
    (_raw(items='[{"sku":"a","quantity":2.0,"unit_price":1}]'), False, False),  # 2.0 is not an int token
    (_raw(items='[{"sku":"a","quantity":2147483648,"unit_price":1}]'), False, False),  # 2^31 overflows int
    (_raw(items="[null]"), True, False),  # a null element: the screen proves it (the value checks flag it); no JVM proof
    (_text(customer_id=None), False, False),  # a required field null (the strict path), then absent (the screen proves it)
    (_text(customer_id=None).replace('"customer_id":null,', ""), True, False),
    (_raw(shipping='{"city":"Bonn"}'), True, False),  # shipping is optional, its country is not
    (_text(x=1), False, False),  # an unknown key with a value
    (_text()[:-1] + ',"order_id":"o-2"}', False, False),  # a repeated top-level key
    ('{"shipping":null,' + _text()[1:], False, False),  # repeated, the earlier one null
    (_raw(shipping='{"country":"DE","country":"FR"}'), False, False),  # repeated nested
    (_text() + " x", False, False),  # text after the object
    (_text() + "}", False, False),
    (_text() + ',"k":1', False, False),
    (_text(customer_id='c\\"9'), False, True),  # a backslash: the screen needs quote-free strings, Jackson reads escapes
    (_text().replace('"customer_id":', '"customer_id" :'), False, True),  # a space before ':'
    # The value checks a proven record passes in the JVM function (the screen proves the shape; its checks flag these).
    (_text(customer_id="  "), True, False),  # a blank required string
    (_raw(items='[{"sku":"a","quantity":2,"unit_price":1},{"sku":"","quantity":1,"unit_price":1}]'), True, False),
    (_raw(shipping='{"country":" ","city":"Bonn"}'), True, False),  # blank in an optional record's required field
    (_text(status=" PAID "), True, True),  # trim, then lower: "paid", a symbol
    (_text(status=" PAID\n"), False, True),  # likewise (an escape: the screen leaves it to the strict path)
    (_text(status="refunded"), True, False),  # not a symbol
    # A case step meets a non-ASCII character: the JVM function leaves it to the strict path (the screen too: \u escape).
    (_text(status="PA\u0130D"), False, False),
    (_text(shipping={"country": "DE", "city": " "}), True, True),  # city is optional: a blank one is not checked
    (" " + _text(), False, False),  # not written from its first character to its last
    ("[1]", False, False),
    ("", False, False),
]


@pytest.fixture(scope="module")
def orders():
    return datasets.load("orders")


def _generated(dataset, folder) -> list[str]:
    """600 generated records of `dataset` (5% bad, duplicates), one per line."""
    generate_dataset(dataset, folder, records=600, files=1, bad_ratio=0.05, seed=5, hours=24,
                     end=datetime(2027, 1, 15, 7, tzinfo=timezone.utc))
    return [line for f in sorted(folder.iterdir()) for line in f.read_text().splitlines() if line]


@pytest.fixture(scope="module")
def generated_orders(orders, tmp_path_factory) -> list[str]:
    return _generated(orders, tmp_path_factory.mktemp("orders"))


@pytest.fixture(scope="module")
def order_proofs(spark, orders, generated_orders) -> tuple[list[bool], list[bool]]:
    """Which of CASES' payloads, then the generated orders, the screen proves and the JVM function proves: one query each."""
    payloads = [p for p, _, _ in CASES] + generated_orders
    return _proven(spark, orders, payloads), _proven_by_jvm(spark, orders, payloads)


def _proven(spark, orders, payloads: list[str]) -> list[bool]:
    root = orders.schema
    frame = json_envelope(spark, payloads).select(F.col("payload").alias("_json"))
    frame = frame.select("_json", typed_screen.parse_wrapped(F.col("_json"), root).alias("_w"))
    frame = frame.select("*", *(c.alias(n) for n, c in typed_screen.counts("_json", F.col("_w"), root, frozenset()).items()))
    return [r.p for r in frame.select(typed_screen.proven("_json", F.col("_w")).alias("p")).collect()]


def _proven_by_jvm(spark, orders, payloads: list[str]) -> list[bool]:
    name = strict_json.register(spark, orders)
    assert name, f"{strict_json.STRICT_JSON_CLASS} is not on the test session's classpath (build/jvm/glue-functions.jar)"
    return [r.p for r in json_envelope(spark, payloads).select(F.expr(f"{name}(payload)").isNotNull().alias("p")).collect()]


def test_which_records_the_screen_proves(order_proofs):
    screen, _ = order_proofs
    assert screen[:len(CASES)] == [expected for _, expected, _ in CASES]


def test_which_records_the_jvm_function_proves(order_proofs):
    _, jvm = order_proofs
    assert jvm[:len(CASES)] == [expected for _, _, expected in CASES]


def _three_ways(envelope, dataset, monkeypatch) -> tuple[list[dict], list[dict], list[dict]]:
    """The envelope's validated rows through the shipped contract (the JVM function proving), through the screen's
    Spark expressions proving, and through the strict path alone."""
    def rows():
        return [r.asDict(recursive=True) for r in validate(envelope, dataset, now_ms=NOW_MS).collect()]

    shipped = rows()
    # The stages are built once per dataset and function: cleared to build them again with the JVM function off
    # (the screen's Spark expressions prove), then with the screen off too (the strict path alone).
    monkeypatch.setattr(strict_json, "register", lambda session, dataset: None)
    try:
        typed_contract._selects.cache_clear()
        screened = rows()
        monkeypatch.setattr(typed_screen, "proven", lambda text_name, wrapped: F.lit(False))
        typed_contract._selects.cache_clear()
        return shipped, screened, rows()
    finally:
        typed_contract._selects.cache_clear()


def test_the_screen_never_changes_a_result(spark, orders, generated_orders, order_proofs, monkeypatch):
    """The table's payloads and 600 generated orders (5% bad, duplicates), through the shipped contract (the JVM
    function proving), through the screen's Spark expressions proving, and through the strict path alone: every
    column of every row equal; the screen and the JVM function (order_proofs) prove most generated orders."""
    generated = generated_orders
    screen, jvm = order_proofs
    assert sum(screen[len(CASES):]) > 0.9 * len(generated)  # the valid orders take the fast path
    assert sum(jvm[len(CASES):]) > 0.9 * len(generated)
    payloads = [p for p, _, _ in CASES] + generated
    envelope = json_envelope(spark, payloads)
    shipped, screened, strict = _three_ways(envelope, orders, monkeypatch)
    assert len(shipped) == len(payloads)
    assert shipped == strict
    assert screened == strict
    assert {r["reason"] for r in shipped} > {None, "malformed_json", "invalid_type"}


CLICK = {"event_id": "e-1", "event_type": "click", "event_time": NOW_MS - 3_600_000, "user_id": "u-1", "amount": 1.5,
         "currency": "EUR"}
# json_text values as raw JSON text: every JSON type, nesting, escapes, number spellings, spacing, a repeated nested key.
METADATA = [
    '{"page":"/p/1","ab":true}', '{ "page" : "/p/2" , "ab" : [ 1 , 2 ] }', "{}", "[]", "true", "false", "0", "-0",
    "-0.0", "3.14", "1E3", "1e-7", "0.1e-7", "1.50", "12345678901234567890", "123456789012345678901234567890.5",
    "1e400", '"plain"', '""', '"with \\"quote\\" and \\\\ backslash"', '"\\u00e9 \\u2713 \\ud83d\\ude00"',
    '"\\u0001 control \\n \\t"', '"\\/ slash"', '"caf\u00e9 \u2713 \U0001F600"', '{"a\\"b":1,"c":{"d":[null,{"e":[]}]}}',
    '{"a":1,"a":2}', '[1,"x",null,{"k":[1.0,2e2]}]', '{"x":NaN}', "NaN", '{"x":01}', '{"x":1',
]


@pytest.fixture(scope="module")
def clickstream():
    return datasets.load("clickstream")


@pytest.fixture(scope="module")
def json_text_corpus(clickstream, tmp_path_factory) -> tuple[list[str], list[str]]:
    """A click for each METADATA value, and 600 generated events (5% bad, duplicates)."""
    base = json.dumps(CLICK, separators=(",", ":"))
    return [base[:-1] + f',"metadata":{text}}}' for text in METADATA], _generated(clickstream, tmp_path_factory.mktemp("clicks"))


@pytest.fixture(scope="module")
def producer_corpus(tmp_path_factory):
    """Issue 58's shapes: 600 clickstream records (5% bad) from generate(shape="producers"): (its Expectation, lines)."""
    from glue_jobs.generate import generate

    folder = tmp_path_factory.mktemp("producers")
    expect = generate(folder, records=600, files=1, bad_ratio=0.05, seed=9, shape="producers", base_time_ms=NOW_MS)
    return expect, (folder / "events-00000.json").read_text(encoding="utf-8").splitlines()


@pytest.fixture(scope="module")
def clickstream_three_ways(spark, clickstream, json_text_corpus, producer_corpus) -> dict[str, tuple[list, list, list]]:
    """_three_ways over one envelope holding json_text_corpus's records (table, then generated) and producer_corpus's
    lines: group ("json_text", "producers") -> its (shipped, screened, strict) rows, in its records' order."""
    table, generated = json_text_corpus
    groups = {"json_text": table + generated, "producers": producer_corpus[1]}
    payloads = [p for group in groups.values() for p in group]
    with pytest.MonkeyPatch.context() as mp:
        ways = _three_ways(json_envelope(spark, payloads), clickstream, mp)
    offsets = [str(i + 1) for i in range(len(payloads))]
    assert [[r["source_offset"] for r in rows] for rows in ways] == [offsets] * 3, "one row per record, in order"
    found, start = {}, 0
    for name, group in groups.items():
        found[name] = tuple(rows[start:start + len(group)] for rows in ways)
        start += len(group)
    return found


def test_json_text_fields_are_proven_and_stored_as_the_strict_path_stores_them(spark, clickstream, json_text_corpus,
                                                                                clickstream_three_ways):
    """A json_text field (clickstream's metadata) holds any JSON value, stored as its JSON text. Every metadata value
    above and 600 generated events come out equal column by column through the shipped contract (the JVM proof answers the
    field's text: StrictJsonRecord.jsonText), the screen's Spark expressions and the strict path alone (their rows from
    clickstream_three_ways); the valid ones are proven. Before 2026-11-27 the strict path dead-lettered every non-string
    value as invalid_type."""
    table, generated = json_text_corpus
    proven = _proven_by_jvm(spark, clickstream, table + generated)
    assert proven[:len(table)] == [text not in ('{"x":NaN}', "NaN", '{"x":01}', '{"x":1') for text in METADATA]
    assert sum(proven[len(table):]) > 0.9 * len(generated)
    shipped, screened, strict = clickstream_three_ways["json_text"]
    assert len(shipped) == len(table) + len(generated)
    assert shipped == strict
    assert screened == strict
    stored = [r["metadata"] for r in shipped[:len(table)]]
    assert stored[:3] == ['{"page":"/p/1","ab":true}', '{"page":"/p/2","ab":[1,2]}', "{}"]
    assert stored[METADATA.index('"\\/ slash"')] == '"/ slash"'
    assert {r["reason"] for r in shipped[:len(table)]} == {None, "malformed_json"}


def test_records_shaped_like_producers_keep_their_verdicts_and_the_jvm_proof_takes_them_all(spark, producer_corpus,
                                                                                             clickstream_three_ways):
    """Issue 58's shapes (glue_jobs/generate.PRODUCER_SHAPES: escapes, UTF-8 text, case variants, json_text arrays,
    integers for a double, explicit nulls) and 5% bad records: the shipped contract, the screen and the strict path
    alone agree on every column of every row (their rows from clickstream_three_ways), and the JVM proof hands none of
    the valid ones to the strict parse (devtools/fast_path_census.py prints the same per shape)."""
    from devtools.fast_path_census import census

    expect, payloads = producer_corpus
    assert {"escapes", "non_ascii", "case_variant", "json_text_array", "integer_amount", "explicit_null"} <= set(expect.shapes)
    bad = set(expect.bad_lines)
    found = census(spark, [p for p in payloads if p not in bad])
    assert all(slow == 0 for _, slow in found.values()), found
    shipped, screened, strict = clickstream_three_ways["producers"]
    assert len(shipped) == len(payloads)
    assert shipped == strict and screened == strict
    assert sum(1 for r in shipped if r["reason"] is None) == len(payloads) - len(expect.bad_lines)
