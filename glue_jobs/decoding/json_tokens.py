"""JSON token helpers without a UDF: the strict parse options, a string's JSON literal, and the checks that a
payload is exactly one JSON object (glue_jobs/contract/typed_contract.py).

Native Spark expressions only (no UDFs: Glue 4.0's pyspark cannot pickle Python functions on Python 3.11).
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

CORRUPT = "_corrupt_record"
# Strict JSON (RFC 8259): Spark's parser would otherwise accept NaN/Infinity tokens and 'single-quoted' strings.
JSON_OPTIONS = {
    "mode": "PERMISSIVE",
    "columnNameOfCorruptRecord": CORRUPT,
    "allowNonNumericNumbers": "false",
    "allowSingleQuotes": "false",
}


def struct_ddl(types: dict[str, str]) -> str:
    return "struct<" + ",".join(f"`{name}`:{ddl}" for name, ddl in types.items()) + ">"


def json_string_literal(text: Column) -> Column:
    """JSON text of a string value (quoted and escaped), via to_json of a one-field struct."""
    return F.regexp_extract(F.to_json(F.struct(text.alias("v"))), r'(?s)^\{"v":(.*)\}$', 1)


def starts_with_brace(payload: Column) -> Column:
    return F.when(payload.startswith("{"), F.lit(True)).otherwise(payload.rlike(r"^\s*\{"))


def ends_with_brace(payload: Column) -> Column:
    return F.when(payload.endswith("}"), F.lit(True)).otherwise(payload.rlike(r"\}\s*$"))


def looks_like_one_object(payload: Column) -> Column:
    """The payload starts with `{` and ends with `}` (whitespace around allowed). Necessary, not sufficient:
    `has_text_after_first_value` and `top_level_keys` check the rest."""
    return starts_with_brace(payload) & ends_with_brace(payload)


def _at_most_sql(sql: str, character: str, limit_sql: str) -> str:
    """SQL: whether `character` occurs at most `limit_sql` (an int SQL expression, >= 0) times in the string
    `sql` yields. substring_index(s, c, n) is the text before the n-th c, or all of s when c occurs fewer
    than n times; UTF8String.subStringIndex finds each c by comparing bytes and returns s itself then, so
    the common case walks the bytes once and copies nothing (Spark 3.3-4.1 source: common/unsafe
    UTF8String.subStringIndex; a count, or instr/length, walks characters or copies the text, and cost
    more). octet_length is the byte count, read off the string."""
    return f"(octet_length(substring_index({sql}, '{character}', {limit_sql} + 1)) = octet_length({sql}))"


def has_text_after_first_value(name: str = "payload") -> Column:
    """For a payload (column `name`) that starts with `{`, ends with `}` and parses: whether any text follows
    its first object. Spark's parsers read the first value and ignore the rest of the text (NVIDIA/cudf#14226
    and #10267 describe this Spark behaviour; checked on Spark 3.3, 3.5 and 4.1 by the contract tests), so this wraps the payload: as `[payload]` it must parse as
    an array of exactly one element; text after the object makes that array fail to parse or hold more
    elements, unless the text starts with `]` (the parser stops at the array's end), so a payload holding
    a `]` must also parse as `{"v":payload}`, which rejects exactly that case. A payload whose only `}` is its
    last character cannot have text after its first object (that object ends at a `}`): it skips both."""
    payload = F.col(name)
    wrapped_array = F.from_json(F.concat(F.lit("["), payload, F.lit("]")), "array<struct<>>", JSON_OPTIONS)
    wrapped_object = F.from_json(F.concat(F.lit('{"v":'), payload, F.lit("}")), struct_ddl({CORRUPT: "string"}), JSON_OPTIONS)
    return F.when(F.expr(_at_most_sql(f"`{name}`", "}", "1")), F.lit(False)).otherwise(
        ~F.coalesce(F.size(wrapped_array) == 1, F.lit(False))
        | F.when(payload.contains("]"), wrapped_object.getField(CORRUPT).isNotNull()).otherwise(F.lit(False))
    )


def top_level_keys(name: str = "payload") -> Column:
    """The top-level keys of a JSON object as written, repeated keys included (json_object_keys, Spark 3.1+;
    null for text that is not one object); compare its size with array_distinct's to find a repeated key."""
    return F.expr(f"json_object_keys(`{name}`)")
