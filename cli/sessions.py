"""`durables sessions`: durable client sessions and the alerts about them."""

from __future__ import annotations

import click

from . import output
from .context import State, json_option, pass_state


@click.command("sessions")
@click.option(
    "--alerts",
    "alert_count",
    type=click.IntRange(min=0),
    default=10,
    metavar="N",
    show_default=True,
    help="Also show the N newest alerts.",
)
@json_option
@pass_state
def sessions(state: State, alert_count: int, as_json: bool) -> None:
    """Durable client sessions: live or away, timeout, interests; and recent alerts
    (such as sessions that expired)."""
    client = state.client()
    now = client.server_ms()
    rows: list[dict[str, object]] = []
    table_rows: list[tuple[object, ...]] = []
    for record in client.sessions():
        live = client.session_live(record.id)
        away = None if live else round((now - record.away_since()) / 1000, 1)
        state_name = "live" if live else "expired" if record.expired(now) else "away"
        timeout_s = record.timeout_ms / 1000
        interests = {c: i.to_dict() for c, i in record.interests.items()}
        rows.append(
            {
                "id": record.id,
                "state": state_name,
                "away_s": away,
                "timeout_s": timeout_s,
                "interests": interests,
            }
        )
        table_rows.append((record.id, state_name, away, timeout_s, ", ".join(interests)))
    alerts = client.alerts(alert_count) if alert_count else []
    if as_json:
        output.print_json({"sessions": rows, "alerts": alerts})
        return
    columns = ("session", "state", "away s", "timeout s", "interests")
    output.show(output.table("sessions", columns, table_rows))
    if alerts:
        output.show(output.table("alerts", ("message",), [(a["message"],) for a in alerts]))
