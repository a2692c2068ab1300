"""The typed contract's fast path: one plain typed parse, and a count that proves it equal to the strict one.

The strict parse (glue_jobs/decoding/typed_parse.py) marks every string literal before parsing, because Spark's
`from_json` coerces: a string field takes any token (123 -> "123"), a decimal field takes a string token
("12.5"), a double field the strings "NaN" and "Infinity". Marking costs a regular-expression rewrite of
every payload and a second rendering of every string. Most records need neither: this module parses the
payload once, plainly, and proves for each record that no coercion happened, by counting. A record the
count cannot prove goes through the strict path (`fast` false); the result is the same either way.

The payload is parsed wrapped, as `{"\\u0001":PAYLOAD,"\\u0002":0}` (struct with the corrupt-record column):
the sentinel `\\u0002` reads 0 only if the parser got past exactly one value after `\\u0001` and found the
sentinel as a key of the same object. A payload cannot write either key without a backslash (Jackson
rejects raw control characters in strings, RFC 8259 section 7), and the fast path takes no payload holding
a backslash. Text after the first value breaks the wrapper (a syntax error, or an object closed early so the
sentinel is never read); a token of the wrong type fails the parse (the corrupt-record column is set: Spark
3.3 nulls the row, 3.5+ keeps the fields that parsed); an extra key `"k":V` after the payload's object is
caught by the key count below.

The count, over a payload with no backslash (so no string literal holds a quote):
  Q  = quotes in the payload = 2 x (string literals)
  K  = occurrences of `":`: each is a key (in valid JSON a closing quote followed by ':' ends a key)
  S  = non-null string values in the parse (string, enum, date fields; map values of those)
  N  = keys the parse accounts for: non-null fields of every record, every entry of every map
Every counted string value came from a string literal, if it is not exactly what a token of another type
renders as (`_renders_a_token`); every key is a literal. So literals >= keys + S >= K + S, and
  Q == 2 x (K + S)   proves there is no other literal (no string in a number, decimal or boolean field),
                     and that every key is followed directly by ':';
  K == N             proves every key is a field the parse kept with a value: no unknown key, no repeated key,
                     no key written with null. A record with a null-valued key takes the strict path: the parse
                     cannot tell a known field's null from an unknown key's (both leave N as it is), and an unknown
                     key is never silently lost (dataset.json unknown_fields, glue_jobs/contract/unknown_fields.py).
json_text fields render any token as text, so a record with one present is left to the strict path.
Native expressions only; the per-record count packs N, S and the flags into one long.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from glue_jobs.dataset_types import Node
from glue_jobs.decoding import json_tokens as tokens
from glue_jobs.decoding import typed_parse as tp

_VALUE, _SENTINEL = "\u0001", "\u0002"
_WRAP_OPEN, _WRAP_CLOSE = '{"\\u0001":', ',"\\u0002":0}'
# The tally packs N (keys), S (string values) and R (values that render a token) into one long: both N and S
# stay below 2^20 because the fast path takes payloads under 2^20 bytes (a key or a string takes 3+ bytes).
_S_UNIT, _R_UNIT, _FIELD_MASK = 1 << 20, 1 << 40, (1 << 20) - 1
MAX_FAST_BYTES = 1 << 20
_NUMBER = r"^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?$"


def parse_wrapped(text: Column, root: Node) -> Column:
    """The plain typed parse of `text` inside the wrapper: struct<\\u0001: the record, \\u0002: int, corrupt>."""
    schema = T.StructType([T.StructField(_VALUE, tp.wire_type(root, "")), T.StructField(_SENTINEL, T.IntegerType()),
                           T.StructField(tokens.CORRUPT, T.StringType())])
    return F.from_json(F.concat(F.lit(_WRAP_OPEN), text, F.lit(_WRAP_CLOSE)), schema, tokens.JSON_OPTIONS)


def record(wrapped: Column) -> Column:
    return wrapped.getField(_VALUE)


def _renders_a_token(text: Column) -> Column:
    """Whether a string value is exactly what Spark writes into a string field for a token of another type:
    a number (as JSON writes it), true, false, an object or array ({ or [), or a non-finite double (Jackson
    quotes it: '"Infinity"'). Only such a value may not have come from a string literal."""
    first = text.substr(1, 1)
    return (F.when(first.isin("{", "[", '"'), F.lit(True))
            .when(first.isin("t", "f"), text.isin("true", "false"))
            .when(first.isin("-", "0", "1", "2", "3", "4", "5", "6", "7", "8", "9"), text.rlike(_NUMBER))
            .when(first.isin("N", "I"), text.isin("NaN", "Infinity"))
            .otherwise(F.lit(False)))


def _tally(node: Node, value: Column, path: str, json_text: frozenset[str]) -> Column:
    """N + S x 2^20 + R x 2^40 of one value (the keys of a record's fields are counted by the record)."""
    zero = F.lit(0).cast("long")
    if path in json_text:
        return F.when(value.isNull(), zero).otherwise(F.lit(_R_UNIT))  # left to the strict path
    kind = node.kind
    if kind in ("string", "enum", "date"):
        return F.when(value.isNull(), zero).otherwise(F.lit(_S_UNIT) + F.when(_renders_a_token(value), F.lit(_R_UNIT)).otherwise(0))
    if kind == "record":
        total = zero
        for f in node.fields:
            child = value.getField(f.name)
            total = total + F.when(child.isNull(), zero).otherwise(1 + _tally(f.type, child, f"{path}.{f.name}" if path else f.name,
                                                                               json_text))
        return F.when(value.isNull(), zero).otherwise(total)
    if kind == "array":
        element = node.items
        if not _counts_anything(element):
            return zero
        return F.coalesce(F.aggregate(value, zero, lambda acc, x: acc + _tally(element, x, f"{path}[]", json_text)), zero)
    if kind == "map":
        entries = F.coalesce(F.size(value).cast("long"), zero)
        entries = F.when(value.isNull(), zero).otherwise(entries)
        if not _counts_anything(node.items):
            return entries
        inner = F.aggregate(F.map_values(value), zero, lambda acc, x: acc + _tally(node.items, x, f"{path}[]", json_text))
        return entries + F.coalesce(inner, zero)
    return zero  # numbers, booleans: their key is counted by the record holding them


def _counts_anything(node: Node) -> bool:
    """Whether values of this type hold keys or strings (an array of numbers counts nothing)."""
    if node.kind in ("string", "enum", "date", "record", "map"):
        return True
    if node.kind == "array":
        return _counts_anything(node.items)
    return False


def _occurrences(name: str, needle: str) -> Column:
    """How often `needle` (no quote of SQL's own) occurs in column `name`: bytes removed / its length."""
    body = f"`{name}`"
    return F.expr(f"(octet_length({body}) - octet_length(replace({body}, '{needle}', ''))) DIV {len(needle.encode())}")


COUNT_COLUMNS = ("_tally", "_quotes", "_keys")


def counts(text_name: str, wrapped: Column, root: Node, json_text: frozenset[str]) -> dict[str, Column]:
    """The counts of the module doc, as columns of their own stage (each is read more than once by `proven`;
    inside a CASE branch Spark would evaluate a repeated expression once per use)."""
    return {"_tally": _tally(root, record(wrapped), "", json_text), "_quotes": _occurrences(text_name, '"'),
            "_keys": _occurrences(text_name, '":')}


def proven(text_name: str, wrapped: Column) -> Column:
    """Whether the plain parse `wrapped` of the payload column `text_name` is exactly the strict parse (see the
    module doc), from the `counts` columns. False sends the record down the strict path; it never decides
    validity by itself."""
    text = F.col(f"`{text_name}`")
    tally, quotes, keys = (F.col(name) for name in COUNT_COLUMNS)
    kept = tally.bitwiseAND(_FIELD_MASK)
    parsed = (wrapped.isNotNull() & wrapped.getField(tokens.CORRUPT).isNull() & (wrapped.getField(_SENTINEL) == 0)
              & record(wrapped).isNotNull())
    shaped = text.startswith("{") & text.endswith("}") & ~text.contains("\\") & (F.octet_length(text) < MAX_FAST_BYTES)
    literals = (F.shiftright(tally, 40) == 0) & (quotes == 2 * (keys + F.shiftright(tally, 20).bitwiseAND(_FIELD_MASK)))
    return F.coalesce(shaped & parsed & literals & (keys == kept), F.lit(False))
