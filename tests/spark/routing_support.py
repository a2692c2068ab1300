"""Datasets a team might route from one stream by a `kind` field, written as files only (a datasets folder of their
own): page views (kind a string), checkouts (kind an enum, a decimal total) and sensor readings (kind a string, a
nested device). None of them is a shipped dataset."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
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


@dataclass
class RoutedExpectation:
    """What a routed run must end with: each dataset's valid event ids and bad payloads, and the unroutable payloads."""

    valid: dict[str, list[str]] = field(default_factory=lambda: {name: [] for name in SCHEMAS})
    bad: dict[str, list[str]] = field(default_factory=lambda: {name: [] for name in SCHEMAS})
    unroutable: list[str] = field(default_factory=list)


def routed_files(folder: Path, *, files: int, per_file: int, seed: int) -> RoutedExpectation:
    """NDJSON files mixing the three datasets (about 5% of each one's records bad), records of a kind no route names,
    without a kind, and lines that are not JSON (together about 6%), and a repeated page view in each file (collapsed
    within its batch)."""
    rng, expect = random.Random(seed), RoutedExpectation()
    folder.mkdir(parents=True)
    makers = {"page_views": (page_view, {"url": 123}), "checkouts": (checkout, {"total": 1.234}),
              "sensor_readings": (reading, {"value": "21.5"})}
    for number in range(files):
        lines = []
        for index in range(per_file):
            event_id, roll = f"f{number}-{index}", rng.random()
            if roll < 0.02:
                line = json.dumps({"event_id": event_id, "kind": "refund", "at": T})
            elif roll < 0.04:
                line = json.dumps({"event_id": event_id, "at": T})
            elif roll < 0.06:
                line = f"not json {event_id}"
            else:
                name = rng.choice(sorted(makers))
                make, breaks = makers[name]
                bad = rng.random() < 0.05
                line = make(event_id, minute=rng.randrange(120), **(breaks if bad else {}))
                (expect.bad if bad else expect.valid)[name].append(line if bad else event_id)
                if not bad and name == "page_views" and index == 0:
                    lines.append(line)  # the same record twice in one file: one row
            if not line.startswith("{") or '"kind"' not in line or '"refund"' in line:
                expect.unroutable.append(line)
            lines.append(line)
        (folder / f"events-{number:05d}.json").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return expect
