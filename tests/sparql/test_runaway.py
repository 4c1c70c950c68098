"""Runaway SPARQL queries against a real server: they stop at the limit, for real, and nothing else waits.

A query that matches every triple three times over (8 billion rows here) never ends by itself; the
server must answer 503 at its time limit and stop evaluating it, keep answering everything else
meanwhile, and stop when asked to with such a query in flight, without waiting for it. What is asserted is
what happened and in which order (answered while the runaways still ran, 503 for the time limit, every
process asleep after); how long a runaway takes to be answered is a figure of `semreg bench noisy`
(the adversary's `sparql` requests, per kind).
"""
from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import httpx
import pytest
from support.paths import ONTOLOGIES
from support.processes import stat, tree
from support.server import wait_for

pytestmark = pytest.mark.process

RUNAWAY = "SELECT (COUNT(*) AS ?n) WHERE { ?a ?b ?c . ?d ?e ?f . ?g ?h ?i }"
TICKS = os.sysconf("SC_CLK_TCK")


def load(url: str, instances: int = 60) -> None:
    batch = [{"id": f"svc-{k}", "service": "svc", "address": "127.0.0.1", "port": 9000 + k, "ttl": 0,
              "tags": [f"ex:Livro ex:temUmGenero ex:Terror{t}" for t in range(5)]} for k in range(instances)]
    with httpx.Client(base_url=url, timeout=30) as http:
        assert http.post("/v1/instances/batch", json={"instances": batch}).status_code == 200
        # with a short time limit the first queries may pass it while the query processes take the batch in
        answer = wait_for(lambda: (r := http.get("/sparql", params={"query": "SELECT (COUNT(*) AS ?n) { ?s ?p ?o }"}))
                          .status_code == 200 and r, 30, "the batch visible to SPARQL")
        assert int(answer.json()["results"]["bindings"][0]["n"]["value"]) > 2000  # so the runaway is one




def cpu_seconds(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        fields = stat(pid)
        if fields is not None and fields[0] != "Z":
            total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / TICKS


def tree_cpu_over(root: int, window_s: float) -> float:
    pids = tree(root)
    before = cpu_seconds(pids)
    time.sleep(window_s)  # a measurement window, not a wait for something to happen
    return cpu_seconds(pids) - before


def all_sleeping(root: int) -> bool:
    return all((stat(pid) or ["S"])[0] in ("S", "I", "Z") for pid in tree(root))


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def send_all(url: str, queries: list[str], results: list, started: threading.Event | None = None) -> list[threading.Thread]:
    def one(query: str) -> None:
        with httpx.Client(base_url=url, timeout=60) as http:
            response = http.get("/sparql", params={"query": query})
        results.append((query, response.status_code, response))

    threads = [threading.Thread(target=one, args=(q,)) for q in queries]
    for t in threads:
        t.start()
    return threads


def stopped(url: str) -> float:
    """Queries stopped at their time limit so far (`semreg_sparql_stopped_total`)."""
    return next(float(line.split()[1]) for line in httpx.get(url + "/metrics").text.splitlines()
                if line.startswith("semreg_sparql_stopped_total "))


def running(url: str) -> int:
    text = httpx.get(url + "/metrics").text
    line = next(line for line in text.splitlines() if line.startswith("semreg_sparql_running "))
    return int(float(line.split()[1]))


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from support.server import ServerProcess

    base = tmp_path_factory.mktemp("runaway")
    node = ServerProcess(None, "--sparql-time-limit", "1.5", "--ontology", str(ONTOLOGIES / "obras.ttl"))
    node.start(base / "logs")
    load(node.url)
    yield node
    node.stop()


def test_five_runaways_each_get_503_at_the_limit_and_everything_else_answers_meanwhile(server):
    url = server.url
    with httpx.Client(base_url=url, timeout=30) as http:
        idle_cpu = tree_cpu_over(server.proc.pid, 1.0)
        stopped_before = stopped(url)
        results: list = []
        threads = send_all(url, [RUNAWAY] * 5, results)
        wait_for(lambda: running(url) == 5, 10, "five runaways running")
        # beside them: a small query and a discovery answer while all five still run
        small = http.get("/sparql", params={"query": "ASK { ?s ?p ?o }"})
        discovered = http.get("/v1/discover", params={"s": "ex:Obra", "p": "ex:temUmGenero", "o": "sr:Any"})
        assert small.status_code == 200 and small.json()["boolean"] is True
        assert discovered.status_code == 200 and len(discovered.json()["instances"]) == 60
        assert running(url) == 5 and not results
        # ... because the query processes run below the server's priority
        main_nice = int(stat(server.proc.pid)[16])
        assert all(int(stat(pid)[16]) >= main_nice + 5 for pid in tree(server.proc.pid)[1:])
        for t in threads:
            t.join(30)
        assert [r[1] for r in results] == [503] * 5
        for _, _, response in results:
            assert response.headers["retry-after"] == "2"
            assert "time limit of 1.5 s" in response.json()["error"]
        assert stopped(url) == stopped_before + 5  # each stopped by the time limit, its process killed
        # once the last is answered, nothing burns CPU any more: every process is asleep, and stays so
        wait_for(lambda: all_sleeping(server.proc.pid), 30, "every server process asleep")
        assert tree_cpu_over(server.proc.pid, 1.0) <= idle_cpu + 0.15
        assert http.get("/sparql", params={"query": "ASK { ?s ?p ?o }"}).status_code == 200


def test_a_small_query_beside_runaways_is_answered_on_a_connection_uvicorn_kept(server):
    """A pooled client that registered, then queries: its connection stays with uvicorn, whose route sends
    the query to a process; never to one about to evaluate a runaway (it would be killed with it)."""
    url = server.url
    for attempt in range(3):
        results: list = []
        threads = send_all(url, [RUNAWAY] * 5, results)
        wait_for(lambda: running(url) == 5, 10, "five runaways running")
        with httpx.Client(base_url=url, timeout=30) as http:
            put = http.put(f"/v1/instances/kept-{attempt}", json={"service": "kept", "address": "127.0.0.1",
                                                                 "port": 9000, "ttl": 0, "tags": []})
            assert put.status_code in (200, 201)
            small = http.get("/sparql", params={"query": "ASK { ?s ?p ?o }"})  # on the PUT's connection
            assert small.status_code == 200 and small.json()["boolean"] is True, small.text
            assert not results  # answered before any runaway was: it waited for none of them
        for t in threads:
            t.join(30)
        assert [r[1] for r in results] == [503] * 5


def test_memory_stays_bounded_over_a_hundred_runaways_in_a_row(start_server):
    node = start_server("--sparql-time-limit", "0.1", "--ontology", str(ONTOLOGIES / "obras.ttl"), data_dir=None)
    load(node.url)
    with httpx.Client(base_url=node.url, timeout=30) as http:
        def runaway() -> None:
            assert http.get("/sparql", params={"query": RUNAWAY}).status_code == 503

        stopped_before = stopped(node.url)
        for _ in range(10):
            runaway()
        rss_before = rss_kib(node.proc.pid)
        for _ in range(90):
            runaway()
        rss_after = rss_kib(node.proc.pid)
        assert rss_after - rss_before < 20 * 1024, (rss_before, rss_after)
        assert len(tree(node.proc.pid)) <= 1 + 1 + 8  # the server, the template, at most the max workers
        # each was killed at the limit, or (when its process was still being forked) never started
        assert 50 <= stopped(node.url) - stopped_before <= 100
        assert http.get("/sparql", params={"query": "ASK { ?s ?p ?o }"}).status_code == 200


def test_sigterm_with_a_runaway_in_flight_exits_0_without_waiting_for_it(start_server):
    node = start_server("--sparql-time-limit", "60", "--ontology", str(ONTOLOGIES / "obras.ttl"), data_dir=None)
    load(node.url)
    results: list = []
    threads = send_all(node.url, [RUNAWAY], results)
    wait_for(lambda: running(node.url) == 1, 10, "the runaway running")
    processes = tree(node.proc.pid)
    assert len(processes) >= 3
    os.kill(node.proc.pid, signal.SIGTERM)
    assert node.proc.wait(30) == 0  # well before the runaway's time limit of 60 s
    threads[0].join(10)
    assert results and results[0][1] == 503 and "stopping" in results[0][2].json()["error"]
    wait_for(lambda: all(stat(pid) is None or stat(pid)[0] == "Z" for pid in processes), 5, "no process left")
