"""What a new schema version of a dataset may change: the rules the lake can live with, at any depth.

A lake table's files keep every version's rows, so a later version may only add to what readers see:

| rule | allowed | refused |
|---|---|---|
| `add-optional-field` | a new field that is ["null", T], at any depth | a new required field (old rows have no value for it) |
| `keep-type` | the same type; an enum gaining symbols; a field becoming optional | another type (int -> long too: Parquet columns keep their type) |
| `keep-decimal` | the same precision and scale | another precision or scale |
| `no-rename-or-removal` | every field of the version before | a field gone (a rename is a removal and an addition) |
| `keep-optional` | | an optional field made required (old rows hold nulls) |

The Schema Registry checks BACKWARD compatibility too (operations/avro_compat.py); these are stricter. Used by
the dataset tests (`make test`) and `make diff`; pure Python.
"""

from __future__ import annotations

from glue_jobs.dataset_types import Node


def evolution_problems(old: Node, new: Node, path: str = "") -> list[str]:
    """Each change from `old` to `new` the lake cannot live with, as 'path: what (rule: name)'."""
    here = path or "the record"
    if old.kind != new.kind:
        return [f"{here}: {old.kind} -> {new.kind} (rule: keep-type)"]
    problems: list[str] = []
    if old.required is False and new.required is True and path:
        problems.append(f"{path}: optional -> required (rule: keep-optional)")
    if old.kind == "decimal" and (old.precision, old.scale) != (new.precision, new.scale):
        problems.append(f"{here}: decimal({old.precision},{old.scale}) -> decimal({new.precision},{new.scale}) (rule: keep-decimal)")
    if old.kind in ("array", "map"):
        problems += evolution_problems(old.items, new.items, f"{path}[]")
    if old.kind == "record":
        new_fields = {f.name: f for f in new.fields}
        for f in old.fields:
            child = f"{path}.{f.name}" if path else f.name
            if f.name not in new_fields:
                problems.append(f"{child}: gone (rule: no-rename-or-removal)")
            else:
                problems += evolution_problems(f.type, new_fields[f.name].type, child)
        old_names = {f.name for f in old.fields}
        for f in new.fields:
            if f.name not in old_names and f.type.required:
                child = f"{path}.{f.name}" if path else f.name
                problems.append(f"{child}: a new required field (rule: add-optional-field)")
    return problems


def dataset_problems(dataset) -> list[str]:
    """Every committed version of `dataset` against the one before it: 'vN: problem'."""
    from glue_jobs.dataset_types import parse_schema

    nodes = [parse_schema(dataset.avro(v), f"{dataset.name}/schema.v{v}.avsc") for v in dataset.versions]
    problems = []
    for index in range(1, len(nodes)):
        version = dataset.versions[index]
        problems += [f"{dataset.name} v{version}: {p}" for p in evolution_problems(nodes[index - 1], nodes[index])]
    return problems
