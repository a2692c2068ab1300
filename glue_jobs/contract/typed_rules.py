"""A dataset's rules (dataset.json `rules`) as Spark expressions over stored values: the first rule a value breaks,
at any depth, with its field path and the rule in the detail (`items[3].quantity: value out of range (min 1)`).

Rules over an array's elements are checked element by element with a lambda (`transform`). Spark evaluates a lambda
outside whole-stage code generation, so the projection that holds the rules is a Project of its own in the plan
(docs/datasets.md, "Performance", also on a lambda-free test tried in front of the per-element checks).
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from glue_jobs.contract import typed_checks as tc
from glue_jobs.dataset_types import Node
from glue_jobs.datasets import Dataset

RULE_ORDER = ("min", "max", "enum", "pattern", "min_length", "max_length", "min_items", "max_items")


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


def checks(dataset: Dataset, node: Node, value: Column, path: str, where: Column) -> Column | None:
    """The first rule a stored value breaks, at rule path `path` (`items[].x`), or None if no rule lies below."""
    if not any(r.path == path or r.path.startswith(f"{path}.") or r.path.startswith(f"{path}[]") for r in dataset.rules):
        return None
    found: list[Column] = []
    rule = dataset.rule(path)
    for name in RULE_ORDER:
        limit = getattr(rule, name, None) if rule else None
        if limit is None:
            continue
        broken = _broken(name, value, limit)
        shown = list(limit) if name == "enum" else limit
        detail = F.concat(where, F.lit(f": value out of range ({name} {shown})"))
        found.append(tc.when(broken, F.struct(F.lit(tc.OUT_OF_RANGE).alias("reason"), detail.alias("detail"))))
    if node.kind == "record":
        for f in node.fields:
            inner = checks(dataset, f.type, value.getField(f.name), f"{path}.{f.name}", F.concat(where, F.lit(f".{f.name}")))
            if inner is not None:
                found.append(inner)
    elif node.kind == "array":
        element = lambda x, i: checks(dataset, node.items, x, f"{path}[]",  # noqa: E731
                                      F.concat(where, F.lit("["), i.cast("string"), F.lit("]")))
        if checks(dataset, node.items, F.lit(None), f"{path}[]", where) is not None:
            found.append(tc.first_of(F.transform(value, element)))
    return tc.first(found)

