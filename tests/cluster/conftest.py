"""Fixtures of the ring's tests: three real nodes on loopback ports with a real etcd."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.inprocess_ring import InProcessRing
from support.ring import new_ring

from semreg.bench.localcluster import LocalCluster


@pytest.fixture
def ring(tmp_path: Path) -> Iterator[LocalCluster]:
    cluster = new_ring(tmp_path / "ring")
    try:
        yield cluster
    finally:
        cluster.close()
        for node in cluster.nodes:  # shown by pytest when the test failed
            trouble = [line for line in node.log().splitlines() if '"level":"error"' in line or "Traceback" in line]
            print(f"--- {node.name}: {len(trouble)} error lines", *trouble[-5:], sep="\n")


@pytest.fixture
def in_ring(tmp_path: Path) -> Iterator[InProcessRing]:
    """Nodes as apps in this process, on one fake clock and one etcd in memory."""
    r = InProcessRing(tmp_path / "ring")
    try:
        yield r
    finally:
        r.close()
