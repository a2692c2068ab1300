"""JSON tokens without a UDF: strict parse options, what kind a field's token was, texts and blanks.

Native Spark expressions only (no UDFs: Glue 4.0's pyspark cannot pickle Python functions on Python 3.11).
glue_jobs/contract.py builds the event contract's stages from these.

How a JSON token's type is told apart
-------------------------------------
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
   "c, c its first character, nor any backslash, which could start an escaped literal): then the
   token was not a string, and a non-string token always parses as its own type, so the answer is the same.
   Plain identifiers such as "evt-1" or "u-42" and object metadata never pay for this extra parse.
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

# Trimmed from both ends of event_type (and a blank required string is missing): Java regex \s, i.e. space,
# \t, \n, \x0b, \f and \r, as a Spark SQL literal (\uXXXX escapes: Spark SQL has no \f).
_TRIMMED_SQL = "' \\t\\n\\u000B\\u000C\\r'"


def struct_ddl(types: dict[str, str]) -> str:
    return "struct<" + ",".join(f"`{name}`:{ddl}" for name, ddl in types.items()) + ">"


def parse_single(field: str, ddl_type: str) -> Column:
    return F.from_json("payload", struct_ddl({field: ddl_type}), JSON_OPTIONS).getField(field)


def _first_byte_between(text: Column, low: str, high: str) -> Column:
    """The text starts with a character in [low, high) (ASCII bounds): two binary comparisons instead of a
    startsWith per character (strings compare byte by byte, unsigned; no collations before Spark 4)."""
    return (text >= F.lit(low)) & (text < F.lit(high))


def has_escape(payload: Column) -> Column:
    """Whether the payload holds a backslash: without one no string in it is escaped, so each string token's
    characters are written as they are (the shortcuts below rely on it). Computed once per record."""
    return payload.contains("\\")


def _may_be_a_string_token(first, escaped: Column) -> Column:
    """False only if no string literal in the payload starts with `first` (see module doc, step 3).

    A string token whose text starts with c is written "c... or starts with an escape ("\\...; any backslash
    in the payload is taken as one: `escaped`, has_escape's column; single-quoted strings are malformed).
    When neither occurs the token cannot be a string, so the confirming parse is skipped: object metadata
    without '"{' in the payload costs no second parse. `first` is a one-character string, or a Column for it."""
    payload = F.col("payload")
    quoted = F.lit(f'"{first}') if isinstance(first, str) else F.concat(F.lit('"'), first)
    return escaped | payload.contains(quoted)


def _token_kind(text: Column) -> list[tuple[Column, str, object]]:
    """(condition on the field's text, type that parses the token if it is not a string, its first
    character) for each token kind whose rendering the text could be (see module doc, step 3)."""
    looks_numeric = _first_byte_between(text, "0", ":") | text.startswith('"') | _first_byte_between(text, "-0", "-:")
    return [
        (looks_numeric, "double", F.substring(text, 1, 1)),  # rare: string fields seldom look numeric
        (text.isin("true", "false"), "boolean", F.when(text == "true", F.lit("t")).otherwise(F.lit("f"))),
        (text.startswith("{"), "map<string,string>", "{"),
        (text.startswith("["), "array<string>", "["),
    ]


def is_non_string_token(field: str, text: Column, escaped: Column) -> Column:
    """True when the field's token is a number, boolean, object or array (see module doc, step 3): re-parsed
    as the type its text looks like, unless the payload cannot hold a string token starting that way
    (`escaped`: has_escape of the payload)."""
    def parses_as(ddl_type: str, first) -> Column:
        return F.when(_may_be_a_string_token(first, escaped), parse_single(field, ddl_type).isNotNull()).otherwise(F.lit(True))

    kinds = _token_kind(text)
    condition, ddl_type, first = kinds[0]
    check = F.when(condition, parses_as(ddl_type, first))
    for condition, ddl_type, first in kinds[1:]:
        check = check.when(condition, parses_as(ddl_type, first))
    return check.otherwise(F.lit(False))


def json_string_literal(text: Column) -> Column:
    """JSON text of a string value (quoted and escaped), via to_json of a one-field struct."""
    return F.regexp_extract(F.to_json(F.struct(text.alias("v"))), r'(?s)^\{"v":(.*)\}$', 1)


def string_token_literal(text: Column, escaped: Column) -> Column:
    """JSON text of a string token the parse returned as `text`, written as to_json writes it. In a payload
    without a backslash (`escaped` false) the token's characters stand as they are, and a string token cannot
    hold '"' or a control character unescaped (RFC 8259 section 7; Spark's allowUnquotedControlChars is off
    by default, so Jackson rejects them), the only characters Jackson's generator escapes by default (it
    leaves non-ASCII and '/' as they are; tests/spark/test_streaming_contract.py compares both ways on
    every Spark line): the literal is the text in quotes. Otherwise json_string_literal, a to_json and a
    regex per value."""
    return F.when(escaped, json_string_literal(text)).otherwise(F.concat(F.lit('"'), text, F.lit('"')))


def strip(name: str) -> Column:
    """The text of column `name` without \\s characters at either end (one pass from each end)."""
    return F.expr(f"trim(BOTH {_TRIMMED_SQL} FROM `{name}`)")


def is_blank(name: str) -> Column:
    """Empty or only \\s characters. Those all sort below "!", so other texts skip the trim."""
    return (F.col(name) < F.lit("!")) & (strip(name) == "")


def starts_with_brace(payload: Column) -> Column:
    return F.when(payload.startswith("{"), F.lit(True)).otherwise(payload.rlike(r"^\s*\{"))


def ends_with_brace(payload: Column) -> Column:
    return F.when(payload.endswith("}"), F.lit(True)).otherwise(payload.rlike(r"\}\s*$"))



def looks_like_one_object(payload: Column) -> Column:
    """The payload starts with `{` and ends with `}` (whitespace around allowed). Necessary, not sufficient:
    `surely_one_object`, then `has_text_after_first_value` and `top_level_keys`, check the rest."""
    return starts_with_brace(payload) & ends_with_brace(payload)


def _count_sql(sql: str, character: str) -> str:
    """SQL: how often `character` (not a regex metacharacter) occurs in the string the SQL expression `sql`
    yields: the pieces split() cuts it into, minus one (limit -1 keeps empty pieces; Spark 3.0+). Spark has
    no character count; split on one plain character takes the JDK's fast path. For the short value texts
    only: it decodes, splits and re-encodes the text (docs/streaming-job.md)."""
    return f"(size(split({sql}, '{character}', -1)) - 1)"


def _at_most_sql(sql: str, character: str, limit_sql: str) -> str:
    """SQL: whether `character` occurs at most `limit_sql` (an int SQL expression, >= 0) times in the string
    `sql` yields. substring_index(s, c, n) is the text before the n-th c, or all of s when c occurs fewer
    than n times; UTF8String.subStringIndex finds each c by comparing bytes and returns s itself then, so
    the common case walks the bytes once and copies nothing (Spark 3.3-4.1 source: common/unsafe
    UTF8String.subStringIndex; a count, or instr/length, walks characters or copies the text, and cost
    more: docs/streaming-job.md). octet_length is the byte count, read off the string."""
    return f"(octet_length(substring_index({sql}, '{character}', {limit_sql} + 1)) = octet_length({sql}))"


def _in_values_sql(value_texts: list[str], character: str) -> str:
    """SQL: how often `character` occurs in the columns `value_texts` (null counts 0). Most values hold none:
    LIKE '%c%' is a byte search (Spark simplifies it to contains), and only a value holding c is counted."""
    return " + ".join([f"(CASE WHEN `{name}` LIKE '%{character}%' THEN {_count_sql(f'`{name}`', character)} ELSE 0 END)"
                       for name in value_texts] or ["0"])


def surely_one_object(payload: str, escaped: str, value_texts: list[str], present: list[str]) -> Column:
    """True only when a payload (column `payload`) that looks like one object and parses can hold neither
    text after that object nor a repeated top-level key, told by counting characters (`escaped` names the
    column holding has_escape of the payload): `value_texts` name
    the columns holding the text of each contract value the parse returned (strings as themselves, an
    object field as its JSON text; numbers hold neither character counted) and `present` names one column
    per contract field, non-null when the parse returned a value for it. False means: check by parsing
    (`has_text_after_first_value`, `top_level_keys`), which costs a parse per record; most records never need it.

    Without a backslash in the payload no string is escaped, so every ':' and '}' in the payload is one of:
    a top-level key's colon, the root's closing brace, a character of a value the parse returned, or a
    character of something else (another key, a nested value the contract does not read, text after the
    object). Each returned field's key has its colon and each returned value's characters are in the
    payload, so there are at least that many of each; at most fields present + colons in the values leaves
    no room for a top-level key beyond the contract fields returned, hence none repeated; text after the
    object ends with a '}' of its own, so at most 1 + closing braces in the values leaves none."""
    fields_present = " + ".join(f"CAST(`{name}` IS NOT NULL AS INT)" for name in present) or "0"
    body = f"`{payload}`"
    colons_accounted = _at_most_sql(body, ":", f"({fields_present}) + ({_in_values_sql(value_texts, ':')})")
    braces_accounted = _at_most_sql(body, "}", f"1 + ({_in_values_sql(value_texts, '}')})")
    return ~F.col(escaped) & F.expr(f"{colons_accounted} AND {braces_accounted}")


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
