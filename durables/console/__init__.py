"""A web console: see and operate channels, durables, consumers and sessions in a browser.

`durables console` serves it (needs the `console` extra: Starlette and uvicorn). Read-only
unless started with `--admin`; bound to 127.0.0.1 unless given a token.
"""

from __future__ import annotations

from .app import ConsoleConfig, create_app

__all__ = ["ConsoleConfig", "create_app"]
