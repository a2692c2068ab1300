"""The one error type the CLI turns into `error: <message>` and exit code 1."""

from __future__ import annotations


class ToolError(Exception):
    """An operation was refused or failed; the message says what and what to do about it."""

    exit_code = 1
