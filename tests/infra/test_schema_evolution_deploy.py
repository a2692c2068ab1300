"""Schema evolution as the stack deploys it: a new committed version file is an added registry version,
the tables change in place, the job package carries it, and `make diff` shows no replacement.

clickstream's version files are read through glue_jobs.datasets (`glue_jobs.schema` reads datasets/clickstream/);
these tests point STREAMLAKE_DATASETS at a temporary copy of datasets/ whose clickstream holds the committed
schema.v1.avsc plus a v2 (pinned in its schemas.lock.json), so nothing in the repository changes.
"""

from __future__ import annotations

import json
import shutil
import zipfile

import pytest

from devtools.diff import diff_templates
from devtools.snapshot import normalize, synth_templates
from glue_jobs import datasets, schema
from infra import job_assets
from operations import avro_compat

V1 = json.loads(schema.schema_text(1))


def _v2(extra_fields=(), required=()) -> dict:
    fields = []
    for f in V1["fields"]:
        if f["name"] in required and isinstance(f["type"], list):
            f = {k: v for k, v in f.items() if k != "default"} | {"type": next(t for t in f["type"] if t != "null")}
        fields.append(f)
    return {**V1, "fields": fields + list(extra_fields)}


def use_clickstream_versions(root, monkeypatch, *versions: dict):
    """A copy of datasets/ under `root` whose clickstream has these versions (v1 kept byte for byte, each later
    one pinned in schemas.lock.json), made the datasets folder (STREAMLAKE_DATASETS). Returns clickstream's folder."""
    if not root.exists():
        shutil.copytree(datasets.root(), root)
    folder = root / schema.DATASET
    lock = {"schema.v1.avsc": datasets.file_digest((folder / "schema.v1.avsc").read_bytes())}
    for stale in folder.glob("schema.v*.avsc"):
        if stale.name != "schema.v1.avsc":
            stale.unlink()
    for number, definition in enumerate(versions[1:], start=2):
        path = folder / f"schema.v{number}.avsc"
        path.write_text(json.dumps(definition, indent=2) + "\n", encoding="utf-8")
        lock[path.name] = datasets.file_digest(path.read_bytes())
    (folder / datasets.LOCK_FILE).write_text(json.dumps(lock, indent=2) + "\n", encoding="utf-8")
    monkeypatch.setenv(datasets.ROOT_VARIABLE, str(root))
    assert json.loads(schema.schema_text(1)) == versions[0]
    return folder


@pytest.fixture
def with_versions(tmp_path, monkeypatch):
    return lambda *versions: use_clickstream_versions(tmp_path / "datasets", monkeypatch, *versions)


OPTIONAL_FIELD = {"name": "campaign", "type": ["null", "string"], "default": None, "doc": "marketing campaign id"}


@pytest.mark.e2e
def test_adding_an_optional_field_deploys_as_a_new_version_with_no_replacement(templates, with_versions, tmp_path):
    v2 = _v2([OPTIONAL_FIELD])
    with_versions(V1, v2)
    assert avro_compat.evolution_problems("BACKWARD", avro_compat.parse(v2), [avro_compat.parse(V1)]) == []

    evolved = normalize(synth_templates(["staging"])["staging"])
    changes = diff_templates(normalize(templates["staging"]), evolved)
    kinds = {(c.type, c.kind) for c in changes}
    assert ("AWS::Glue::SchemaVersion", "added") in kinds
    assert not [c for c in changes if c.kind in ("replaced", "removed") or c.deploy_fails or c.data_loss]
    (version,) = [r for r in evolved["Resources"].values() if r["Type"] == "AWS::Glue::SchemaVersion"]
    assert json.loads(version["Properties"]["SchemaDefinition"]) == v2
    tables = {c.logical_id: c for c in changes if c.type == "AWS::Glue::Table"}
    assert sum("column `campaign` added (string)" in c.columns for c in tables.values()) == 2  # lake and Kinesis source
    # staging's MSK topic carries orders (config msk.dataset): its table stays pinned to the orders schema
    assert not [c for c in tables.values() if any("SchemaVersionNumber" in path for path, _, _ in c.changes)]

    package = job_assets.build_package_zip(tmp_path / "package.zip")
    with zipfile.ZipFile(package) as archive:
        assert json.loads(archive.read("datasets/clickstream/schema.v2.avsc")) == v2
        assert json.loads(archive.read("datasets/clickstream/schema.v1.avsc")) == V1
        assert not [name for name in archive.namelist() if name.startswith("glue_jobs/schemas/")]


def test_making_a_field_required_is_refused_with_the_rule_that_refuses_it():
    v2 = _v2(required=("user_id",))
    problems = avro_compat.evolution_problems("BACKWARD", avro_compat.parse(v2), [avro_compat.parse(V1)])
    assert problems and all(p.startswith("BACKWARD vs version 1") for p in problems)
    assert "user_id" in problems[0]


def test_the_check_covers_the_checkpoint_version_too():
    """v3 is compatible with v2 (its latest) but not with v1 (the checkpoint, the registry's default)."""
    with_field = _v2([{"name": "campaign", "type": "string", "default": "none"}])
    without_default = {**with_field, "fields": [
        {k: v for k, v in f.items() if not (f["name"] == "campaign" and k == "default")} for f in with_field["fields"]]}
    v1, v2, v3 = (avro_compat.parse(s) for s in (V1, with_field, without_default))
    assert avro_compat.compatibility_problems("BACKWARD", v3, [v1, v2]) == []  # the latest only: no problem
    problems = avro_compat.evolution_problems("BACKWARD", v3, [v1, v2])
    assert problems and all("vs version 1 (checkpoint)" in p for p in problems)


def test_make_diff_checks_every_committed_version(with_versions):
    from devtools import diff

    with_versions(V1, _v2([OPTIONAL_FIELD]))
    line, problems = diff.schema_check()
    assert (line, problems) == ("Event schema: versions v1, v2 committed; each BACKWARD-compatible with the latest "
                                "version before it and v1 (the checkpoint)", [])
    with_versions(V1, _v2(required=("user_id",)))
    line, problems = diff.schema_check()
    assert "⛔ 1 compatibility problem(s): the deploy would fail" in line
    assert problems == ["v2: BACKWARD vs version 1: Event.user_id: a value of writer branch null cannot be read as string"]


@pytest.mark.e2e
def test_a_nested_optional_field_in_a_dataset_deploys_as_a_new_version_the_kafka_job_reads(templates, tmp_path, monkeypatch):
    """orders v2 adds an optional field inside its line items: the registry gets version 2, the Kafka job's arguments
    name the new dataset digest (it loads and checks v2 at start), the lake table's column changes in place, and no
    resource is replaced."""
    import shutil

    from glue_jobs import datasets
    from glue_jobs.dataset_evolution import dataset_problems

    root = tmp_path / "datasets"
    shutil.copytree(datasets.root(), root)
    v2 = json.loads((root / "orders" / "schema.v1.avsc").read_text())
    items = next(f for f in v2["fields"] if f["name"] == "items")
    items["type"]["items"]["fields"].append({"name": "discount", "type": ["null", "int"], "default": None})
    (root / "orders" / "schema.v2.avsc").write_text(json.dumps(v2, indent=2))
    lock = json.loads((root / "orders" / "schemas.lock.json").read_text())
    lock["schema.v2.avsc"] = datasets.file_digest((root / "orders" / "schema.v2.avsc").read_bytes())
    (root / "orders" / "schemas.lock.json").write_text(json.dumps(lock))
    monkeypatch.setenv(datasets.ROOT_VARIABLE, str(root))
    assert dataset_problems(datasets.load("orders")) == []

    evolved = normalize(synth_templates(["staging"])["staging"])
    changes = diff_templates(normalize(templates["staging"]), evolved)
    assert not [c for c in changes if c.kind in ("replaced", "removed") or c.deploy_fails or c.data_loss]
    (version,) = [c for c in changes if c.type == "AWS::Glue::SchemaVersion"]
    assert version.kind == "added" and "SchemaOrdersVersion2" in version.logical_id
    tables = {c.logical_id: c for c in changes if c.type == "AWS::Glue::Table"}
    (job,) = [c for c in changes if c.type == "AWS::Glue::Job" and c.logical_id.startswith("StreamingJobOrders")]
    (digest,) = [(a, b) for path, a, b in job.changes if path.endswith(".--sources.orders.dataset_digest")]
    assert job.kind == "modified" and digest[1] == datasets.load("orders").digest != digest[0]
    (lake,) = [c for c in tables.values() if c.logical_id.startswith("CatalogLakeTableOrders")]
    assert lake.kind == "modified" and any("items" in column and "discount:int" in column for column in lake.columns)
