"""Run ``manage.py conveyor`` in-process and capture what it prints."""

from __future__ import annotations

import json
from dataclasses import dataclass
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError


@dataclass
class Result:
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)

    def lines(self) -> list[str]:
        return self.out.splitlines()


def run(*args: str) -> Result:
    """``manage.py conveyor *args``; raises ``CommandError`` like the shell exits non-zero."""
    out, err = StringIO(), StringIO()
    call_command("conveyor", *args, stdout=out, stderr=err)
    return Result(out.getvalue(), err.getvalue())


def fails(*args: str) -> str:
    """Run a command that must fail; return its one-line error message."""
    return run_failing(*args)[1]


def run_failing(*args: str) -> tuple[Result, str]:
    """Run a command that must fail; return what it printed and its one-line error."""
    out, err = StringIO(), StringIO()
    with pytest.raises(CommandError) as info:
        call_command("conveyor", *args, stdout=out, stderr=err)
    message = str(info.value)
    assert message and "\n" not in message, f"not one line: {message!r}"
    return Result(out.getvalue(), err.getvalue()), message


def table(result: Result) -> list[list[str]]:
    """A human table as rows of cells (header first)."""
    return [line.split() for line in result.lines()]
