"""The one place that knows the key layout. Nothing else formats a key.

Every key of a channel carries the hash tag `{<channel>}`, so all of them live
in one slot and every Lua script runs unchanged on Redis Cluster:

    <ns>:channels                     set of channel names (the registry; plain commands only)
    <ns>:sessions                     set of durable client session ids
    <ns>:session:{<id>}               hash: a session's record (timeout, last seen, interests)
    <ns>:session:{<id>}:live          string: token of the live client of the session, PX lease
    <ns>:alerts                       list: recent alerts for the admin (newest first, capped)
    <ns>:audit                        stream (capped): admin actions: what, on what, from
                                      which address, with what outcome (the id: when)
    <ns>:{<ch>}:s                     the stream: one entry per event
    <ns>:{<ch>}:meta                  hash: created_ms, ttl_ms, capacity, full, keyed; and
                                      published, ackreq, moves, notrips (what the scripts
                                      keep); '<producer id>:' -> '<sequence> <first event
                                      id>' of that producer's last publish here (a retry of
                                      it is not stored again)
    <ns>:{<ch>}:durables              hash: durable name -> JSON spec (kind, filter, start)
    <ns>:{<ch>}:last                  hash: key -> last value (keyed channels)
    <ns>:{<ch>}:lastid                hash: key -> id of the event that set the last value
    <ns>:{<ch>}:lease:<durable>       string: token of the exclusive holder, with a PX lease
    <ns>:{<ch>}:gate:<durable>:<token>  stream (empty) with the durable's group: an exclusive
                                      holder reads it beside the channel, so once a new holder
                                      deleted it, the old one's reads fail (the fence)
    <ns>:{<ch>}:gates:<durable>       set: the gate keys of an exclusive durable's holders
    <ns>:{<ch>}:rc:<durable>          hash: pending event id -> redelivery count (only if > 0)
    <ns>:{<ch>}:keep:<durable>        set: pending ids whose count must not rise at the next attach
    <ns>:{<ch>}:members:<durable>     hash: attached consumer id -> its window (shared, serial)
    <ns>:{<ch>}:alive:<durable>       zset: attached consumer id -> lease expiry (server ms)
    <ns>:{<ch>}:ring:<durable>        list: consumer ids in round-robin order, next to deal first
    <ns>:{<ch>}:redo:<durable>        list: ids handed back, waiting to be dealt again, first first
    <ns>:{<ch>}:delayed:<durable>     zset: ids rolled back with a delay -> when they are due
    <ns>:{<ch>}:bell:<durable>        stream (MAXLEN 1): rung when events are dealt to others
    <ns>:{<ch>}:tap:<durable>:<id>    stream (empty) with the durable's group: while it exists,
                                      a serial consumer may read new events straight from the
                                      channel; deleting it ends the read (a blocked one wakes);
                                      it expires unless each read through it renews it
    <ns>:{<ch>}:taps:<durable>        hash: tap (or door) key -> consumer id, those opened
    <ns>:{<ch>}:door:<durable>:<id>   stream (empty) with the durable's group: an idle shared
                                      consumer waits reading it, until it is woken (an entry)
                                      to read the channel through its tap; listed with the taps.
                                      Keyed durables: the consumer's own bell (one entry, no
                                      group, lapses after a minute), rung when another's fetch
                                      dealt it events or hands it the watch (lib/watch.lua)
    <ns>:{<ch>}:waits:<durable>       hash: waiting consumer id -> 'd', or the newest stream
                                      id when it was woken to read the channel (what it takes
                                      after that, the dispatcher settles); keyed durables:
                                      waiting consumer id -> 'k', and '~watch' -> the watcher
                                      and the end of its term (server ms)
    <ns>:{<ch>}:dead:<durable>        stream: dead letters (events past max_deliveries)
    <ns>:{<ch>}:tally:<durable>       hash: counters the scripts keep for the metrics
                                      ('redelivered': events handed out again)
    <ns>:{<ch>}:holds:<durable>       hash: 'k:<key>' -> id of the key's event out (keyed
                                      durables: the key's next event waits until it is
                                      acked), 'i:<id>' -> key of an event dealt or waiting
    <ns>:{<ch>}:nacks                 stream: ack-required events a session did not acknowledge
    <ns>:{<ch>}:unsent                zset: '<session id> <event id>' of ack-required events whose
                                      timeout passed before the session read them (nacked by
                                      housekeeping: the session skips them without a second nack)
    <ns>:{<ch>}:strips                zset: session id -> publish count at which to check its queue
    <ns>:{<ch>}:slimits               hash: session id -> its queue limits on this channel, and
                                      its group's position as the last look left it
    <ns>:{<ch>}:overflowed            hash: 'closed:<id>' / 'dropped:<id>' -> what overflow did
    <ns>:{<ch>}:mids                  hash: producer message id -> the event id it got
    <ns>:{<ch>}:midtimes              zset: producer message id -> when (server ms), for expiry
    <ns>:{<ch>}:producers             hash: the producers' records of earlier versions (now in
                                      the meta hash); deleted with the channel
    <ns>:{<ch>}:sinks                 hash: Spark sink id -> last batch id committed to the channel
    <ns>:{<ch>}:stage:<token>         list: events a Spark task staged for the channel, until
                                      the driver commits its batch (expires if it never does)

A session with an interest in a channel reads it through the consumer group
`~session:<id>` on the channel's stream ('~' cannot start a durable's name).

Names are validated (`durables.names`) before they get here.
"""

from __future__ import annotations

from dataclasses import dataclass

# Field names inside a stream entry: short, because they are stored per event.
F_DATA = b"d"
F_KEY = b"k"
F_PROPS = b"p"
F_OP = b"o"
F_ACK = b"a"
F_MESSAGE_ID = b"m"
"""The producer's message id: the one given to `publish`, or the client's producer id and
sequence (`<producer>:<sequence>`)."""
"""An ack-required event: the milliseconds each interested session has to acknowledge it."""
OP_DESTROY = b"destroy"
OP_ACK = b"ack:"
"""The op `publish.lua` takes for an ack-required event: `ack:<milliseconds>`."""


def namespace_pattern(ns: str) -> str:
    """A SCAN pattern matching every key of namespace `ns` (and of namespaces named
    `<ns>:...`: a name holds no glob character, `durables.names`)."""
    return f"{ns}:*"


def registry(ns: str) -> str:
    """The set of channel names in namespace `ns`."""
    return f"{ns}:channels"


def sessions(ns: str) -> str:
    """The set of session ids in namespace `ns`."""
    return f"{ns}:sessions"


def session(ns: str, session_id: str) -> str:
    """A session's record (tagged like its lease, so a script may touch both on a cluster)."""
    return f"{ns}:session:{{{session_id}}}"


def session_live(ns: str, session_id: str) -> str:
    """The lease of the client a session is live in."""
    return f"{ns}:session:{{{session_id}}}:live"


def alerts(ns: str) -> str:
    """Recent alerts (expired sessions, ...), newest first."""
    return f"{ns}:alerts"


def audit(ns: str) -> str:
    """The audit log of admin actions (a capped stream; its ids say when)."""
    return f"{ns}:audit"


def session_group(session_id: str) -> str:
    """The consumer group through which a session reads a channel it is interested in."""
    return f"~session:{session_id}"


@dataclass(frozen=True, slots=True)
class ChannelKeys:
    """The keys of one channel."""

    ns: str
    channel: str

    @property
    def prefix(self) -> str:
        return f"{self.ns}:{{{self.channel}}}"

    @property
    def stream(self) -> str:
        return f"{self.prefix}:s"

    @property
    def meta(self) -> str:
        return f"{self.prefix}:meta"

    @property
    def durables(self) -> str:
        return f"{self.prefix}:durables"

    @property
    def last_values(self) -> str:
        return f"{self.prefix}:last"

    @property
    def last_ids(self) -> str:
        return f"{self.prefix}:lastid"

    @property
    def nacks(self) -> str:
        return f"{self.prefix}:nacks"

    @property
    def unsent_nacks(self) -> str:
        return f"{self.prefix}:unsent"

    @property
    def session_trips(self) -> str:
        return f"{self.prefix}:strips"

    @property
    def session_limits(self) -> str:
        return f"{self.prefix}:slimits"

    @property
    def overflowed(self) -> str:
        return f"{self.prefix}:overflowed"

    @property
    def message_ids(self) -> str:
        return f"{self.prefix}:mids"

    @property
    def message_times(self) -> str:
        return f"{self.prefix}:midtimes"

    @property
    def producers(self) -> str:
        return f"{self.prefix}:producers"

    def lease(self, durable: str) -> str:
        return f"{self.prefix}:lease:{durable}"

    def gate(self, durable: str, token: str) -> str:
        return f"{self.prefix}:gate:{durable}:{token}"

    def gates(self, durable: str) -> str:
        return f"{self.prefix}:gates:{durable}"

    def redeliveries(self, durable: str) -> str:
        return f"{self.prefix}:rc:{durable}"

    def keep(self, durable: str) -> str:
        return f"{self.prefix}:keep:{durable}"

    def members(self, durable: str) -> str:
        return f"{self.prefix}:members:{durable}"

    def alive(self, durable: str) -> str:
        return f"{self.prefix}:alive:{durable}"

    def ring(self, durable: str) -> str:
        return f"{self.prefix}:ring:{durable}"

    def redo(self, durable: str) -> str:
        return f"{self.prefix}:redo:{durable}"

    def delayed(self, durable: str) -> str:
        return f"{self.prefix}:delayed:{durable}"

    def tap(self, durable: str, consumer: str) -> str:
        return f"{self.prefix}:tap:{durable}:{consumer}"

    def taps(self, durable: str) -> str:
        return f"{self.prefix}:taps:{durable}"

    def door(self, durable: str, consumer: str) -> str:
        return f"{self.prefix}:door:{durable}:{consumer}"

    def waits(self, durable: str) -> str:
        return f"{self.prefix}:waits:{durable}"

    def bell(self, durable: str) -> str:
        return f"{self.prefix}:bell:{durable}"

    def dead(self, durable: str) -> str:
        return f"{self.prefix}:dead:{durable}"

    def holds(self, durable: str) -> str:
        """A keyed durable's keys out: key -> the id of its event handed out."""
        return f"{self.prefix}:holds:{durable}"

    def tally(self, durable: str) -> str:
        """Counters the scripts keep for the metrics ('redelivered')."""
        return f"{self.prefix}:tally:{durable}"

    def planned(self, durable: str) -> str:
        """The batches a Spark query planned over the durable and has not committed."""
        return f"{self.prefix}:planned:{durable}"

    @property
    def sinks(self) -> str:
        return f"{self.prefix}:sinks"

    def stage(self, token: str) -> str:
        return f"{self.prefix}:stage:{token}"

    @property
    def channel_level(self) -> list[str]:
        """Every key of the channel beside its stream, meta and durables hash (which
        `delete_channel.lua` takes first): all go when the channel is deleted."""
        return [
            self.last_values,
            self.last_ids,
            self.nacks,
            self.unsent_nacks,
            self.session_trips,
            self.session_limits,
            self.overflowed,
            self.message_ids,
            self.message_times,
            self.producers,
            self.sinks,
        ]

    def per_durable(self, durable: str) -> list[str]:
        """Every key that belongs to one durable, beside its consumer group."""
        return [
            self.lease(durable),
            self.gates(durable),  # scripts delete the gates it names first
            self.redeliveries(durable),
            self.keep(durable),
            self.members(durable),
            self.alive(durable),
            self.ring(durable),
            self.redo(durable),
            self.delayed(durable),
            self.taps(durable),  # scripts delete the taps it names first
            self.waits(durable),
            self.bell(durable),
            self.dead(durable),
            self.planned(durable),
            self.tally(durable),
            self.holds(durable),
        ]
