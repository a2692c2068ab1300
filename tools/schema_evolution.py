"""Evolve the event schema: registry version, catalog tables, streaming jobs, in that order.

The procedure (docs/operations.md "Schema evolution"):
  1. check   the new schema file against the registry's versions under the schema's compatibility
             mode, locally (tools/avro_compat.py): a refusal here changes nothing;
  2. register the new version in the Glue Schema Registry and wait for its status; FAILURE (the
             registry's own compatibility verdict) stops here, nothing else changed;
  3. stop    the streaming jobs that are running, and wait until they have stopped;
  4. update  the catalog tables' columns (each source table and the lake table) from the same
             file, keeping partition keys, parameters, location and SerDe;
  5. restart the jobs stopped in step 3 (a job reads its table's schema when it starts);
  6. then    roll out producers that write the new schema (not done by this tool).
Producers come last so that no record of the new shape reaches a job still running on the old
table. Re-running the command after a failure is safe: every step first compares and skips what
is already done.

Catalog columns are derived from the schema file with the same rules as glue_jobs/schema.py
(tests/ops/test_schema_evolution.py proves they agree on glue_jobs/schemas/event.avsc).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from glue_jobs import schema as event_schema
from tools import avro_compat, jobs
from tools.errors import ToolError

# TableInput keys UpdateTable accepts that GetTable returns (the rest are read-only metadata).
_TABLE_INPUT_KEYS = (
    "Name", "Description", "Owner", "LastAccessTime", "LastAnalyzedTime", "Retention", "StorageDescriptor",
    "PartitionKeys", "ViewOriginalText", "ViewExpandedText", "TableType", "Parameters", "TargetTable",
)
_REGISTRY_WAIT_S = 60


# ----------------------------------------------------------------------------------------------
# Columns from a schema file (same mapping as glue_jobs/schema.py, applied to any file)


def contract_columns(schema: avro_compat.Schema, where: str) -> list[tuple[str, str, str]]:
    """(name, wire Glue type, doc) per field; only the types the pipeline can store are allowed."""
    columns = []
    for f in schema.root["fields"]:
        avro_type = f["type"]
        if isinstance(avro_type, list):
            non_null = [t for t in avro_type if t != "null"]
            if len(non_null) != 1 or "null" not in avro_type:
                raise ToolError(f"{where}: field {f['name']!r}: only [\"null\", T] unions are supported")
            avro_type = non_null[0]
        if not isinstance(avro_type, str) or avro_type not in event_schema._AVRO_TYPES:
            allowed = ", ".join(event_schema._AVRO_TYPES)
            raise ToolError(f"{where}: field {f['name']!r}: Avro type {json.dumps(avro_type)} is not supported "
                            f"by the lake (allowed: {allowed}, or [\"null\", one of them])")
        columns.append((f["name"], event_schema._AVRO_TYPES[avro_type][0], f.get("doc", "")))
    return columns


def source_columns(schema: avro_compat.Schema, where: str) -> list[tuple[str, str, str]]:
    return contract_columns(schema, where)


def lake_columns(schema: avro_compat.Schema, where: str) -> list[tuple[str, str, str]]:
    stored = [(n, event_schema._STORED_OVERRIDES.get(n, (t,))[0], d) for n, t, d in contract_columns(schema, where)]
    return stored + [(name, glue, "") for name, glue, _ in event_schema.INGESTION_COLUMNS]


def read_schema_file(path: str) -> tuple[str, avro_compat.Schema]:
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise ToolError(f"--schema-file {path!r}: cannot read it ({exc.strerror})") from None
    parsed = avro_compat.parse(text, where=str(file))
    # The registry stores the definition text; compact JSON keeps versions comparable.
    return json.dumps(parsed.root, separators=(",", ":")), parsed


# ----------------------------------------------------------------------------------------------
# The plan


@dataclass
class TableChange:
    """One catalog table and what the new schema changes in it.

    A registry-backed table (StorageDescriptor.SchemaReference, the MSK source table) takes its
    columns from the registry: its column list is left alone (empty) and a pinned
    SchemaVersionNumber is moved to the new version instead.
    """

    database: str
    name: str
    current: dict  # GetTable's Table
    new_columns: list[dict]
    new_version: int | None = None  # set for registry-backed tables whose pin must move

    @property
    def descriptor(self) -> dict:
        return self.current.get("StorageDescriptor", {})

    @property
    def current_columns(self) -> list[dict]:
        return self.descriptor.get("Columns", [])

    @property
    def registry_backed(self) -> bool:
        return "SchemaReference" in self.descriptor and not self.current_columns

    @property
    def pinned_version(self) -> int | str | None:
        """The pinned SchemaVersionNumber (a long in the table API), or the pinned SchemaVersionId."""
        reference = self.descriptor.get("SchemaReference", {})
        return reference.get("SchemaVersionNumber") or reference.get("SchemaVersionId")

    def diff_lines(self) -> list[str]:
        if self.registry_backed:
            return [f"schema version {self.pinned_version} -> {self.new_version}"] if self._pin_moves else []
        old = {c["Name"]: c["Type"] for c in self.current_columns}
        new = {c["Name"]: c["Type"] for c in self.new_columns}
        lines = [f"+ {n} {t}" for n, t in new.items() if n not in old]
        lines += [f"- {n} {t}" for n, t in old.items() if n not in new]
        lines += [f"~ {n} {old[n]} -> {t}" for n, t in new.items() if n in old and old[n] != t]
        if not lines and [c["Name"] for c in self.current_columns] != list(new):
            lines.append("~ column order")
        return lines

    @property
    def _pin_moves(self) -> bool:
        return self.pinned_version is not None and self.new_version is not None and self.pinned_version != self.new_version

    @property
    def needed(self) -> bool:
        if self.registry_backed:
            return self._pin_moves
        return [(c["Name"], c["Type"]) for c in self.current_columns] != [
            (c["Name"], c["Type"]) for c in self.new_columns
        ]

    def table_input(self) -> dict:
        table_input = {k: self.current[k] for k in _TABLE_INPUT_KEYS if k in self.current}
        descriptor = dict(table_input.get("StorageDescriptor", {}))
        if self.registry_backed:
            reference = dict(descriptor["SchemaReference"])
            reference["SchemaVersionNumber"] = self.new_version
            reference.pop("SchemaVersionId", None)  # the reference takes a number or an id, not both
            descriptor["SchemaReference"] = reference
        else:
            descriptor["Columns"] = self.new_columns
        table_input["StorageDescriptor"] = descriptor
        return table_input


@dataclass
class Plan:
    registry: str
    schema_name: str
    compatibility: str
    latest_version: int
    definition: str
    register: bool
    tables: list[TableChange]
    jobs_to_stop: dict[str, jobs.Run]  # job name -> its active run
    idle_jobs: list[str]
    problems: list[str] = field(default_factory=list)

    @property
    def table_updates(self) -> list[TableChange]:
        return [t for t in self.tables if t.needed]

    def lines(self) -> list[str]:
        out = [f"schema {self.registry}/{self.schema_name} (compatibility {self.compatibility}, "
               f"latest version {self.latest_version})"]
        out.append(f"1. check compatibility ({self.compatibility}) against the registry: "
                   + ("REFUSED" if self.problems else "ok"))
        out += [f"     {p}" for p in self.problems]
        out.append("2. register schema version " + (
            f"{self.latest_version + 1}" if self.register else f"- skipped, version {self.latest_version} is identical"))
        restart = bool(self.table_updates)
        if restart and self.jobs_to_stop:
            out.append("3. stop streaming jobs: " + ", ".join(
                f"{name} (run {run.run_id})" for name, run in self.jobs_to_stop.items()))
        else:
            out.append("3. stop streaming jobs - skipped, " + (
                "no table changes" if not restart else "none running"))
        if self.table_updates:
            out.append("4. update catalog tables:")
            for table in self.table_updates:
                out.append(f"     {table.database}.{table.name}: " + "; ".join(table.diff_lines()))
        else:
            out.append("4. update catalog tables - skipped, columns already match")
        out.append("5. restart streaming jobs: " + (
            ", ".join(self.jobs_to_stop) if restart and self.jobs_to_stop else "- skipped, none stopped"))
        if self.idle_jobs:
            out.append(f"     not running before, left stopped: {', '.join(self.idle_jobs)}")
        out.append("6. then roll out producers writing the new schema (outside this tool)")
        return out


@dataclass(frozen=True)
class Targets:
    """What the procedure touches, from the stack outputs."""

    registry: str
    schema_name: str
    database: str
    source_tables: dict[str, str]  # source -> table
    lake_table: str
    streaming_jobs: dict[str, str]  # source -> job name


def _registry_versions(glue, schema_id: dict, latest: int, need_all: bool) -> list[avro_compat.Schema]:
    numbers = range(1, latest + 1) if need_all else [latest]
    versions = []
    for number in numbers:
        try:
            version = glue.get_schema_version(SchemaId=schema_id, SchemaVersionNumber={"VersionNumber": number})
        except Exception as exc:  # deleted versions leave gaps in the numbering
            if "EntityNotFound" in type(exc).__name__ or "EntityNotFound" in str(exc):
                continue
            raise
        if version.get("Status", "AVAILABLE") == "AVAILABLE":
            versions.append(avro_compat.parse(version["SchemaDefinition"], where=f"registry version {number}"))
    return versions


def build_plan(glue, targets: Targets, schema_file: str) -> Plan:
    definition, new = read_schema_file(schema_file)
    new_source = [_column(n, t, d) for n, t, d in source_columns(new, schema_file)]
    new_lake = [_column(n, t, d) for n, t, d in lake_columns(new, schema_file)]

    schema_id = {"RegistryName": targets.registry, "SchemaName": targets.schema_name}
    info = glue.get_schema(SchemaId=schema_id)
    if info.get("DataFormat", "AVRO") != "AVRO":
        raise ToolError(f"schema {targets.schema_name!r} has data format {info.get('DataFormat')}, not AVRO")
    mode = info.get("Compatibility", "BACKWARD")
    latest = int(info.get("LatestSchemaVersion", 0))
    existing = _registry_versions(glue, schema_id, latest, need_all=mode.endswith("_ALL")) if latest else []
    latest_text = existing[-1].root if existing else None
    register = latest_text != new.root
    problems = avro_compat.compatibility_problems(mode, new, existing) if register else []

    # The number the new version gets; execute() corrects it with the registry's answer.
    next_version = latest + 1 if register else latest
    tables = [
        TableChange(targets.database, table, _get_table(glue, targets.database, table), new_source, next_version)
        for table in targets.source_tables.values()
    ]
    tables.append(TableChange(targets.database, targets.lake_table,
                              _get_table(glue, targets.database, targets.lake_table), new_lake))
    for table in tables:
        table.new_columns = _with_existing_comments(table.current_columns, table.new_columns)

    to_stop, idle = {}, []
    for job_name in targets.streaming_jobs.values():
        run = jobs.current_run(glue, job_name)
        if run is not None:
            to_stop[job_name] = run
        else:
            idle.append(job_name)
    return Plan(targets.registry, targets.schema_name, mode, latest, definition, register, tables, to_stop, idle,
                problems)


def _column(name: str, glue_type: str, doc: str) -> dict:
    column = {"Name": name, "Type": glue_type}
    if doc:
        column["Comment"] = doc[:255]
    return column


def _with_existing_comments(current: list[dict], new: list[dict]) -> list[dict]:
    """Keep a column's existing comment when its name and type are unchanged."""
    existing = {c["Name"]: c for c in current}
    out = []
    for column in new:
        old = existing.get(column["Name"])
        if old is not None and old.get("Type") == column["Type"] and "Comment" in old:
            column = {**column, "Comment": old["Comment"]}
        out.append(column)
    return out


def _get_table(glue, database: str, name: str) -> dict:
    from botocore.exceptions import ClientError

    try:
        return glue.get_table(DatabaseName=database, Name=name)["Table"]
    except ClientError as exc:
        raise ToolError(f"catalog table {database}.{name}: {exc.response.get('Error', {}).get('Code')}: "
                        f"{exc.response.get('Error', {}).get('Message')}") from None


# ----------------------------------------------------------------------------------------------
# Execution


def execute(glue, plan: Plan, *, say: Callable[[str], None] = print, sleep: Callable[[float], None] = time.sleep,
            stop_timeout_s: float = 600) -> None:
    if plan.problems:
        raise ToolError(
            f"the new schema is not {plan.compatibility}-compatible with the registry; nothing was changed:\n  "
            + "\n  ".join(plan.problems)
        )
    if plan.register:
        version = register_version(glue, plan, sleep=sleep)
        say(f"2. registered {plan.registry}/{plan.schema_name} version {version}")
        for table in plan.tables:
            if table.new_version is not None:
                table.new_version = version
    updates = plan.table_updates
    if not updates:
        say("catalog tables already match the schema; jobs left as they are")
        return
    stopped = []
    for job_name, run in plan.jobs_to_stop.items():
        final = jobs.stop(glue, job_name, wait=True, timeout_s=stop_timeout_s, sleep=sleep)
        if final is not None:
            stopped.append(job_name)
            say(f"3. stopped {job_name} (run {run.run_id}: {final.state})")
    try:
        for table in updates:
            glue.update_table(DatabaseName=table.database, TableInput=table.table_input())
            say(f"4. updated {table.database}.{table.name}: " + "; ".join(table.diff_lines()))
    except Exception:
        if stopped:
            say("tables NOT all updated; these jobs are stopped and were left stopped: " + ", ".join(stopped)
                + ". Fix the cause and re-run this command, then start them with `python -m tools job start`.")
        raise
    for job_name in stopped:
        run_id = jobs.start(glue, job_name)
        say(f"5. restarted {job_name}: run {run_id}")
    say("6. now roll out producers writing the new schema")


def register_version(glue, plan: Plan, *, sleep: Callable[[float], None] = time.sleep) -> int:
    from botocore.exceptions import ClientError

    schema_id = {"RegistryName": plan.registry, "SchemaName": plan.schema_name}
    try:
        response = glue.register_schema_version(SchemaId=schema_id, SchemaDefinition=plan.definition)
    except ClientError as exc:
        error = exc.response.get("Error", {})
        raise ToolError(f"the registry refused the new version: {error.get('Code')}: {error.get('Message')}; "
                        "nothing else was changed") from None
    version_id, number, status = response["SchemaVersionId"], response.get("VersionNumber"), response.get("Status")
    waited = 0.0
    # The registry checks compatibility asynchronously: PENDING, then AVAILABLE or FAILURE.
    while status == "PENDING" and waited < _REGISTRY_WAIT_S:
        sleep(1)
        waited += 1
        status = glue.get_schema_version(SchemaVersionId=version_id).get("Status")
    if status == "FAILURE":
        raise ToolError(
            f"the registry marked version {number} FAILURE: not {plan.compatibility}-compatible with the "
            f"existing versions. Nothing else was changed. (The failed version stays listed in the registry; "
            f"delete it with `aws glue delete-schema-versions` if you want the number back.)"
        )
    if status != "AVAILABLE":
        raise ToolError(f"version {number} is still {status} after {_REGISTRY_WAIT_S}s; nothing else was changed. "
                        "Re-run once the registry shows it AVAILABLE.")
    return int(number)
