"""Fixtures of the ring's tests: three real nodes on loopback ports with a real etcd."""
from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.inprocess_ring import InProcessRing
from support.ring import new_ring

from semreg.bench.localcluster import LocalCluster
from semreg.bench.peers import free_ports


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


@pytest.fixture
def etcd_factory(tmp_path: Path) -> Iterator:
    """Start real etcds (`/usr/bin/etcd`, one member each): `start(scheme, *flags)` gives (host, client port);
    each stopped at the end of the test."""
    started: list[subprocess.Popen] = []

    def start(scheme: str, *extra: str) -> tuple[str, int]:
        client, peer = free_ports(2)
        url, peer_url = f"{scheme}://127.0.0.1:{client}", f"http://127.0.0.1:{peer}"
        log = (tmp_path / f"etcd-{client}.log").open("wb")
        started.append(subprocess.Popen(
            ["etcd", "--name", "t", "--data-dir", str(tmp_path / f"etcd-{client}"), "--listen-client-urls", url,
             "--advertise-client-urls", url, "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls",
             peer_url, "--initial-cluster", f"t={peer_url}", *extra], stdout=log, stderr=log))
        return "127.0.0.1", client
    yield start
    for process in started:
        process.terminate()
        process.wait(10)
