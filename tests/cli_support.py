"""Helpers for the CLI tests: the `durables` command run in-process, and its modules."""

from __future__ import annotations

import dataclasses
import importlib
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click
from click.testing import CliRunner, Result

# The package directory is cli/, installed as `durables_cli` by setuptools' editable finder,
# which mypy cannot follow: so the modules are looked up at run time and typed here.
CLI: click.Group = importlib.import_module("durables_cli.main").cli
exits: Any = importlib.import_module("durables_cli.exits")
interrupts: Any = importlib.import_module("durables_cli.interrupts")
property_value: Any = importlib.import_module("durables_cli.channels").property_value
tour: Any = importlib.import_module("durables_cli.tour")  # what `durables demo` runs

SCRIPT = Path(sys.executable).parent / "durables"
LINE_TIMEOUT_S = 20.0
BINARY_REPR = repr(b"\x00\xff")


def describe(result: Result) -> str:
    """Everything a failed assertion needs: exit code, both streams, any exception."""
    return (
        f"exit {result.exit_code}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}\n"
        f"exception: {result.exception!r}"
    )


def library_json(value: object) -> Any:
    """What the library returns, as JSON would carry it (tuples become lists)."""
    if isinstance(value, list):
        return [library_json(v) for v in value]
    assert dataclasses.is_dataclass(value) and not isinstance(value, type)
    return json.loads(json.dumps(dataclasses.asdict(value), default=str))


class Cli:
    """The `durables` command, run in-process against the test server and namespace."""

    def __init__(self, url: str | None, namespace: str, env: Mapping[str, str] | None = None):
        self.prefix = ["--namespace", namespace] + (["--url", url] if url else [])
        self.env = dict(env or {})

    def __call__(self, *args: str, input: str | bytes | None = None) -> Result:
        return CliRunner().invoke(CLI, [*self.prefix, *args], input=input, env=self.env)

    def ok(self, *args: str, input: str | bytes | None = None) -> str:
        """stdout of a command that must succeed."""
        result = self(*args, input=input)
        assert result.exit_code == exits.OK, describe(result)
        return result.stdout

    def json(self, *args: str) -> Any:
        return json.loads(self.ok(*args, "--json"))

    def fails(self, code: int, message: str, *args: str, input: str | None = None) -> Result:
        """Run a command that must end with `code` and say `message` on stderr, no traceback."""
        result = self(*args, input=input)
        assert result.exit_code == code, describe(result)
        assert message in result.stderr, describe(result)
        assert "Traceback" not in result.output
        assert isinstance(result.exception, SystemExit), describe(result)
        return result
