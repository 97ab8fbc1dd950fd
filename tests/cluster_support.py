"""Running behaviour tests on a Redis Cluster too.

A module opts in with `pytestmark = pytest.mark.on_cluster`: each of its tests that
reaches the server through `server_url` (so through `client`, `channel`, `cli`) then
runs twice, `[standalone]` and `[cluster]`, the latter on one three-primary cluster
started once for the run and marked `cluster` (`-m cluster` selects them, `-m "not
cluster"` leaves them out). Tests that ask for `server` or `fresh_server` themselves
(they look at or kill the one server) stay standalone. The cluster runs in the valkey
pass only: it tests our routing, not the server.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from .ha_cluster import Cluster
from .servers import server_binary

DEPLOYMENTS = ("standalone", "cluster")
ON_CLUSTER = "on_cluster"
STANDALONE_ONLY = frozenset({"server", "fresh_server"})


def _cluster_pass() -> bool:
    return os.environ.get("DURABLES_TEST_SERVER", "valkey") == "valkey"


@pytest.fixture(scope="session")
def cluster_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """Three cluster-mode primaries (no replicas) for the whole run; tests keep apart by
    namespace, and their channels spread over the primaries by hash tag."""
    if not _cluster_pass():
        pytest.skip("the cluster runs in the valkey pass only")
    with Cluster(server_binary("valkey"), tmp_path_factory.mktemp("cluster")) as servers:
        yield servers


@pytest.fixture
def deployment(request: pytest.FixtureRequest) -> str:
    """ "standalone" unless the test was parametrized onto the cluster."""
    return str(getattr(request, "param", "standalone"))


def url_for(request: pytest.FixtureRequest, deployment: str) -> str:
    """The URL of the server the test runs on."""
    if deployment == "cluster":
        servers: Cluster = request.getfixturevalue("cluster_server")
        return servers.url
    return str(request.getfixturevalue("server").url)


def cluster_deployments(metafunc: pytest.Metafunc) -> list[Any]:
    """The deployments a test runs on: both for an `on_cluster` module's tests that reach
    the server through `server_url` (valkey pass), else standalone alone."""
    standalone = pytest.param("standalone", id="standalone")
    if metafunc.definition.get_closest_marker(ON_CLUSTER) is None:
        return [standalone]
    names = set(metafunc.fixturenames)
    if "deployment" not in names or names & STANDALONE_ONLY or not _cluster_pass():
        return [standalone]
    return [standalone, pytest.param("cluster", marks=pytest.mark.cluster, id="cluster")]


__all__ = ["DEPLOYMENTS", "cluster_deployments", "cluster_server", "deployment", "url_for"]
