"""Which dataset a record of a routed JSON source belongs to: the value of one declared field (docs/datasets.md "One
stream, several datasets").

A routed source carries several datasets on one stream. Its `RouteTable` names one field (a path of record fields,
`type` or `meta.type`) and, per value, the dataset records with that value go to. The field must be a string or
enum field along records of every dataset the table names (`problems`), so each dataset's contract checks it like
any other field (123 is not the string "123": that record reaches the dataset and is its invalid_type dead letter)
and its lake stores it; it is never an unknown field.

The value is read with Spark's `get_json_object` (a string token's value unquoted and unescaped; another token's JSON
text), compared with the declared values exactly (no case folding, no trimming). A record whose value no route
names, whose field is absent or null, or whose payload is not JSON goes to no dataset: it is `unroutable`, a dead
letter of the source itself (glue_jobs/routed_batch.py), and `detail` says which of these it was.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from pyspark.sql import Column
from pyspark.sql import functions as F

from glue_jobs.decoding.json_tokens import json_string_literal, top_level_keys

UNROUTABLE = "unroutable"
# Not a dataset name: a routed source's own dead letters live beside its datasets' under this name locally.
RESERVED = (UNROUTABLE,)
_PATH = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_DETAIL_VALUE_CHARS = 200


class RouteError(ValueError):
    """A route table that cannot route; the message names the key."""


@dataclass(frozen=True)
class RouteTable:
    """`field`: the path read from each record; `routes`: (value, dataset) pairs, sorted by value."""

    field: str
    routes: tuple[tuple[str, str], ...]

    @classmethod
    def of(cls, field: object, routes: object, *, field_key: str = "routes.field", values_key: str = "routes.values") -> RouteTable:
        """From the declared `field` and `{value: dataset}`; refuses, naming the key (`field_key`, `values_key`: where
        the caller read them), a field that is not a path of names, no route, a value that is not a non-empty
        string, a dataset that is not a string or is reserved."""
        if not isinstance(field, str) or not _PATH.match(field):
            raise RouteError(f"{field_key}: {field!r} is not a field path (names joined by '.', e.g. type or meta.type)")
        if not isinstance(routes, dict) or not routes:
            raise RouteError(f"{values_key}: must map at least one value to a dataset, got {routes!r}")
        for value, dataset in routes.items():
            if not isinstance(value, str) or not value:
                raise RouteError(f"{values_key}: the value {value!r} is not a non-empty string")
            if not isinstance(dataset, str) or not dataset:
                raise RouteError(f"{values_key} {value}: {dataset!r} is not a dataset name")
            if dataset in RESERVED:
                raise RouteError(f"{values_key} {value}: {dataset!r} is reserved (a routed source's own dead letters)")
        return cls(field, tuple(sorted(routes.items())))

    @property
    def datasets(self) -> tuple[str, ...]:
        return tuple(sorted({dataset for _, dataset in self.routes}))

    def problems(self, datasets: dict) -> list[str]:
        """What keeps each named dataset (name -> glue_jobs.datasets.Dataset) from being routed by `field`: the path is
        not a string or enum field along records of its newest schema, or an enum lacks a value routed to it."""
        found = []
        for name in self.datasets:
            dataset = datasets.get(name)
            if dataset is None:
                found.append(f"dataset {name}: routed to by {self.field} but not one of the source's datasets")
                continue
            node = dataset.schema
            for part in self.field.split("."):
                child = next((f.type for f in node.fields if f.name == part), None) if node.kind == "record" else None
                if child is None:
                    node = None
                    break
                node = child
            if node is None or node.kind not in ("string", "enum"):
                found.append(f"dataset {name}: the route field {self.field} must be a string or enum field of its schema "
                             f"(version {dataset.latest_version}), so its contract checks it; it is "
                             f"{'absent' if node is None else node.kind}")
            elif node.kind == "enum":
                missing = [value for value, target in self.routes if target == name and value not in node.symbols]
                if missing:
                    found.append(f"dataset {name}: route value(s) {missing} are not symbols of its enum {self.field} "
                                 f"{list(node.symbols)}: every routed record would be its dead letter")
        return found

    def to_record(self) -> dict:
        return {"field": self.field, "routes": [list(route) for route in self.routes]}

    @classmethod
    def from_record(cls, record: dict) -> RouteTable:
        return cls.of(record["field"], dict(record["routes"]))

    def value(self, payload: str = "payload") -> Column:
        """The field's value in each JSON payload (column `payload`; null: absent, null, or not JSON)."""
        return F.get_json_object(F.col(payload), "$." + self.field)

    def dataset(self, payload: str = "payload") -> Column:
        """The dataset each record routes to, or null."""
        value, routed = self.value(payload), None
        for text, dataset in self.routes:
            routed = (F.when if routed is None else routed.when)(value == F.lit(text), F.lit(dataset))
        return routed

    def detail(self, payload: str = "payload") -> Column:
        """Why a record routes to no dataset, for its dead letter's `detail` (the value as a JSON string, cut at
        200 characters)."""
        value = self.value(payload)
        routed = ", ".join(json.dumps(text) for text, _ in self.routes)
        return (F.when(top_level_keys(payload).isNull(), F.lit("the payload is not one JSON object"))
                .when(value.isNull(), F.lit(f"{self.field} is absent or null"))
                .otherwise(F.concat(F.lit(f"{self.field} "), json_string_literal(F.substring(value, 1, _DETAIL_VALUE_CHARS)),
                                    F.lit(f" routes to no dataset (routed: {routed})"))))
