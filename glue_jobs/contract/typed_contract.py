"""A dataset's contract as DataFrame transforms: any schema the dataset files declare, nested at any depth.

`validate(envelope, dataset, now_ms=...)` returns one row per record: the dataset's fields as stored
(struct, array, map, decimal(p,s), date, timestamp; `_unknown_fields` when the dataset keeps unknown fields),
VALIDATED_INGESTION_COLUMNS, `_unknown_count` when it keeps or drops them (contract.UNKNOWN_COUNT), then reason (null
when valid), detail (the field path: `items[3].unit_price: value out of range (min 0)`) and payload.

Order of the checks, first problem wins:
1. malformed_json: not exactly one JSON object (text after it, a repeated top-level key, a syntax error);
1b. unknown_field, when the dataset rejects unknown fields (glue_jobs/contract/unknown_fields.py): the first one's path;
2. the types (glue_jobs/contract/typed_checks.py), in schema order, depth first;
3. the event time (format, then not_before .. processing time + max_future) and the dataset's rules, in
   schema order; a rule names itself in the detail.

A record a decoder already typed (the envelope's `record`, Kafka: glue_jobs/decoding/registry_frames.py) skips step 1
and the parse of step 2; the checks no parse makes (blank, enum, date, decimal digits, ...) run on it as on a parsed
record, and a record they flag is diagnosed from its payload (its JSON) as a JSON record is. A JSON record the JVM
proof (glue_jobs/contract/strict_json.py) answers has passed those checks there.

Strings are normalized (dataset.json `normalize`) before the enum and the rules see them. Known limits: a key repeated
inside a nested object or map keeps its last value (Spark's parser; only top-level keys are checked). A decimal's
fraction digits beyond the 38-digit wide parse are seen only with the jar (the JVM reads an unproven record's decimals
as written: strict_json.INEXACT_DECIMAL_CLASS); the Spark-expression path rounds them.
"""

from __future__ import annotations

from datetime import datetime, timezone
from functools import cache

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from glue_jobs import contract
from glue_jobs.batch_constants import with_batch_constants
from glue_jobs.column_seq import ColumnSeq, select
from glue_jobs.contract import strict_json, typed_rules, unknown_fields
from glue_jobs.contract import typed_checks as tc
from glue_jobs.contract import typed_screen as screen
from glue_jobs.dataset_contract import UNKNOWN_FIELDS_COLUMN
from glue_jobs.dataset_types import Node
from glue_jobs.datasets import Dataset
from glue_jobs.decoding import json_tokens as tokens
from glue_jobs.decoding import registry_frames
from glue_jobs.decoding import typed_parse as tp
from glue_jobs.schema import ENVELOPE_COLUMNS

_LATEST_MS = "_latest_ms"
_CARRIED = (*ENVELOPE_COLUMNS, _LATEST_MS)
_ISO = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]{1,6})?(Z|[+-]([0-9]{2}):([0-9]{2}))\z"  # \z: see typed_checks._DATE
stored = "_v_{}".format  # a field's stored value (stage 3 on)


def _iso_instant(column_sql: str) -> Column:
    """The instant an ISO-8601 text (SQL expression `column_sql`, already matching _ISO) names, or null when a part
    is out of range (hour 24, February 30, an offset beyond Java's +-18:00, ...): Spark's own string-to-timestamp
    parse, which returns null for such parts (try_cast: ANSI mode, Spark 4's default, would throw instead)."""
    return F.expr(f"try_cast({column_sql} AS timestamp)")


def _walk_needed(node: Node, normalize: dict, path: str) -> bool:
    """Whether storing a plain-parsed value needs more than one cast to its stored type: a string to normalize,
    a date to check, a timestamp number to convert."""
    if node.kind in ("string", "enum"):
        return bool(normalize.get(path))
    if node.kind in ("date", "timestamp-millis", "timestamp-micros"):
        return True
    if node.kind == "record":
        return any(_walk_needed(f.type, normalize, f"{path}.{f.name}" if path else f.name) for f in node.fields)
    if node.kind in ("array", "map"):
        return _walk_needed(node.items, normalize, f"{path}[]")
    return False


def _store(node: Node, value: Column, normalize: dict, path: str) -> Column:
    """A value of the plain parse (typed_parse.wire_type(node, "")) as the lake stores it. A decimal is parsed
    wide with the same integer digits, so its cast cannot overflow; a valid record's has no digit beyond the scale."""
    kind = node.kind
    if not _walk_needed(node, normalize, path):
        return value.cast(node.stored_ddl()) if kind in ("decimal", "record", "array", "map") else value
    if kind in ("string", "enum"):
        return tc.normalized(value, normalize.get(path, ()))
    if kind == "date":
        return F.when(tc.valid_date(value), value).cast("date")
    if kind in ("timestamp-millis", "timestamp-micros"):
        low, high = tc._INTEGER_BOUNDS[kind]
        per_second = 1000 if kind == "timestamp-millis" else 1_000_000
        in_range = value.between(low, high)
        return F.when(in_range, F.timestamp_seconds(value.cast("decimal(20,0)") / F.lit(per_second)))
    if kind == "record":
        fields = [_store(f.type, value.getField(f.name), normalize, f"{path}.{f.name}" if path else f.name).alias(f.name)
                  for f in node.fields]
        return F.when(value.isNotNull(), F.struct(*fields))
    if kind == "array":
        return F.transform(value, lambda x: _store(node.items, x, normalize, f"{path}[]"))
    return F.transform_values(value, lambda _, x: _store(node.items, x, normalize, f"{path}[]"))


# What an iso8601 event time that is not one is told (docs/datasets.md "event_time"): the reason is invalid_type, as for any
# value not of its type, and the detail says which form was expected rather than "wrong JSON type".
ISO_FORM = "not an ISO-8601 date-time with an offset (e.g. 2026-11-20T10:15:00Z or 2026-11-20T10:15:00.25+01:00)"


def _event_time(dataset: Dataset) -> tuple[Column, Column, Column]:
    """The event time in three steps, each a column of its own stage (each is read more than once after it):
    whether the field's value has the format (`_et_form`, from `_et_in`), the stored timestamp, and the problem
    (format, then not_before .. processing time + max_future)."""
    spec, where = dataset.event_time, F.lit(dataset.event_time.field)
    value, form, stamp_column = F.col("_et_in"), F.col("_et_form"), F.col(stored(spec.field))
    latest = F.col(_LATEST_MS)
    if spec.format == "iso8601":
        stamp = F.when(form, _iso_instant("`_et_in`"))
        too_early = stamp_column < F.lit(datetime.fromtimestamp(spec.not_before_ms / 1000, timezone.utc))
        too_late = stamp_column > F.expr(f"timestamp_millis(`{_LATEST_MS}`)")
        return value.rlike(_ISO), stamp, tc.first([tc.when(~form, tc.problem(tc.INVALID_TYPE, where, ISO_FORM)), tc.when(
            stamp_column.isNull() | too_early | too_late, tc.problem(tc.OUT_OF_RANGE, where))])
    per_second = 1000 if spec.format == "epoch_millis" else 1
    low, high = tc._INTEGER_BOUNDS["timestamp-millis"]
    fits = value.between(low // (1000 // per_second), high // (1000 // per_second))
    stamp = F.when(form, F.timestamp_seconds(value.cast("decimal(20,0)") / F.lit(per_second)))
    millis = value * (1000 // per_second) if per_second == 1000 else F.when(form, value * 1000)
    out_of_range = ~form | (millis < F.lit(spec.not_before_ms)) | (millis > latest)
    return fits, stamp, tc.when(out_of_range, tc.problem(tc.OUT_OF_RANGE, where))


def _stages(dataset: Dataset, proof: str | None = None, trusted: bool = True, replacements: bool = False) -> list[dict[str, Column | None]]:
    """The projections `validate` applies in order (a None keeps a column of the stage before). An expression read
    more than once gets a column of its own stage: inside a CASE branch or a coalesce Spark evaluates a repeated
    expression once per use. Expensive ones sit in a CASE branch, so they run only for the records that need
    them: the proof for all (`proof`, the JVM function's SQL name, glue_jobs/contract/strict_json.py; without it
    the plain parse and glue_jobs/contract/typed_screen.py's counts), the strict (marked) parse for those not proven, the
    diagnosis for flagged ones. `trusted`: whether a decoded record comes from the decoder, whose guarantees spare
    it some checks (glue_jobs/typed_checks.suspect); a typed record from anywhere else has every check made."""
    root, normalize = dataset.schema, {r.path: r.normalize for r in dataset.rules if r.normalize}
    names = [f.name for f in root.fields]
    json_text = frozenset(dataset.json_text)
    choice = dataset.unknown_fields  # glue_jobs/contract/unknown_fields.py: only unproven JSON records can have one
    kept, unk, counted = [UNKNOWN_FIELDS_COLUMN] if choice == "keep" else [], F.col("_unk"), choice != "reject"
    time_field = dataset.event_time.field
    is_json = F.col("record").isNull()
    stages: list[dict[str, Column | None]] = []

    def stage(**columns: Column | None) -> None:
        """A projection: the carried columns, then `columns` (None: kept from the stage before)."""
        stages.append({**dict.fromkeys(_CARRIED), **columns})

    fast, wrapped, record = F.col("_fast"), F.col("_w"), F.col("record")
    # A decoded record (Kafka) is already typed: it skips the parse and its proof, and is flagged like a proven one.
    # Its json_text fields are Avro strings that hold the JSON text: stored as they are (a JSON record's json_text
    # field holds the JSON value itself, stored as its text).
    if proof:  # the JVM function (glue_jobs/contract/strict_json.py): the record when proven, else null
        # What the function answers has a decoded record's type (registry_frames.record_type).
        stage(_wv=F.when(is_json, F.expr(f"{proof}(`payload`)")).otherwise(record))
        stage(_wv=None, _fast=F.when(is_json, F.col("_wv").isNotNull()).otherwise(F.lit(True)))
    else:
        stage(_w=F.when(is_json, screen.parse_wrapped(F.col("payload"), root)))
        stage(_w=None, **{n: F.when(is_json, c) for n, c in screen.counts("payload", wrapped, root, json_text).items()})
        stage(_wv=F.when(is_json, screen.record(wrapped)).otherwise(record.cast(tp.wire_type(root, ""))),  # wide decimals
              _fast=F.when(is_json, screen.proven("payload", wrapped)).otherwise(F.lit(True)))
    # A proven record is flagged only by the value checks the parse does not make (blank, enum, NaN, scale, ...).
    # The JVM function makes a decoded record's checks itself (glue_jobs/contract/strict_json.py): its records need none. For
    # a source without decoded records `is_json` folds to true, and the checks (lambdas over arrays, which Spark
    # cannot compile into the stage's code) leave the plan.
    decoded = tc.suspect(root, F.col("_wv"), normalize=normalize, marked=False, decoded=trusted, json_text=json_text)
    sus = F.when(fast, F.when(is_json, F.lit(False)).otherwise(decoded)) if proof else F.when(
        fast & is_json, tc.suspect(root, F.col("_wv"), normalize=normalize, marked=False)).when(fast, decoded)
    stage(_wv=None, _fast=None, _sus=sus)
    stage(_wv=None, _fast=None, _sus=None, _marked=F.when(~fast | F.col("_sus"), tp.marked(F.col("payload"))))
    # The strict parse rounds fraction digits beyond its wide type's scale away and the diagnosis reads numbers through a
    # double: where the jar is there, the JVM reads each decimal of an unproven record as written
    # (strict_json.INEXACT_DECIMAL_CLASS), and a value its declared type does not hold exactly is out of range at its path.
    inexact = {"_dec": F.when(~fast, F.expr(f"{strict_json.inexact_decimal_name(proof)}(`payload`)"))} if (
        proof and root.has_decimal) else {}
    stage(_wv=None, _fast=None, _sus=None, _marked=None, _mp=F.when(~fast, tp.parse(F.col("_marked"), root)), **inexact)

    mp = F.col("_mp")
    corrupt = mp.isNull() | mp.getField(tokens.CORRUPT).isNotNull()
    keys = tokens.top_level_keys("payload")
    one_object = (tokens.looks_like_one_object(F.col("payload")) & ~tokens.has_text_after_first_value("payload")
                  & F.coalesce(F.size(keys) == F.size(F.array_distinct(keys)), F.lit(False)))
    top = tp.parse_texts(F.col("_marked"), root)
    json_texts = {}
    for name in names:
        if name in json_text:  # the token's JSON text: only the strict parse knows a string token from another
            value = tp.field(mp, name)
            json_texts[f"_jt_{name}"] = F.when(tp.is_string_token(value), tokens.json_string_literal(tp.unmarked(value))).otherwise(
                tp.rendered_json(value))
    # The proven value (`_wv`) and the strict path's (`_p`) stay apart until each field is stored: a proven decimal
    # already has its stored type (registry_frames.record_type), the strict path's is wide.
    stage(_marked=None, _wv=None, _fast=None, _p=F.when(~fast, tp.to_plain(root, mp)),
          _unk=F.when(~fast & is_json, unknown_fields.entries(root, F.col("_marked"), json_text)),
          _malformed=F.when(fast, F.lit(False)).otherwise(~one_object | top.getField(tokens.CORRUPT).isNotNull()),
          _flagged=F.when(fast, F.col("_sus")).otherwise(corrupt | tc.suspect(root, mp, normalize=normalize, json_text=json_text) | (
              F.col("_dec").isNotNull() if inexact else F.lit(False))), **json_texts, **dict.fromkeys(inexact))

    untrusted = [] if trusted else [F.when(~is_json, tc.first([tc.diagnose_typed(f.type, record.getField(f.name), path=f.name)
                                                              for f in root.fields]))]
    diagnosis = F.coalesce(
        *untrusted,
        tc.diagnose(root, F.col("_marked"), F.lit(""), normalize=normalize, json_text=json_text),
        *([tc.when(F.col("_dec").isNotNull(), tc.problem(tc.OUT_OF_RANGE, F.col("_dec")))] if inexact else []),
        F.struct(F.lit(tc.INVALID_TYPE).alias("reason"), F.lit("payload: does not match the schema").alias("detail")))
    malformed = F.struct(F.lit(contract.MALFORMED_JSON).alias("reason"), F.lit("payload is not one JSON object").alias("detail"))
    kept_texts = dict.fromkeys(json_texts)
    verdict = F.when(F.col("_malformed"), malformed)
    if choice == "reject":  # after malformed_json, before the types: a misspelled field says so, not "missing"
        verdict = verdict.when(F.size(unk) > 0, tc.problem(tc.UNKNOWN_FIELD, unk.getItem(0).getField("path")))
    stage(_p=None, _wv=None, _fast=None, _problem=verdict.when(F.col("_flagged"), diagnosis), **({"_unk": None} if counted else {}),
          **kept_texts)

    p, wv = F.col("_p"), F.col("_wv")
    values: dict[str, Column | None] = {}
    for f in root.fields:
        if f.name == time_field:
            values["_et_in"] = F.when(fast, wv.getField(f.name)).otherwise(p.getField(f.name))
        elif f.name in json_text:
            # The JVM proof answers a json_text field as the text the strict path renders (StrictJsonRecord.jsonText),
            # a decoded record holds the text already; the screen proves no JSON record with one present.
            values[stored(f.name)] = F.when(fast, wv.getField(f.name)).otherwise(F.col(f"_jt_{f.name}"))
        elif not f.type.has_decimal:
            values[stored(f.name)] = _store(f.type, F.when(fast, wv.getField(f.name)).otherwise(p.getField(f.name)),
                                            normalize, f.name)
        else:
            # A proven decimal has its stored type already (the cast is the identity, which Spark drops) where the JVM
            # proof answered it. A flagged record's decimal may round past its declared digits (99999999.999 as
            # decimal(10,2)): the cast to the stored type is an error in ANSI mode (Spark 4's default), so only an
            # unflagged record is cast.
            proven = (wv.getField(f.name).cast(f.type.stored_ddl()) if proof and not _walk_needed(f.type, normalize, f.name)
                      else _store(f.type, wv.getField(f.name), normalize, f.name))
            values[stored(f.name)] = F.when(F.col("_problem").isNull(), F.when(fast, proven).otherwise(
                _store(f.type, p.getField(f.name), normalize, f.name)))
    form, stamp, time_problem = _event_time(dataset)
    if counted:  # a valid record's unknown fields: how many (kept or dropped), and, kept, their JSON text
        values["_unknown_n"] = F.when(F.size(unk) > 0, F.size(unk))
        values.update({stored(n): unknown_fields.as_json(unk) for n in kept})
    others = dict.fromkeys([*(stored(n) for n in [*names, *kept] if n != time_field), *(["_unknown_n"] if counted else [])])
    stage(_problem=None, _wv=None, _fast=None, **values)
    stage(_problem=None, **others, _et_in=None, _et_form=form)
    stage(_problem=None, **others, _et_in=None, _et_form=None, **{stored(time_field): stamp})

    rules: list[Column] = []
    for f in root.fields:
        if f.name == time_field:
            rules.append(time_problem)
        found = typed_rules.checks(dataset, f.type, F.col(stored(f.name)), f.name, F.lit(f.name))
        if found is not None:
            rules.append(found)
    # An optimizer barrier (spark_partition_id is nondeterministic, so a filter on the result stays above this
    # projection: Spark's PushPredicateThroughNonJoin pushes a filter only through projections of deterministic
    # expressions, inlining their aliases). Pushed down, a filter such as `reason IS NULL` would inline every
    # stage into one expression tree: the stages share columns (a DAG), inlined they multiply (OutOfMemoryError
    # while planning, seen with orders). It costs one integer comparison per record.
    verdict = F.when(F.spark_partition_id() >= 0, F.coalesce(F.col("problem"), F.col("_problem"), tc.first(rules)))
    stage(**dict.fromkeys(map(stored, [*names, *kept])), **({"_unknown_n": None} if counted else {}), _verdict=verdict)
    valid = F.col("_verdict").isNull()
    stages.append({
        **{name: F.when(valid, F.col(stored(name))) if name == time_field else F.col(stored(name)) for name in [*names, *kept]},
        **dict.fromkeys(contract.VALIDATED_INGESTION_COLUMNS),
        **({contract.UNKNOWN_COUNT: F.when(valid, F.col("_unknown_n"))} if counted else {}),
        **({contract.REPLACEMENTS: F.when(F.col("payload").contains("\ufffd"), F.lit(1).cast("byte"))} if replacements else {}),
        "reason": F.col("_verdict.reason"), "detail": F.col("_verdict.detail"), "payload": None,
    })
    return stages


@cache
def _selects(dataset: Dataset, jvm, proof: str | None, trusted: bool = True, replacements: bool = False) -> list[ColumnSeq]:
    """The stages' columns, built once per dataset and JVM and kept in the JVM: building them is thousands of py4j
    calls (about a second per batch for orders), so a batch only plans the selects, one call each."""
    return [ColumnSeq([F.col(f"`{n}`") if c is None else c.alias(n) for n, c in stage.items()])
            for stage in _stages(dataset, proof, trusted, replacements)]


def validate(envelope: DataFrame, dataset: Dataset, *, now_ms: int, count_replacements: bool = False) -> DataFrame:
    """Envelope -> one row per record: the dataset's stored fields, contract.VALIDATED_INGESTION_COLUMNS, reason, detail,
    payload (see the module doc). Successive selects, so each parse runs once per row."""
    from pyspark import SparkContext

    record_type = registry_frames.record_type(dataset)
    given, trusted = envelope.schema["record"].dataType, True
    if given != record_type and given.simpleString() == record_type.simpleString():
        # The dataset's record with other nullability: typed, but not by the decoder (whose guarantees `_stages` relies
        # on), so every check is made on it.
        envelope, trusted = envelope.withColumn("record", F.col("record").cast(record_type)), False
    elif given != record_type:
        # Only a decoder gives typed records (glue_jobs/decoding/registry_frames.py), in this shape; other sources carry a
        # null of another type. A record is a shortcut, never the only copy: the payload holds its JSON.
        envelope = envelope.withColumn("record", F.lit(None).cast(record_type))
    frame = with_batch_constants(envelope, {_LATEST_MS: now_ms + dataset.event_time.max_future_ms})
    proof = strict_json.register(envelope.sparkSession, dataset)
    for columns in _selects(dataset, SparkContext._jvm, proof, trusted, count_replacements):
        frame = select(frame, columns)
    if tuple(frame.columns[-len(contract.VALIDATED_EXTRA_COLUMNS):]) != contract.VALIDATED_EXTRA_COLUMNS:
        raise AssertionError(f"typed contract columns drifted: {frame.columns}")
    return frame
