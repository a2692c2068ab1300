"""Avro schema compatibility, in pure Python, checked before the Glue Schema Registry is called.

Why here: the registry decides compatibility itself (an incompatible RegisterSchemaVersion ends in
Status FAILURE), but moto's registry does not evaluate it, and an operator wants the reason
("field 'country' added without a default") before anything is registered. The rules are the Avro
specification's schema resolution (https://avro.apache.org/docs/1.10.2/spec.html#Schema+Resolution,
Avro 1.10.2 is what the registry implements):

- A reader can read a writer's data when, recursively: the types match, or the writer type promotes
  to the reader type (int -> long/float/double, long -> float/double, float -> double,
  string <-> bytes); records have the same (unqualified) name or a reader alias of it, every
  reader field exists in the writer (by name or alias) or has a default, writer-only fields are
  ignored; enums keep every writer symbol (or the reader has a default); unions: each writer branch
  must be readable by the reader (a reader union takes the first branch that can read it).
- BACKWARD: the new schema reads data written with the latest version (added fields need defaults,
  removed fields are fine, type changes only by promotion). FORWARD: the latest reads the new one.
  FULL: both. The _ALL variants check against every version instead of the latest.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from operations.errors import ToolError

PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
PROMOTIONS = {
    "int": {"long", "float", "double"},
    "long": {"float", "double"},
    "float": {"double"},
    "string": {"bytes"},
    "bytes": {"string"},
}
MODES = ("NONE", "DISABLED", "BACKWARD", "BACKWARD_ALL", "FORWARD", "FORWARD_ALL", "FULL", "FULL_ALL")


class SchemaError(ToolError):
    """The schema file itself is not a valid Avro schema."""


@dataclass(frozen=True)
class Schema:
    """A parsed schema: its root node and the named types it defines (full name -> node)."""

    root: object
    names: dict

    @property
    def text(self) -> str:
        return json.dumps(self.root, separators=(",", ":"))


def parse(definition: str | dict, *, where: str = "schema") -> Schema:
    if isinstance(definition, str):
        try:
            definition = json.loads(definition)
        except json.JSONDecodeError as exc:
            raise SchemaError(f"{where}: not valid JSON (line {exc.lineno} column {exc.colno}: {exc.msg})") from None
    names: dict = {}
    _collect(definition, None, names, where)
    if not (isinstance(definition, dict) and definition.get("type") == "record"):
        raise SchemaError(f"{where}: the top level must be an Avro record")
    return Schema(definition, names)


def _full_name(node: dict, namespace: str | None) -> str:
    name = node["name"]
    if "." in name:
        return name
    ns = node.get("namespace", namespace)
    return f"{ns}.{name}" if ns else name


def _collect(node, namespace, names, where) -> None:
    """Register named types and check the structure (field names unique, defaults well typed)."""
    if isinstance(node, str):
        if node not in PRIMITIVES:
            try:
                _deref(node, names, namespace)
            except SchemaError as exc:
                raise SchemaError(f"{where}: {exc}") from None
        return
    if isinstance(node, list):
        if not node:
            raise SchemaError(f"{where}: empty union")
        for branch in node:
            if isinstance(branch, list):
                raise SchemaError(f"{where}: a union may not directly contain a union")
            _collect(branch, namespace, names, where)
        return
    if not isinstance(node, dict) or "type" not in node:
        raise SchemaError(f"{where}: {json.dumps(node)[:80]} is not an Avro schema")
    kind = node["type"]
    if kind in ("record", "error", "enum", "fixed"):
        if not isinstance(node.get("name"), str) or not node["name"]:
            raise SchemaError(f"{where}: a {kind} needs a name")
        full = _full_name(node, namespace)
        names[full] = node
        namespace = full.rpartition(".")[0] or None
    if kind in ("record", "error"):
        fields = node.get("fields")
        if not isinstance(fields, list):
            raise SchemaError(f"{where}: record {node['name']} needs a list of fields")
        seen = set()
        for f in fields:
            if not isinstance(f, dict) or not isinstance(f.get("name"), str) or "type" not in f:
                raise SchemaError(f"{where}: record {node['name']}: every field needs a name and a type")
            if f["name"] in seen:
                raise SchemaError(f"{where}: record {node['name']}: field {f['name']!r} appears twice")
            seen.add(f["name"])
            _collect(f["type"], namespace, names, f"{where}: field {f['name']!r}")
            if "default" in f and not _default_matches(f["type"], f["default"], names, namespace):
                raise SchemaError(
                    f"{where}: field {f['name']!r}: default {json.dumps(f['default'])} does not match its type "
                    "(for a union the default must match the FIRST branch, e.g. [\"null\", ...] with null)"
                )
    elif kind == "enum":
        if not isinstance(node.get("symbols"), list) or not node["symbols"]:
            raise SchemaError(f"{where}: enum {node['name']} needs symbols")
    elif kind == "array":
        _collect(node.get("items"), namespace, names, where)
    elif kind == "map":
        _collect(node.get("values"), namespace, names, where)
    elif kind == "fixed":
        if not isinstance(node.get("size"), int):
            raise SchemaError(f"{where}: fixed {node['name']} needs an integer size")
    elif isinstance(kind, (dict, list)):
        _collect(kind, namespace, names, where)
    elif kind not in PRIMITIVES and not isinstance(kind, str):
        raise SchemaError(f"{where}: unknown type {kind!r}")


def _default_matches(schema, value, names, namespace) -> bool:
    node = _deref(schema, names, namespace)
    if isinstance(node, list):
        return _default_matches(node[0], value, names, namespace)
    kind = _kind(node)
    checks = {
        "null": lambda v: v is None,
        "boolean": lambda v: isinstance(v, bool),
        "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "long": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
        "double": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
        "bytes": lambda v: isinstance(v, str),
        "string": lambda v: isinstance(v, str),
        "fixed": lambda v: isinstance(v, str),
        "enum": lambda v: isinstance(v, str) and v in node.get("symbols", []),
        "array": lambda v: isinstance(v, list),
        "map": lambda v: isinstance(v, dict),
        "record": lambda v: isinstance(v, dict),
    }
    check = checks.get(kind)
    return check(value) if check else True


def _deref(node, names, namespace=None):
    """A type reference by name -> its definition; {"type": "long", "logicalType": ...} -> "long"."""
    if isinstance(node, str):
        if node in PRIMITIVES:
            return node
        for candidate in (node, f"{namespace}.{node}" if namespace else None):
            if candidate in names:
                return names[candidate]
        short = {full.rpartition(".")[2]: n for full, n in names.items()}
        if node in short:
            return short[node]
        raise SchemaError(f"unknown type name {node!r}")
    if isinstance(node, dict) and isinstance(node.get("type"), (str, list, dict)) and node.get("type") not in (
        "record", "error", "enum", "fixed", "array", "map"
    ):
        return _deref(node["type"], names, namespace)
    return node


def _kind(node) -> str:
    if isinstance(node, list):
        return "union"
    if isinstance(node, str):
        return node
    return "record" if node["type"] == "error" else node["type"]


def _describe(node) -> str:
    kind = _kind(node)
    if kind == "union":
        return "[" + ", ".join(_describe(b) for b in node) + "]"
    if kind in ("record", "enum", "fixed"):
        return f"{kind} {node['name']}"
    if kind == "array":
        return "array"
    if kind == "map":
        return "map"
    return kind


def read_problems(reader: Schema, writer: Schema) -> list[str]:
    """Why `reader` cannot read data written with `writer`; an empty list means it can."""
    problems: list[str] = []
    _resolve(reader.root, writer.root, reader, writer, reader.root.get("name", "record"), problems, set())
    return problems


def _resolve(r, w, reader: Schema, writer: Schema, path: str, problems: list[str], seen: set) -> bool:
    r = _deref(r, reader.names)
    w = _deref(w, writer.names)
    rk, wk = _kind(r), _kind(w)

    if wk == "union":
        ok = True
        for branch in w:
            if not _readable(r, branch, reader, writer, path, seen):
                problems.append(f"{path}: a value of writer branch {_describe(_deref(branch, writer.names))} "
                                f"cannot be read as {_describe(r)}")
                ok = False
        return ok
    if rk == "union":
        if any(_readable(branch, w, reader, writer, path, seen) for branch in r):
            return True
        problems.append(f"{path}: {_describe(w)} is not readable by any branch of {_describe(r)}")
        return False

    if rk != wk:
        if wk in PROMOTIONS and rk in PROMOTIONS[wk]:
            return True
        problems.append(f"{path}: type changed from {_describe(w)} to {_describe(r)}, which is not an Avro "
                        "promotion (allowed: int->long/float/double, long->float/double, float->double, "
                        "string<->bytes)")
        return False

    if rk in PRIMITIVES:
        return True
    if rk == "record":
        return _resolve_record(r, w, reader, writer, path, problems, seen)
    if rk == "enum":
        if not _same_name(r, w):
            problems.append(f"{path}: enum {w['name']} is now enum {r['name']}")
            return False
        missing = [s for s in w["symbols"] if s not in r["symbols"]]
        if missing and "default" not in r:
            problems.append(f"{path}: enum symbols {missing} removed and the enum has no default")
            return False
        return True
    if rk == "fixed":
        if not _same_name(r, w) or r.get("size") != w.get("size"):
            problems.append(f"{path}: fixed {w['name']}({w.get('size')}) is now fixed {r['name']}({r.get('size')})")
            return False
        return True
    if rk == "array":
        return _resolve(r["items"], w["items"], reader, writer, f"{path}[]", problems, seen)
    if rk == "map":
        return _resolve(r["values"], w["values"], reader, writer, f"{path}{{}}", problems, seen)
    problems.append(f"{path}: unsupported type {rk!r}")
    return False


def _readable(r, w, reader, writer, path, seen) -> bool:
    return _resolve(r, w, reader, writer, path, [], set(seen))


def _same_name(r: dict, w: dict) -> bool:
    short = w["name"].rpartition(".")[2]
    return r["name"].rpartition(".")[2] == short or short in [a.rpartition(".")[2] for a in r.get("aliases", [])]


def _resolve_record(r, w, reader, writer, path, problems, seen) -> bool:
    if not _same_name(r, w):
        problems.append(f"{path}: record {w['name']} is now record {r['name']} (names must match, or add an alias)")
        return False
    key = (id(r), id(w))
    if key in seen:  # recursive types: already being resolved higher up
        return True
    seen.add(key)
    ok = True
    writer_fields = {f["name"]: f for f in w["fields"]}
    for field in r["fields"]:
        match = writer_fields.get(field["name"]) or next(
            (writer_fields[a] for a in field.get("aliases", []) if a in writer_fields), None
        )
        field_path = f"{path}.{field['name']}"
        if match is None:
            if "default" not in field:
                problems.append(f"{field_path}: field added without a default, so data written before it "
                                "cannot be read (give it a default, e.g. type [\"null\", ...] with default null)")
                ok = False
            continue
        ok = _resolve(field["type"], match["type"], reader, writer, field_path, problems, seen) and ok
    return ok


def compatibility_problems(mode: str, new: Schema, existing: list[Schema]) -> list[str]:
    """Problems of registering `new` after `existing` (oldest first) under a registry compatibility mode."""
    if mode not in MODES:
        raise ToolError(f"unknown compatibility mode {mode!r}; known: {', '.join(MODES)}")
    if mode == "NONE" or not existing:
        return []
    if mode == "DISABLED":
        return ["the schema's compatibility is DISABLED: the registry accepts no new versions"]
    against = existing if mode.endswith("_ALL") else existing[-1:]
    problems: list[str] = []
    for number, old in enumerate(against, start=len(existing) - len(against) + 1):
        if mode.startswith(("BACKWARD", "FULL")):
            problems += [f"BACKWARD vs version {number}: {p}" for p in read_problems(new, old)]
        if mode.startswith(("FORWARD", "FULL")):
            problems += [f"FORWARD vs version {number}: {p}" for p in read_problems(old, new)]
    return problems


def evolution_problems(mode: str, new: Schema, existing: list[Schema], checkpoint: int = 1) -> list[str]:
    """`compatibility_problems` against the latest version(s) AND against the checkpoint version.

    Which version the registry compares a new one with is not settled by what AWS publishes: the Schema
    Registry guide describes a checkpoint version (the first by default; GetSchema's SchemaCheckpoint)
    that compatibility is checked against, and an AWS answer on re:Post says it moves to the most recent
    version, while a user in the same thread saw it stay at version 1. So the offline check passes only
    when the new version is compatible with both the latest and the checkpoint version; it assumes the
    registry checks no other version (for a *_ALL mode, all of them are checked anyway).
    """
    problems = compatibility_problems(mode, new, existing)
    if not existing or mode in ("NONE", "DISABLED") or mode.endswith("_ALL"):
        return problems
    if not 1 <= checkpoint <= len(existing):
        raise ToolError(f"checkpoint version {checkpoint} is not among the {len(existing)} existing version(s)")
    if checkpoint != len(existing):
        at_checkpoint = compatibility_problems(mode, new, existing[:checkpoint])
        problems += [p.replace(f"vs version {checkpoint}:", f"vs version {checkpoint} (checkpoint):") for p in at_checkpoint]
    return problems
