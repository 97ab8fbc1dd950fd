"""The console's pages for an incident: every durable on one sortable, filterable table,
the server's health, a durable's consumers, events to look at (read only) and the audit
log of admin actions.

As in `views`, everything a user wrote goes through `esc`; sorting and filtering are
links and a GET form (no script needed).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from urllib.parse import urlencode

from ..figures import DurableFigures, Figures
from ..records import AuditEntry
from ..server_health import ServerHealth
from .views import NONE, channel_href, esc, preview, table

SORTS: dict[str, Callable[[tuple[str, DurableFigures, float, float]], object]] = {
    "channel": lambda r: (r[0], r[1].info.name),
    "durable": lambda r: (r[1].info.name, r[0]),
    "depth": lambda r: -r[1].info.depth,
    "lag": lambda r: -(r[1].lag or 0),
    "oldest": lambda r: -r[1].oldest_unacked_age_s,
    "in": lambda r: -r[2],
    "out": lambda r: -r[3],
    "consumers": lambda r: len(r[1].info.consumers),
}
"""The overview's sort orders: names ascending, figures largest first."""
COLUMNS = (("channel", "channel"), ("durable", "durable"), ("kind", ""), ("depth", "depth"),
           ("lag", "lag"), ("oldest unacked", "oldest"), ("delivered /s", "in"),
           ("acked /s", "out"), ("consumers", "consumers"))  # fmt: skip


def durables_table(
    f: Figures, rates: dict[tuple[str, str], tuple[float, float]], sort: str, needle: str
) -> str:
    """Every durable of every channel: depth, lag, oldest age, rates; sorted by `sort`,
    kept to those whose channel or name contains `needle`."""
    rows = [
        (c.info.name, d, *rates.get((c.info.name, d.info.name), (0.0, 0.0)))
        for c in f.channels
        for d in c.durables
        if needle.lower() in f"{c.info.name} {d.info.name}".lower()
    ]
    rows.sort(key=SORTS.get(sort, SORTS["channel"]))  # type: ignore[arg-type]
    head = "".join(
        f'<th><a href="/?{esc(urlencode({"sort": key, "q": needle}))}">{esc(label)}</a></th>'
        if key
        else f"<th>{esc(label)}</th>"
        for label, key in COLUMNS
    )
    body = "".join(_durable_row(*row) for row in rows)
    form = (
        '<form class="filter" method="get" action="/">'
        f'<input type="hidden" name="sort" value="{esc(sort)}">'
        f'<input type="search" name="q" value="{esc(needle)}" placeholder="filter durables">'
        "<button>Filter</button></form>"
    )
    if not body:
        return form + f'<p class="empty">{"no durables" if not needle else "no match"}</p>'
    return (
        form
        + f'<table id="all-durables"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'
    )


def _durable_row(channel: str, d: DurableFigures, rate_in: float, rate_out: float) -> str:
    i = d.info
    cells = [
        f'<a href="{esc(channel_href(channel))}">{esc(channel)}</a>', esc(i.name), esc(i.kind),
        f'<span data-field="depth">{i.depth}</span>',
        esc(d.lag if d.lag is not None else NONE),
        f"{d.oldest_unacked_age_s:.1f} s", f"{rate_in:.1f}", f"{rate_out:.1f}",
        str(len(i.consumers)) if i.consumers else '<span class="warn">none</span>',
    ]  # fmt: skip
    tds = "".join(f"<td>{cell}</td>" for cell in cells)
    return f'<tr data-row="{esc(channel)}/{esc(i.name)}">{tds}</tr>'


def health(h: ServerHealth, namespace: str) -> str:
    """The server health panel: memory, eviction policy, persistence, role, replicas."""
    limit = "no limit" if not h.maxmemory else _mib(h.maxmemory)
    ratio = h.memory_ratio
    used = _mib(h.used_memory) + (f" ({ratio:.0%} of maxmemory)" if ratio is not None else "")
    policy = (
        f'<span class="warn">{esc(h.policy)}: may evict</span>' if h.evicting else esc(h.policy)
    )
    persistence = "AOF" if h.aof else "no AOF"
    if h.rdb_changes_since_save is not None:
        persistence += f", {h.rdb_changes_since_save} changes since the last RDB save"
    rows = (("namespace", esc(namespace)), ("memory used", esc(used)), ("maxmemory", esc(limit)),
            ("eviction policy", policy), ("persistence", esc(persistence)),
            ("role", esc(h.role)), ("replicas", str(h.replicas)))  # fmt: skip
    items = "".join(f"<dt>{label}</dt><dd>{value}</dd>" for label, value in rows)
    return f'<h2>Server health</h2><dl class="facts" id="health">{items}</dl>'


def _mib(n: int) -> str:
    return f"{n / (1024 * 1024):.1f} MiB"


def consumers(f_durables: Sequence[DurableFigures]) -> str:
    """Every attached consumer of a channel's durables."""
    rows = []
    for d in f_durables:
        for c in d.consumers:
            cells = [
                esc(d.info.name), esc(c.name), esc(c.host or NONE),
                esc(c.pid if c.pid is not None else NONE),
                esc(c.window if c.window is not None else NONE), str(c.held),
                esc(c.keys if c.keys is not None else NONE),
                NONE if c.last_seen_s is None else f"{c.last_seen_s:.1f} s ago",
                NONE if c.lease_left_s is None else f"{c.lease_left_s:.1f} s",
            ]  # fmt: skip
            rows.append("<tr>" + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>")
    columns = ["durable", "consumer", "host", "pid", "window", "held", "keys", "last seen",
               "lease left"]  # fmt: skip
    return "<h2>Consumers</h2>" + table(
        columns, rows, id_="consumers", empty="no consumer attached"
    )


def events(channel: str, durable: str | None, found: Sequence[object]) -> str:
    """Events to look at: id, time, key, properties, payload as text."""
    rows = []
    for e in found:
        event_id = str(getattr(e, "id", ""))
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(int(event_id.split("-")[0]) / 1000))
        properties = getattr(e, "properties", {}) or {}
        shown = ", ".join(f"{k}={v}" for k, v in properties.items()) or NONE
        payload = preview(getattr(e, "data", b""))
        cells = [
            esc(event_id),
            esc(when),
            esc(getattr(e, "key", None) or NONE),
            esc(shown),
            f'<code class="payload">{esc(payload)}</code>',
        ]
        rows.append("<tr>" + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>")
    what = (
        f"the next events durable {esc(durable)} would be given" if durable else "the newest events"
    )
    note = (
        f'<p class="note">Read only: {what} of channel '
        f'<a href="{esc(channel_href(channel))}">{esc(channel)}</a>; nothing is delivered '
        "or acknowledged.</p>"
    )
    return note + table(
        ["id", "time (UTC)", "key", "properties", "payload"], rows, id_="events", empty="no events"
    )


def audit(entries: Sequence[AuditEntry]) -> str:
    """The audit log: what, on what, when, from which address, and the outcome."""
    rows = (
        f"<tr><td>{esc(time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(a.time_ms / 1000)))}</td>"
        f"<td>{esc(a.action)}</td><td>{esc(a.target)}</td><td>{esc(a.address)}</td>"
        f"<td>{esc(a.outcome)}</td></tr>"
        for a in entries
    )
    return table(
        ["when (UTC)", "action", "on", "from", "outcome"],
        rows,
        id_="audit",
        empty="no admin actions recorded",
    )


__all__ = ["audit", "consumers", "durables_table", "events", "health"]
