"""Evolve a dataset's schema: check, deploy, restart the jobs, then producers.

The stack owns the schema versions (infra/catalog.py): every committed file
datasets/<name>/schema.v<N>.avsc is a registry version of the dataset's schema (v1 the AWS::Glue::Schema,
each later one an AWS::Glue::SchemaVersion), the tables' columns come from the newest, and the job package
carries the files (a Kafka job checks the registry's versions against them when it starts). This tool does not
register versions or edit tables (that would drift from the stack); it runs the procedure around the deploy
(docs/operations.md "Schema evolution"), for one dataset (`--dataset`):
  1. check   the schema file against the registry's versions: its latest and its checkpoint version
             (GetSchema SchemaCheckpoint; operations/avro_compat.evolution_problems says why both), and against
             the lake's rules at any depth (glue_jobs/dataset_evolution.py: add an optional field, never
             change a type, a decimal, a name). A refusal here changes nothing.
  2. deploy  if the registry does not have it yet: the tool prints what to commit and the deploy
             command, and stops (nothing changed). `make diff` shows the version added, no replacement.
  3. verify  once deployed: the registry's latest version is the file, the tables' columns match it.
  4. restart the streaming jobs of the dataset's sources that are running (stop, wait, start): a job loads
             the new package and table when it starts.
  5. then    roll out producers that write the new schema (not done by this tool).
Producers come last so that no record of the new shape reaches a job still running the old package.
Re-running after a failure is safe: every step compares first.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from glue_jobs import schema as event_schema
from glue_jobs.dataset_evolution import evolution_problems as lake_problems
from glue_jobs.dataset_types import Node, SchemaError, parse_schema
from glue_jobs.datasets import Dataset
from operations import avro_compat, jobs
from operations.errors import ToolError

# ----------------------------------------------------------------------------------------------
# Columns from a schema file: what the stack derives from a version (infra/catalog.py), at any depth


def schema_node(dataset: Dataset, root: dict, where: str) -> Node:
    try:
        return parse_schema(root, where)
    except SchemaError as error:
        raise ToolError(f"{where}: {error} (dataset {dataset.name})") from None


def source_columns(dataset: Dataset, node: Node) -> list[tuple[str, str]]:
    """(name, Catalog type) of a Kinesis source table carrying the dataset at this schema version."""
    return dataclasses.replace(dataset, schema=node).source_columns()


def lake_columns(dataset: Dataset, node: Node) -> list[tuple[str, str]]:
    """(name, Catalog type) of the dataset's lake table at this schema version."""
    stored = dataclasses.replace(dataset, schema=node).columns(catalog=True)
    return stored + [(name, glue) for name, glue, _ in event_schema.INGESTION_COLUMNS]


def read_schema_file(path: str) -> tuple[str, avro_compat.Schema]:
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise ToolError(f"--schema-file {path!r}: cannot read it ({exc.strerror})") from None
    parsed = avro_compat.parse(text, where=str(file))
    # The registry stores the definition text; compact JSON keeps versions comparable.
    return json.dumps(parsed.root, separators=(",", ":")), parsed


def newest_file(dataset: Dataset) -> str:
    return f"datasets/{dataset.name}/schema.v{dataset.latest_version}.avsc"


# ----------------------------------------------------------------------------------------------
# The plan


@dataclass(frozen=True)
class Targets:
    """What the procedure touches, from the stack outputs."""

    dataset: Dataset
    registry: str
    schema_name: str
    database: str
    source_tables: dict[str, str]  # source -> table
    lake_table: str
    streaming_jobs: dict[str, str]  # source -> job name


@dataclass
class Plan:
    registry: str
    schema_name: str
    compatibility: str
    latest_version: int
    checkpoint_version: int
    definition: str
    deployed: bool  # the registry's latest version is the file
    next_file: str  # where the file is committed when it is not deployed yet
    problems: list[str] = field(default_factory=list)  # compatibility and lake-rule refusals
    drift: list[str] = field(default_factory=list)  # deployed, but a table does not follow it
    jobs_to_restart: dict[str, jobs.Run] = field(default_factory=dict)  # job name -> its active run, on older code
    redeployed_jobs: dict[str, jobs.Run] = field(default_factory=dict)  # job name -> its run started by/after the deploy
    idle_jobs: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        out = [f"schema {self.registry}/{self.schema_name} (compatibility {self.compatibility}, latest version "
               f"{self.latest_version}, checkpoint version {self.checkpoint_version})"]
        out.append(f"1. check compatibility ({self.compatibility}) against versions {self.latest_version} (latest) and "
                   f"{self.checkpoint_version} (checkpoint), and the lake's rules: " + ("REFUSED" if self.problems else "ok"))
        out += [f"     {p}" for p in self.problems]
        if not self.deployed:
            out.append(f"2. deploy: not in the registry yet. Commit the file as {self.next_file}, review `make diff` "
                       "(a schema version added, no replacement), deploy (`npx cdk deploy '<env>/*'`), then run this "
                       "command again to restart the jobs")
            return out
        out.append(f"2. deploy - done: registry version {self.latest_version} is the file")
        out.append("3. verify the catalog tables follow it: " + ("DRIFT" if self.drift else "ok"))
        out += [f"     {d}" for d in self.drift]
        out.append("4. restart streaming jobs: " + (", ".join(
            f"{name} (run {run.run_id})" for name, run in self.jobs_to_restart.items()) or "- none running older code"))
        if self.redeployed_jobs:
            out.append("     already restarted by the deploy (the job keeper's deploy step), left running: " + ", ".join(
                f"{name} (run {run.run_id})" for name, run in self.redeployed_jobs.items()))
        if self.idle_jobs:
            out.append(f"     not running, left stopped (they load the new schema when started): {', '.join(self.idle_jobs)}")
        out.append("5. then roll out producers writing the new schema (outside this tool)")
        return out


def _registry_version(glue, schema_id: dict, number: int) -> avro_compat.Schema | None:
    try:
        version = glue.get_schema_version(SchemaId=schema_id, SchemaVersionNumber={"VersionNumber": number})
    except Exception as exc:  # deleted versions leave gaps in the numbering
        if "EntityNotFound" in type(exc).__name__ or "EntityNotFound" in str(exc):
            return None
        raise
    if version.get("Status", "AVAILABLE") != "AVAILABLE":
        return None
    return avro_compat.parse(version["SchemaDefinition"], where=f"registry version {number}")


def committed_file_for(dataset: Dataset, definition_root: dict) -> tuple[str, str]:
    """(the file this schema is, or would be, committed as; "newest", "older" or "not committed")."""
    for number in dataset.versions:
        if dataset.avro(number) == definition_root:
            return f"datasets/{dataset.name}/schema.v{number}.avsc", "newest" if number == dataset.latest_version else "older"
    return f"datasets/{dataset.name}/schema.v{dataset.latest_version + 1}.avsc", "not committed"


def build_plan(glue, targets: Targets, schema_file: str) -> Plan:
    dataset = targets.dataset
    definition, new = read_schema_file(schema_file)
    node = schema_node(dataset, new.root, schema_file)
    new_source, new_lake = source_columns(dataset, node), lake_columns(dataset, node)

    schema_id = {"RegistryName": targets.registry, "SchemaName": targets.schema_name}
    info = glue.get_schema(SchemaId=schema_id)
    if info.get("DataFormat", "AVRO") != "AVRO":
        raise ToolError(f"schema {targets.schema_name!r} has data format {info.get('DataFormat')}, not AVRO")
    mode = info.get("Compatibility", "BACKWARD")
    latest = int(info.get("LatestSchemaVersion", 0))
    checkpoint = int(info.get("SchemaCheckpoint", 1) or 1)
    by_number = {n: _registry_version(glue, schema_id, n) for n in range(1, latest + 1)}
    existing = [v for v in by_number.values() if v is not None]
    deployed = bool(latest) and by_number.get(latest) is not None and by_number[latest].root == new.root
    next_file, committed = committed_file_for(dataset, new.root)
    problems = []
    if not deployed:
        available = [n for n, v in by_number.items() if v is not None]
        at = available.index(checkpoint) + 1 if checkpoint in available else 1
        problems = avro_compat.evolution_problems(mode, new, existing, checkpoint=at) if existing else []
        if existing:
            # The lake holds rows of every deployed version: the newest must be able to read them all.
            deployed_node = schema_node(dataset, existing[-1].root, f"registry version {available[-1]}")
            problems += [f"lake rules vs version {available[-1]}: {p}" for p in lake_problems(deployed_node, node)]
    plan = Plan(targets.registry, targets.schema_name, mode, latest, checkpoint, definition, deployed, next_file, problems)
    if not deployed:
        return plan
    if committed != "newest":
        where = f"is {next_file}, not the newest committed version" if committed == "older" else \
            f"is not committed in this checkout (it would be {next_file})"
        plan.drift.append(f"the deployed file {where}: run the tool from the checkout that was deployed")
    for table in targets.source_tables.values():
        plan.drift += _table_drift(glue, targets.database, table, new_source)
    plan.drift += _table_drift(glue, targets.database, targets.lake_table, new_lake)
    for job_name in targets.streaming_jobs.values():
        run = jobs.current_run(glue, job_name)
        if run is None:
            plan.idle_jobs.append(job_name)
        elif _started_on_the_deployed_code(glue, job_name, run):
            plan.redeployed_jobs[job_name] = run
        else:
            plan.jobs_to_restart[job_name] = run
    return plan


def _started_on_the_deployed_code(glue, job_name: str, run: jobs.Run) -> bool:
    """Whether the run started after the job's definition last changed: the deploy that registered the version also
    changed the dataset_digest in the job's --sources, and the job keeper's deploy step (infra/job_keeper.py) restarted the run.
    A run that started in the same instant is counted as older code: restarting it once more is the safe side."""
    modified = glue.get_job(JobName=job_name)["Job"].get("LastModifiedOn")
    return run.started_on is not None and modified is not None and run.started_on > modified


def _table_drift(glue, database: str, name: str, expected: list[tuple[str, str]]) -> list[str]:
    """Whether a deployed table's columns are the file's (the stack derives them from the newest version)."""
    descriptor = _get_table(glue, database, name).get("StorageDescriptor", {})
    columns = [(c["Name"], c["Type"]) for c in descriptor.get("Columns", [])]
    return [] if columns == expected else [f"{database}.{name} columns do not match the file: the deploy has not "
                                           "updated it (re-deploy)"]


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
            f"the new schema is refused (registry {plan.compatibility} compatibility or the lake's rules); nothing was "
            "changed:\n  "
            + "\n  ".join(plan.problems)
        )
    if not plan.deployed:
        say(f"nothing changed: commit the file as {plan.next_file} and deploy first (step 2 above)")
        return
    if plan.drift:
        raise ToolError("the deployed catalog does not follow the schema; nothing was changed:\n  " + "\n  ".join(plan.drift))
    for job_name, run in plan.jobs_to_restart.items():
        final = jobs.stop(glue, job_name, wait=True, timeout_s=stop_timeout_s, sleep=sleep)
        say(f"4. stopped {job_name} (run {run.run_id}: {final.state if final else 'already ended'})")
        run_id = jobs.start(glue, job_name)
        say(f"4. restarted {job_name}: run {run_id}")
    say("5. now roll out producers writing the new schema")
