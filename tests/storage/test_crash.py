"""Acknowledged writes survive kill -9; SIGTERM drains in-flight requests and exits 0, and stops a long
start-up without waiting for its end."""
from __future__ import annotations

import os
import signal
import subprocess
import threading
import time

import httpx
import pyoxigraph as ox
import pytest
from support.server import ServerProcess, wait_for

from semreg.storage.registrations import Reader
from semreg.storage.store import Store

pytestmark = pytest.mark.process


@pytest.mark.slow
def test_acknowledged_writes_survive_sigkill(start_server, tmp_path):
    data = tmp_path / "data"
    srv = start_server(data_dir=data)
    acked: set[str] = set()
    deleted: set[str] = set()
    uncertain: set[str] = set()
    lock = threading.Lock()
    stop = threading.Event()

    def writer(n: int) -> None:
        with httpx.Client(base_url=srv.url, timeout=5) as c:
            k = 0
            while not stop.is_set() and k < 2000:
                iid = f"w{n}-{k}"
                k += 1
                try:
                    r = c.put(f"/v1/instances/{iid}", json={"service": f"s{n}", "address": "10.0.0.1", "port": 80,
                                                            "tags": [f"<http://x.org/C{k % 50}>"], "ttl": 30})
                    if r.status_code in (200, 201):
                        with lock:
                            acked.add(iid)
                    if k % 10 == 0:
                        old = f"w{n}-{k - 5}"
                        with lock:
                            uncertain.add(old)  # a delete cut off by the kill may or may not have happened
                        if c.delete(f"/v1/instances/{old}").status_code == 204:
                            with lock:
                                deleted.add(old)
                            uncertain.discard(old)
                except httpx.HTTPError:
                    return  # the server died mid-request: that write was never acknowledged

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 30
    while len(acked) < 400 and time.monotonic() < deadline:
        time.sleep(0.01)
    srv.kill()  # SIGKILL mid-load
    stop.set()
    for t in threads:
        t.join(10)
    assert len(acked) >= 400, f"only {len(acked)} writes were acknowledged before the kill"

    srv = start_server(data_dir=data)
    with srv.client() as c:
        present = {i["id"] for i in c.get("/v1/instances").json()}
        expected = acked - deleted - uncertain
        assert expected <= present, f"lost {sorted(expected - present)} acknowledged registrations"
        assert not (deleted & present), "an acknowledged deregistration came back"
        view = c.get(f"/v1/instances/{next(iter(acked - deleted))}").json()
        assert view["status"] == "up"  # restored with one fresh ttl
        listed = {i["id"]: i for i in c.get("/v1/instances").json()}
    # start-up brought the RDF form up to date with the records; a clean stop writes the rest: the
    # directory, read as RDF, holds exactly the registrations the restarted node served
    assert srv.stop() == 0
    at_rest = read_registrations(data)
    assert at_rest.keys() == present
    assert all(at_rest[iid]["port"] == listed[iid]["port"] and at_rest[iid]["tags"] == [list(t.values()) for t in
               listed[iid]["tags"]] for iid in present)


def read_registrations(data) -> dict[str, dict]:
    store = ox.Store.read_only(str(data))
    reader = Reader()
    reader.extend(store.quads_for_pattern(None, None, None, None))
    records, problems = reader.records()
    assert problems == []
    return {rec["id"]: rec for rec, _ in records}


def test_sigterm_drains_in_flight_requests_and_exits_0(start_server):
    srv = start_server(data_dir=None)
    with srv.client() as c:
        index = c.get("/v1/tags").headers["x-semreg-index"]
    result = {}

    def slow_read():
        try:
            r = httpx.get(srv.url + "/v1/tags", params={"index": index, "wait": "300s"}, timeout=60)
            result["status"] = r.status_code
        except httpx.HTTPError as exc:
            result["error"] = repr(exc)

    t = threading.Thread(target=slow_read)
    t.start()
    wait_for(lambda: watches_held(srv) == 1, what="the blocking read held by the server")
    code = srv.stop(timeout_s=30)
    t.join(10)
    assert code == 0 and not t.is_alive()  # the five-minute watch was answered by the stop, not waited out
    assert result.get("status") == 200, result


def watches_held(srv: ServerProcess) -> int:
    metrics = httpx.get(srv.url + "/metrics", timeout=5).text
    return int(float(next(line.split()[1] for line in metrics.splitlines() if line.startswith("semreg_watches "))))


def records_only_directory(path, count: int) -> None:
    """A data directory holding `count` instance records as the server writes them (written in memory, then
    loaded in bulk: a transaction per batch on disk takes 14 s for 100,000)."""
    memory = Store(None)
    memory.save_records([({"id": f"i{n}", "service": "svc", "address": "10.0.0.1", "port": 80, "ttl": 0,
                           "tags": [["http://ex.org/A", "http://ex.org/p", f"http://ex.org/O{n % 100}"]]}, n + 1)
                         for n in range(count)])
    disk = ox.Store(str(path))
    disk.bulk_extend(memory.ox.quads_for_pattern(None, None, None, None))
    disk.flush()
    del disk


@pytest.mark.slow
def test_sigterm_during_a_long_start_up_stops_it_exits_0_and_loses_nothing(tmp_path):
    """At a million instances the start-up takes a minute or more, past the grace a supervisor gives a stop
    (Kubernetes: 30 s) before it kills. SIGTERM once the node is restoring is honoured at the next look (every
    16,384 records read, between two batches put back), not at the end of the start-up."""
    data, count = tmp_path / "data", 60_000
    records_only_directory(data, count)
    server = ServerProcess(data, "--no-sparql")
    log_path = tmp_path / "serve.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(server.command(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        # the ontologies come before the records, inside the server's signal handlers: restoring starts now
        wait_for(lambda: '"ontologies restored"' in log_path.read_text() or proc.poll() is not None, 60,
                 "the node to begin restoring")
        os.killpg(proc.pid, signal.SIGTERM)
        assert proc.wait(60) == 0, log_path.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    said = log_path.read_text()
    assert '"start-up stopped: the server was asked to stop"' in said, said[-3000:]
    assert '"node open"' not in said and '"instances restored"' not in said and '"node stopped"' in said
    server.start(tmp_path / "again")
    try:
        with server.client() as c:
            assert c.get("/v1/summary").json()["instances"] == count
    finally:
        assert server.stop() == 0
