"""Where things live in the lake: hour partitions, compaction outputs, and the hidden _compaction area.

    <lake>/event_date=YYYY-MM-DD/event_hour=H/<data files>           written by streaming, replaced here
    <lake>/_compaction/journal/<run_id>/<partition>/plan.json         intent: the exact input files
    <lake>/_compaction/journal/<run_id>/<partition>/staged.json       commit point: verified outputs
    <lake>/_compaction/staging/<run_id>/<partition>/attempt-N/        Spark output before publishing
    <lake>/_compaction/history/<partition>.json                       the last finished compaction
    <lake>/_compaction/sizing.json                                    learned output/input byte ratio

Everything under `_compaction` is invisible to Spark and Athena (leading underscore), and it sits at
the lake root, outside every partition, so readers of a partition never see staging or journals.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from glue_jobs.lake.storage import is_hidden

CONTROL_DIR = "_compaction"
DATA_SUFFIX = ".parquet"
OUTPUT_PREFIX = "compacted-"

_RUN_ID_RE = r"\d{8}T\d{6}Z-[0-9a-f]{6}"
_OUTPUT_RE = re.compile(rf"^{OUTPUT_PREFIX}(?P<run_id>{_RUN_ID_RE})-(?P<n>\d{{5}})\.snappy\.parquet$")
RUN_ID_RE = re.compile(rf"^{_RUN_ID_RE}$")
_DATE_DIR_RE = re.compile(r"^event_date=(\d{4}-\d{2}-\d{2})$")
_HOUR_DIR_RE = re.compile(r"^event_hour=(\d{1,2})$")


@dataclass(frozen=True, order=True)
class HourPartition:
    """One event_date/event_hour partition; `key` keeps the directory names exactly as found."""

    start: datetime  # UTC start of the hour
    date_dir: str
    hour_dir: str

    @classmethod
    def for_hour(cls, start: datetime) -> HourPartition:
        start = start.astimezone(timezone.utc).replace(minute=0, second=0, microsecond=0)
        return cls(start, f"event_date={start:%Y-%m-%d}", f"event_hour={start.hour}")

    @classmethod
    def from_dirs(cls, date_dir: str, hour_dir: str) -> HourPartition | None:
        """The partition for two directory names, or None when they are not partition directories."""
        date_match, hour_match = _DATE_DIR_RE.match(date_dir), _HOUR_DIR_RE.match(hour_dir)
        if not date_match or not hour_match or int(hour_match.group(1)) > 23:
            return None
        try:
            day = datetime.strptime(date_match.group(1), "%Y-%m-%d").replace(tzinfo=timezone.utc)
        except ValueError:
            return None
        return cls(day + timedelta(hours=int(hour_match.group(1))), date_dir, hour_dir)

    @property
    def key(self) -> str:
        return f"{self.date_dir}/{self.hour_dir}"

    @property
    def end(self) -> datetime:
        return self.start + timedelta(hours=1)

    def __str__(self) -> str:
        return self.key


def parse_hour(text: str) -> datetime:
    """'2026-01-01T05' (UTC) -> the start of that hour; ValueError with the expected format otherwise."""
    try:
        return datetime.strptime(text, "%Y-%m-%dT%H").replace(tzinfo=timezone.utc)
    except ValueError:
        raise ValueError(f"hour {text!r} is not in the form YYYY-MM-DDTHH (UTC), e.g. 2026-01-01T05") from None


def new_run_id(now: datetime) -> str:
    return f"{now.astimezone(timezone.utc):%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"


def output_name(run_id: str, index: int) -> str:
    return f"{OUTPUT_PREFIX}{run_id}-{index:05d}.snappy.parquet"


def output_run_id(name: str) -> str | None:
    """The run that wrote a compaction output, or None for any other file."""
    match = _OUTPUT_RE.match(name)
    return match.group("run_id") if match else None


def is_data_file(name: str) -> bool:
    """Every visible Parquet file in a partition is data, whoever wrote it."""
    return not is_hidden(name) and name.endswith(DATA_SUFFIX)


@dataclass(frozen=True)
class LakePaths:
    root: str

    @property
    def control(self) -> str:
        return f"{self.root}/{CONTROL_DIR}"

    @property
    def journal_root(self) -> str:
        return f"{self.control}/journal"

    @property
    def staging_root(self) -> str:
        return f"{self.control}/staging"

    @property
    def sizing(self) -> str:
        return f"{self.control}/sizing.json"

    def partition(self, p: HourPartition) -> str:
        return f"{self.root}/{p.key}"

    def journal(self, run_id: str, p: HourPartition) -> str:
        return f"{self.journal_root}/{run_id}/{p.key}"

    def staging(self, run_id: str, p: HourPartition) -> str:
        return f"{self.staging_root}/{run_id}/{p.key}"

    def history(self, p: HourPartition) -> str:
        return f"{self.control}/history/{p.date_dir}/{p.hour_dir}.json"
