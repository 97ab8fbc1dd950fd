"""Helpers for the console tests: `durables console` as a child process on a free port,
plain HTTP requests to it, and headless Chromium (Debian's) driven by Playwright."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from .cli_support import SCRIPT

CHROMIUM = Path(os.environ.get("DURABLES_TEST_CHROMIUM", "/usr/bin/chromium"))
START_TIMEOUT_S = 20.0
SCREENSHOTS = os.environ.get("DURABLES_SCREENSHOTS") == "1"
"""Set to 1 to (re)write the screenshots of docs/console.md."""
DOCS = Path(__file__).resolve().parent.parent / "docs"


@dataclass(frozen=True)
class Console:
    """A running console: its base URL and process."""

    base: str
    process: subprocess.Popen[str]

    def get(self, path: str, headers: Mapping[str, str] | None = None) -> tuple[int, str]:
        return request(self.base + path, headers=headers)

    def post(
        self, path: str, body: object, headers: Mapping[str, str] | None = None
    ) -> tuple[int, str]:
        return request(self.base + path, json.dumps(body).encode(), headers)


def request(
    url: str, data: bytes | None = None, headers: Mapping[str, str] | None = None
) -> tuple[int, str]:
    """(status, body) of a GET, or a POST of JSON `data`; redirects are not followed."""
    sent = {"content-type": "application/json", **(headers or {})}
    req = urllib.request.Request(url, data=data, headers=sent, method="POST" if data else "GET")
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(req, timeout=10) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


@contextmanager
def console(
    url: str, namespace: str, *options: str, env: Mapping[str, str] | None = None
) -> Iterator[Console]:
    """`durables console --port 0 OPTIONS` until the block ends (then terminated)."""
    command = [
        str(SCRIPT),
        "--url",
        url,
        "--namespace",
        namespace,
        "console",
        "--port",
        "0",
        *options,
    ]
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # "serving the console (...) on http://h:p/ ..."
        if "http://" not in line:
            process.kill()
            raise AssertionError(
                f"console did not start: {line!r} {process.stderr.read()!r}"
                if process.stderr
                else line
            )
        base = line.split(" on ", 1)[1].split("/ ", 1)[0]
        _wait_answering(base)
        yield Console(base, process)
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


def _wait_answering(base: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            request(base + "/api/state")
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def chromium_or_skip() -> Path:
    if not CHROMIUM.exists() or shutil.which(str(CHROMIUM)) is None:
        if os.environ.get("CI") == "true":
            raise AssertionError(f"CI needs {CHROMIUM} (apt-get install chromium)")
        pytest.skip(f"no {CHROMIUM}: apt-get install chromium")
    return CHROMIUM


def screenshot(page: Any, name: str) -> None:
    """docs/console-NAME.png, when DURABLES_SCREENSHOTS=1."""
    if SCREENSHOTS:
        page.screenshot(path=str(DOCS / f"console-{name}.png"))
