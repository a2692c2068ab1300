"""What a compaction run is asked to do: the lake, the target file size, which hours (CompactionSettings)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

MB = 1024 * 1024


@dataclass(frozen=True)
class CompactionSettings:
    lake_path: str
    dataset: str = "clickstream"  # the lake table's dataset: its columns and the key duplicates collapse by
    target_file_bytes: int = 128 * MB
    grace_minutes: int = 15
    lookback_hours: int = 48
    hour: datetime | None = None  # compact this hour only (UTC start), whatever the lookback
    # Which partitions a run looks at: by default those the partitions log names (what the streaming job
    # wrote, of any age); `scan` looks at every hour of the lookback window instead (an operator's tool,
    # e.g. for files written by something other than the streaming job). `hour` overrides both.
    scan: bool = False
    environment: str = "local"
    delete_threads: int = 8

    def __post_init__(self) -> None:
        if self.target_file_bytes < 1024:
            raise ValueError(f"target_file_bytes must be at least 1024, got {self.target_file_bytes}")
        if self.grace_minutes < 0:
            raise ValueError(f"grace_minutes must be 0 or more, got {self.grace_minutes}")
        if self.lookback_hours < 1:
            raise ValueError(f"lookback_hours must be at least 1, got {self.lookback_hours}")
