"""Records for any dataset, made from its files: valid ones that honour the schema and the rules, and bad
ones of each reason code with the reason the contract must give them. Local tool (not in the job zip):
`python -m glue_jobs generate --dataset NAME`, the benchmarks and the tests.

Valid values: a key field is unique per record (string `<field>-<n>`, numbers n); the event time is spread
over the hours the caller gives; numbers lie within min/max; strings within min_length/max_length, from
`enum` or, for a `pattern`, made from the pattern itself (literals, classes, ranges and bounded repeats;
another construct stops with a message naming it); arrays within min_items/max_items; an optional field
is absent in about one record in four.
"""

from __future__ import annotations

import functools
import json
import random
import re
import string
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path

from glue_jobs.dataset_types import Node
from glue_jobs.datasets import Dataset, Rule

try:  # the regular-expression parser (Python 3.11: re._parser; 3.10: sre_parse)
    from re import _parser as _sre
except ImportError:  # pragma: no cover
    import sre_parse as _sre  # type: ignore[no-redef]

_LETTERS = string.ascii_lowercase


@dataclass
class Expectation:
    """What the contract must make of the generated files."""

    records: int = 0
    valid_keys: list[str] = field(default_factory=list)
    bad_by_reason: dict[str, int] = field(default_factory=dict)
    bad_payloads: list[str] = field(default_factory=list)  # each bad record as written: its dead letter's payload
    duplicates: int = 0


def pattern_text(pattern: str, rng: random.Random) -> str:
    """A string Spark's rlike(pattern) finds, for the subset named in the module doc."""
    def walk(items) -> str:
        out = []
        for op, arg in items:
            name = str(op)
            if name == "LITERAL":
                out.append(chr(arg))
            elif name == "IN":
                out.append(_from_class(arg, rng))
            elif name in ("MAX_REPEAT", "MIN_REPEAT"):
                low, high, inner = arg
                high = min(high, low + 4) if high != _sre.MAXREPEAT else low + 4
                out.append("".join(walk(inner) for _ in range(rng.randint(low, high))))
            elif name == "SUBPATTERN":
                out.append(walk(arg[-1]))
            elif name == "AT":
                continue
            elif name == "BRANCH":
                out.append(walk(rng.choice(arg[1])))
            else:
                raise ValueError(f"pattern {pattern!r}: cannot make a matching value for {name}; give sample records instead")
        return "".join(out)

    return walk(_parsed(pattern))


@functools.lru_cache(maxsize=256)
def _parsed(pattern: str):
    """The pattern's parse tree, parsed once per pattern, not for every value (docs/performance.md "make bench's
    length"). `walk` only reads the tree."""
    return _sre.parse(pattern)


def _from_class(items, rng: random.Random) -> str:
    return rng.choice(_class_choices(tuple(items)))


@functools.lru_cache(maxsize=1024)
def _class_choices(items: tuple) -> tuple[str, ...]:
    """The characters a class (`[a-z0-9]`, `\\d`) matches, listed once per class."""
    choices: list[str] = []
    for op, arg in items:
        name = str(op)
        if name == "LITERAL":
            choices.append(chr(arg))
        elif name == "RANGE":
            choices += [chr(c) for c in range(arg[0], arg[1] + 1)]
        elif name == "CATEGORY" and "DIGIT" in str(arg):
            choices += list(string.digits)
        elif name == "CATEGORY" and "WORD" in str(arg):
            choices += list(string.ascii_letters + string.digits + "_")
        else:
            raise ValueError(f"cannot make a value for the character class item {name}")
    return tuple(choices)


class RecordMaker:
    def __init__(self, dataset: Dataset, seed: int = 7, pinned: dict[str, str] | None = None) -> None:
        """`pinned`: {field path: value} every record carries (a routed stream's route field, `meta.type` nested)."""
        self.dataset = dataset
        self.rng = random.Random(seed)
        self.rules = {r.path: r for r in dataset.rules}
        self._no_rule: dict[str, Rule] = {}  # a field without a rule: its empty Rule, made once per path
        self.pinned = dict(pinned or {})

    def valid(self, n: int, event_time: datetime) -> dict:
        record = {}
        for f in self.dataset.schema.fields:
            if f.name == self.dataset.event_time.field:
                record[f.name] = self._event_time(event_time)
            elif f.name in self.dataset.key:
                record[f.name] = f"{f.name}-{n:08d}" if f.type.kind in ("string", "enum") else n
            elif f.name in self.dataset.json_text:
                record[f.name] = {"page": f"/p/{self.rng.randint(1, 50)}", "ab": self.rng.random() < 0.5}
            elif f.type.required or self.rng.random() < 0.75:
                record[f.name] = self._value(f.type, f.name)
        for path, value in self.pinned.items():
            put(record, path, value)
        return record

    def _event_time(self, at: datetime):
        fmt = self.dataset.event_time.format
        if fmt == "iso8601":
            return at.isoformat(timespec="milliseconds").replace("+00:00", "Z")
        millis = int(at.timestamp() * 1000)
        return millis if fmt == "epoch_millis" else millis // 1000

    def _value(self, node: Node, path: str):
        rule = self.rules.get(path) or self._no_rule.get(path) or self._no_rule.setdefault(path, Rule(path=path))
        kind, rng = node.kind, self.rng
        if kind == "record":
            return {f.name: self._value(f.type, f"{path}.{f.name}") for f in node.fields
                    if f.type.required or rng.random() < 0.75}
        if kind == "array":
            low = rule.min_items if rule.min_items is not None else 1
            high = rule.max_items if rule.max_items is not None else max(low, 4)
            return [self._value(node.items, f"{path}[]") for _ in range(rng.randint(low, max(low, high)))]
        if kind == "map":
            return {f"k{i}": self._value(node.items, f"{path}[]") for i in range(rng.randint(0, 3))}
        if kind == "enum":
            return rng.choice(rule.enum or node.symbols)
        if kind == "string":
            if rule.enum:
                return rng.choice(rule.enum)
            if rule.pattern:
                return pattern_text(rule.pattern, rng)
            low = max(rule.min_length or 1, 1)
            high = rule.max_length if rule.max_length is not None else max(low, 12)
            return "".join(rng.choice(_LETTERS) for _ in range(rng.randint(low, max(low, high))))
        if kind == "boolean":
            return rng.random() < 0.5
        if kind in ("int", "long"):
            low = int(rule.min) if rule.min is not None else 0
            high = int(rule.max) if rule.max is not None else low + 1000
            return rng.randint(low, high)
        if kind in ("float", "double", "decimal"):
            scale = node.scale if kind == "decimal" else 2
            low = float(rule.min) if rule.min is not None else 0.0
            limit = 10.0 ** (node.precision - node.scale) - 1 if kind == "decimal" else 1e6
            high = min(float(rule.max) if rule.max is not None else low + 1000.0, limit)
            value = Decimal(str(round(rng.uniform(low, high), scale)))
            return float(value) if kind != "decimal" else value
        if kind == "date":
            return (datetime(2020, 1, 1) + timedelta(days=rng.randint(0, 2000))).strftime("%Y-%m-%d")
        if kind in ("timestamp-millis", "timestamp-micros"):
            millis = rng.randint(1_577_836_800_000, 1_735_689_600_000)
            return millis if kind == "timestamp-millis" else millis * 1000
        raise AssertionError(kind)

    def bad(self, n: int, event_time: datetime) -> tuple[str, str]:
        """(payload, the reason the contract gives it): each reason code in turn."""
        record = self.valid(n, event_time)
        kind = n % 4
        if kind == 0:
            return decimal_literal(record)[:-2], "malformed_json"
        required = [f.name for f in self.dataset.schema.fields if f.type.required and f.name not in self.dataset.key]
        if kind == 1 and required:
            del record[self.rng.choice(required)]
            return decimal_literal(record), "missing_required_field"
        if kind == 2:
            field_name = self.dataset.event_time.field
            record[field_name] = 12345 if isinstance(record[field_name], str) else "soon"
            return decimal_literal(record), "invalid_type"
        record[self.dataset.event_time.field] = self._event_time(datetime(2099, 1, 1, tzinfo=timezone.utc))
        return decimal_literal(record), "out_of_range"


def decimal_literal(record: dict) -> str:
    """The record as JSON, decimals written exactly as their digits (json would write floats)."""
    text = json.dumps(record, default=lambda v: f"__DEC__{v}__", separators=(",", ":"))
    return _DECIMAL.sub(r"\1", text) if "__DEC__" in text else text


_DECIMAL = re.compile(r'"__DEC__(-?[0-9.]+)__"')


def generate_dataset(dataset: Dataset, out_dir: str | Path, *, records: int, files: int = 10, bad_ratio: float = 0.01,
                     duplicate_ratio: float = 0.005, hours: int = 48, seed: int = 7,
                     end: datetime | None = None) -> Expectation:
    """NDJSON files of `dataset`'s records, ending at `end` (default: the current hour) over `hours` hours."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    maker, rng = RecordMaker(dataset, seed), random.Random(seed + 1)
    end = end or datetime.now(timezone.utc).replace(minute=0, second=0, microsecond=0)
    expect, lines, valid_lines = Expectation(), [], []
    key = dataset.key[0]
    for n in range(records):
        at = end - timedelta(seconds=rng.randint(1, hours * 3600))
        if rng.random() < bad_ratio:
            payload, reason = maker.bad(n, at)
            expect.bad_by_reason[reason] = expect.bad_by_reason.get(reason, 0) + 1
            expect.bad_payloads.append(payload)
        elif valid_lines and rng.random() < duplicate_ratio:
            payload = rng.choice(valid_lines)
            expect.duplicates += 1
        else:
            record = maker.valid(n, at)
            payload = decimal_literal(record)
            valid_lines.append(payload)
            expect.valid_keys.append(str(record[key]))
        lines.append(payload)
    for i in range(files):
        chunk = lines[i::files]
        (out / f"{dataset.name}-{i:05d}.json").write_text("\n".join(chunk) + ("\n" if chunk else ""), encoding="utf-8")
    expect.records = records
    return expect


def put(record: dict, path: str, value) -> None:
    """`value` at the field path (`meta.type`: the record `meta`'s field `type`, the record made when absent)."""
    *parents, last = path.split(".")
    for name in parents:
        record = record.setdefault(name, {})
    record[last] = value
