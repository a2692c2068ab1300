"""`python -m operations dataset new`: a dataset drafted from sample records, with what it guessed said."""

from __future__ import annotations

import json

import pytest

from glue_jobs import datasets
from operations import cli
from operations.dataset_draft import draft, write_draft
from operations.errors import ToolError

SAMPLES = [
    {"trip_id": "t-1", "started": "2026-11-20T10:00:00+01:00", "rider": {"id": "r-1", "vip": True},
     "stops": [{"lat": 52.5, "seq": 1}], "fare_cents": 1250, "meter": 5_000_000_000},
    {"trip_id": "t-2", "started": "2026-11-20T11:00:00.5Z", "rider": {"id": "r-2"},
     "stops": [{"lat": 52, "seq": 2}, {"lat": 52.1, "seq": 3}], "fare_cents": 900, "meter": 7, "note": "late"},
]


def test_types_optional_fields_key_and_event_time_are_guessed_and_said():
    schema, contract, notes = draft("trips", SAMPLES)
    assert schema["fields"] == [
        {"name": "trip_id", "type": "string"},
        {"name": "started", "type": "string"},
        {"name": "rider", "type": {"type": "record", "name": "Rider", "fields": [
            {"name": "id", "type": "string"}, {"name": "vip", "type": ["null", "boolean"], "default": None}]}},
        {"name": "stops", "type": {"type": "array", "items": {"type": "record", "name": "StopsItem", "fields": [
            {"name": "lat", "type": "double"}, {"name": "seq", "type": "int"}]}}},
        {"name": "fare_cents", "type": "int"},
        {"name": "meter", "type": "long"},
        {"name": "note", "type": ["null", "string"], "default": None},
    ]
    assert contract["key"] == ["trip_id"] and contract["event_time"] == {"field": "started", "format": "iso8601"}
    assert "stops[].lat: integers and fractions seen: double (use a decimal for money)" in notes
    assert "note: missing or null in 1 of 2 samples: optional" in notes
    assert any(n.startswith("event time: started") for n in notes) and "key: trip_id (unique in the samples)" in notes


def test_a_draft_is_a_loadable_dataset_once_its_version_is_pinned(tmp_path, monkeypatch, capsys):
    sample = tmp_path / "trips.jsonl"
    sample.write_text("\n".join(json.dumps(s) for s in SAMPLES) + "\n")
    monkeypatch.setenv(datasets.ROOT_VARIABLE, str(tmp_path / "datasets"))
    (tmp_path / "datasets").mkdir()
    assert cli.main(["dataset", "new", "trips", "--sample", str(sample)]) == 0
    assert "guessed:" in capsys.readouterr().out
    assert datasets.load("trips", draft=True).event_time.field == "started"
    assert datasets.load("trips", draft=True).unknown_fields == "reject"  # written out: dataset.json says what happens
    assert json.loads((tmp_path / "datasets" / "trips" / "dataset.json").read_text())["unknown_fields"] == "reject"
    assert cli.main(["dataset", "new", "rides", "--sample", str(sample), "--unknown-fields", "keep"]) == 0
    assert datasets.load("rides", draft=True).unknown_fields == "keep"
    assert dict(datasets.load("rides", draft=True).columns())["_unknown_fields"] == "string"
    with pytest.raises(datasets.DatasetError, match='add "schema.v1.avsc": "'):
        datasets.load("trips")  # not pinned: nothing deploys a draft
    with pytest.raises(ToolError, match="exists: a drafted dataset never overwrites one"):
        write_draft(tmp_path / "datasets", "trips", sample)


def test_bad_samples_are_named_by_line(tmp_path):
    sample = tmp_path / "bad.jsonl"
    sample.write_text('{"a": 1}\n[1, 2]\n{oops\n')
    with pytest.raises(ToolError, match="2 line\\(s\\) are not records: line 2: not a JSON object; line 3: not JSON"):
        write_draft(tmp_path, "x", sample)


def test_a_name_or_field_avro_refuses_is_refused_before_anything_is_written(tmp_path):
    """1d225b0 wrote `Sensor-Readings/`, and then every synth failed; now nothing is written and the one line says why
    (a sample key Avro refuses, such as `firm-ware`, was refused by the draft already)."""
    sample = tmp_path / "s.jsonl"
    sample.write_text('{"id": "a", "firm-ware": "1.2", "at": "2026-11-20T10:00:00Z"}\n')
    with pytest.raises(ToolError, match=r"field 'firm-ware' is not a name Avro and the lake accept"):
        write_draft(tmp_path / "datasets", "sensor", sample)
    sample.write_text('{"id": "a", "at": "2026-11-20T10:00:00Z"}\n')
    with pytest.raises(ToolError, match=r"nothing written: the drafted dataset would not load: Sensor-Readings: the folder name must match"):
        write_draft(tmp_path / "datasets", "Sensor-Readings", sample)
    assert not (tmp_path / "datasets").exists()


def _with(tmp_path, monkeypatch, *, fields=None, rules=None) -> list[str]:
    """The problems of a dataset `d` whose schema has `fields` (after an id) and whose contract has `rules`."""
    folder = tmp_path / "datasets" / "d"
    folder.mkdir(parents=True)
    schema = {"type": "record", "name": "D", "fields": [{"name": "id", "type": "string"},
                                                        {"name": "at", "type": "long"}, *(fields or [])]}
    (folder / "schema.v1.avsc").write_text(json.dumps(schema))
    (folder / "dataset.json").write_text(json.dumps({"key": ["id"], "event_time": {"field": "at", "format": "epoch_millis"},
                                                     "rules": rules or {}}))
    monkeypatch.setenv(datasets.ROOT_VARIABLE, str(tmp_path / "datasets"))
    with pytest.raises(datasets.DatasetError) as raised:
        datasets.load("d", draft=True)
    return raised.value.problems


@pytest.mark.parametrize("fields,rules,message", [
    ([{"name": "firm-ware", "type": "string"}], None, "d/schema.v1.avsc: the schema: field 'firm-ware' is not an Avro name"),
    ([{"name": "state", "type": {"type": "enum", "name": "State", "symbols": ["ok", "not ok"]}}], None,
     "d/schema.v1.avsc: state: enum symbols must be unique and match"),
    ([{"name": "level", "type": ["null", "int"], "default": "none"}], None,
     "d/schema.v1.avsc: level: the default of a ['null', T] union must be null"),
    ([{"name": "level", "type": "int", "default": "none"}], None, 'd/schema.v1.avsc: level: the default "none" is not a int'),
    ([{"name": "level", "type": "int"}], {"level": {"min": 100, "max": 0}}, "rules.level.min"),
    ([{"name": "code", "type": "string"}], {"code": {"min_length": 3, "max_length": 2}}, "rules.code.min_length"),
])
def test_dataset_files_avro_or_the_contract_would_refuse_later_are_refused_when_read(tmp_path, monkeypatch, fields,
                                                                                    rules, message):
    """Checked where every tool, synth and both jobs read the files (glue_jobs/datasets.py), naming the file and field:
    1d225b0 accepted each of these and failed at registration, at run time, or never (a rule no value passes)."""
    problems = _with(tmp_path, monkeypatch, fields=fields, rules=rules)
    assert any(message in p for p in problems), problems


def test_pin_names_the_digest_refuses_when_the_check_failed_and_pins_when_it_passed(tmp_path, monkeypatch, capsys):
    """`dataset check --pin`'s last step (operations/cli.py _pin), without Spark: a drafted version not pinned is named
    with the line to add; a failed check does not pin it (exit 3, the lock untouched); a passed one writes the digest
    glue_jobs.datasets then accepts, so the dataset loads as committed."""
    monkeypatch.setenv(datasets.ROOT_VARIABLE, str(tmp_path))
    sample = tmp_path / "s.jsonl"
    sample.write_text('{"id": "a1", "at": "2026-01-01T00:00:00Z"}\n{"id": "a2", "at": "2026-01-01T00:01:00Z"}\n')
    write_draft(tmp_path, "things", sample)
    digest = datasets.file_digest((tmp_path / "things" / "schema.v1.avsc").read_bytes())
    with pytest.raises(datasets.DatasetError, match="has no digest"):
        datasets.load("things")

    assert cli._pin("things", pin=False, refused=False) == 0
    assert f'run again with --pin (it adds "schema.v1.avsc": "{digest}"' in capsys.readouterr().out
    assert cli._pin("things", pin=False, refused=True) == 3
    assert "schema.v1.avsc not pinned: records fail the contract" in capsys.readouterr().err
    assert not (tmp_path / "things" / "schemas.lock.json").exists()

    assert cli._pin("things", pin=True, refused=False) == 0
    assert "pinned schema.v1.avsc" in capsys.readouterr().out
    assert json.loads((tmp_path / "things" / "schemas.lock.json").read_text()) == {"schema.v1.avsc": digest}
    assert datasets.load("things").latest_version == 1  # committed now
    assert cli._pin("things", pin=True, refused=False) == 0 and capsys.readouterr().out == ""  # pinned already: nothing to do
