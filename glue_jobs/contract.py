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
   Plain identifiers such as "evt-1" or "u-42" never pay for this extra parse.

`allowNonNumericNumbers` is off, so bare NaN/Infinity tokens (not JSON, RFC 8259) are malformed_json;
the strings "NaN"/"Infinity" in a number field are invalid_type; a number that overflows a double
(1e400) is out_of_range.

Reason codes, first match wins: malformed_json, missing_required_field, invalid_type, out_of_range.
`detail` names the first offending field in schema order.
"""

from __future__ import annotations

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


def _is_non_string_token(field: str, text: Column) -> Column:
    """True when the field's token is a number, boolean, object or array (see module doc, step 3)."""
    looks_numeric = text.rlike('^(-?[0-9]|")')
    looks_boolean = text.isin("true", "false")
    looks_object = text.startswith("{")
    looks_array = text.startswith("[")
    return (
        F.when(looks_numeric, _parse_single(field, "double").isNotNull())
        .when(looks_boolean, _parse_single(field, "boolean").isNotNull())
        .when(looks_object, _parse_single(field, "map<string,string>").isNotNull())
        .when(looks_array, _parse_single(field, "array<string>").isNotNull())
        .otherwise(F.lit(False))
    )


def _json_string_literal(text: Column) -> Column:
    """JSON text of a string value (quoted and escaped), via to_json of a one-field struct."""
    return F.regexp_extract(F.to_json(F.struct(text.alias("v"))), r'(?s)^\{"v":(.*)\}$', 1)


def _strip(text: Column) -> Column:
    return F.regexp_replace(text, r"^\s+|\s+$", "")


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


def _field_columns(field) -> dict[str, Column]:
    """Per field: its text (presence), typed value, and the rule flags. Decoded (Avro) records are typed already."""
    name = field.name
    is_avro = F.col("record").isNotNull()
    typed = F.col(f"_typed.{name}")
    decoded = F.col(f"record.{name}")
    if field.avro_type == "string":
        text = F.when(is_avro, decoded).otherwise(typed)
        wrong_type = ~is_avro & text.isNotNull() & _is_non_string_token(name, text)
        if name in JSON_TEXT_FIELDS:
            value = F.when(text.isNull() | is_avro | wrong_type, text).otherwise(_json_string_literal(text))
            wrong_type = F.lit(False)  # any JSON value is allowed
        elif name in NORMALIZED_FIELDS:
            value = F.lower(_strip(text))
        else:
            value = text
        missing = text.isNull() | (~wrong_type & (F.length(_strip(text)) == 0)) if field.required else F.lit(False)
        out_of_range = F.lit(False)
        return {"value": value, "missing": missing, "wrong_type": wrong_type, "out_of_range": out_of_range}

    text = F.when(is_avro, decoded.cast("string")).otherwise(F.coalesce(F.col(f"_text.{name}"), typed.cast("string")))
    value = F.when(is_avro, decoded).otherwise(typed)
    present = text.isNotNull()
    conversion_failed = ~is_avro & present & typed.isNull()
    if field.avro_type in _INTEGER_TYPES:
        # An integer token too large for the type: a number, so out_of_range rather than invalid_type.
        overflow = conversion_failed & text.rlike("^-?[0-9]+$") & _parse_single(name, "double").isNotNull()
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
    is_json_record = F.col("record").isNull()
    shape_ok = F.col("payload").rlike(r"^\s*\{") & F.col("payload").rlike(r"\}\s*$")
    is_malformed = is_json_record & (
        F.col("payload").isNull()
        | ~shape_ok
        | F.col("_typed").isNull()
        | F.col(f"_text.{_CORRUPT}").isNotNull()
    )
    columns = {f.name: _field_columns(f) for f in _FIELDS}

    event_time_ms = columns[EVENT_TIME_FIELD]["value"]
    time_out_of_range = (event_time_ms < F.lit(MIN_EVENT_TIME_MS)) | (event_time_ms > F.lit(now_ms + MAX_FUTURE_MS))
    columns[EVENT_TIME_FIELD]["out_of_range"] = columns[EVENT_TIME_FIELD]["out_of_range"] | (
        event_time_ms.isNotNull() & time_out_of_range
    )

    checks = [(MALFORMED_JSON, is_malformed, "payload is not one JSON object")]
    for rule, reason, what in (
        ("missing", MISSING_REQUIRED_FIELD, "required field absent, null or empty"),
        ("wrong_type", INVALID_TYPE, "wrong JSON type"),
        ("out_of_range", OUT_OF_RANGE, "value out of range"),
    ):
        checks += [(reason, columns[f.name][rule], f"{f.name}: {what}") for f in _FIELDS]
    reason = F.when(checks[0][1], F.lit(checks[0][0]))
    detail = F.when(checks[0][1], F.lit(checks[0][2]))
    for code, condition, message in checks[1:]:
        reason = reason.when(condition, F.lit(code))
        detail = detail.when(condition, F.lit(message))

    is_valid = reason.isNull()
    # Only valid rows keep typed values: timestamp_millis of a huge (invalid) long would overflow.
    contract_values = [
        (F.when(is_valid, columns[f.name]["value"]) if f.name == EVENT_TIME_FIELD else columns[f.name]["value"]).alias(f.name)
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

    classified = parsed.select(
        *contract_values,
        *(col.alias(name) for name, col in ingestion.items()),
        *(F.when(is_valid, col).alias(name) for name, col in partitions.items()),
        reason.alias("reason"),
        detail.alias("detail"),
        F.col("payload"),
    )
    # timestamp_millis is exact (a double division could land a microsecond early); instants are zone-free.
    return classified.select(
        *(F.expr(f"timestamp_millis(`{c}`)").alias(c) if c == EVENT_TIME_FIELD else F.col(c) for c in classified.columns)
    )
