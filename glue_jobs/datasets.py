"""Datasets: the files a team writes (`datasets/<name>/`), read into frozen, typed objects.

    datasets/<name>/dataset.json        the contract (keys below; extend, never rename)
    datasets/<name>/schema.v<N>.avsc    Avro schema versions 1..N; a committed version never changes
    datasets/<name>/schemas.lock.json   {"schema.v1.avsc": "<sha256>", ...}: each version's pinned digest

The one reader of those files: the CDK app, both jobs, the local runner, the generator, the benchmarks, the
rehearsal and the tools call `load(name)` / `load_all()` and never read the raw files. It imports neither
pyspark nor aws_cdk, and reads with importlib.resources-style Traversables, so it works from the source
tree and from the `--extra-py-files` zip Glue imports in place (the zip carries `datasets/` beside the
packages: infra/job_assets.py). STREAMLAKE_DATASETS names another folder (tests, a team's own repository).

A bad file raises DatasetError listing every problem at once, each naming the dataset, the key, the bad
value and what is allowed.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

from glue_jobs.dataset_contract import CONTRACT_KEYS, UNKNOWN_FIELDS_COLUMN, EventTime, Rule, read_contract
from glue_jobs.dataset_types import Node, SchemaError, full_name, parse_schema, resolve

ROOT_VARIABLE = "STREAMLAKE_DATASETS"
LOCK_FILE = "schemas.lock.json"
_VERSION_FILE = re.compile(r"^schema\.v([1-9][0-9]*)\.avsc$")
_NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")


class DatasetError(ValueError):
    """Every problem of one or more dataset folders, one per line."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__(f"invalid dataset files ({len(problems)} problem(s)):\n" + "\n".join(f"  {p}" for p in problems))


@dataclass(frozen=True)
class Dataset:
    name: str
    description: str
    key: tuple[str, ...]
    event_time: EventTime
    rules: tuple[Rule, ...]
    json_text: tuple[str, ...]
    table_format: str
    unknown_fields: str  # reject, keep or drop (glue_jobs/dataset_contract.py)
    versions: tuple[int, ...]
    schema: Node  # the newest version's root record
    digest: str  # sha256 over dataset.json and every schema version (20 hex digits): changes when the contract does

    @property
    def latest_version(self) -> int:
        return self.versions[-1]

    def rule(self, path: str) -> Rule | None:
        return next((r for r in self.rules if r.path == path), None)

    def schema_text(self, version: int | None = None) -> str:
        version = self.latest_version if version is None else version
        if version not in self.versions:
            raise ValueError(f"dataset {self.name}: schema version {version} is not committed (have {list(self.versions)})")
        return _folder(self.name).joinpath(f"schema.v{version}.avsc").read_text(encoding="utf-8")

    def avro(self, version: int | None = None) -> dict:
        return json.loads(self.schema_text(version))

    def registry_definition(self, version: int | None = None) -> str:
        """The Schema Registry's SchemaDefinition of a version: the .avsc file, compact and stable."""
        return json.dumps(self.avro(version), separators=(",", ":"), sort_keys=False)

    @property
    def avro_full_name(self) -> str:
        return full_name(self.avro())

    def source_columns(self) -> list[tuple[str, str]]:
        """(name, Catalog type) of the record as it arrives (a stream's source table): dates as strings,
        timestamps and the epoch event time as bigint."""
        return [(f.name, f.type.wire_catalog_type()) for f in self.schema.fields]

    def columns(self, *, catalog: bool = False) -> list[tuple[str, str]]:
        """The dataset's stored columns (name, Spark DDL or, with `catalog`, the Catalog's Hive type), in schema
        order: each field as its type stores it, the event time as a timestamp; then, for a dataset that keeps unknown
        fields, the string column holding them."""
        fields = [(f.name, "timestamp" if f.name == self.event_time.field else
                   f.type.catalog_type() if catalog else f.type.stored_ddl()) for f in self.schema.fields]
        return fields + [(UNKNOWN_FIELDS_COLUMN, "string")] if self.unknown_fields == "keep" else fields


def root():
    """The datasets folder: STREAMLAKE_DATASETS, else `datasets/` beside the glue_jobs package (in the
    source tree and in the job zip alike)."""
    override = os.environ.get(ROOT_VARIABLE)
    if override:
        from pathlib import Path

        return Path(override)
    return resources.files("glue_jobs").parent.joinpath("datasets")


def _folder(name: str):
    return root().joinpath(name)


def names() -> tuple[str, ...]:
    """Every dataset folder (a folder holding a dataset.json), sorted."""
    folder = root()
    if not folder.is_dir():
        raise DatasetError([f"{folder}: no datasets folder"])
    return tuple(sorted(e.name for e in folder.iterdir() if e.is_dir() and e.joinpath("dataset.json").is_file()))


def dataset_name(name: str) -> str:
    """argparse type of a --dataset option: a dataset folder's name, or the error listing the datasets."""
    import argparse

    if name not in names():
        raise argparse.ArgumentTypeError(f"{name!r} is not a dataset (datasets: {', '.join(names())})")
    return name


def chosen(name: str | None, option: str = "--dataset") -> str:
    """The dataset a command works on: `name` when given; else the only dataset there is. With several, none is
    guessed: a lake compacted or a stream read under another dataset's contract is silently wrong (every record a
    dead letter, every column null), so the command refuses, naming them (DatasetError)."""
    if name is not None:
        return name
    found = names()
    if len(found) == 1:
        return found[0]
    raise DatasetError([f"{option} is required: {len(found)} datasets exist ({', '.join(found)})"])


def load(name: str, *, draft: bool = False) -> Dataset:
    """The dataset in folder `name`, read now (a file edited since the last call is read again). `draft`
    accepts a newest version whose digest is not pinned yet (`python -m operations dataset check` of a new file);
    nothing deploys or runs a job from a draft."""
    folder = _folder(name)
    files = tuple(sorted((e.name, e.read_bytes()) for e in folder.iterdir() if e.is_file())) if folder.is_dir() else ()
    return _parse(name, str(folder), files, draft)


def load_all() -> dict[str, Dataset]:
    """Every dataset, checked together: one DatasetError lists the problems of all of them."""
    found, problems = {}, []
    for name in names():
        try:
            found[name] = load(name)
        except DatasetError as error:
            problems += error.problems
    if problems:
        raise DatasetError(problems)
    return found


def file_digest(text: bytes) -> str:
    return hashlib.sha256(text).hexdigest()


@cache
def _parse(name: str, where: str, files: tuple[tuple[str, bytes], ...], draft: bool = False) -> Dataset:
    """The dataset of a folder's files (cached by their bytes: the jobs ask for it once per batch)."""
    contents = dict(files)
    problems: list[str] = []
    if not _NAME.match(name):
        problems.append(f"{name}: the folder name must match {_NAME.pattern} (it names tables, prefixes and metrics)")
    elif name == "events" or name.startswith(("source_", "dead_letters_")):
        problems.append(f"{name}: the folder name is taken by another table of the database (events, source_*, dead_letters_*)")
    if "dataset.json" not in contents:
        raise DatasetError(problems + [f"{name}: dataset.json is missing ({where})"])
    raw_contract = contents["dataset.json"]
    try:
        contract = json.loads(raw_contract)
    except ValueError as error:
        raise DatasetError(problems + [f"{name}: dataset.json is not JSON: {error}"]) from None
    versions, texts = _versions(name, contents, problems, draft)
    schema = None
    if versions:
        try:
            schema = parse_schema(json.loads(texts[versions[-1]]), f"{name}/schema.v{versions[-1]}.avsc")
        except (SchemaError, ValueError) as error:
            problems.append(f"{name}: {error}")
    if not isinstance(contract, dict):
        raise DatasetError(problems + [f"{name}: dataset.json must be an object with keys {', '.join(CONTRACT_KEYS)}"])
    parts = read_contract(name, contract, schema, problems)
    if problems:
        raise DatasetError(problems)
    # 20 hex digits: enough to tell contract versions apart, and unlike a 64-digit asset hash the snapshots keep it.
    digest = hashlib.sha256(raw_contract + b"".join(texts[v].encode() for v in versions)).hexdigest()[:20]
    return Dataset(name=name, versions=tuple(versions), schema=schema, digest=digest, **parts)


def _versions(name: str, contents: dict[str, bytes], problems: list[str], draft: bool = False) -> tuple[list[int], dict[int, str]]:
    """Schema versions 1..N with their texts, each matching its pinned digest in schemas.lock.json."""
    versions = []
    for file_name in contents:
        if file_name.endswith(".avsc"):
            match = _VERSION_FILE.match(file_name)
            if match:
                versions.append(int(match.group(1)))
            else:
                problems.append(f"{name}: {file_name}: schema files are named schema.v<N>.avsc")
    versions.sort()
    if not versions:
        problems.append(f"{name}: no schema.v1.avsc")
    elif versions != list(range(1, len(versions) + 1)):
        problems.append(f"{name}: schema versions must be 1..N without gaps, found {versions}")
    texts = {v: contents[f"schema.v{v}.avsc"] for v in versions}
    try:
        lock = json.loads(contents[LOCK_FILE]) if LOCK_FILE in contents else {}
    except ValueError as error:
        problems.append(f"{name}: {LOCK_FILE} is not JSON: {error}")
        lock = {}
    for version, raw in texts.items():
        file_name, digest = f"schema.v{version}.avsc", file_digest(raw)
        pinned = lock.get(file_name)
        if pinned is None and draft and version == len(texts):
            continue
        if pinned is None:
            problems.append(f'{name}: {file_name} has no digest in {LOCK_FILE}: add "{file_name}": "{digest}" once the '
                            "version is final (a committed version never changes)")
        elif pinned != digest:
            problems.append(f"{name}: {file_name} changed after its digest was pinned in {LOCK_FILE} (pinned {pinned[:12]}..., "
                            f"now {digest[:12]}...): a committed version never changes; add schema.v{len(texts) + 1}.avsc instead")
    for extra in sorted(set(lock) - {f"schema.v{v}.avsc" for v in texts}):
        problems.append(f"{name}: {LOCK_FILE} pins {extra}, which does not exist (a committed version is never removed)")
    return versions, {v: raw.decode("utf-8") for v, raw in texts.items()}


__all__ = ["Dataset", "DatasetError", "EventTime", "Rule", "chosen", "load", "load_all", "names", "resolve", "root"]
