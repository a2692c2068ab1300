"""The event contract as DataFrame transforms: strict parsing, validation, reason codes, lake columns.

Every rule of DESIGN.md "Default event contract" lives here, in native Spark expressions only (no UDFs:
Glue 4.0's pyspark cannot pickle Python functions on Python 3.11).

How a JSON token's type is told apart without a UDF
---------------------------------------------------
`from_json` renders any token into a StringType field (123 -> "123", {"a":1} -> '{"a":1}'), so a typed
parse alone cannot reject a number where a string is expected. The job therefore:

1. parses every payload once with the typed schema (strings, bigint, double) in PERMISSIVE mode with a
   corrupt-record column. Spark documents that a field which fails to convert is set to null and the
   record's text lands in the corrupt-record column (checked on Spark 3.3 and 3.5);
2. for records that failed (only those: `when` evaluates lazily), parses again with every field as
   StringType, which fails only on real syntax errors -> malformed_json, and yields each field's text;
3. for a string field whose text could also be the rendering of a non-string token (it starts with a
   digit, '-', '"', '{', '[' or is true/false) parses that single field again with the matching
   non-string type (double, boolean, map, array). If that succeeds the token was not a string.
   The parse is skipped when the payload cannot hold a string literal starting like the text (neither
   "c nor 'c, c its first character, nor any backslash, which could start an escaped literal): then the
   token was not a string, and a non-string token always parses as its own type, so the answer is the same.
   Plain identifiers such as "evt-1" or "u-42" and object metadata never pay for this extra parse.

The rules are built in successive selects so that each re-parse and regex runs once per row.

`allowNonNumericNumbers` is off, so bare NaN/Infinity tokens (not JSON, RFC 8259) are malformed_json;
the strings "NaN"/"Infinity" in a number field are invalid_type; a number that overflows a double
(1e400) is out_of_range.

Reason codes, first match wins: malformed_json, missing_required_field, invalid_type, out_of_range.
`detail` names the first offending field in schema order.
"""

from __future__ import annotations

import operator
from functools import reduce

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from glue_jobs.schema import INGESTION_COLUMNS, PARTITION_COLUMNS, contract_fields, spark_source_schema

MALFORMED_JSON = "malformed_json"
MISSING_REQUIRED_FIELD = "missing_required_field"
INVALID_TYPE = "invalid_type"
OUT_OF_RANGE = "out_of_range"
REASON_CODES = (MALFORMED_JSON, MISSING_REQUIRED_FIELD, INVALID_TYPE, OUT_OF_RANGE)

# Field rules the .avsc cannot express. Names must exist in schemas/event.avsc (checked at import).
EVENT_TIME_FIELD = "event_time"  # epoch milliseconds, stored as a timestamp, drives the partitions
NORMALIZED_FIELDS = ("event_type",)  # stored lower-cased and trimmed
JSON_TEXT_FIELDS = ("metadata",)  # any JSON value, stored as its JSON text
MIN_EVENT_TIME_MS = 946_684_800_000  # 2000-01-01T00:00:00Z
MAX_FUTURE_MS = 86_400_000  # processing time + 1 day

MS_PER_HOUR = 3_600_000
MS_PER_DAY = 86_400_000

_CORRUPT = "_corrupt_record"
_JSON_OPTIONS = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": _CORRUPT, "allowNonNumericNumbers": "false"}
_DDL_TYPES = {"string": "string", "long": "bigint", "int": "int", "double": "double", "float": "float",
              "boolean": "boolean"}
_INTEGER_TYPES = ("long", "int")
_DIGITS = tuple("0123456789")
_WHITESPACE = (" ", "\t", "\n", "\x0b", "\f", "\r")  # Java regex \s
_LINE_TERMINATORS = ("\u0085", "\u2028", "\u2029")
_FLOAT_TYPES = ("double", "float")

_FIELDS = contract_fields()
_NAMES = tuple(f.name for f in _FIELDS)
for _name in (EVENT_TIME_FIELD, *NORMALIZED_FIELDS, *JSON_TEXT_FIELDS):
    if _name not in _NAMES:
        raise ValueError(f"glue_jobs.contract names field {_name!r}, which schemas/event.avsc does not define")

# Envelope every source adapter produces (DESIGN "Sources in Glue"): the batch function sees only this.
# `record` holds already-decoded columns (Avro from MSK); it is null for JSON text sources.
ENVELOPE_COLUMNS = ("payload", "record", "source", "source_partition", "source_offset", "arrival_time")
VALIDATED_EXTRA_COLUMNS = ("reason", "detail", "payload")


def envelope_schema() -> T.StructType:
    return T.StructType([
        T.StructField("payload", T.StringType()),
        T.StructField("record", spark_source_schema()),
        T.StructField("source", T.StringType()),
        T.StructField("source_partition", T.StringType()),
        T.StructField("source_offset", T.StringType()),
        T.StructField("arrival_time", T.TimestampType()),
    ])


def _struct_ddl(types: dict[str, str]) -> str:
    return "struct<" + ",".join(f"`{name}`:{ddl}" for name, ddl in types.items()) + ">"


def _typed_ddl() -> str:
    return _struct_ddl({**{f.name: _DDL_TYPES[f.avro_type] for f in _FIELDS}, _CORRUPT: "string"})


def _text_ddl() -> str:
    return _struct_ddl({**{f.name: "string" for f in _FIELDS}, _CORRUPT: "string"})


def _parse_single(field: str, ddl_type: str) -> Column:
    return F.from_json("payload", _struct_ddl({field: ddl_type}), _JSON_OPTIONS).getField(field)


def _typed_col(name: str) -> Column:
    """A non-string field's value from the typed parse (null if absent or not convertible)."""
    return F.col(f"_y_{name}")


def _text_col(name: str) -> Column:
    return F.col(f"_t_{name}")


def _starts_with_any(text: Column, prefixes) -> Column:
    """startsWith compares bytes in place; substring(text, 1, 1) would count every character of the text
    and allocate a new string, once per check and row."""
    return reduce(operator.or_, (text.startswith(prefix) for prefix in prefixes))


def _ends_with_any(text: Column, suffixes) -> Column:
    return reduce(operator.or_, (text.endswith(suffix) for suffix in suffixes))


def _may_be_a_string_token(first) -> Column:
    """False only if no string literal in the payload starts with `first` (see module doc, step 3).

    A string token whose text starts with c is written "c... or 'c... (single quotes are allowed) or starts
    with an escape ("\\..., '\\...; any backslash in the payload is taken as one). When none of these
    occurs the token cannot be a string, so the confirming parse is skipped: object metadata without '"{'
    in the payload costs no second parse. `first` is a one-character string, or a Column for it."""
    payload = F.col("payload")
    if isinstance(first, str):
        quoted, single_quoted = F.lit(f'"{first}'), F.lit(f"'{first}")
    else:
        quoted, single_quoted = F.concat(F.lit('"'), first), F.concat(F.lit("'"), first)
    return payload.contains(quoted) | payload.contains(single_quoted) | payload.contains("\\")


def _is_non_string_token(field: str, text: Column) -> Column:
    """True when the field's token is a number, boolean, object or array (see module doc, step 3)."""
    looks_numeric = _starts_with_any(text, (*_DIGITS, '"')) | (
        text.startswith("-") & _starts_with_any(text, tuple(f"-{d}" for d in _DIGITS))
    )

    def parses_as(ddl_type: str, first) -> Column:
        return F.when(_may_be_a_string_token(first), _parse_single(field, ddl_type).isNotNull()).otherwise(F.lit(True))

    return (
        F.when(looks_numeric, parses_as("double", F.substring(text, 1, 1)))  # rare: string fields seldom look numeric
        .when(text.isin("true", "false"), parses_as("boolean", F.when(text == "true", F.lit("t")).otherwise(F.lit("f"))))
        .when(text.startswith("{"), parses_as("map<string,string>", "{"))
        .when(text.startswith("["), parses_as("array<string>", "["))
        .otherwise(F.lit(False))
    )


def _json_string_literal(text: Column) -> Column:
    """JSON text of a string value (quoted and escaped), via to_json of a one-field struct."""
    return F.regexp_extract(F.to_json(F.struct(text.alias("v"))), r'(?s)^\{"v":(.*)\}$', 1)


def _strip(text: Column) -> Column:
    """Java-regex trim of \\s at both ends; the regex only runs when an end character could be affected
    (`$` also matches before a final line terminator such as U+0085)."""
    may_change = _starts_with_any(text, _WHITESPACE) | _ends_with_any(text, (*_WHITESPACE, *_LINE_TERMINATORS))
    return F.when(may_change, F.regexp_replace(text, r"^\s+|\s+$", "")).otherwise(text)


def _starts_with_brace(payload: Column) -> Column:
    return F.when(payload.startswith("{"), F.lit(True)).otherwise(payload.rlike(r"^\s*\{"))


def _ends_with_brace(payload: Column) -> Column:
    return F.when(payload.endswith("}"), F.lit(True)).otherwise(payload.rlike(r"\}\s*$"))


def parse_payload(envelope: DataFrame) -> DataFrame:
    """Envelope -> envelope + `_typed` (typed parse) + `_text` (text parse, only for records that failed)."""
    is_json_record = F.col("record").isNull()
    typed = envelope.select(
        *ENVELOPE_COLUMNS,
        F.when(is_json_record, F.from_json("payload", _typed_ddl(), _JSON_OPTIONS)).alias("_typed"),
    )
    typed_parse_failed = F.col(f"_typed.{_CORRUPT}").isNotNull()
    return typed.select(
        *ENVELOPE_COLUMNS,
        "_typed",
        F.when(is_json_record & typed_parse_failed, F.from_json("payload", _text_ddl(), _JSON_OPTIONS)).alias("_text"),
    )


def _token_text(field) -> Column:
    """The field's text: presence for every type, the token's rendering for the type checks."""
    is_avro = F.col("record").isNotNull()
    typed = F.col(f"_typed.{field.name}")
    decoded = F.col(f"record.{field.name}")
    if field.avro_type == "string":
        return F.when(is_avro, decoded).otherwise(typed)
    return F.when(is_avro, decoded.cast("string")).otherwise(F.coalesce(F.col(f"_text.{field.name}"), typed.cast("string")))


def _token_checks(field) -> dict[str, Column]:
    """The expensive per-field checks (conditional re-parses, regexes), each computed once per row."""
    name = field.name
    is_avro = F.col("record").isNotNull()
    text = _text_col(name)
    if field.avro_type == "string":
        checks = {f"_w_{name}": F.when(~is_avro & text.isNotNull(), _is_non_string_token(name, text)).otherwise(F.lit(False))}
        if field.required or name in NORMALIZED_FIELDS:
            checks[f"_s_{name}"] = _strip(text)
        return checks
    if field.avro_type in _INTEGER_TYPES:
        # An integer token too large for the type: a number, so out_of_range rather than invalid_type.
        conversion_failed = ~is_avro & text.isNotNull() & _typed_col(name).isNull()
        overflow = F.when(conversion_failed & text.rlike("^-?[0-9]+$"), _parse_single(name, "double").isNotNull())
        return {f"_o_{name}": overflow.otherwise(F.lit(False))}
    return {}


def _field_columns(field) -> dict[str, Column]:
    """Per field: its value and the rule flags, from the columns of the two stages before."""
    name = field.name
    is_avro = F.col("record").isNotNull()
    text = _text_col(name)
    if field.avro_type == "string":
        wrong_type = F.col(f"_w_{name}")
        if name in JSON_TEXT_FIELDS:
            value = F.when(text.isNull() | is_avro | wrong_type, text).otherwise(_json_string_literal(text))
            wrong_type = F.lit(False)  # any JSON value is allowed
        elif name in NORMALIZED_FIELDS:
            value = F.lower(F.col(f"_s_{name}"))
        else:
            value = text
        missing = text.isNull() | (~wrong_type & (F.col(f"_s_{name}") == "")) if field.required else F.lit(False)
        out_of_range = F.lit(False)
        return {"value": value, "missing": missing, "wrong_type": wrong_type, "out_of_range": out_of_range}

    typed = _typed_col(name)
    decoded = F.col(f"record.{name}")
    value = F.when(is_avro, decoded).otherwise(typed)
    present = text.isNotNull()
    conversion_failed = ~is_avro & present & typed.isNull()
    if field.avro_type in _INTEGER_TYPES:
        overflow = F.col(f"_o_{name}")
        wrong_type = conversion_failed & ~overflow
        out_of_range = overflow
    else:
        wrong_type = conversion_failed
        out_of_range = present & value.isNotNull() & (F.isnan(value) | (F.abs(value) == float("inf")))
    missing = ~present if field.required else F.lit(False)
    return {"value": value, "missing": missing, "wrong_type": wrong_type, "out_of_range": out_of_range}


def validate(envelope: DataFrame, *, now_ms: int, batch_id: int) -> DataFrame:
    """Envelope -> one row per input record: lake columns + reason (null when valid), detail, payload."""
    return envelope.transform(parse_payload).transform(lambda df: _classify(df, now_ms=now_ms, batch_id=batch_id))


def _classify(parsed: DataFrame, *, now_ms: int, batch_id: int) -> DataFrame:
    # Successive selects, so that each expensive expression (a re-parse, a regex) runs once per row: Spark's
    # CollapseProject does not merge two projections when that would copy a non-cheap expression into
    # several places of the next one. Intermediate columns start with "_" and are dropped at the end.
    is_json_record = F.col("record").isNull()
    payload = F.col("payload")
    is_malformed = is_json_record & (
        payload.isNull()
        | ~(_starts_with_brace(payload) & _ends_with_brace(payload))
        | F.col("_typed").isNull()
        | F.col(f"_text.{_CORRUPT}").isNotNull()
    )
    # The parsed structs end here: later stages get flat columns (each non-codegen stage copies its whole
    # input row, and the two structs were most of it).
    texts = parsed.select(
        *ENVELOPE_COLUMNS,
        *(F.col(f"_typed.{f.name}").alias(f"_y_{f.name}") for f in _FIELDS if f.avro_type != "string"),
        *(_token_text(f).alias(f"_t_{f.name}") for f in _FIELDS),
        is_malformed.alias("_malformed"),
    )
    checked = texts.select("*", *(check.alias(name) for f in _FIELDS for name, check in _token_checks(f).items()))

    columns = {f.name: _field_columns(f) for f in _FIELDS}
    event_time_ms = columns[EVENT_TIME_FIELD]["value"]
    time_out_of_range = (event_time_ms < F.lit(MIN_EVENT_TIME_MS)) | (event_time_ms > F.lit(now_ms + MAX_FUTURE_MS))
    columns[EVENT_TIME_FIELD]["out_of_range"] = columns[EVENT_TIME_FIELD]["out_of_range"] | (
        event_time_ms.isNotNull() & time_out_of_range
    )
    rules = ("missing", "wrong_type", "out_of_range")
    flagged = checked.select(
        *ENVELOPE_COLUMNS, "_malformed",
        *(columns[f.name]["value"].alias(f"_v_{f.name}") for f in _FIELDS),
        *(columns[f.name][rule].alias(f"_{rule}_{f.name}") for rule in rules for f in _FIELDS),
    )

    checks = [(MALFORMED_JSON, F.col("_malformed"), "payload is not one JSON object")]
    for rule, reason, what in (
        ("missing", MISSING_REQUIRED_FIELD, "required field absent, null or empty"),
        ("wrong_type", INVALID_TYPE, "wrong JSON type"),
        ("out_of_range", OUT_OF_RANGE, "value out of range"),
    ):
        checks += [(reason, F.col(f"_{rule}_{f.name}"), f"{f.name}: {what}") for f in _FIELDS]
    reason = F.when(checks[0][1], F.lit(checks[0][0]))
    detail = F.when(checks[0][1], F.lit(checks[0][2]))
    for code, condition, message in checks[1:]:
        reason = reason.when(condition, F.lit(code))
        detail = detail.when(condition, F.lit(message))
    reasoned = flagged.select(
        *ENVELOPE_COLUMNS, *(f"_v_{f.name}" for f in _FIELDS), reason.alias("reason"), detail.alias("detail")
    )

    is_valid = F.col("reason").isNull()
    event_time_ms = F.col(f"_v_{EVENT_TIME_FIELD}")
    # Only valid rows keep typed values: timestamp_millis of a huge (invalid) long would overflow.
    contract_values = [
        (F.when(is_valid, event_time_ms) if f.name == EVENT_TIME_FIELD else F.col(f"_v_{f.name}")).alias(f.name)
        for f in _FIELDS
    ]
    # Epoch arithmetic, not date_format: partitions are UTC whatever the session/JVM time zone.
    epoch_day = F.floor(event_time_ms / F.lit(MS_PER_DAY)).cast("int")
    event_date = F.date_add(F.lit("1970-01-01").cast("date"), epoch_day).cast("string")
    epoch_hour = F.floor(event_time_ms / F.lit(MS_PER_HOUR))
    event_hour = (epoch_hour - F.floor(epoch_hour / F.lit(24)) * F.lit(24)).cast("int")  # F.pmod is pyspark 3.4+

    ingestion = {
        "source": F.col("source"),
        "source_partition": F.col("source_partition"),
        "source_offset": F.col("source_offset"),
        "arrival_time": F.col("arrival_time"),
        "batch_id": F.lit(batch_id).cast("long"),
    }
    if tuple(ingestion) != tuple(name for name, _, _ in INGESTION_COLUMNS):
        raise AssertionError("ingestion columns drifted from glue_jobs.schema.INGESTION_COLUMNS")
    partitions = {"event_date": event_date, "event_hour": event_hour}
    if tuple(partitions) != tuple(name for name, _, _ in PARTITION_COLUMNS):
        raise AssertionError("partition columns drifted from glue_jobs.schema.PARTITION_COLUMNS")

    classified = reasoned.select(
        *contract_values,
        *(col.alias(name) for name, col in ingestion.items()),
        *(F.when(is_valid, col).alias(name) for name, col in partitions.items()),
        F.col("reason"),
        F.col("detail"),
        F.col("payload"),
    )
    # timestamp_millis is exact (a double division could land a microsecond early); instants are zone-free.
    return classified.select(
        *(F.expr(f"timestamp_millis(`{c}`)").alias(c) if c == EVENT_TIME_FIELD else F.col(c) for c in classified.columns)
    )
