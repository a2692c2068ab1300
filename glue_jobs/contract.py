"""The event contract as DataFrame transforms: strict parsing, validation, reason codes.

Every rule of DESIGN.md "Default event contract" lives here, in native Spark expressions only (no UDFs: Glue
4.0's pyspark cannot pickle Python functions on Python 3.11); how a JSON token's kind is told apart without one
is glue_jobs/json_tokens.py. What the batch adds to a row (batch_id, partitions) is glue_jobs/lake_layout.py.

Parsing is strict JSON (RFC 8259): bare NaN/Infinity tokens and 'single-quoted' strings are malformed_json, and
so is a payload that is not exactly one JSON object: text after the object (a second object on the line), or a
key repeated at its top level (which value was meant is ambiguous). The strings "NaN"/"Infinity" in a number
field are invalid_type; a number that overflows a double (1e400) is out_of_range.

Reason codes, first match wins (malformed_json, missing_required_field, invalid_type, out_of_range);
`detail` names the first offending field in schema order.

Stages
------
The rules are built in successive selects (`_stages`) so that each re-parse runs once per row, at most.
Per-field columns are named by one helper each (`typed(f)`, `text(f)`, ...); `f` is a contract field.

| stage | adds | drops |
|---|---|---|
| 1 `_parse` | `_parsed` (typed parse of a JSON record) | |
| 2 `_flatten` | `typed(f)` (non-string fields), `text(f)` (string fields: the value), `_failed`, `_not_one_object`, `_escaped` (a backslash in the payload) | `_parsed` |
| 2b `_counted` | `_recheck` (must the record be parsed again to prove it is one object with unique keys?) | |
| 3 `_resolve` | `_strings` (all-strings parse of a failed record), `_trailing`, `_keys`, `non_string(f)`, `stripped(f)`, `json_text(f)`, `overflowed(f)` | |
| 4 `_texts` | `text(f)` (other fields: the token as text), `_malformed` | `_strings`, `_failed`, `_not_one_object`, `_escaped`, `_recheck`, `_trailing`, `_keys` |
| 5 `_flag` | `value(f)`, `broken(rule, f)` per rule | the stage 2-4 columns |
| 6 `_reason` | `reason`, `detail` | `broken(rule, f)`, `_malformed` |
| 7 `_lake_columns` | the contract's fields, VALIDATED_INGESTION_COLUMNS, VALIDATED_EXTRA_COLUMNS | everything else |
| 8 `_timestamps` | event_time as a timestamp | |

Every stage carries the envelope's columns and `_latest_ms` (the per-batch limit of event_time) up to stage 7.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from glue_jobs import json_tokens as tokens
from glue_jobs.batch_constants import with_batch_constants
from glue_jobs.registry_frames import MALFORMED_RECORD, UNKNOWN_SCHEMA_VERSION
from glue_jobs.schema import ENVELOPE_COLUMNS, INGESTION_COLUMNS, contract_fields

MALFORMED_JSON = "malformed_json"
MISSING_REQUIRED_FIELD = "missing_required_field"
INVALID_TYPE = "invalid_type"
OUT_OF_RANGE = "out_of_range"
REASON_CODES = (MALFORMED_JSON, MISSING_REQUIRED_FIELD, INVALID_TYPE, OUT_OF_RANGE, MALFORMED_RECORD, UNKNOWN_SCHEMA_VERSION)  # last 2: Kafka

# Field rules the .avsc cannot express. Names must exist in the newest datasets/clickstream/schema.v<N>.avsc (`_fields`).
EVENT_TIME_FIELD = "event_time"  # epoch milliseconds, stored as a timestamp, drives the partitions
NORMALIZED_FIELDS = ("event_type",)  # stored lower-cased and trimmed
JSON_TEXT_FIELDS = ("metadata",)  # any JSON value, stored as its JSON text
MIN_EVENT_TIME_MS = 946_684_800_000  # 2000-01-01T00:00:00Z
MAX_FUTURE_MS = 86_400_000  # processing time + 1 day

_DDL_TYPES = {"string": "string", "long": "bigint", "int": "int", "double": "double", "float": "float", "boolean": "boolean"}
_INTEGER_TYPES = ("long", "int")


def _fields():
    """clickstream's fields, checked against the names above. Read when the stages are built, never at import:
    every job imports this module (typed_contract, packed_batch), and a team may delete datasets/clickstream."""
    fields = contract_fields()
    names = tuple(f.name for f in fields)
    missing = [name for name in (EVENT_TIME_FIELD, *NORMALIZED_FIELDS, *JSON_TEXT_FIELDS) if name not in names]
    if missing:
        raise ValueError(f"glue_jobs.contract names field {missing[0]!r}, which the newest datasets/clickstream/schema.v<N>.avsc does not define")
    if any(name.startswith("_") for name in names):
        raise ValueError(f"a contract field starts with '_', which the stages' own columns use: {names}")
    return fields


# What validate() returns besides the contract's fields: the ingestion columns the envelope carries (the
# lake's INGESTION_COLUMNS but batch_id, which the write adds), then the verdict and the record's text.
VALIDATED_INGESTION_COLUMNS = ("source", "source_partition", "source_offset", "arrival_time")
if VALIDATED_INGESTION_COLUMNS != tuple(name for name, _, _ in INGESTION_COLUMNS if name != "batch_id"):
    raise AssertionError("VALIDATED_INGESTION_COLUMNS drifted from glue_jobs.schema.INGESTION_COLUMNS")
VALIDATED_EXTRA_COLUMNS = ("reason", "detail", "payload")


# Per-field stage columns, one name helper per kind (see the table above); the argument is a field's name.
typed = "_typed_{}".format  # a non-string field's value from the typed parse (null if absent or not convertible)
text = "_text_{}".format  # a field's text: a string field's value (stage 2), another field's token as text (stage 4)
non_string = "_nonstring_{}".format  # whether a string field's token was a number, boolean, object or array
stripped = "_stripped_{}".format  # a normalized field's text without whitespace at either end
json_text = "_jsontext_{}".format  # a JSON-text field's value: the token's JSON text
overflowed = "_overflow_{}".format  # whether an integer field's number overflowed (out_of_range, not invalid_type)
value = "_value_{}".format  # a field's value as stored
broken = "_{}_{}".format  # broken(rule, field): whether the field breaks the rule (one of _RULES)


def _ddl(types: dict[str, str]) -> str:
    return tokens.struct_ddl({**types, tokens.CORRUPT: "string"})


# The per-batch value, joined to the rows as data by `validate` (glue_jobs/batch_constants.py), so that every
# other expression is built once per JVM and reused (`_stages`) and the generated code is the same every batch.
_LATEST_MS = "_latest_ms"  # processing time + 1 day: a later event_time is out_of_range
_CARRIED = (*ENVELOPE_COLUMNS, _LATEST_MS)
_RULES = ("missing", "wrong_type", "out_of_range")

Stage = dict  # output column name -> expression, or None to carry the input column of that name


def _parse() -> Stage:
    """Stage 1: envelope + `_parsed`, the typed parse of a JSON record (null for a decoded Avro record)."""
    is_json_record = F.col("record").isNull()
    typed_ddl = _ddl({f.name: _DDL_TYPES[f.avro_type] for f in _fields()})
    return {**dict.fromkeys(ENVELOPE_COLUMNS), "_parsed": F.when(is_json_record, F.from_json("payload", typed_ddl, tokens.JSON_OPTIONS))}


def _flatten() -> Stage:
    """Stage 2 (native expressions, few: whole-stage codegen puts a stage in one Java method, which the JVM
    stops compiling past 8,000 bytes of bytecode): flat typed values, string fields' texts, whether the
    typed parse failed and whether the payload is one JSON object at all."""
    is_json_record = F.col("record").isNull()
    return {
        **dict.fromkeys(_CARRIED),
        **{typed(f.name): F.col(f"_parsed.{f.name}") for f in _fields() if f.avro_type != "string"},
        **{text(f.name): F.when(is_json_record, F.col(f"_parsed.{f.name}")).otherwise(F.col(f"record.{f.name}"))
           for f in _fields() if f.avro_type == "string"},
        "_failed": is_json_record & F.col(f"_parsed.{tokens.CORRUPT}").isNotNull(),
        "_not_one_object": is_json_record & (F.col("_parsed").isNull() | ~tokens.looks_like_one_object(F.col("payload"))),
        "_escaped": tokens.has_escape(F.col("payload")),
    }


def _counted(flat: Stage) -> Stage:
    """Stage 2b: `_recheck`, whether a JSON record that looks like one object must be parsed again to rule out
    text after it or a repeated key (json_tokens.surely_one_object)."""
    present = [text(f.name) if f.avro_type == "string" else typed(f.name) for f in _fields()]
    strings = [text(f.name) for f in _fields() if f.avro_type == "string"]
    one_object = F.col("record").isNull() & ~F.col("_not_one_object")
    return {**dict.fromkeys(flat), "_recheck": one_object & ~tokens.surely_one_object("payload", "_escaped", strings, present)}


def _resolve(flat: Stage) -> Stage:
    """Stage 3: every JSON function after the typed parse, each evaluated only for the rows that need it (the
    all-strings parse of a failed record, the re-parses that tell a token's kind or prove one object, the
    JSON text of a string metadata value, an integer's overflow). A projection with a JSON function is not
    whole-stage compiled: it is generated as small methods, which suits these long condition chains."""
    is_json_record, escaped = F.col("record").isNull(), F.col("_escaped")
    strings_parse = F.from_json("payload", _ddl({f.name: "string" for f in _fields()}), tokens.JSON_OPTIONS)
    resolved = {
        **dict.fromkeys(flat),
        "_strings": F.when(F.col("_failed"), strings_parse),
        # Not exactly one object: text after it, or a repeated top-level key; parsed again only when counting
        # characters cannot rule both out (json_tokens.surely_one_object).
        "_trailing": F.col("_recheck") & tokens.has_text_after_first_value("payload"),
        "_keys": F.when(F.col("_recheck"), tokens.top_level_keys("payload")),
    }
    for f in _fields():
        name, field_text = f.name, F.col(text(f.name))
        if f.avro_type == "string":
            present_in_json = is_json_record & field_text.isNotNull()
            if name in JSON_TEXT_FIELDS:
                # Any JSON value: a string token is stored as its JSON literal, any other as it was rendered.
                is_string_token = present_in_json & ~tokens.is_non_string_token(name, field_text, escaped)
                resolved[json_text(name)] = F.when(is_string_token, tokens.string_token_literal(field_text, escaped)).otherwise(field_text)
                continue
            resolved[non_string(name)] = F.when(present_in_json, tokens.is_non_string_token(name, field_text, escaped)).otherwise(F.lit(False))
            if name in NORMALIZED_FIELDS:
                resolved[stripped(name)] = tokens.strip(text(name))
        elif f.avro_type in _INTEGER_TYPES:
            # A failed record only (its text parse runs again here: one row in a hundred, not worth a stage).
            overflow = F.col("_failed") & F.col(typed(name)).isNull() & strings_parse.getField(name).rlike("^-?[0-9]+$")
            resolved[overflowed(name)] = F.when(overflow, tokens.parse_single(name, "double").isNotNull()).otherwise(F.lit(False))
    return resolved


def _texts(resolved: Stage) -> Stage:
    """Stage 4: every field's text (presence for every type, the token's rendering for the type checks) and
    whether the payload is malformed JSON."""
    is_avro = F.col("record").isNotNull()
    return {
        **dict.fromkeys(name for name in resolved if name not in ("_strings", "_not_one_object", "_escaped", "_recheck", "_trailing", "_keys", "_failed")),
        **{
            text(f.name): F.when(is_avro, F.col(f"record.{f.name}").cast("string"))
            .otherwise(F.coalesce(F.col(f"_strings.{f.name}"), F.col(typed(f.name)).cast("string")))
            for f in _fields() if f.avro_type != "string"
        },
        "_malformed": F.col("_not_one_object") | F.col("_trailing") | F.col(f"_strings.{tokens.CORRUPT}").isNotNull()
        | F.coalesce(F.size("_keys") != F.size(F.array_distinct("_keys")), F.lit(False)),
    }


def _field_columns(field) -> dict[str, Column]:
    """Per field: its value and the rule flags, from the columns of the stages before."""
    name = field.name
    is_avro = F.col("record").isNotNull()
    field_text = F.col(text(name))
    if field.avro_type == "string":
        if name in JSON_TEXT_FIELDS:
            stored, wrong_type = F.col(json_text(name)), F.lit(False)  # any JSON value is allowed
        else:
            stored = F.lower(F.col(stripped(name))) if name in NORMALIZED_FIELDS else field_text
            wrong_type = F.col(non_string(name))
        blank = F.col(stripped(name)) == "" if name in NORMALIZED_FIELDS else tokens.is_blank(text(name))
        missing = field_text.isNull() | (~wrong_type & blank) if field.required else F.lit(False)
        return {"value": stored, "missing": missing, "wrong_type": wrong_type, "out_of_range": F.lit(False)}

    parsed = F.col(typed(name))
    stored = F.when(is_avro, F.col(f"record.{name}")).otherwise(parsed)
    present = field_text.isNotNull()
    conversion_failed = ~is_avro & present & parsed.isNull()
    if field.avro_type in _INTEGER_TYPES:
        wrong_type = conversion_failed & ~F.col(overflowed(name))
        out_of_range = F.col(overflowed(name))
    else:
        wrong_type = conversion_failed
        out_of_range = present & stored.isNotNull() & (F.isnan(stored) | (F.abs(stored) == float("inf")))
    missing = ~present if field.required else F.lit(False)
    return {"value": stored, "missing": missing, "wrong_type": wrong_type, "out_of_range": out_of_range}


def _flag() -> Stage:
    """Stage 5: each field's value and its rule flags."""
    columns = {f.name: _field_columns(f) for f in _fields()}
    event_time_ms = columns[EVENT_TIME_FIELD]["value"]
    time_out_of_range = (event_time_ms < F.lit(MIN_EVENT_TIME_MS)) | (event_time_ms > F.col(_LATEST_MS))
    columns[EVENT_TIME_FIELD]["out_of_range"] |= event_time_ms.isNotNull() & time_out_of_range
    return {
        **dict.fromkeys((*_CARRIED, "_malformed")),
        **{value(f.name): columns[f.name]["value"] for f in _fields()},
        **{broken(rule, f.name): columns[f.name][rule] for rule in _RULES for f in _fields()},
    }


def _reason() -> Stage:
    """Stage 6: the first failed rule's reason code and detail (null for a valid record)."""
    checks = [(MALFORMED_JSON, F.col("_malformed"), "payload is not one JSON object")]
    for rule, reason, what in (
        ("missing", MISSING_REQUIRED_FIELD, "required field absent, null or empty"),
        ("wrong_type", INVALID_TYPE, "wrong JSON type"),
        ("out_of_range", OUT_OF_RANGE, "value out of range"),
    ):
        checks += [(reason, F.col(broken(rule, f.name)), f"{f.name}: {what}") for f in _fields()]
    known = F.col("problem").isNotNull()  # an adapter's verdict (an undecodable Kafka value) comes first
    reason, detail = F.when(known, F.col("problem.reason")), F.when(known, F.col("problem.detail"))
    for code, condition, message in checks:
        reason = reason.when(condition, F.lit(code))
        detail = detail.when(condition, F.lit(message))
    return {**dict.fromkeys((*_CARRIED, *(value(f.name) for f in _fields()))), "reason": reason, "detail": detail}


def _lake_columns() -> Stage:
    """Stage 7: the record's lake columns (typed values of a valid record only), reason, detail and payload.
    batch_id and the hour partition are not here: the write adds them (glue_jobs/lake_layout.py)."""
    is_valid = F.col("reason").isNull()
    # Only valid rows keep event_time: timestamp_millis of a huge (invalid) long would overflow.
    contract_values = {f.name: F.when(is_valid, F.col(value(f.name))) if f.name == EVENT_TIME_FIELD else F.col(value(f.name))
                       for f in _fields()}
    return {**contract_values, **dict.fromkeys(VALIDATED_INGESTION_COLUMNS), **dict.fromkeys(VALIDATED_EXTRA_COLUMNS)}


def _timestamps(classified: Stage) -> Stage:
    """Stage 8: event_time as a timestamp. timestamp_millis is exact (a double division could land a
    microsecond early); instants are zone-free."""
    return {name: F.expr(f"timestamp_millis(`{name}`)") if name == EVENT_TIME_FIELD else None for name in classified}


def _build_stages() -> list[list[Column]]:
    flat = _flatten()
    counted = _counted(flat)
    resolved = _resolve(counted)
    classified = _lake_columns()
    stages = [_parse(), flat, counted, resolved, _texts(resolved), _flag(), _reason(), classified, _timestamps(classified)]
    return [[F.col(f"`{name}`") if column is None else column.alias(name) for name, column in stage.items()]
            for stage in stages]


_built: tuple[object, list[list[Column]]] | None = None


def _stages() -> list[list[Column]]:
    """The columns of every stage, built once per JVM (thousands of py4j calls every batch would repeat)."""
    global _built
    from pyspark import SparkContext

    jvm = SparkContext._jvm
    if _built is None or _built[0] is not jvm:
        _built = (jvm, _build_stages())
    return _built[1]


def validate(envelope: DataFrame, *, now_ms: int) -> DataFrame:
    """Envelope -> one row per input record: the contract's fields, VALIDATED_INGESTION_COLUMNS, then
    reason (null when valid), detail and payload. These are the columns the writes store (the lake's
    but batch_id and the partition, a dead letter's but batch_id and ingest_date: glue_jobs/lake_layout.py).

    Successive selects, so that each expensive expression (a parse, a regex) runs once per row: Spark's
    CollapseProject does not merge two projections when that would copy a non-cheap expression into
    several places of the next one. Intermediate columns start with "_" and are dropped by stage 7."""
    first, *rest = _stages()
    frame = with_batch_constants(envelope, {_LATEST_MS: now_ms + MAX_FUTURE_MS}).select(*first, _LATEST_MS)
    for columns in rest:
        frame = frame.select(*columns)
    return frame
