"""A progress line on stderr: redrawn in place on a terminal, a line per 10% otherwise (CI logs)."""

from __future__ import annotations

import sys
import time


class Progress:
    def __init__(self, total: int, *, label: str = "records", stream=None, enabled: bool = True,
                 min_interval_s: float = 0.2) -> None:
        self.total = total
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.min_interval_s = min_interval_s
        self.is_tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._last_draw = 0.0
        self._last_decile = -1
        self.done = 0
        self.retried = 0

    def update(self, done: int, retried: int = 0) -> None:
        self.done, self.retried = done, retried
        if not self.enabled:
            return
        if self.is_tty:
            now = time.monotonic()
            if now - self._last_draw >= self.min_interval_s or done >= self.total:
                self._last_draw = now
                self.stream.write("\r" + self._text())
                self.stream.flush()
        else:
            decile = (10 * done // self.total) if self.total else 10
            if decile != self._last_decile:
                self._last_decile = decile
                self.stream.write(self._text() + "\n")
                self.stream.flush()

    def finish(self) -> None:
        if self.enabled and self.is_tty:
            self.stream.write("\r" + self._text() + "\n")
            self.stream.flush()

    def _text(self) -> str:
        percent = 100 * self.done // self.total if self.total else 100
        width = 30
        filled = width * percent // 100
        bar = "#" * filled + "." * (width - filled)
        retried = f", {self.retried} retried" if self.retried else ""
        return f"[{bar}] {self.done}/{self.total} {self.label} ({percent}%){retried}"
