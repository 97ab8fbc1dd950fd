"""How the connector's errors reach a Spark user."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from ..errors import DurablesError

P = ParamSpec("P")
T = TypeVar("T")


class SinkCommitError(DurablesError):
    """A Spark batch could not be committed to its channel (its staged rows were lost)."""


def plain_errors(call: Callable[P, T]) -> Callable[P, T]:
    """Spark shows a failing data source's whole Python traceback; a durables error is
    raised afresh, so the user reads its message, not the redis-py frames under it."""

    @functools.wraps(call)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return call(*args, **kwargs)
        except DurablesError as exc:
            raise exc.with_traceback(None) from None

    return wrapper
