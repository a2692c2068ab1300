"""Datasets a team might route from one stream by a `kind` field, written as files only (a datasets folder of their
own): page views (kind a string), checkouts (kind an enum, a decimal total) and sensor readings (kind a string, a
nested device). None of them is a shipped dataset."""

from __future__ import annotations

import json
from pathlib import Path

from glue_jobs import datasets

T = 1_699_999_200_000  # 2023-11-14T22:00Z
_TIME = {"field": "at", "format": "epoch_millis", "not_before": "2020-01-01T00:00:00Z", "max_future": "PT1H"}
SCHEMAS = {
    "page_views": [{"name": "event_id", "type": "string"}, {"name": "kind", "type": "string"}, {"name": "at", "type": "long"},
                   {"name": "url", "type": "string"}],
    "checkouts": [{"name": "event_id", "type": "string"},
                  {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["checkout", "refund_requested"]}},
                  {"name": "at", "type": "long"},
                  {"name": "total", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}}],
    "sensor_readings": [{"name": "event_id", "type": "string"}, {"name": "kind", "type": "string"}, {"name": "at", "type": "long"},
                        {"name": "device", "type": {"type": "record", "name": "Device", "fields": [{"name": "id", "type": "string"}]}},
                        {"name": "value", "type": "double"}],
}
ROUTES = {"page_view": "page_views", "checkout": "checkouts", "reading": "sensor_readings"}


def write_routed_datasets(root: Path) -> Path:
    """The three datasets' folders under `root`/datasets; returns that folder."""
    folder = root / "datasets"
    for name, fields in SCHEMAS.items():
        own = folder / name
        own.mkdir(parents=True)
        (own / "schema.v1.avsc").write_text(json.dumps({"type": "record", "name": name.title().replace("_", ""),
                                                        "namespace": "com.example.routed", "fields": fields}))
        (own / "dataset.json").write_text(json.dumps({"description": f"{name} routed by kind", "key": ["event_id"],
                                                      "event_time": _TIME}))
        (own / "schemas.lock.json").write_text(json.dumps({"schema.v1.avsc": datasets.file_digest((own / "schema.v1.avsc").read_bytes())}))
    return folder


def page_view(event_id: str, minute: int = 0, **changes) -> str:
    return json.dumps({"event_id": event_id, "kind": "page_view", "at": T + 60_000 * minute, "url": "/home", **changes})


def checkout(event_id: str, minute: int = 0, **changes) -> str:
    return json.dumps({"event_id": event_id, "kind": "checkout", "at": T + 60_000 * minute, "total": 12.5, **changes})


def reading(event_id: str, minute: int = 0, **changes) -> str:
    return json.dumps({"event_id": event_id, "kind": "reading", "at": T + 60_000 * minute, "device": {"id": "d-1"}, "value": 21.5, **changes})
