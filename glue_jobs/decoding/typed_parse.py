"""Strict typed parsing of JSON records at any depth, with native Spark expressions only.

`from_json` coerces in a few places: a StringType field takes any token (123 -> "123"), a DecimalType field
takes a string token ("12.5") and rounds extra fraction digits, a DoubleType field takes the strings "NaN"
and "Infinity". `marked(payload)` removes the first two: it prefixes every string literal of the payload
with the escape `\\u0000`, so

- every string value the parse returns starts with U+0000, and a number, boolean, object or array rendered
  into a StringType field never does (its text starts with a digit, '-', 't', 'f', '{' or '[');
- a string token no longer parses as a number: "\\u000012.5" is not a decimal, "\\u0000NaN" not a double.

Object keys are string literals too, so the parse schema names every field `\\u0000<name>` (`wire_type`).
An escape, not the raw character: Jackson rejects unescaped control characters in strings (RFC 8259
section 7). Checked on Spark 3.3, 3.5 and 4.1 by tests/spark/test_typed_contract.py. The regular
expression matches a JSON string literal exactly (RFC 8259: '"', then characters other than '"' and '\\'
or a '\\'-escape, then '"'); outside string literals JSON has no '"', so the matches are the literals. It
is written with possessive quantifiers so Java's regex engine does not recurse once per character.

Decimals are parsed wide (glue_jobs/dataset_types.py `wide_decimal`), so a value with more fraction digits
than the scale is seen instead of rounded away.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from glue_jobs.dataset_types import Node
from glue_jobs.decoding.json_tokens import CORRUPT, JSON_OPTIONS

MARK = "\u0000"
_STRING_LITERAL = r'"([^"\\]*+(?:\\.[^"\\]*+)*+)"'
_MARKED_LITERAL = '"\\\\u0000$1"'  # Java replacement syntax: \\ is one backslash
_MARKED_KEY_LITERAL = r'(?<!\\)"\\u0000'  # an opening quote's marker in Jackson's rendering of a value
BIG = 1 << 30  # substr length meaning "to the end"

_PRIMITIVE = {
    "string": T.StringType(), "enum": T.StringType(), "date": T.StringType(), "boolean": T.BooleanType(),
    "int": T.IntegerType(), "long": T.LongType(), "float": T.FloatType(), "double": T.DoubleType(),
    "timestamp-millis": T.LongType(), "timestamp-micros": T.LongType(),
}


def marked(payload: Column) -> Column:
    """The payload with every string literal prefixed by the escape \\u0000 (see the module doc)."""
    return F.regexp_replace(payload, _STRING_LITERAL, _MARKED_LITERAL)


def wire_type(node: Node, mark: str = MARK, *, declared_decimals: bool = False) -> T.DataType:
    """The Spark type the marked payload is parsed with (field names carry the marker); with `mark=""`, the
    type of the plain parse (glue_jobs/contract/typed_screen.py) and of `to_plain`. `declared_decimals`: decimals at their
    declared precision and scale instead of the wide parse's (what the JVM proof answers, exact by then)."""
    if node.kind == "record":
        return T.StructType([T.StructField(mark + f.name, wire_type(f.type, mark, declared_decimals=declared_decimals))
                             for f in node.fields])
    if node.kind == "array":
        return T.ArrayType(wire_type(node.items, mark, declared_decimals=declared_decimals))
    if node.kind == "map":
        return T.MapType(T.StringType(), wire_type(node.items, mark, declared_decimals=declared_decimals))
    if node.kind == "decimal":
        return T.DecimalType(node.precision, node.scale) if declared_decimals else T.DecimalType(*node.wide_decimal())
    return _PRIMITIVE[node.kind]


def texts_type(node: Node) -> T.DataType:
    """One level of a node as texts: a record's fields, an array's elements, a map's values, each as the
    text of its token (a string token's value with its marker). Used to say where a record went wrong."""
    if node.kind == "record":
        return T.StructType([T.StructField(MARK + f.name, T.StringType()) for f in node.fields])
    if node.kind == "array":
        return T.ArrayType(T.StringType())
    return T.MapType(T.StringType(), T.StringType())


def parse(text: Column, node: Node) -> Column:
    """The marked JSON `text` parsed as `node`, plus the corrupt-record column: a record that does not parse
    as the type (syntax, a token of another type, an int overflow) has it set; its fields are unreliable
    (Spark 3.3 nulls them, 3.5+ keeps the ones that parsed)."""
    schema = wire_type(node)
    return F.from_json(text, T.StructType([*schema.fields, T.StructField(CORRUPT, T.StringType())]), JSON_OPTIONS)


def parse_texts(text: Column, node: Node) -> Column:
    """`text` (a marked object or array, as Jackson renders it) parsed one level deep as texts_type(node)."""
    if node.kind == "record":
        return F.from_json(text, T.StructType([*texts_type(node).fields, T.StructField(CORRUPT, T.StringType())]), JSON_OPTIONS)
    return F.from_json(text, texts_type(node), JSON_OPTIONS)


def to_plain(node: Node, value: Column) -> Column:
    """A value of the marked parse in the plain parse's shape (wire_type(node, "")): string tokens without their
    marker, field names without it. A token of another type in a string field comes out garbled; its record is
    flagged by typed_checks.suspect and never stored."""
    kind = node.kind
    if kind in ("string", "enum", "date"):
        return unmarked(value)
    if kind == "record":
        return F.when(value.isNotNull(), F.struct(*[to_plain(f.type, field(value, f.name)).alias(f.name) for f in node.fields]))
    if kind == "array":
        return F.transform(value, lambda x: to_plain(node.items, x))
    if kind == "map":
        return F.transform_values(F.transform_keys(value, lambda k, _: unmarked(k)), lambda _, x: to_plain(node.items, x))
    return value


def field(struct: Column, name: str) -> Column:
    return struct.getField(MARK + name)


def is_string_token(text: Column) -> Column:
    return text.startswith(MARK)


def unmarked(text: Column) -> Column:
    """A string token's value without its marker."""
    return text.substr(2, BIG)


def rendered_json(text: Column) -> Column:
    """A non-string token's JSON text as the parse rendered it, with the markers of its strings and keys removed
    (a marker follows an opening quote; a closing or escaped quote is never followed by one)."""
    return F.regexp_replace(text, _MARKED_KEY_LITERAL, '"')
