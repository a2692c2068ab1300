"""A dataset's Avro schema as a tree of typed nodes, and what each node is on the wire, in Spark and in the Catalog.

Read by glue_jobs/datasets.py; no pyspark and no aws_cdk here (DDL strings only), so the CDK app, the jobs
and the tools share one reading of a schema. Supported, at any depth (DESIGN.md "Datasets"): string,
boolean, int, long, float, double, enum, record, array, map (string keys), decimal (logical type on bytes
or fixed), date, timestamp-millis, timestamp-micros. A type that is not a union with null is required; a
union is allowed only as ["null", T].

How a node is carried:

| Avro | JSON wire value | parsed as (Spark DDL) | stored (Spark / Catalog) |
|---|---|---|---|
| string, enum | string | string | string |
| boolean | true/false | boolean | boolean |
| int / long | integer | int / bigint | int / bigint |
| float / double | number | float / double | float / double |
| decimal(p,s) | number, at most s fraction digits | decimal(38, 38-(p-s)): the integer digits of p,s and every fraction digit Spark can hold, so a rounded value is seen | decimal(p,s) |
| date | "YYYY-MM-DD" | string | date |
| timestamp-millis / -micros | epoch ms / us integer | bigint | timestamp |
| record | object | struct | struct |
| array | array | array | array |
| map | object | map<string,T> | map<string,T> |
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

PRIMITIVES = ("string", "boolean", "int", "long", "float", "double")
LOGICAL = ("decimal", "date", "timestamp-millis", "timestamp-micros")
MAX_PRECISION = 38  # Spark's DecimalType.MAX_PRECISION; Athena's decimal has the same limit

_STORED_DDL = {"string": "string", "enum": "string", "boolean": "boolean", "int": "int", "long": "bigint",
               "float": "float", "double": "double", "date": "date", "timestamp-millis": "timestamp",
               "timestamp-micros": "timestamp"}
_WIRE_DDL = {**_STORED_DDL, "date": "string", "timestamp-millis": "bigint", "timestamp-micros": "bigint"}


class SchemaError(ValueError):
    """A schema file that this project cannot carry; the message names the file and the field path."""


@dataclass(frozen=True)
class Node:
    """One type in the tree. `kind` is a primitive, a logical type, or enum/record/array/map."""

    kind: str
    required: bool = True
    fields: tuple[Field, ...] = ()  # record
    items: Node | None = None  # array elements, map values
    symbols: tuple[str, ...] = ()  # enum
    precision: int = 0  # decimal
    scale: int = 0  # decimal
    name: str = ""  # record or enum name

    @property
    def is_leaf(self) -> bool:
        return self.kind not in ("record", "array", "map")

    @property
    def has_decimal(self) -> bool:
        """Whether a decimal is anywhere in this type (a record's fields, array elements, map values)."""
        if self.kind == "decimal":
            return True
        if self.kind == "record":
            return any(f.type.has_decimal for f in self.fields)
        return self.kind in ("array", "map") and self.items.has_decimal

    def stored_ddl(self) -> str:
        """Spark DDL (and Hive/Athena type) of the stored value: struct<...>, array<...>, decimal(p,s), ..."""
        return self._ddl(_STORED_DDL, stored=True)

    def catalog_type(self) -> str:
        """The Glue Data Catalog column type: Hive DDL without backticks (Athena reads it as written)."""
        return self._ddl(_STORED_DDL, stored=True, quote=False)

    def wire_catalog_type(self) -> str:
        """The Catalog column type of the value as it arrives (a decimal keeps its precision and scale)."""
        return self._ddl(_WIRE_DDL, stored=True, quote=False)

    def wire_ddl(self) -> str:
        """Spark DDL of the value as the JSON parse reads it (see the module table)."""
        return self._ddl(_WIRE_DDL, stored=False)

    def wide_decimal(self) -> tuple[int, int]:
        """(precision, scale) the wire parse reads a decimal with: same integer digits, every fraction digit."""
        integer_digits = self.precision - self.scale
        return MAX_PRECISION, MAX_PRECISION - integer_digits

    def _ddl(self, names: dict[str, str], *, stored: bool, quote: bool = True) -> str:
        if self.kind == "decimal":
            precision, scale = (self.precision, self.scale) if stored else self.wide_decimal()
            return f"decimal({precision},{scale})"
        if self.kind == "record":
            q = "`" if quote else ""
            return "struct<" + ",".join(f"{q}{f.name}{q}:{f.type._ddl(names, stored=stored, quote=quote)}" for f in self.fields) + ">"
        if self.kind == "array":
            return f"array<{self.items._ddl(names, stored=stored, quote=quote)}>"
        if self.kind == "map":
            return f"map<string,{self.items._ddl(names, stored=stored, quote=quote)}>"
        return names[self.kind]


@dataclass(frozen=True)
class Field:
    name: str
    type: Node
    doc: str = ""
    has_default: bool = False


# Avro "Names": a name starts with [A-Za-z_] and holds only [A-Za-z0-9_]; a namespace is such names joined by dots; "Every
# symbol [of an enum] must match the regular expression [A-Za-z_][A-Za-z0-9_]*" and be unique (Avro specification,
# "Names" and "Enums"). Java's parser (the Schema Registry's) refuses others at registration, long after the files
# were written, and the lake's column names come from them.
_AVRO_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_AVRO_NAMESPACE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
# The JSON type of a field's default per Avro type (Avro specification, "Complex Types", field default values).
_DEFAULT_TYPES = {"string": (str,), "enum": (str,), "boolean": (bool,), "int": (int,), "long": (int,), "date": (int,),
                  "timestamp-millis": (int,), "timestamp-micros": (int,), "float": (int, float), "double": (int, float),
                  "decimal": (str,), "record": (dict,), "map": (dict,), "array": (list,)}


def default_problem(node: Node, value, union: bool) -> str | None:
    """Why `value` cannot be the default of a field of type `node` (None: it can). A union's default is of its first
    branch, here always null ("the default value corresponds to the first schema in the union", Avro specification)."""
    if union:
        return None if value is None else "the default of a ['null', T] union must be null (its first branch)"
    allowed = _DEFAULT_TYPES.get(node.kind, ())
    if value is None or isinstance(value, bool) and bool not in allowed or not isinstance(value, allowed):
        return f"the default {json.dumps(value)} is not a {node.kind}"
    if node.kind == "enum" and value not in node.symbols:
        return f"the default {value!r} is not one of the enum's symbols"
    if node.kind == "int" and not -2**31 <= value < 2**31 or node.kind == "long" and not -2**63 <= value < 2**63:
        return f"the default {value} is out of the {node.kind} range"
    return None


@dataclass
class _Reader:
    """Parses one .avsc document; named types (records, enums, fixed) may be referenced by name later."""

    where: str
    named: dict[str, dict] = field(default_factory=dict)

    def fail(self, path: str, message: str) -> SchemaError:
        return SchemaError(f"{self.where}: {path or 'the schema'}: {message}")

    def node(self, avro, path: str) -> Node:
        if isinstance(avro, list):
            non_null = [t for t in avro if t != "null"]
            if "null" not in avro or len(non_null) != 1 or len(avro) != 2:
                raise self.fail(path, f"a union must be ['null', T], got {avro!r}")
            inner = self.node(non_null[0], path)
            return Node(**{**inner.__dict__, "required": False})
        if isinstance(avro, str):
            if avro in PRIMITIVES:
                return Node(avro)
            if avro in self.named:
                return self.node(self.named[avro], path)
            raise self.fail(path, f"type {avro!r} is not supported (supported: {', '.join(PRIMITIVES + LOGICAL)}, "
                                  "enum, record, array, map)")
        if not isinstance(avro, dict) or "type" not in avro:
            raise self.fail(path, f"not an Avro type: {avro!r}")
        logical = avro.get("logicalType")
        if logical is not None:
            return self._logical(avro, logical, path)
        kind = avro["type"]
        if kind == "record":
            return self._record(avro, path)
        if kind == "enum":
            self._name(avro, path)
            symbols = avro.get("symbols")
            if not isinstance(symbols, list) or not symbols or not all(isinstance(s, str) for s in symbols):
                raise self.fail(path, "an enum needs a non-empty list of string symbols")
            bad = [s for s in symbols if not _AVRO_NAME.match(s)]
            if bad or len(set(symbols)) != len(symbols):
                raise self.fail(path, f"enum symbols must be unique and match {_AVRO_NAME.pattern} (Avro names), got "
                                      f"{', '.join(map(repr, bad)) or 'a repeated symbol'}")
            return Node("enum", symbols=tuple(symbols), name=avro["name"])
        if kind == "array":
            return Node("array", items=self._element(avro.get("items"), f"{path}[]"))
        if kind == "map":
            return Node("map", items=self._element(avro.get("values"), f"{path}{{}}"))
        if kind == "fixed" or kind == "bytes":
            raise self.fail(path, f"{kind} is supported only as a decimal (logicalType decimal)")
        return self.node(kind, path)

    def _element(self, avro, path: str) -> Node:
        if avro is None:
            raise self.fail(path, "an array needs `items` and a map `values`")
        return self.node(avro, path)

    def _name(self, avro: dict, path: str) -> None:
        name = avro.get("name")
        if not isinstance(name, str) or not name:
            raise self.fail(path, f"a {avro['type']} needs a name")
        if not _AVRO_NAME.match(name):
            raise self.fail(path, f"the {avro['type']} name {name!r} is not an Avro name ({_AVRO_NAME.pattern})")
        namespace = avro.get("namespace")
        if namespace is not None and (not isinstance(namespace, str) or namespace and not _AVRO_NAMESPACE.match(namespace)):
            raise self.fail(path, f"the namespace {namespace!r} is not Avro names joined by dots")
        earlier = self.named.get(name)
        if earlier is not None and earlier is not avro and earlier.get("namespace") == avro.get("namespace"):
            # Avro's parsers (Java's Schema.Parser, the Schema Registry's) refuse a second definition of a name.
            raise self.fail(path, f"named type {name!r} is defined twice: define it once, then refer to it by its name")
        self.named[name] = avro
        if avro.get("namespace"):
            self.named[f"{avro['namespace']}.{name}"] = avro

    def _logical(self, avro: dict, logical: str, path: str) -> Node:
        base = avro["type"]
        if logical == "decimal" and base in ("bytes", "fixed"):
            if base == "fixed":
                self._name(avro, path)
            precision, scale = avro.get("precision"), avro.get("scale", 0)
            if not isinstance(precision, int) or not 1 <= precision <= MAX_PRECISION:
                raise self.fail(path, f"decimal precision must be an integer 1-{MAX_PRECISION}, got {precision!r}")
            if not isinstance(scale, int) or not 0 <= scale <= precision:
                raise self.fail(path, f"decimal scale must be an integer 0-{precision} (the precision), got {scale!r}")
            return Node("decimal", precision=precision, scale=scale)
        expected = {"date": "int", "timestamp-millis": "long", "timestamp-micros": "long"}.get(logical)
        if expected is None:
            raise self.fail(path, f"logicalType {logical!r} is not supported (supported: {', '.join(LOGICAL)})")
        if base != expected:
            raise self.fail(path, f"logicalType {logical!r} annotates {expected}, not {base!r}")
        return Node(logical)

    def _record(self, avro: dict, path: str) -> Node:
        self._name(avro, path)
        fields, names = [], set()
        for entry in avro.get("fields") or []:
            name = entry.get("name") if isinstance(entry, dict) else None
            if not isinstance(name, str) or not name:
                raise self.fail(path, f"a field needs a name: {entry!r}")
            if name.startswith("_") or name in names:
                raise self.fail(path, f"field {name!r}: names must be unique and not start with '_' (the job's own columns do)")
            if not _AVRO_NAME.match(name):
                raise self.fail(path, f"field {name!r} is not an Avro name ({_AVRO_NAME.pattern})")
            names.add(name)
            child = f"{path}.{name}" if path else name
            node = self.node(entry.get("type"), child)
            if "default" in entry:
                problem = default_problem(node, entry["default"], union=isinstance(entry.get("type"), list))
                if problem is not None:
                    raise self.fail(child, problem)
            fields.append(Field(name, node, entry.get("doc", ""), "default" in entry))
        if not fields:
            raise self.fail(path, "a record needs at least one field")
        return Node("record", fields=tuple(fields), name=avro["name"])


def parse_schema(avro: dict, where: str) -> Node:
    """The root record of an .avsc document as a Node tree; SchemaError names `where` and the field path."""
    if not isinstance(avro, dict) or avro.get("type") != "record":
        raise SchemaError(f"{where}: the schema must be a record")
    return _Reader(where).node(avro, "")


def resolve(root: Node, path: str) -> Node | None:
    """The node at a rule path (`a.b`, `items[].x`, `tags[]`), or None when the path names no field."""
    node = root
    for part in path.split("."):
        elements = 0
        while part.endswith("[]"):
            part, elements = part[:-2], elements + 1
        if node.kind != "record":
            return None
        node = next((f.type for f in node.fields if f.name == part), None)
        for _ in range(elements):
            if node is None or node.kind != "array":
                return None
            node = node.items
        if node is None:
            return None
    return node


def full_name(avro: dict) -> str:
    """The record's fully-qualified Avro name (namespace.name): its schema name in the Glue Schema Registry."""
    return f"{avro['namespace']}.{avro['name']}" if avro.get("namespace") else avro["name"]
