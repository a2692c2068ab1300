"""Reading one mapping of the config document while collecting every problem with its dotted path."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any


def _fmt(value: Any) -> str:
    if isinstance(value, str):
        return repr(value)
    return json.dumps(value)


class _Reader:
    """Reads one mapping of the config, recording every problem with its full dotted path."""

    def __init__(self, data: Any, path: str, problems: list[str]) -> None:
        self.path = path
        self.problems = problems
        if not isinstance(data, dict):
            self.fail("", data, "must be an object")
            data = {}
        self.data = data
        self.used: set[str] = set()

    def fail(self, key: str, value: Any, message: str) -> None:
        where = f"{self.path}.{key}" if key else self.path
        self.problems.append(f"{where}: {_fmt(value)} {message}")

    def _take(self, key: str, default: Any, required: bool) -> tuple[bool, Any]:
        self.used.add(key)
        if key in self.data:
            return True, self.data[key]
        if required:
            self.problems.append(f"{self.path}.{key}: missing (required)")
        return False, default

    def child(self, key: str) -> _Reader:
        found, value = self._take(key, {}, required=True)
        return _Reader(value if found else {}, f"{self.path}.{key}", self.problems)

    def string(
        self,
        key: str,
        *,
        choices: Sequence[str] | None = None,
        pattern: re.Pattern[str] | None = None,
        allowed: str = "",
        optional: bool = False,
        default: str | None = None,
    ) -> Any:
        found, value = self._take(key, default, required=not optional)
        if not found or (optional and value is None):
            return value if found else default
        if not isinstance(value, str):
            self.fail(key, value, "must be a string")
            return default
        if choices is not None and value not in choices:
            self.fail(key, value, f"is not one of {', '.join(choices)}")
            return default
        if pattern is not None and not pattern.match(value):
            self.fail(key, value, f"is not {allowed or 'valid'}")
            return default
        return value

    def integer(
        self, key: str, *, minimum: int, maximum: int, optional: bool = False, default: int | None = None
    ) -> Any:
        found, value = self._take(key, default, required=not optional)
        if not found or (optional and value is None):
            return value if found else default
        # bool is an int subclass in Python; a JSON true is never a count.
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(key, value, f"must be a whole number from {minimum} to {maximum}")
            return default
        if not minimum <= value <= maximum:
            self.fail(key, value, f"is out of range: allowed {minimum} to {maximum}")
            return default
        return value

    def number(self, key: str, *, minimum: float, maximum: float) -> Any:
        found, value = self._take(key, None, required=True)
        if not found:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.fail(key, value, f"must be a number from {minimum} to {maximum}")
            return None
        if not minimum <= value <= maximum:
            self.fail(key, value, f"is out of range: allowed {minimum} to {maximum}")
            return None
        return float(value)

    def boolean(self, key: str) -> Any:
        found, value = self._take(key, None, required=True)
        if found and not isinstance(value, bool):
            self.fail(key, value, "must be true or false")
            return None
        return value

    def string_list(
        self, key: str, *, pattern: re.Pattern[str], allowed: str, min_items: int = 0
    ) -> tuple[str, ...]:
        found, value = self._take(key, [], required=False)
        if not isinstance(value, list):
            self.fail(key, value, "must be a list of strings")
            return ()
        good = []
        for i, item in enumerate(value):
            if not isinstance(item, str) or not pattern.match(item):
                self.fail(f"{key}[{i}]", item, f"is not {allowed}")
            else:
                good.append(item)
        if len(value) < min_items:
            self.fail(key, value, f"must hold at least {min_items} item(s)")
        return tuple(good)

    def finish(self) -> None:
        for key in sorted(set(self.data) - self.used):
            self.problems.append(
                f"{self.path}.{key}: unknown field; allowed: {', '.join(sorted(self.used))}"
            )
