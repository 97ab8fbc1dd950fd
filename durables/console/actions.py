"""What the console may change (only when started with `--admin`): purge or delete a
channel, delete a durable, replay a durable's dead letters, close a session.

Each action has two halves: `impact` says, from the server's state now, what would be
lost (the browser shows it in the confirmation), and `perform` does it through the
library's own calls, as the CLI's commands do.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import durables.aio as aio

from ..errors import ConfigError
from ..figures import ChannelFigures

ACTIONS = ("purge", "delete-channel", "delete-durable", "replay", "close-session")


@dataclass(frozen=True)
class Target:
    """What an action is about, from the request."""

    action: str
    channel: str = ""
    durable: str = ""
    session: str = ""

    @classmethod
    def of(cls, action: str, given: Mapping[str, object]) -> Target:
        if action not in ACTIONS:
            raise ConfigError(f"no action {action!r}; actions: {', '.join(ACTIONS)}")
        fields = {n: given.get(n) for n in ("channel", "durable", "session")}
        if any(v is not None and not isinstance(v, str) for v in fields.values()):
            raise ConfigError("channel, durable and session are strings")
        target = cls(action, **{n: str(v or "") for n, v in fields.items()})
        needed = {
            "close-session": ("session",),
            "delete-durable": ("channel", "durable"),
            "replay": ("channel", "durable"),
        }.get(action, ("channel",))
        missing = [n for n in needed if not getattr(target, n)]
        if missing:
            raise ConfigError(f"{action} needs {' and '.join(missing)}")
        return target

    def described(self) -> str:
        """What the action is on, as the audit log names it."""
        if self.session:
            return f"session {self.session}"
        if self.durable:
            return f"durable {self.channel}/{self.durable}"
        return f"channel {self.channel}"


async def _channel_figures(client: aio.AsyncClient, name: str) -> ChannelFigures:
    figures = await client.figures(alert_count=0)
    for c in figures.channels:
        if c.info.name == name:
            return c
    raise ConfigError(f"channel {name!r} does not exist")


def _plural(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


async def impact(client: aio.AsyncClient, t: Target) -> str:
    """One sentence naming what the action would lose, from the state now."""
    if t.action == "close-session":
        return await _session_impact(client, t.session)
    c = await _channel_figures(client, t.channel)
    if t.action == "purge":
        behind = [
            f"{d.info.name} ({d.info.depth} not yet delivered)" for d in c.durables if d.info.depth
        ]
        lost = (
            f"; durables lose events they have not consumed: {', '.join(behind)}" if behind else ""
        )
        return (
            f"Purge channel {t.channel!r}: its {_plural(c.info.length, 'retained event')} "
            f"are removed for good{lost}."
        )
    if t.action == "delete-channel":
        names = ", ".join(d.info.name for d in c.durables) or "none"
        return (
            f"Delete channel {t.channel!r}: its {_plural(c.info.length, 'event')}, its "
            f"durables ({names}) with their positions and dead letters are lost."
        )
    d = next((d for d in c.durables if d.info.name == t.durable), None)
    if d is None:
        raise ConfigError(f"durable {t.durable!r} does not exist on {t.channel!r}")
    if t.action == "delete-durable":
        return (
            f"Delete durable {t.durable!r} of channel {t.channel!r}: its position, "
            f"{_plural(d.info.depth, 'undelivered event')}, "
            f"{_plural(d.info.transaction_depth, 'unacknowledged event')} and "
            f"{_plural(d.dead_letters, 'dead letter')} are lost to it."
        )
    return (
        f"Replay {_plural(d.dead_letters, 'dead letter')} of durable {t.durable!r}: they "
        f"are published to channel {t.channel!r} again as new events (every durable on it "
        f"gets them) and leave the dead-letter list."
    )


async def _session_impact(client: aio.AsyncClient, session_id: str) -> str:
    figures = await client.figures(alert_count=0)
    s = next((s for s in figures.sessions if s.record.id == session_id), None)
    if s is None:
        raise ConfigError(f"session {session_id!r} does not exist")
    if s.live:
        raise ConfigError(f"session {session_id!r} is live: its client closes it")
    interests = ", ".join(s.record.interests) or "none"
    return (
        f"Close session {session_id!r}: its queue of {_plural(s.queue_depth, 'event')} "
        f"and its interests ({interests}) are discarded; a client that resumes it gets a "
        f"new session."
    )


async def perform(client: aio.AsyncClient, t: Target, address: str = "unknown") -> str:
    """Do it, and note it in the audit log (with `address`, where the request came from);
    a sentence saying what was done."""
    done = await _perform(client, t)
    await client.record_audit(t.action, t.described(), f"console, from {address}", done)
    return done


async def _perform(client: aio.AsyncClient, t: Target) -> str:
    if t.action == "close-session":
        await _session_impact(client, t.session)  # refuses a live one
        closed = await client.discard_session(t.session, "an operator (the web console)")
        return f"closed session {t.session!r}" if closed else f"no session {t.session!r}"
    channel = await client.get_channel(t.channel)
    if t.action == "purge":
        return f"purged {_plural(await channel.purge(), 'event')} from {t.channel!r}"
    if t.action == "delete-channel":
        await channel.delete()
        return f"deleted channel {t.channel!r}"
    durable = await channel.get_durable(t.durable)
    if t.action == "delete-durable":
        await durable.delete()
        return f"deleted durable {t.durable!r} of {t.channel!r}"
    replayed = await durable.replay_dead_letters()
    return f"replayed {_plural(replayed, 'dead letter')} of {t.durable!r}"


__all__ = ["ACTIONS", "Target", "impact", "perform"]
