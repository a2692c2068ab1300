"""dataset.json, checked against the dataset's newest schema: every problem is collected, none raised here.

| key | default | meaning |
|---|---|---|
| `description` | required | one line: what a record is |
| `key` | required | top-level fields identifying a record; duplicates collapse by them within the dataset and hour |
| `event_time` | required | `field`, `format` (epoch_millis, epoch_seconds: a long; iso8601: a string with an offset), `not_before` (ISO-8601 instant, default 2000-01-01T00:00:00Z), `max_future` (ISO-8601 duration, default PT24H) |
| `rules` | {} | per field path (`a.b`, `items[].x`): min, max, enum, pattern, min_length, max_length, min_items, max_items, normalize |
| `json_text` | [] | top-level string fields whose wire value may be any JSON value, stored as its JSON text |
| `table_format` | parquet | parquet or iceberg |
| `unknown_fields` | reject | a JSON field the schema does not know, at any depth: `reject` (dead letter `unknown_field`, its path), `keep` (stored as JSON text in the `_unknown_fields` column), `drop` (dropped, counted) |
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from glue_jobs.dataset_types import Node, resolve

TIME_FORMATS = ("epoch_millis", "epoch_seconds", "iso8601")
TABLE_FORMATS = ("parquet", "iceberg")
NORMALIZE = ("trim", "lower", "upper")
_DURATION = re.compile(r"^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)S)?)?$")
_INSTANT = re.compile(r"^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.\d{1,6})?(Z|[+-]\d{2}:\d{2})$")
CONTRACT_KEYS = ("description", "key", "event_time", "rules", "json_text", "table_format", "unknown_fields")
UNKNOWN_FIELD_CHOICES = ("reject", "keep", "drop")
UNKNOWN_FIELDS_COLUMN = "_unknown_fields"  # a `keep` dataset's column: {"path": value, ...} as JSON text
_NUMERIC = ("int", "long", "float", "double", "decimal")
_TEXT = ("string", "enum")
# Which rule applies to which kinds of node (DESIGN.md "Datasets").
RULE_KINDS = {
    "min": _NUMERIC, "max": _NUMERIC, "enum": _TEXT, "pattern": _TEXT, "min_length": _TEXT, "max_length": _TEXT,
    "normalize": _TEXT, "min_items": ("array", "map"), "max_items": ("array", "map"),
}


@dataclass(frozen=True)
class EventTime:
    """The field that gives a record its hour partition. Valid from `not_before_ms` to processing time + `max_future_ms`."""

    field: str
    format: str
    not_before_ms: int
    max_future_ms: int


@dataclass(frozen=True)
class Rule:
    """The rules of one field path (`a.b`, `items[].x`), as dataset.json states them; None = not set."""

    path: str
    min: Decimal | None = None
    max: Decimal | None = None
    enum: tuple[str, ...] | None = None
    pattern: str | None = None
    min_length: int | None = None
    max_length: int | None = None
    min_items: int | None = None
    max_items: int | None = None
    normalize: tuple[str, ...] = ()


def parse_instant_ms(text: str) -> int | None:
    """Epoch milliseconds of an ISO-8601 instant with a required offset, or None if it is not one."""
    from datetime import datetime

    if not isinstance(text, str) or not _INSTANT.match(text):
        return None
    try:
        return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return None


def parse_duration_ms(text: str) -> int | None:
    """Milliseconds of an ISO-8601 duration made of days, hours, minutes and seconds (PT24H, P2D, PT90M)."""
    match = _DURATION.match(text) if isinstance(text, str) else None
    if not match or text in ("P", "PT") or text.endswith("T"):
        return None
    days, hours, minutes, seconds = (int(g or 0) for g in match.groups())
    return (((days * 24 + hours) * 60 + minutes) * 60 + seconds) * 1000


def decimal_value(value) -> Decimal | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        return Decimal(str(value))
    except InvalidOperation:
        return None



DEFAULT_NOT_BEFORE = "2000-01-01T00:00:00Z"
DEFAULT_MAX_FUTURE = "PT24H"
_TIME_KINDS = {"epoch_millis": ("long",), "epoch_seconds": ("long",), "iso8601": ("string",)}
_KEY_KINDS = ("string", "enum", "int", "long", "decimal", "date", "boolean")
# Java regex constructs Python's re rejects are few; a pattern both accept behaves the same on plain text.
_UNSUPPORTED_PATTERN = re.compile(r"\\[pPQEGZz]|\(\?<[!=]?[a-zA-Z]|\+\+|\*\+|\?\+")


def read_contract(name: str, contract: dict, schema: Node | None, problems: list[str]) -> dict:
    def problem(key: str, value, allowed: str) -> None:
        problems.append(f"{name}: {key}: {value!r} {allowed}")

    for key in sorted(set(contract) - set(CONTRACT_KEYS)):
        problem(key, contract[key], f"is not a dataset.json key (keys: {', '.join(CONTRACT_KEYS)})")
    description = contract.get("description")
    if not isinstance(description, str) or not description.strip():
        problem("description", description, "must be a non-empty string")
    top = {f.name: f.type for f in schema.fields} if schema else {}
    key = contract.get("key")
    if not isinstance(key, list) or not key or not all(isinstance(k, str) for k in key) or len(set(key)) != len(key):
        problem("key", key, "must be a non-empty list of distinct field names")
        key = []
    elif schema:
        for k in key:
            node = top.get(k)
            if node is None:
                problem("key", k, f"is not a top-level field of the schema (fields: {', '.join(top)})")
            elif node.kind not in _KEY_KINDS or not node.required:
                problem("key", k, f"must be a required field of type {', '.join(_KEY_KINDS)} (it is {_describe(node)})")
    event_time = _event_time(contract.get("event_time"), top, problem)
    json_text = contract.get("json_text", [])
    if not isinstance(json_text, list) or not all(isinstance(j, str) for j in json_text):
        problem("json_text", json_text, "must be a list of top-level string field names")
        json_text = []
    elif schema:
        for j in json_text:
            if j not in top or top[j].kind != "string":
                problem("json_text", j, "must name a top-level field of type string (its JSON text is stored)")
    rules = _rules(contract.get("rules", {}), schema, set(json_text), problem)
    table_format = contract.get("table_format", "parquet")
    if table_format not in TABLE_FORMATS:
        problem("table_format", table_format, f"is not one of {', '.join(TABLE_FORMATS)}")
    unknown_fields = contract.get("unknown_fields", "reject")
    if unknown_fields not in UNKNOWN_FIELD_CHOICES:
        problem("unknown_fields", unknown_fields, f"is not one of {', '.join(UNKNOWN_FIELD_CHOICES)}")
    elif unknown_fields == "keep" and UNKNOWN_FIELDS_COLUMN in top:
        problem("unknown_fields", unknown_fields, f"keeps unknown fields in a column {UNKNOWN_FIELDS_COLUMN}, which the schema "
                "already has as a field: rename the field")
    return {"description": description or "", "key": tuple(key), "event_time": event_time, "rules": rules,
            "json_text": tuple(json_text), "table_format": table_format, "unknown_fields": unknown_fields}


def _describe(node: Node) -> str:
    return node.kind if node.required else f"optional {node.kind}"


def _event_time(spec, top: dict[str, Node], problem) -> EventTime | None:
    if not isinstance(spec, dict):
        problem("event_time", spec, "must be an object with field, format, not_before, max_future")
        return None
    for extra in sorted(set(spec) - {"field", "format", "not_before", "max_future"}):
        problem(f"event_time.{extra}", spec[extra], "is not an event_time key (field, format, not_before, max_future)")
    field, fmt = spec.get("field"), spec.get("format")
    if fmt not in TIME_FORMATS:
        problem("event_time.format", fmt, f"is not one of {', '.join(TIME_FORMATS)}")
    if top and field not in top:
        problem("event_time.field", field, f"is not a top-level field of the schema (fields: {', '.join(top)})")
    elif top and fmt in _TIME_KINDS:
        node = top[field]
        if node.kind not in _TIME_KINDS[fmt] or not node.required:
            problem("event_time.field", field, f"must be a required {_TIME_KINDS[fmt][0]} for format {fmt} (it is {_describe(node)})")
    not_before = spec.get("not_before", DEFAULT_NOT_BEFORE)
    not_before_ms = parse_instant_ms(not_before)
    if not_before_ms is None:
        problem("event_time.not_before", not_before, "must be an ISO-8601 instant with an offset (2000-01-01T00:00:00Z)")
    max_future = spec.get("max_future", DEFAULT_MAX_FUTURE)
    max_future_ms = parse_duration_ms(max_future)
    if max_future_ms is None:
        problem("event_time.max_future", max_future, "must be an ISO-8601 duration of days, hours, minutes, seconds (PT24H)")
    if None in (not_before_ms, max_future_ms) or not isinstance(field, str):
        return None
    return EventTime(field=field, format=fmt, not_before_ms=not_before_ms, max_future_ms=max_future_ms)


def _rules(spec, schema: Node | None, json_text: set[str], problem) -> tuple[Rule, ...]:
    if not isinstance(spec, dict):
        problem("rules", spec, "must be an object: field path -> rules")
        return ()
    rules = []
    for path, entry in spec.items():
        where = f"rules.{path}"
        node = resolve(schema, path) if schema else None
        if schema and node is None:
            problem(where, path, "names no field of the schema (paths: a.b for a nested field, items[].x for each element's)")
            continue
        if not isinstance(entry, dict) or not entry:
            problem(where, entry, f"must be an object of rules ({', '.join(RULE_KINDS)})")
            continue
        values, ok = {}, True
        for rule, value in entry.items():
            if rule not in RULE_KINDS:
                problem(f"{where}.{rule}", value, f"is not a rule ({', '.join(RULE_KINDS)})")
                ok = False
            elif node is not None and (node.kind not in RULE_KINDS[rule] or path in json_text):
                problem(f"{where}.{rule}", value, f"does not apply to a field of type {node.kind} (applies to {', '.join(RULE_KINDS[rule])})")
                ok = False
            else:
                checked = _rule_value(rule, value, node)
                if isinstance(checked, _Refused):
                    problem(f"{where}.{rule}", value, checked.allowed)
                    ok = False
                else:
                    values[rule] = checked
        for low, high in (("min", "max"), ("min_length", "max_length"), ("min_items", "max_items")):
            if low in values and high in values and values[low] > values[high]:
                problem(f"{where}.{low}", entry[low], f"is above {high} {entry[high]}: no value could pass")
                ok = False
        if ok:
            rules.append(Rule(path=path, **values))
    return tuple(rules)


@dataclass(frozen=True)
class _Refused:
    allowed: str  # what the rule accepts


def _rule_value(rule: str, value, node: Node | None):
    """The rule's value as Rule holds it, or _Refused saying what is allowed."""
    if rule in ("min", "max"):
        number = decimal_value(value)
        if number is None or not number.is_finite():
            return _Refused("must be a finite JSON number")
        if node is not None and node.kind in ("int", "long") and number != number.to_integral_value():
            return _Refused(f"must be an integer for a field of type {node.kind}")
        return number
    if rule in ("min_length", "max_length", "min_items", "max_items"):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            return _Refused("must be an integer >= 0")
        return value
    if rule == "enum":
        if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
            return _Refused("must be a non-empty list of strings")
        if node is not None and node.kind == "enum" and set(value) - set(node.symbols):
            return _Refused(f"names values the Avro enum does not have (symbols: {', '.join(node.symbols)})")
        return tuple(value)
    if rule == "pattern":
        if not isinstance(value, str):
            return _Refused("must be a regular expression string")
        try:
            re.compile(value)
        except re.error as error:
            return _Refused(f"is not a regular expression: {error}")
        if _UNSUPPORTED_PATTERN.search(value):
            return _Refused("uses a construct whose meaning differs between Python and Java regexes (\\p, \\Q, \\G, \\Z, possessive quantifiers, named groups)")
        return value
    if rule == "normalize":
        if not isinstance(value, list) or not value or any(v not in NORMALIZE for v in value) or len(set(value)) != len(value):
            return _Refused(f"must be a list of distinct steps from {', '.join(NORMALIZE)}")
        if "lower" in value and "upper" in value:
            return _Refused("cannot both lower and upper")
        return tuple(value)
    raise AssertionError(rule)
