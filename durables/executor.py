"""The one place that sends operations to the server.

Everything else builds `Op`s (pure data) and reads typed results. Here alone:
EVALSHA with a reload after NOSCRIPT (a restarted server has no scripts), pipelining
several operations into one round trip, and the translation of every server error
into our tree (by prefix: `durables.replies.translate`) and of every broken socket
into `ConnectionLostError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from . import scripts
from .errors import ConnectionLostError
from .replies import error_word, translate

if TYPE_CHECKING:
    from redis import Redis

    from .ops.base import Op

T = TypeVar("T")
LOST = (RedisConnectionError, RedisTimeoutError)


def lost(exc: BaseException, context: str) -> ConnectionLostError:
    where = f"{context}: " if context else ""
    return ConnectionLostError(f"{where}lost the connection to the server: {exc}")


class Executor:
    """Sends operations over one redis-py connection pool (thread-safe, as the pool is)."""

    def __init__(self, redis: Redis) -> None:
        self.redis = redis

    def run(self, op: Op[T]) -> T:
        """Send one operation and parse its reply; our errors for error replies."""
        try:
            try:
                reply = self._send(op)
            except NoScriptError:
                self._load(op)
                reply = self._send(op)
        except ResponseError as exc:
            if error_word(exc)[0] not in op.tolerate:
                raise translate(exc, op.context) from exc
            reply = exc
        except LOST as exc:
            raise lost(exc, op.context) from exc
        return op.parse(reply)

    def run_all(self, ops: Sequence[Op[Any]]) -> list[Any]:
        """Send operations in one pipeline (one round trip), in order; parsed replies.

        Every operation runs even if an earlier one fails; then the first error reply is
        raised. A script the server did not know is loaded and only that call is sent
        again, so nothing else in the pipeline runs twice.
        """
        if len(ops) == 1:
            return [self.run(ops[0])]
        context = ops[0].context if ops else ""
        try:
            pipe = self.redis.pipeline(transaction=False)
            for op in ops:
                pipe.execute_command(*self._wire(op))  # type: ignore[no-untyped-call]
            replies: list[Any] = pipe.execute(raise_on_error=False)
            for i, reply in enumerate(replies):
                if isinstance(reply, NoScriptError):
                    self._load(ops[i])
                    replies[i] = self._send_capturing(ops[i])
        except LOST as exc:
            raise lost(exc, context) from exc
        for op, reply in zip(ops, replies, strict=True):
            if isinstance(reply, ResponseError) and error_word(reply)[0] not in op.tolerate:
                raise translate(reply, op.context) from reply
        return [op.parse(reply) for op, reply in zip(ops, replies, strict=True)]

    def load_scripts(self) -> None:
        """Load every script in one round trip, so no pipeline meets a NOSCRIPT: done at
        connect (a script missing mid-pipeline would be sent again alone, after the rest)."""
        try:
            pipe = self.redis.pipeline(transaction=False)
            for name in scripts.NAMES:
                pipe.script_load(scripts.source(name))
            pipe.execute()
        except LOST as exc:
            raise lost(exc, "loading scripts") from exc
        except ResponseError as exc:
            raise translate(exc, "loading scripts") from exc

    def close(self) -> None:
        self.redis.close()

    @staticmethod
    def _wire(op: Op[Any]) -> tuple[Any, ...]:
        return op.wire(scripts.sha(op.script)) if op.script is not None else op.args

    def _send(self, op: Op[Any]) -> Any:
        return self.redis.execute_command(*self._wire(op))  # type: ignore[no-untyped-call]

    def _send_capturing(self, op: Op[Any]) -> Any:
        try:
            return self._send(op)
        except ResponseError as exc:
            return exc

    def _load(self, op: Op[Any]) -> None:
        if op.script is None:
            raise AssertionError(f"NOSCRIPT for a plain command {op.args[:1]}")
        self.redis.script_load(scripts.source(op.script))


__all__ = ["Executor", "lost"]
