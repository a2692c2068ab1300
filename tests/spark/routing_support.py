"""Datasets routed from one stream by a `kind` field: page views and checkouts (a decimal total), which dev's routed
stream `events` ships with (datasets/), and sensor readings with a nested device, a dataset a team adds with files
only (docs/examples/routed/datasets); `kind` an enum in each. No Python names their fields but these record makers."""

from __future__ import annotations

import json
import random
import shutil
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "docs" / "examples" / "routed"
DATASETS = ("checkouts", "page_views", "sensor_readings")
T = 1_699_999_200_000  # 2023-11-14T22:00Z
ROUTES = {"page_view": "page_views", "checkout": "checkouts", "reading": "sensor_readings"}


def write_routed_datasets(root: Path) -> Path:
    """A copy of the three datasets' folders under `root`/datasets (the two shipped ones and the example's); returns
    that folder."""
    for name in DATASETS:
        shipped = REPO / "datasets" / name
        shutil.copytree(shipped if shipped.is_dir() else EXAMPLES / "datasets" / name, root / "datasets" / name)
    return root / "datasets"


def page_view(event_id: str, minute: int = 0, **changes) -> str:
    return json.dumps({"event_id": event_id, "kind": "page_view", "at": T + 60_000 * minute, "url": "/home", "referrer": None, **changes})


def checkout(event_id: str, minute: int = 0, **changes) -> str:
    return json.dumps({"event_id": event_id, "kind": "checkout", "at": T + 60_000 * minute, "total": 12.5, **changes})


def reading(event_id: str, minute: int = 0, **changes) -> str:
    return json.dumps({"event_id": event_id, "kind": "reading", "at": T + 60_000 * minute, "device": {"id": "d-1"}, "value": 21.5, **changes})


@dataclass
class RoutedExpectation:
    """What a routed run must end with: each dataset's valid event ids and bad payloads, and the unroutable payloads."""

    valid: dict[str, list[str]] = field(default_factory=lambda: {name: [] for name in DATASETS})
    bad: dict[str, list[str]] = field(default_factory=lambda: {name: [] for name in DATASETS})
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
