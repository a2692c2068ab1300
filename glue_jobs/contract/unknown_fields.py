"""Fields a JSON record holds that its schema does not declare, at any depth: the dataset.json `unknown_fields` choice.

`entries(root, marked, json_text)` is every unknown field of a record, in document order per object, parents before
children: an array of struct<path, value>, the path as the contract's details write it (`location.altitude`,
`readings[2].note`, `attributes["k"].x`) and the value as its JSON text. It reads the marked payload
(glue_jobs/decoding/typed_parse.py: every string literal starts with U+0000, keys too), one object level at a time, each level
parsed as map<string,string>: a map keeps every key the object holds (a repeated key twice: Spark's JSON parser does
not deduplicate map keys, checked on Spark 3.5 and 4.1 by tests/spark/test_unknown_fields.py), and a value's text
keeps its marker, so a string tells itself from another token when it is rendered.

What is not unknown: a key inside a map field (any key is a map's), anything inside a json_text field (any JSON value
is its value). A typed record from a decoder has no unknown field: its writer schema is a committed version.

Only records the fast path does not prove are walked: glue_jobs/contract/typed_screen.py counts every key and proves a record
only when each is a field the parse kept, and the JVM proof (glue_jobs/contract/strict_json.py) answers null for a record with
an unknown key; so a record with one always takes the strict path, where this runs. Native expressions only.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from glue_jobs.dataset_types import Node
from glue_jobs.decoding import typed_parse as tp
from glue_jobs.decoding.json_tokens import json_string_literal

ENTRY_DDL = "array<struct<path:string,value:string>>"
_OBJECT = T.MapType(T.StringType(), T.StringType())
_ARRAY = T.ArrayType(T.StringType())
_OPTIONS = {"allowNonNumericNumbers": "false", "allowSingleQuotes": "false"}


def _none() -> Column:
    return F.array().cast(ENTRY_DDL)


def _holds_records(node: Node) -> bool:
    if node.kind == "record":
        return True
    if node.kind in ("array", "map"):
        return _holds_records(node.items)
    return False


def rendered(token: Column) -> Column:
    """A token's JSON text from the marked parse's text of it: a string token as its JSON literal, any other as the
    parse rendered it with its strings' markers removed, a JSON null as null."""
    return F.coalesce(F.when(tp.is_string_token(token), json_string_literal(tp.unmarked(token))).otherwise(tp.rendered_json(token)),
                      F.lit("null"))


def _child_path(where: Column | None, name: Column) -> Column:
    return name if where is None else F.concat(where, F.lit("."), name)


def _walk(node: Node, text: Column, where: Column | None, path: str, json_text: frozenset[str]) -> Column:
    """The unknown fields under the token whose marked text is `text` (a value of type `node`), at detail path `where`
    (None at the top) and schema path `path` (`a.b`, `items[]`)."""
    if path in json_text:
        return _none()
    if node.kind == "record":
        parsed = F.from_json(text, _OBJECT, _OPTIONS)
        known = [tp.MARK + f.name for f in node.fields]
        own = F.transform(F.filter(F.map_entries(parsed), lambda e: ~e.getField("key").isin(*known)),
                          lambda e: F.struct(_child_path(where, tp.unmarked(e.getField("key"))).alias("path"),
                                             rendered(e.getField("value")).alias("value")))
        found = [F.coalesce(own, _none())]
        for f in node.fields:
            child_path = f"{path}.{f.name}" if path else f.name
            if _holds_records(f.type) and child_path not in json_text:
                child = parsed.getItem(tp.MARK + f.name)
                found.append(_walk(f.type, child, _child_path(where, F.lit(f.name)), child_path, json_text))
        return F.concat(*found) if len(found) > 1 else found[0]
    if node.kind == "array":
        elements = F.from_json(text, _ARRAY, _OPTIONS)
        each = F.transform(elements, lambda x, i: _walk(node.items, x, F.concat(where, F.lit("["), i.cast("string"), F.lit("]")),
                                                         f"{path}[]", json_text))
        return F.coalesce(F.flatten(each), _none())
    if node.kind == "map":
        values = F.map_entries(F.from_json(text, _OBJECT, _OPTIONS))
        each = F.transform(values, lambda e: _walk(node.items, e.getField("value"), F.concat(
            where, F.lit('["'), tp.unmarked(e.getField("key")), F.lit('"]')), f"{path}[]", json_text))
        return F.coalesce(F.flatten(each), _none())
    return _none()


def entries(root: Node, marked: Column, json_text: frozenset[str]) -> Column:
    """Every unknown field of the record whose marked payload is `marked` (see the module doc); empty when none, and
    for a payload that is not an object."""
    return _walk(root, marked, None, "", json_text)


def as_json(found: Column) -> Column:
    """The unknown fields as one JSON object text, {"path": value, ...} in the order found (null when none): what a
    `keep` dataset stores. Built as text, not as a map, so a repeated path cannot fail the batch (a map with a
    repeated key is an error under Spark's default spark.sql.mapKeyDedupPolicy)."""
    members = F.transform(found, lambda e: F.concat(json_string_literal(e.getField("path")), F.lit(":"), e.getField("value")))
    return F.when(F.size(found) > 0, F.concat(F.lit("{"), F.array_join(members, ","), F.lit("}")))
