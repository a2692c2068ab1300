"""glue_jobs.datasets: the shipped datasets, their pinned versions, and bad dataset files refused with every
problem named (dataset, key, value, what is allowed). No Spark: the module imports without pyspark."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from glue_jobs import datasets, schema
from glue_jobs.datasets import DatasetError
from infra.config import REPO_ROOT

GOOD_SCHEMA = {"type": "record", "name": "Thing", "fields": [
    {"name": "id", "type": "string"}, {"name": "at", "type": "long"},
    {"name": "parts", "type": {"type": "array", "items": {"type": "record", "name": "Part", "fields": [
        {"name": "n", "type": "int"}]}}},
]}
GOOD_CONTRACT = {"description": "things", "key": ["id"], "event_time": {"field": "at", "format": "epoch_millis"},
                 "rules": {"parts[].n": {"min": 1}}}


def _write(root, name, contract, schema=GOOD_SCHEMA, lock=True):
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "dataset.json").write_text(json.dumps(contract))
    (folder / "schema.v1.avsc").write_text(json.dumps(schema))
    if lock:
        digest = datasets.file_digest((folder / "schema.v1.avsc").read_bytes())
        (folder / "schemas.lock.json").write_text(json.dumps({"schema.v1.avsc": digest}))
    return folder


@pytest.fixture
def root(tmp_path, monkeypatch):
    monkeypatch.setenv(datasets.ROOT_VARIABLE, str(tmp_path))
    return tmp_path


def test_shipped_datasets(monkeypatch):
    monkeypatch.delenv(datasets.ROOT_VARIABLE, raising=False)
    found = datasets.load_all()
    assert sorted(found) == ["checkouts", "clickstream", "orders", "page_views"]  # checkouts, page_views: dev's `events`
    clickstream, orders = found["clickstream"], found["orders"]
    # clickstream is today's event, byte for byte
    # its versions have one home, datasets/clickstream/: glue_jobs.schema (the registry's
    # EventSchema, the Catalog's clickstream tables) reads every version there, byte for byte
    shipped = sorted(p.name for p in (REPO_ROOT / "datasets/clickstream").glob("schema.v*.avsc"))
    assert shipped == [f"schema.v{n}.avsc" for n in clickstream.versions]
    for n in clickstream.versions:
        assert (REPO_ROOT / f"datasets/clickstream/schema.v{n}.avsc").read_bytes() == \
            schema.schema_text(n).encode("utf-8"), n
    assert not (REPO_ROOT / "glue_jobs/schemas").exists()
    assert schema.schema_versions() == clickstream.versions
    assert clickstream.key == ("event_id",) and clickstream.event_time.format == "epoch_millis"
    assert clickstream.avro_full_name == "com.streamlake.events.Event"
    assert dict(orders.columns(catalog=True)) == {
        "order_id": "string", "ordered_at": "timestamp", "customer_id": "string", "status": "string", "currency": "string",
        "total": "decimal(12,2)", "items": "array<struct<sku:string,quantity:int,unit_price:decimal(10,2)>>",
        "shipping": "struct<country:string,city:string,express:boolean>", "coupons": "map<string,int>",
    }
    assert orders.event_time.field == "ordered_at" and orders.event_time.format == "iso8601"
    assert orders.rule("items[].quantity").min == 1


def test_every_problem_is_listed_at_once(root):
    _write(root, "bad", {
        "description": "", "key": ["nope"], "event_time": {"field": "id", "format": "epoch_nanos", "max_future": "24h"},
        "rules": {"parts[].n": {"min": "1", "pattern": "x"}, "ghost": {"min": 1}, "id": {"normalize": ["title"]}},
        "json_text": ["at"], "table_format": "delta", "unknown_fields": "ignore", "owner": "me",
    })
    with pytest.raises(DatasetError) as error:
        datasets.load("bad")
    assert error.value.problems == [
        "bad: owner: 'me' is not a dataset.json key (keys: description, key, event_time, rules, json_text, table_format, unknown_fields)",
        "bad: description: '' must be a non-empty string",
        "bad: key: 'nope' is not a top-level field of the schema (fields: id, at, parts)",
        "bad: event_time.format: 'epoch_nanos' is not one of epoch_millis, epoch_seconds, iso8601",
        "bad: event_time.max_future: '24h' must be an ISO-8601 duration of days, hours, minutes, seconds (PT24H)",
        "bad: json_text: 'at' must name a top-level field of type string (its JSON text is stored)",
        "bad: rules.parts[].n.min: '1' must be a finite JSON number",
        "bad: rules.parts[].n.pattern: 'x' does not apply to a field of type int (applies to string, enum)",
        "bad: rules.ghost: 'ghost' names no field of the schema (paths: a.b for a nested field, items[].x for each element's)",
        "bad: rules.id.normalize: ['title'] must be a list of distinct steps from trim, lower, upper",
        "bad: table_format: 'delta' is not one of parquet, iceberg",
        "bad: unknown_fields: 'ignore' is not one of reject, keep, drop",
    ]


def test_load_all_names_every_bad_dataset(root):
    _write(root, "one", {**GOOD_CONTRACT, "key": []})
    _write(root, "two", {**GOOD_CONTRACT, "event_time": {"field": "id", "format": "epoch_millis"}})
    _write(root, "fine", GOOD_CONTRACT)
    with pytest.raises(DatasetError) as error:
        datasets.load_all()
    assert error.value.problems == [
        "one: key: [] must be a non-empty list of distinct field names",
        "two: event_time.field: 'id' must be a required long for format epoch_millis (it is string)",
    ]


@pytest.mark.parametrize(("schema_change", "message"), [
    ({"type": ["string", "int"]}, "a union must be ['null', T]"),
    ({"type": {"type": "fixed", "name": "F", "size": 4}}, "fixed is supported only as a decimal"),
    ({"type": {"type": "bytes", "logicalType": "decimal", "precision": 40, "scale": 2}}, "decimal precision must be an integer 1-38"),
    ({"type": {"type": "int", "logicalType": "timestamp-millis"}}, "logicalType 'timestamp-millis' annotates long"),
    ({"type": "null"}, "type 'null' is not supported"),
])
def test_unsupported_schema_types_name_the_field(root, schema_change, message):
    schema = json.loads(json.dumps(GOOD_SCHEMA))
    schema["fields"].append({"name": "extra", **schema_change})
    _write(root, "odd", GOOD_CONTRACT, schema)
    with pytest.raises(DatasetError, match=r"odd: odd/schema.v1.avsc: extra: " + message.replace("[", r"\[").replace("(", r"\(")):
        datasets.load("odd")


def test_a_committed_version_cannot_change(root):
    folder = _write(root, "pinned", GOOD_CONTRACT)
    (folder / "schema.v1.avsc").write_text(json.dumps(GOOD_SCHEMA, indent=1))
    with pytest.raises(DatasetError, match="pinned: schema.v1.avsc changed after its digest was pinned in schemas.lock.json"):
        datasets.load("pinned")


def test_a_new_version_says_what_to_pin(root):
    _write(root, "unpinned", GOOD_CONTRACT, lock=False)
    digest = datasets.file_digest((root / "unpinned/schema.v1.avsc").read_bytes())
    with pytest.raises(DatasetError, match=f'add "schema.v1.avsc": "{digest}"'):
        datasets.load("unpinned")


def test_the_digest_follows_the_contract(root):
    _write(root, "a", GOOD_CONTRACT)
    _write(root, "b", {**GOOD_CONTRACT, "rules": {"parts[].n": {"min": 2}}})
    assert datasets.load("a").digest != datasets.load("b").digest


def test_committed_lock_entries_never_change():
    """A version pinned in the last commit keeps its digest (a committed version never changes)."""
    for lock in sorted(REPO_ROOT.glob("datasets/*/schemas.lock.json")):
        relative = lock.relative_to(REPO_ROOT).as_posix()
        shown = subprocess.run(["git", "show", f"HEAD:{relative}"], cwd=REPO_ROOT, capture_output=True, text=True)
        if shown.returncode != 0:
            continue  # a new dataset
        committed, current = json.loads(shown.stdout), json.loads(lock.read_text())
        assert {k: current.get(k) for k in committed} == committed, relative


def test_the_module_imports_without_pyspark_or_cdk():
    code = ("import sys; sys.modules['pyspark'] = None; sys.modules['aws_cdk'] = None; "
            "from glue_jobs import datasets; print(sorted(datasets.load_all()))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['checkouts', 'clickstream', 'orders', 'page_views']"


@pytest.mark.parametrize("name", ["events", "source_orders", "dead_letters_x", "Orders", "9lives"])
def test_a_dataset_name_must_not_collide_or_break_names(root, name):
    _write(root, name, GOOD_CONTRACT)
    with pytest.raises(DatasetError, match=f"{name}: the folder name"):
        datasets.load(name)


def _node(fields: list[dict]):
    from glue_jobs.dataset_types import parse_schema

    return parse_schema({"type": "record", "name": "R", "fields": fields}, "test")


ITEM = {"type": "record", "name": "Item", "fields": [{"name": "n", "type": "int"}]}
BASE = [{"name": "id", "type": "string"}, {"name": "items", "type": {"type": "array", "items": ITEM}},
        {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
        {"name": "note", "type": ["null", "string"], "default": None}]


def _with_item_fields(*fields):
    return [BASE[0], {"name": "items", "type": {"type": "array", "items": {**ITEM, "fields": [*ITEM["fields"], *fields]}}}, *BASE[2:]]


@pytest.mark.parametrize(("new_fields", "problems"), [
    (BASE + [{"name": "extra", "type": ["null", "int"], "default": None}], []),
    (_with_item_fields({"name": "sku", "type": ["null", "string"], "default": None}), []),  # optional, depth 2
    (BASE + [{"name": "extra", "type": "int"}], ["extra: a new required field (rule: add-optional-field)"]),
    (_with_item_fields({"name": "sku", "type": "string"}), ["items[].sku: a new required field (rule: add-optional-field)"]),
    ([BASE[0], {"name": "items", "type": {"type": "array", "items": {**ITEM, "fields": [{"name": "n", "type": "long"}]}}}, *BASE[2:]],
     ["items[].n: int -> long (rule: keep-type)"]),
    ([*BASE[:2], {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}}, BASE[3]],
     ["price: decimal(10,2) -> decimal(12,2) (rule: keep-decimal)"]),
    ([BASE[0], BASE[1], BASE[3], {"name": "cost", "type": BASE[2]["type"]}],
     ["price: gone (rule: no-rename-or-removal)", "cost: a new required field (rule: add-optional-field)"]),
    ([*BASE[:3], {"name": "note", "type": "string"}], ["note: optional -> required (rule: keep-optional)"]),
])
def test_evolution_rules_name_themselves_at_any_depth(new_fields, problems):
    from glue_jobs.dataset_evolution import evolution_problems

    assert evolution_problems(_node(BASE), _node(new_fields)) == problems


def test_shipped_datasets_evolve_within_the_rules_and_the_diff_says_so(monkeypatch):
    monkeypatch.delenv(datasets.ROOT_VARIABLE, raising=False)
    from devtools.diff import dataset_check

    line, problems = dataset_check()
    assert problems == [] and line.startswith("Datasets: checkouts v1 (contract ")
    shipped = [f"{name} v1 (contract {datasets.load(name).digest})"
               for name in ("checkouts", "clickstream", "orders", "page_views")]
    assert line == f"Datasets: {', '.join(shipped)}; every version keeps what the lake and the registry can read"


def test_an_evolution_the_lake_cannot_read_fails_the_diff(root):
    _write(root, "evolving", GOOD_CONTRACT)
    v2 = json.loads(json.dumps(GOOD_SCHEMA))
    v2["fields"][2]["type"]["items"]["fields"][0]["type"] = "long"  # parts[].n: int -> long
    folder = root / "evolving"
    (folder / "schema.v2.avsc").write_text(json.dumps(v2))
    lock = json.loads((folder / "schemas.lock.json").read_text())
    lock["schema.v2.avsc"] = datasets.file_digest((folder / "schema.v2.avsc").read_bytes())
    (folder / "schemas.lock.json").write_text(json.dumps(lock))
    from devtools.diff import dataset_check

    line, problems = dataset_check()
    assert problems == ["evolving v2: parts[].n: int -> long (rule: keep-type)"]
    assert "1 evolution problem(s): refused" in line
