"""The console as an ASGI application (Starlette): pages, the event stream, the actions.

Safe by default: actions exist only with `admin`; a change needs the page's CSRF token in
a header (which another site's form or script cannot send) and, when the browser names
an origin, this one; a `token`, when set, is needed for everything (given once as
`?token=`, then kept in a same-site cookie, or sent as `Authorization: Bearer`). Pages
allow only the package's own script and style.
"""

from __future__ import annotations

import contextlib
import hmac
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from importlib import resources
from typing import Any
from urllib.parse import parse_qsl, urlencode

from redis.exceptions import RedisError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..errors import ConnectionLostError, DurablesError
from ..server_health import parse_health
from ..urls import shown
from . import actions, incident, views
from .live import Live

COOKIE = "durables_console"
LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})
"""The Host names a console without a token answers to."""
CSRF_HEADER = "x-durables-csrf"
NACKS_SHOWN = 50
"""Per channel, the newest nacks the page lists."""
LETTERS_SHOWN = 200
"""The oldest dead letters of a durable the page lists."""
EVENTS_SHOWN = 50
"""How many events the browsing page shows."""
AUDIT_SHOWN = 200
"""The newest audit entries the page lists."""
FAVICON = (
    b'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><rect width="16" height="16" '
    b'rx="3" fill="#2b6cb0"/><path d="M4 4h4a4 4 0 010 8H4z" fill="#fff"/></svg>'
)
HEADERS = [
    (b"content-security-policy", b"default-src 'none'; script-src 'self'; style-src 'self'; "
     b"img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; "
     b"frame-ancestors 'none'"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),
]  # fmt: skip


@dataclass(frozen=True)
class ConsoleConfig:
    """How the console reads the server and what it allows."""

    url: str | None = None
    """The server URL (None: the embedded server)."""
    namespace: str | None = None
    admin: bool = False
    """Offer and accept actions that change or remove data."""
    token: str | None = None
    """Needed on every request when set."""
    interval_s: float = 1.0
    """Seconds between two reads of the figures."""


class Guard:
    """ASGI middleware: the token check, and the security headers on every response."""

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message.setdefault("headers", [])
                message["headers"] = [*message["headers"], *HEADERS]
            await send(message)

        refusal = self._refusal(Request(scope))
        await (refusal or self.app)(scope, receive, with_headers)

    def _refusal(self, request: Request) -> Response | None:
        if self.token is None:
            # no token: only this machine may come in, by a loopback name (another site's
            # DNS name rebound to 127.0.0.1 would otherwise read the pages and act)
            host = host_name(request.headers.get("host", ""))
            if host not in LOOPBACK_NAMES:
                return PlainTextResponse(f"unexpected Host {host!r}: use 127.0.0.1", 421)
            return None
        bearer = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
        if self._good(bearer) or self._good(request.cookies.get(COOKIE, "")):
            return None
        if self._good(request.query_params.get("token", "")):
            rest = [(k, v) for k, v in parse_qsl(request.url.query) if k != "token"]
            target = local_path(request.url.path) + ("?" + urlencode(rest) if rest else "")
            response = RedirectResponse(target, status_code=303)
            response.set_cookie(COOKIE, self.token, httponly=True, samesite="strict")
            return response
        return PlainTextResponse("the console needs its token: open it with ?token=...", 401)

    def _good(self, given: str) -> bool:
        return bool(given) and self.token is not None and same(given, self.token)


class Pages:
    """The console's routes over one reader: pages, the stream, the actions."""

    def __init__(self, config: ConsoleConfig) -> None:
        self.config = config
        self.live = Live(config.url, config.namespace, config.interval_s)
        self.csrf = secrets.token_urlsafe(24)

    def page(self, title: str, body: str, where: str, status: int = 200) -> HTMLResponse:
        live = self.live
        if live.error is not None:
            body = views.outage(live.error) + body
        state = "live" if live.error is None else "server unreachable"
        html = views.layout(
            title,
            body,
            where=where,
            csrf=self.csrf,
            admin=self.config.admin,
            live=state,
            namespace=self.namespace(),
        )
        return HTMLResponse(html, status)

    def namespace(self) -> str:
        client = self.live.current
        return client.namespace if client is not None else self.config.namespace or ""

    def server_url(self) -> str:
        client = self.live.current
        return shown(client.url if client is not None else self.config.url or "embedded server")

    async def overview(self, request: Request) -> Response:
        figures = self.live.figures
        if figures is None:
            return self.page("Overview", "", "/")
        body = views.overview(figures, self.server_url(), self.live.rates, self.config.admin)
        sort, needle = (
            request.query_params.get("sort", "channel"),
            request.query_params.get("q", ""),
        )
        body += "<h2>Durables</h2>" + incident.durables_table(
            figures, self.live.durable_rates, sort, needle
        )
        body += incident.health(parse_health(figures.server), self.namespace())
        return self.page("Overview", body, "/")

    async def channel(self, request: Request) -> Response:
        name = request.path_params["name"]
        figures = self.live.figures
        found = (
            next((c for c in figures.channels if c.info.name == name), None) if figures else None
        )
        if found is None:
            return self.page(f"Channel {name}", '<p class="empty">no such channel</p>', "", 404)
        body = views.channel(found, self.config.admin) + incident.consumers(found.durables)
        return self.page(f"Channel {name}", body, "")

    async def browse(self, request: Request) -> Response:
        """Events to look at, read only: a channel's newest, or a durable's next ones."""
        channel_name = request.query_params.get("channel", "")
        durable = request.query_params.get("durable") or None
        client = await self.live.client()
        target = await client.get_channel(channel_name)
        if durable is None:
            found = await target.browse(EVENTS_SHOWN)
            title = f"Newest events of {channel_name}"
        else:
            found = await (await target.get_durable(durable)).browse(EVENTS_SHOWN)
            title = f"Next events of {durable} on {channel_name}"
        return self.page(title, incident.events(channel_name, durable, found), "")

    async def audit(self, request: Request) -> Response:
        client = await self.live.client()
        body = incident.audit(await client.audit(AUDIT_SHOWN))
        return self.page("Audit log", body, "/audit")

    async def favicon(self, request: Request) -> Response:
        return Response(
            FAVICON, media_type="image/svg+xml", headers={"cache-control": "max-age=86400"}
        )

    async def sessions(self, request: Request) -> Response:
        found = self.live.figures.sessions if self.live.figures else []
        return self.page("Sessions", views.sessions(found, self.config.admin), "/sessions")

    async def dead_letters(self, request: Request) -> Response:
        channel_name = request.query_params.get("channel")
        durable = request.query_params.get("durable")
        if not channel_name or not durable:
            figures = self.live.figures
            body = views.dead_letter_index(figures) if figures else ""
            return self.page("Dead letters", body, "/dead-letters")
        client = await self.live.client()
        target = await (await client.get_channel(channel_name)).get_durable(durable)
        letters = await target.dead_letters(LETTERS_SHOWN)
        body = views.dead_letters(channel_name, durable, letters, self.config.admin)
        return self.page(f"Dead letters of {durable} on {channel_name}", body, "/dead-letters")

    async def alerts(self, request: Request) -> Response:
        client = await self.live.client()
        figures = self.live.figures
        nacks = {}
        for c in figures.channels if figures else ():
            with contextlib.suppress(DurablesError):
                found = await (await client.get_channel(c.info.name)).nacks(NACKS_SHOWN)
                if found:
                    nacks[c.info.name] = found
        body = views.alerts(figures.alerts if figures else [], nacks)
        return self.page("Nacks and alerts", body, "/alerts")

    async def events(self, request: Request) -> Response:
        return StreamingResponse(
            self.live.stream(), media_type="text/event-stream", headers={"x-accel-buffering": "no"}
        )

    async def state(self, request: Request) -> Response:
        return JSONResponse(self.live.state())

    def refused(self, request: Request, changing: bool) -> Response | None:
        """Why an action request is refused: read-only, no CSRF token, another origin."""
        if not self.config.admin:
            message = "the console runs read-only (start it with --admin)"
            return JSONResponse({"error": message}, 403)
        if not changing:
            return None
        if not same(request.headers.get(CSRF_HEADER, ""), self.csrf):
            return JSONResponse({"error": "missing or stale CSRF token: reload the page"}, 403)
        origin = request.headers.get("origin")
        if origin is not None and origin != _own_origin(request):
            return JSONResponse({"error": f"cross-origin request from {origin} refused"}, 403)
        return None

    async def impact(self, request: Request) -> Response:
        given = request.query_params
        return self.refused(request, False) or await _answer(
            lambda client: actions.impact(
                client, actions.Target.of(given.get("action", ""), given)
            ),
            self.live,
            "message",
            refresh=False,
        )

    async def act(self, request: Request) -> Response:
        refusal = self.refused(request, True)
        if refusal is not None:
            return refusal
        try:
            given = await request.json()
        except ValueError:
            given = None
        if not isinstance(given, dict):
            return JSONResponse({"error": "the body must be a JSON object"}, 400)
        action = request.path_params["action"]
        address = request.client.host if request.client else "unknown"
        return await _answer(
            lambda client: actions.perform(client, actions.Target.of(action, given), address),
            self.live,
            "done",
            refresh=True,
        )

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        await self.live.start()
        try:
            yield
        finally:
            await self.live.stop()


def create_app(config: ConsoleConfig) -> Starlette:
    """The console's application; its lifespan starts and stops the reader."""
    pages = Pages(config)
    static = StaticFiles(directory=str(resources.files("durables.console") / "static"))
    app = Starlette(
        routes=[
            Route("/", pages.overview),
            Route("/channels/{name:path}", pages.channel),
            Route("/sessions", pages.sessions),
            Route("/dead-letters", pages.dead_letters),
            Route("/alerts", pages.alerts),
            Route("/browse", pages.browse),
            Route("/audit", pages.audit),
            Route("/favicon.ico", pages.favicon),
            Route("/events", pages.events),
            Route("/api/state", pages.state),
            Route("/api/impact", pages.impact),
            Route("/actions/{action}", pages.act, methods=["POST"]),
            Mount("/static", static, name="static"),
        ],
        lifespan=pages.lifespan,
        exception_handlers={DurablesError: _error_page},
    )
    app.add_middleware(Guard, token=config.token)
    return app


async def _answer(
    work: Callable[[Any], Awaitable[str]], live: Live, field: str, *, refresh: bool
) -> Response:
    """Run `work(client)`: its sentence as JSON, or the error (400; 503 in an outage)."""
    try:
        client = await live.client()
        result = await work(client)
    except (ConnectionLostError, RedisError, OSError) as exc:
        return JSONResponse({"error": f"the server cannot be reached: {exc}"}, 503)
    except DurablesError as exc:
        return JSONResponse({"error": str(exc)}, 400)
    if refresh:
        await live.read_once()  # the pages show the change at once
    return JSONResponse({field: result})


async def _error_page(request: Request, exc: Exception) -> Response:
    status = 503 if isinstance(exc, ConnectionLostError) else 404
    body = f'<p class="outage">{views.esc(exc)}</p>'
    page = views.layout("Not available", body, where="", csrf="", admin=False, live="")
    return HTMLResponse(page, status)


def host_name(host: str) -> str:
    """The name in a Host header, without its port: `[::1]:8480` and `[::1]` give `::1`."""
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0]


def local_path(path: str) -> str:
    """`path` as a path on this site: `//evil.example/x` (or `/\\evil...`), which a
    browser would follow to another site, becomes `/evil.example/x`."""
    return "/" + path.lstrip("/\\")


def same(given: str, secret: str) -> bool:
    """A secret compared in constant time (as bytes: a header may hold any character)."""
    return hmac.compare_digest(given.encode("utf-8", "surrogateescape"), secret.encode())


def _own_origin(request: Request) -> str:
    return f"{request.url.scheme}://{request.headers.get('host', '')}"


__all__ = ["ConsoleConfig", "create_app"]
