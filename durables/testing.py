"""A pytest plugin for testing your own code on durables (registered as `durables`).

Fixtures, each test in a namespace of its own, whose keys are deleted after the test
(`--durables-keep` keeps them, to look at a failed test's data):

- `durables_client`: a `durables.Client`;
- `durables_aio_client`: a `durables.aio.AsyncClient` (needs pytest-asyncio);
- `durables_url`, `durables_namespace`, `durables_settings`: what they connect with.

They run on `memory://` (in-process, nothing to install or start) unless pytest is
given `--durables-url redis://HOST:PORT` (a real server) or `--durables-embedded` (the
embedded server, started for the run in a temporary home and stopped after it).

Helpers: `publish(channel, *payloads)` and `drain(durable)` (with `publish_async` and
`drain_async`) put events in and take them out in a test.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any, NoReturn

import pytest

from . import keys
from .aio.client import AsyncClient
from .aio.client import connect as aio_connect
from .client import Client, connect
from .errors import AuthenticationError, ConnectionLostError, DurablesError
from .events import Message
from .server.embedded import EmbeddedServer

if TYPE_CHECKING:
    from .aio.channel import AsyncChannel
    from .aio.durable import AsyncDurable
    from .channel import Channel
    from .durable import Durable
    from .events import Event

MEMORY_URL = "memory://durables-testing"
"""The store the fixtures use by default (shared by the run's tests, apart by namespace)."""
QUICK: dict[str, object] = {"lease_timeout_s": 1.0, "block_s": 0.1}
"""Settings for tests: a consumer that stops is noticed in a second, a client closes at once."""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("durables", "durables test fixtures")
    group.addoption(
        "--durables-url",
        default=None,
        metavar="URL",
        help="run the durables fixtures on this server (default: memory://)",
    )
    group.addoption(
        "--durables-embedded",
        action="store_true",
        default=False,
        help="run the durables fixtures on the embedded server",
    )
    group.addoption(
        "--durables-keep",
        action="store_true",
        default=False,
        help="keep each test's namespace (its channels, durables, sessions) after the test",
    )


@pytest.fixture(scope="session")
def durables_url(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """The server of the run's durables fixtures."""
    url: str | None = request.config.getoption("durables_url")
    if not request.config.getoption("durables_embedded"):
        yield url or MEMORY_URL
        return
    if url is not None:
        raise pytest.UsageError("give --durables-url or --durables-embedded, not both")
    server = EmbeddedServer(tmp_path_factory.mktemp("durables-embedded"))
    try:
        yield server.ensure_running()
    finally:
        server.stop()


@pytest.fixture
def durables_namespace(request: pytest.FixtureRequest, durables_url: str) -> Iterator[str]:
    """A namespace of the test's own: no test sees another's channels. Its keys are deleted
    after the test (after its clients closed), unless pytest is given `--durables-keep`."""
    namespace = f"test-{uuid.uuid4().hex[:12]}"
    yield namespace
    if not request.config.getoption("durables_keep"):
        _remove_namespace(durables_url, namespace)


def _remove_namespace(url: str, namespace: str) -> None:
    """Delete every key of `namespace` (one by one: on a cluster they are in many slots)."""
    try:
        client = connect(url, namespace=namespace, **QUICK)
    except (ConnectionLostError, AuthenticationError):
        return  # nothing was written where nothing connects; the test's setup said why
    except DurablesError as exc:
        _cannot_connect(exc)
    with client:
        redis = client.ctx.executor.redis
        for key in list(redis.scan_iter(match=keys.namespace_pattern(namespace), count=1000)):
            redis.delete(key)


@pytest.fixture
def durables_settings() -> dict[str, object]:
    """Settings of the clients the fixtures make; override the fixture to change them."""
    return dict(QUICK)


def _cannot_connect(error: DurablesError) -> NoReturn:
    """The setup fails in the error's one line: a traceback would show the arguments of
    the calls that made the client, the URL with its password among them."""
    pytest.fail(f"durables: {error}", pytrace=False)


@pytest.fixture
def durables_client(
    durables_url: str, durables_namespace: str, durables_settings: dict[str, object]
) -> Iterator[Client]:
    """A client in the test's own namespace, closed after the test."""
    try:
        client = connect(durables_url, namespace=durables_namespace, **durables_settings)
    except DurablesError as exc:
        _cannot_connect(exc)
    with client:
        yield client


async def _aio_client(
    durables_url: str, durables_namespace: str, durables_settings: dict[str, object]
) -> AsyncIterator[AsyncClient]:
    """An asyncio client in the test's own namespace, closed after the test."""
    try:
        client = await aio_connect(durables_url, namespace=durables_namespace, **durables_settings)
    except DurablesError as exc:
        _cannot_connect(exc)
    try:
        yield client
    finally:
        await client.close()


def _no_asyncio_runner() -> None:
    pytest.fail("durables_aio_client needs pytest-asyncio (pip install pytest-asyncio)")


durables_aio_client: Any
try:
    import pytest_asyncio
except ImportError:  # the fixture says what is missing when a test asks for it
    durables_aio_client = pytest.fixture(_no_asyncio_runner, name="durables_aio_client")
else:
    durables_aio_client = pytest_asyncio.fixture(_aio_client, name="durables_aio_client")


def _messages(
    payloads: tuple[bytes | str, ...], properties: dict[str, Any] | None
) -> list[Message]:
    return [
        Message(p if isinstance(p, bytes) else p.encode(), properties=properties) for p in payloads
    ]


def publish(
    channel: Channel, *payloads: bytes | str, properties: dict[str, Any] | None = None
) -> list[str]:
    """Publish each payload (str is sent as UTF-8) in one batch; their event ids."""
    return channel.publish_many(_messages(payloads, properties))


async def publish_async(
    channel: AsyncChannel, *payloads: bytes | str, properties: dict[str, Any] | None = None
) -> list[str]:
    """`publish` for the asyncio client."""
    return await channel.publish_many(_messages(payloads, properties))


def drain(
    durable: Durable, *, count: int | None = None, timeout: float = 1.0, consumer: str = "drain"
) -> list[Event]:
    """Take events from `durable` and acknowledge them: `count` of them (waiting up to
    `timeout` seconds for them), or with no `count` all that come until none has for
    `timeout`. The events, in the order they came."""
    events: list[Event] = []
    with durable.consumer(consumer, auto_ack=False) as c:
        deadline = time.monotonic() + timeout
        while count is None or len(events) < count:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            got = c.fetch(timeout=left)
            if got:
                c.commit()
                events += got
                if count is None:
                    deadline = time.monotonic() + timeout
    return events


async def drain_async(
    durable: AsyncDurable,
    *,
    count: int | None = None,
    timeout: float = 1.0,
    consumer: str = "drain",
) -> list[Event]:
    """`drain` for the asyncio client."""
    events: list[Event] = []
    async with durable.consumer(consumer, auto_ack=False) as c:
        deadline = time.monotonic() + timeout
        while count is None or len(events) < count:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            got = await c.fetch(timeout=left)
            if got:
                await c.commit()
                events += got
                if count is None:
                    deadline = time.monotonic() + timeout
    return events


__all__ = [
    "MEMORY_URL", "QUICK", "drain", "drain_async", "durables_aio_client", "durables_client",
    "durables_namespace", "durables_settings", "durables_url", "publish", "publish_async",
]  # fmt: skip
