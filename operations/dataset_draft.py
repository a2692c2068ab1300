"""`streamlake dataset new NAME --sample FILE.jsonl`: draft a dataset's files from sample records.

What it guesses, and says it guessed:
- types at any depth: an object is a record, a list an array of its elements' merged type, true/false a
  boolean, an integer an int (a long once a sample exceeds 32 bits), a number with a fraction a double, a
  string a string; a field missing or null in some sample is optional (["null", T]);
- the event time: a top-level string that every sample writes as an ISO-8601 instant with an offset
  (format iso8601), else a top-level integer in the range of epoch milliseconds or seconds since 2000;
- the key: a top-level string field named `id` or ending in `_id` that no two samples share.
It never overwrites a dataset and never pins the version: what it drafts must be read first (decimals
written as doubles, enums written as strings, rules).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from operations.errors import ToolError

_ISO = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?(Z|[+-]\d{2}:\d{2})$")
_AVRO_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_MS_SINCE_2000, _S_SINCE_2000 = 946_684_800_000, 946_684_800
_S_BEFORE_2100 = 4_102_444_800


@dataclass
class Shape:
    """What the samples wrote at one place: the kinds seen, in how many samples it was present and non-null."""

    kinds: set[str] = field(default_factory=set)
    present: int = 0
    fields: dict[str, Shape] = field(default_factory=dict)  # objects
    seen_objects: int = 0
    items: Shape | None = None  # arrays
    strings: list[str] = field(default_factory=list)
    integers: list[int] = field(default_factory=list)

    def add(self, value) -> None:
        if value is None:
            return
        self.present += 1
        if isinstance(value, bool):
            self.kinds.add("boolean")
        elif isinstance(value, int):
            self.kinds.add("long" if abs(value) >= 2**31 else "int")
            self.integers.append(value)
        elif isinstance(value, float):
            self.kinds.add("double")
        elif isinstance(value, str):
            self.kinds.add("string")
            self.strings.append(value)
        elif isinstance(value, list):
            self.kinds.add("array")
            self.items = self.items or Shape()
            for item in value:
                self.items.add(item)
        elif isinstance(value, dict):
            self.kinds.add("record")
            self.seen_objects += 1
            for key, inner in value.items():
                self.fields.setdefault(key, Shape()).add(inner)


def read_samples(path: Path) -> list[dict]:
    if not path.is_file():
        raise ToolError(f"--sample {path}: no such file")
    samples, problems = [], []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as error:
            problems.append(f"line {number}: not JSON ({error})")
            continue
        if not isinstance(record, dict):
            problems.append(f"line {number}: not a JSON object")
            continue
        samples.append(record)
    if problems:
        raise ToolError(f"--sample {path}: {len(problems)} line(s) are not records: " + "; ".join(problems[:5]))
    if not samples:
        raise ToolError(f"--sample {path}: no records")
    return samples


def _avro(shape: Shape, name: str, notes: list[str], path: str):
    kinds = shape.kinds
    if kinds <= {"int", "long"} and kinds:
        avro = "long" if "long" in kinds else "int"
    elif kinds <= {"int", "long", "double"} and kinds:
        avro = "double"
        if kinds & {"int", "long"}:
            notes.append(f"{path}: integers and fractions seen: double (use a decimal for money)")
    elif kinds == {"record"}:
        avro = {"type": "record", "name": _record_name(name), "fields": [
            _field(inner, key, shape.seen_objects, notes, f"{path}.{key}") for key, inner in shape.fields.items()]}
    elif kinds == {"array"}:
        items = shape.items if shape.items and shape.items.kinds else None
        if items is None:
            notes.append(f"{path}: only empty arrays seen: array of string")
            avro = {"type": "array", "items": "string"}
        else:
            avro = {"type": "array", "items": _avro(items, name + "_item", notes, f"{path}[]")}
    elif len(kinds) == 1:
        avro = next(iter(kinds))
    elif not kinds:
        notes.append(f"{path}: only null seen: optional string")
        avro = "string"
    else:
        notes.append(f"{path}: several JSON types seen ({', '.join(sorted(kinds))}): string; list it in json_text to keep any value")
        avro = "string"
    return avro


def _field(shape: Shape, name: str, total: int, notes: list[str], path: str) -> dict:
    if not _AVRO_NAME.match(name) or name.startswith("_"):
        raise ToolError(f"field {path!r} is not a name Avro and the lake accept (letters, digits, '_'; not starting with '_')")
    avro = _avro(shape, name, notes, path)
    if shape.present < total:
        notes.append(f"{path}: missing or null in {total - shape.present} of {total} samples: optional")
        return {"name": name, "type": ["null", avro], "default": None}
    return {"name": name, "type": avro}


def _record_name(name: str) -> str:
    return "".join(part.capitalize() for part in re.split(r"[_\W]+", name) if part) or "Record"


def draft(name: str, samples: list[dict], unknown_fields: str = "reject") -> tuple[dict, dict, list[str]]:
    """(schema.v1.avsc, dataset.json, notes on what was guessed); `unknown_fields`: what the contract does with a field
    the schema does not know (dataset.json unknown_fields), written out either way."""
    root = Shape()
    for record in samples:
        root.add(record)
    notes: list[str] = []
    schema = {"type": "record", "name": _record_name(name), "namespace": f"datasets.{name}",
              "doc": f"Drafted from {len(samples)} sample record(s): check every type before committing.",
              "fields": [_field(inner, key, len(samples), notes, key) for key, inner in root.fields.items()]}
    required = {f["name"] for f in schema["fields"] if not isinstance(f["type"], list)}
    event_time = _event_time(root, required, notes)
    key = _key(root, required, len(samples), notes)
    contract = {"description": f"{name}: describe one record in a line", "key": key, "event_time": event_time,
                "rules": {}, "json_text": [], "unknown_fields": unknown_fields}
    notes.append(f"unknown_fields: {unknown_fields} (a field the schema does not know is "
                 + {"reject": "a dead letter, reason unknown_field", "keep": "stored as JSON text in _unknown_fields",
                    "drop": "dropped and counted"}[unknown_fields] + "; docs/datasets.md \"Unknown fields\")")
    return schema, contract, notes


def _event_time(root: Shape, required: set[str], notes: list[str]) -> dict:
    def candidates(test) -> list[str]:
        found = [k for k, shape in root.fields.items() if shape.present and test(shape)]
        return sorted(found, key=lambda k: k not in required)  # required fields first

    def offer(names: list[str], fmt: str, why: str) -> dict:
        first = names[0]
        optional = "" if first in required else f"; make {first} required (some samples lack it): the event time must be"
        others = f"; other candidates: {', '.join(names[1:])}" if names[1:] else ""
        notes.append(f"event time: {first} ({why}){optional}{others}")
        return {"field": first, "format": fmt}

    iso = candidates(lambda s: s.kinds == {"string"} and all(_ISO.match(v) for v in s.strings))
    if iso:
        return offer(iso, "iso8601", "ISO-8601 with an offset wherever present")
    millis = candidates(lambda s: s.kinds <= {"int", "long"} and all(v >= _MS_SINCE_2000 for v in s.integers))
    if millis:
        return offer(millis, "epoch_millis", "integers in the range of epoch milliseconds since 2000")
    seconds = candidates(lambda s: s.kinds <= {"int", "long"} and all(_S_SINCE_2000 <= v < _S_BEFORE_2100 for v in s.integers))
    if seconds:
        return offer(seconds, "epoch_seconds", "integers in the range of epoch seconds since 2000")
    notes.append("event time: no candidate found (an ISO-8601 string with an offset, or epoch ms/s): set event_time by hand")
    return {"field": "", "format": "iso8601"}


def _key(root: Shape, required: set[str], total: int, notes: list[str]) -> list[str]:
    for key, shape in root.fields.items():
        if key in required and shape.kinds == {"string"} and (key == "id" or key.endswith("_id")) and len(set(shape.strings)) == total:
            notes.append(f"key: {key} (unique in the samples)")
            return [key]
    notes.append("key: no unique id field found: set key by hand")
    return []


def write_draft(root: Path, name: str, sample: Path, unknown_fields: str = "reject") -> list[str]:
    """Write datasets/<name>/{schema.v1.avsc, dataset.json}; returns the notes. Refuses to overwrite."""
    folder = root / name
    if folder.exists():
        raise ToolError(f"{folder} exists: a drafted dataset never overwrites one")
    schema, contract, notes = draft(name, read_samples(sample), unknown_fields)
    # The files as the jobs and synth will read them, checked before anything is written (a bad name, a field name
    # Avro refuses): a written folder that fails every synth would be worse than none.
    from glue_jobs import datasets

    files = (("dataset.json", json.dumps(contract).encode()), ("schema.v1.avsc", json.dumps(schema).encode()))
    try:
        datasets._parse(name, str(folder), files, draft=True)
    except datasets.DatasetError as error:
        raise ToolError(f"nothing written: the drafted dataset would not load: {'; '.join(error.problems)}") from None
    folder.mkdir(parents=True)
    (folder / "schema.v1.avsc").write_text(json.dumps(schema, indent=2) + "\n", encoding="utf-8")
    (folder / "dataset.json").write_text(json.dumps(contract, indent=2) + "\n", encoding="utf-8")
    return notes
