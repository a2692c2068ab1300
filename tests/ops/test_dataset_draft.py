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
    with pytest.raises(datasets.DatasetError, match='add "schema.v1.avsc": "'):
        datasets.load("trips")  # not pinned: nothing deploys a draft
    with pytest.raises(ToolError, match="exists: a drafted dataset never overwrites one"):
        write_draft(tmp_path / "datasets", "trips", sample)


def test_bad_samples_are_named_by_line(tmp_path):
    sample = tmp_path / "bad.jsonl"
    sample.write_text('{"a": 1}\n[1, 2]\n{oops\n')
    with pytest.raises(ToolError, match="2 line\\(s\\) are not records: line 2: not a JSON object; line 3: not JSON"):
        write_draft(tmp_path, "x", sample)
