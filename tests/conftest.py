"""Fixtures of the end-to-end tests: Spark 4.3 (scripts/setup-spark.sh) and one standalone
cluster for the whole session (three workers of two cores on loopback, stopped at the end)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparkjob import Cluster, spark_home

# The cluster's shape: three workers so that one can be killed with a spare left, two cores each
# so that a job's executors, a spare one and a cluster-mode driver fit.
WORKERS, CORES, MEMORY = 3, 2, "2g"


@pytest.fixture(scope="session")
def spark() -> Path:
    return spark_home()


@pytest.fixture(scope="session")
def cluster(spark, tmp_path_factory) -> Cluster:
    c = Cluster(tmp_path_factory.mktemp("standalone"), spark).start(WORKERS, CORES, MEMORY)
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture
def full_cluster(cluster) -> Cluster:
    """The session's cluster with all its workers alive (a test that killed one added another)."""
    assert cluster.alive_workers() == WORKERS, "a previous test left the cluster short of workers"
    return cluster
