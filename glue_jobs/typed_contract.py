"""A dataset's contract as DataFrame transforms: any schema the dataset files declare, nested at any depth.

`validate(envelope, dataset, now_ms=...)` returns one row per record: the dataset's fields as stored
(struct, array, map, decimal(p,s), date, timestamp), VALIDATED_INGESTION_COLUMNS, then reason (null when
valid), detail (the field path: `items[3].unit_price: value out of range (min 0)`) and payload.

Order of the checks, first problem wins:
1. malformed_json: not exactly one JSON object (text after it, a repeated top-level key, a syntax error);
2. the types (glue_jobs/typed_checks.py), in schema order, depth first;
3. the event time (format, then not_before .. processing time + max_future) and the dataset's rules, in
   schema order; a rule names itself in the detail.

Strings are normalized (dataset.json `normalize`) before the enum and the rules see them. Known limits:
a key repeated inside a nested object or map keeps its last value (Spark's parser; only top-level keys are
checked), and a decimal's fraction digits beyond the 38-digit wide parse are not seen.
"""

from __future__ import annotations

from datetime import datetime, timezone

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from glue_jobs import json_tokens as tokens
from glue_jobs import typed_checks as tc
from glue_jobs import typed_parse as tp
from glue_jobs.batch_constants import with_batch_constants
from glue_jobs.contract import VALIDATED_EXTRA_COLUMNS, VALIDATED_INGESTION_COLUMNS
from glue_jobs.dataset_types import Node
from glue_jobs.datasets import Dataset
from glue_jobs.schema import ENVELOPE_COLUMNS

MALFORMED_JSON = "malformed_json"
_LATEST_MS = "_latest_ms"
_CARRIED = (*ENVELOPE_COLUMNS, _LATEST_MS)
_ISO = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]{1,6})?(Z|[+-]([0-9]{2}):([0-9]{2}))$"
_RULE_ORDER = ("min", "max", "enum", "pattern", "min_length", "max_length", "min_items", "max_items")
stored = "_v_{}".format  # a field's stored value (stage 3 on)


def _iso_fits(text: Column) -> Column:
    """An ISO-8601 instant matching _ISO whose parts are in range (the offset within Java's +-18:00)."""
    def part(group: int) -> Column:
        digits = F.regexp_extract(text, _ISO, group)  # '' when absent: never cast (ANSI mode throws on it)
        return F.when(digits != "", digits).cast("int")

    offset_ok = text.endswith("Z") | F.coalesce((part(6) <= 18) & (part(7) <= 59), F.lit(False))
    return tc.valid_date(text.substr(1, 10)) & (part(1) <= 23) & (part(2) <= 59) & (part(3) <= 59) & offset_ok


def _store(node: Node, value: Column, normalize: dict, path: str) -> Column:
    """A typed value (from the marked parse) as the lake stores it."""
    kind = node.kind
    if kind in ("string", "enum"):
        return tc.normalized(tp.unmarked(value), normalize.get(path, ()))
    if kind == "date":
        text = tp.unmarked(value)
        return F.when(tc.valid_date(text), text).cast("date")
    if kind == "decimal":
        return value.cast(f"decimal({node.precision},{node.scale})")
    if kind in ("timestamp-millis", "timestamp-micros"):
        low, high = tc._INTEGER_BOUNDS[kind]
        per_second = 1000 if kind == "timestamp-millis" else 1_000_000
        in_range = value.between(low, high)
        return F.when(in_range, F.timestamp_seconds(value.cast("decimal(20,0)") / F.lit(per_second)))
    if kind == "record":
        fields = [_store(f.type, tp.field(value, f.name), normalize, f"{path}.{f.name}" if path else f.name).alias(f.name)
                  for f in node.fields]
        return F.when(value.isNotNull(), F.struct(*fields))
    if kind == "array":
        return F.transform(value, lambda x: _store(node.items, x, normalize, f"{path}[]"))
    if kind == "map":
        keys = F.transform_keys(value, lambda k, _: tp.unmarked(k))
        return F.transform_values(keys, lambda _, x: _store(node.items, x, normalize, f"{path}[]"))
    return value


def _event_time(dataset: Dataset, value: Column) -> tuple[Column, Column]:
    """The stored event time and its checks (format, range) on the typed value of its field."""
    spec, where = dataset.event_time, F.lit(dataset.event_time.field)
    latest = F.col(_LATEST_MS)
    if spec.format == "iso8601":
        text = tp.unmarked(value)
        well_formed = text.rlike(_ISO)
        fits = well_formed & _iso_fits(text)
        stamp = F.when(fits, text).cast("timestamp")
        too_early = stamp < F.lit(datetime.fromtimestamp(spec.not_before_ms / 1000, timezone.utc))
        too_late = stamp > F.expr(f"timestamp_millis(`{_LATEST_MS}`)")
        return stamp, tc.first([tc.when(~well_formed, tc.problem(tc.INVALID_TYPE, where)),
                                tc.when(~fits | too_early | too_late, tc.problem(tc.OUT_OF_RANGE, where))])
    else:
        per_second = 1000 if spec.format == "epoch_millis" else 1
        low, high = tc._INTEGER_BOUNDS["timestamp-millis"]
        fits = value.between(low // (1000 // per_second), high // (1000 // per_second))
        stamp = F.when(fits, F.timestamp_seconds(value.cast("decimal(20,0)") / F.lit(per_second)))
        millis = value * (1000 // per_second) if per_second == 1000 else F.when(fits, value * 1000)
    out_of_range = ~fits | (millis < F.lit(spec.not_before_ms)) | (millis > latest)
    return stamp, tc.when(out_of_range, tc.problem(tc.OUT_OF_RANGE, where))


def _broken(rule: str, value: Column, limit) -> Column:
    """Whether a stored value breaks one rule (null when the value is null: a missing value is not a rule's business)."""
    if rule == "min":
        return value < F.lit(limit)
    if rule == "max":
        return value > F.lit(limit)
    if rule == "enum":
        return ~value.isin(*limit)
    if rule == "pattern":
        return ~value.rlike(limit)
    if rule in ("min_length", "max_length"):
        return F.length(value) < limit if rule == "min_length" else F.length(value) > limit
    size = F.when(value.isNotNull(), F.size(value))  # size(null) is -1 outside ANSI mode
    return size < limit if rule == "min_items" else size > limit


def _rule_checks(dataset: Dataset, node: Node, value: Column, path: str, where: Column) -> Column | None:
    """The first rule a stored value breaks, at rule path `path` (`items[].x`), or None if no rule lies below."""
    if not any(r.path == path or r.path.startswith(f"{path}.") or r.path.startswith(f"{path}[]") for r in dataset.rules):
        return None
    checks: list[Column] = []
    rule = dataset.rule(path)
    for name in _RULE_ORDER:
        limit = getattr(rule, name, None) if rule else None
        if limit is None:
            continue
        broken = _broken(name, value, limit)
        shown = list(limit) if name == "enum" else limit
        detail = F.concat(where, F.lit(f": value out of range ({name} {shown})"))
        checks.append(tc.when(broken, F.struct(F.lit(tc.OUT_OF_RANGE).alias("reason"), detail.alias("detail"))))
    if node.kind == "record":
        for f in node.fields:
            inner = _rule_checks(dataset, f.type, value.getField(f.name), f"{path}.{f.name}", F.concat(where, F.lit(f".{f.name}")))
            if inner is not None:
                checks.append(inner)
    elif node.kind == "array":
        element = lambda x, i: _rule_checks(dataset, node.items, x, f"{path}[]",  # noqa: E731
                                            F.concat(where, F.lit("["), i.cast("string"), F.lit("]")))
        if _rule_checks(dataset, node.items, F.lit(None), f"{path}[]", where) is not None:
            checks.append(tc.first_of(F.transform(value, element)))
    return tc.first(checks)


def _stages(dataset: Dataset) -> list[dict[str, Column | None]]:
    root, normalize = dataset.schema, {r.path: r.normalize for r in dataset.rules if r.normalize}
    names = [f.name for f in root.fields]
    is_json = F.col("record").isNull()
    text = F.when(is_json, F.col("payload")).otherwise(F.to_json("record"))
    parse = {**dict.fromkeys(_CARRIED), "_json": text, "_marked": tp.marked(text)}
    parsed = {**dict.fromkeys(_CARRIED), "_json": None, "_marked": None, "_p": tp.parse(F.col("_marked"), root)}

    p = F.col("_p")
    corrupt = p.isNull() | p.getField(tokens.CORRUPT).isNotNull()
    keys = tokens.top_level_keys("_json")
    one_object = (tokens.looks_like_one_object(F.col("_json")) & ~tokens.has_text_after_first_value("_json")
                  & F.coalesce(F.size(keys) == F.size(F.array_distinct(keys)), F.lit(False)))
    top = tp.parse_texts(F.col("_marked"), root)
    json_text = frozenset(dataset.json_text)
    flagged = corrupt | tc.suspect(root, p, normalize=normalize)
    diagnosis = F.coalesce(
        tc.diagnose(root, F.col("_marked"), F.lit(""), normalize=normalize, json_text=json_text),
        F.struct(F.lit(tc.INVALID_TYPE).alias("reason"), F.lit("payload: does not match the schema").alias("detail")))
    malformed = F.struct(F.lit(MALFORMED_JSON).alias("reason"), F.lit("payload is not one JSON object").alias("detail"))
    classify = {
        **dict.fromkeys(_CARRIED), "_p": None,
        "_problem": F.when(~one_object | top.getField(tokens.CORRUPT).isNotNull(), malformed).when(flagged, diagnosis),
    }
    values: dict[str, Column | None] = {**dict.fromkeys(_CARRIED), "_problem": None}
    for f in root.fields:
        value = tp.field(p, f.name)
        if f.name == dataset.event_time.field:
            values[stored(f.name)], values["_time_problem"] = _event_time(dataset, value)
        elif f.name in json_text:
            values[stored(f.name)] = F.when(tp.is_string_token(value), tokens.json_string_literal(tp.unmarked(value))).otherwise(
                tp.rendered_json(value))
        else:
            values[stored(f.name)] = _store(f.type, value, normalize, f.name)
    rules: list[Column] = []
    for f in root.fields:
        if f.name == dataset.event_time.field:
            rules.append(F.col("_time_problem"))
        found = _rule_checks(dataset, f.type, F.col(stored(f.name)), f.name, F.lit(f.name))
        if found is not None:
            rules.append(found)
    verdict = F.coalesce(F.col("_problem"), tc.first(rules))
    judged = {**dict.fromkeys(_CARRIED), **dict.fromkeys(map(stored, names)), "_verdict": verdict}
    valid = F.col("_verdict").isNull()
    out = {
        **{name: F.when(valid, F.col(stored(name))) if name == dataset.event_time.field else F.col(stored(name)) for name in names},
        **dict.fromkeys(VALIDATED_INGESTION_COLUMNS),
        "reason": F.col("_verdict.reason"), "detail": F.col("_verdict.detail"), "payload": None,
    }
    return [parse, parsed, classify, values, judged, out]


def validate(envelope: DataFrame, dataset: Dataset, *, now_ms: int) -> DataFrame:
    """Envelope -> one row per record: the dataset's stored fields, VALIDATED_INGESTION_COLUMNS, reason, detail,
    payload (see the module doc). Successive selects, so each parse runs once per row."""
    frame = with_batch_constants(envelope, {_LATEST_MS: now_ms + dataset.event_time.max_future_ms})
    for stage in _stages(dataset):
        frame = frame.select(*(F.col(f"`{n}`") if c is None else c.alias(n) for n, c in stage.items()))
    if tuple(frame.columns[-len(VALIDATED_EXTRA_COLUMNS):]) != VALIDATED_EXTRA_COLUMNS:
        raise AssertionError(f"typed contract columns drifted: {frame.columns}")
    return frame
