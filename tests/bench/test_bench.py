"""`semreg bench`: the pure parts (wrk reports, the synthetic data set, settings, targets), the peers
it starts, and one end-to-end smoke run. Timings are never asserted; etcd and wrk must be installed
(`apt-get install -y etcd-server wrk`): tests that need them fail, not skip, when they are missing.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time

import httpx
import pyoxigraph as ox
import pytest
from support.bench_runs import quick_bench
from support.paths import ROOT
from support.server import wait_for

from semreg.bench import configure, stores, wrk
from semreg.bench.aio.connection import Response, read_response
from semreg.bench.aio.crowd import WatchCrowd
from semreg.bench.aio.heartbeats import Heartbeater, heartbeat_due
from semreg.bench.aio.loop import LoopThread
from semreg.bench.aio.target import HealthTarget
from semreg.bench.context import median_figures
from semreg.bench.dataset import Dataset, class_iri, property_iri
from semreg.bench.peers import BenchError, Peers, find_tool
from semreg.bench.readings import (
    log_details,
    log_milestones,
    max_open_files,
    open_files_limit,
    parse_metrics,
    process_open_files_limit,
    process_rss_bytes,
    vmrss_bytes,
)
from semreg.bench.report import Target, lookup
from semreg.bench.scenarios import SCENARIOS, consul_watches
from semreg.bench.scenarios.watches import watch_groups
from semreg.bench.settings import from_args
from semreg.bench.stats import latency_stats, ms_summary, percentile

# -- wrk reports, captured from wrk 4.1.0 (Debian bookworm) ---------------------------------------------------
ETCD_RANGE = """\
Running 2s test @ http://127.0.0.1:53119/v3/kv/range
  2 threads and 32 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     3.93ms    1.72ms  14.72ms   69.24%
    Req/Sec     4.12k   407.43     4.51k    85.00%
  Latency Distribution
     50%    3.89ms
     75%    4.98ms
     90%    5.95ms
     99%    9.04ms
  16411 requests in 2.01s, 14.62MB read
Requests/sec:   8179.86
Transfer/sec:      7.29MB
"""

NOT_FOUND_MICROSECONDS = """\
Running 2s test @ http://127.0.0.1:36999/nothing
  2 threads and 32 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   469.54us  317.49us   7.11ms   84.73%
    Req/Sec    35.37k     1.12k   39.19k    90.00%
  Latency Distribution
     50%  405.00us
     75%  541.00us
     90%  782.00us
     99%    1.42ms
  140640 requests in 2.00s, 20.92MB read
  Non-2xx or 3xx responses: 140640
Requests/sec:  70297.61
Transfer/sec:     10.46MB
"""

ALL_TIMED_OUT = """\
Running 3s test @ http://127.0.0.1:18777/
  1 threads and 4 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     0.00us    0.00us   0.00us    -nan%
    Req/Sec     8.00     10.44    20.00     66.67%
  Latency Distribution
     50%    0.00us
     75%    0.00us
     90%    0.00us
     99%    0.00us
  8 requests in 3.01s, 0.88KB read
  Socket errors: connect 0, read 0, write 0, timeout 8
Requests/sec:      2.66
Transfer/sec:     300.66B
"""

SECONDS = """\
Running 3s test @ http://127.0.0.1:18777/
  1 threads and 4 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     1.20s   283.74us   1.20s    62.50%
    Req/Sec     3.00      0.00     3.00    100.00%
  Latency Distribution
     50%    1.20s 
     75%    1.20s 
     90%    1.20s 
     99%    1.20s 
  8 requests in 3.01s, 0.88KB read
Requests/sec:      2.66
Transfer/sec:     300.73B
"""


def test_wrk_parse_etcd_report():
    result = wrk.parse(ETCD_RANGE)
    assert result.requests_per_s == 8179.86
    assert result.requests == 16411
    assert result.duration_s == pytest.approx(2.01)
    assert result.percentiles_ms == {"50": 3.89, "75": 4.98, "90": 5.95, "99": 9.04}
    assert (result.latency_mean_ms, result.latency_max_ms) == (3.93, 14.72)
    assert result.read_bytes == int(14.62 * 1024**2)
    assert result.errors == 0
    figures = result.figures()
    assert (figures["p50_ms"], figures["p99_ms"], figures["requests_per_s"]) == (3.89, 9.04, 8179.9)


def test_wrk_parse_microseconds_and_non_2xx():
    result = wrk.parse(NOT_FOUND_MICROSECONDS)
    assert result.percentiles_ms["50"] == pytest.approx(0.405)
    assert result.percentiles_ms["99"] == pytest.approx(1.42)
    assert result.latency_mean_ms == pytest.approx(0.46954)
    assert result.non_2xx_3xx == 140640
    assert result.errors == 140640


def test_wrk_parse_socket_timeouts_and_nan():
    result = wrk.parse(ALL_TIMED_OUT)
    assert result.socket_errors == {"connect": 0, "read": 0, "write": 0, "timeout": 8}
    assert result.errors == 8
    assert result.percentiles_ms["99"] == 0.0


def test_wrk_parse_seconds_with_trailing_spaces():
    result = wrk.parse(SECONDS)
    assert result.percentiles_ms == {"50": 1200.0, "75": 1200.0, "90": 1200.0, "99": 1200.0}
    assert result.latency_max_ms == 1200.0
    assert result.read_bytes == int(0.88 * 1024)


def test_wrk_parse_refuses_output_without_a_report():
    with pytest.raises(BenchError, match="no report"):
        wrk.parse("unable to connect to 127.0.0.1:1 Connection refused\n")


def test_lua_script_escapes_every_byte_that_is_not_plain_ascii():
    script = wrk.lua_script("POST", '{"k": "é\\\n"}', {"Content-Type": "application/json"})
    assert 'wrk.method = "POST"' in script
    assert 'wrk.body = "{\\034k\\034: \\034\\195\\169\\092\\010\\034}"' in script
    assert 'wrk.headers["Content-Type"] = "application/json"' in script


def test_wrk_settings_never_ask_for_more_threads_than_connections():
    assert wrk.WrkSettings(threads=2, connections=1, duration_s=3).argv()[:3] == ["-t1", "-c1", "-d3s"]
    assert "--latency" in wrk.WrkSettings().argv()


# -- the synthetic data set --------------------------------------------------------------------------------
RDFS = "http://www.w3.org/2000/01/rdf-schema#"


@pytest.fixture(scope="module", params=[{}, {"classes": 300, "instances": 1000}], ids=["full", "quick"])
def dataset_store(request):
    data = Dataset(**request.param)
    store = ox.Store()
    store.load(data.turtle().encode(), ox.RdfFormat.TURTLE)  # raises on invalid Turtle
    return data, store


def _subjects(store: ox.Store, query: str) -> set[str]:
    return {row[0].value for row in store.query(query)}


def test_dataset_turtle_holds_every_class_and_property(dataset_store):
    data, store = dataset_store
    classes = _subjects(store, "SELECT ?c WHERE { ?c a <http://www.w3.org/2002/07/owl#Class> }")
    assert classes == {class_iri(i) for i in range(data.classes)}
    # every property reaches the root property, so the query's `p00` covers every tag's predicate
    reach = _subjects(store, f"SELECT ?p WHERE {{ ?p <{RDFS}subPropertyOf>* <{property_iri(0)}> }}")
    assert reach == {property_iri(i) for i in range(data.properties)}


def test_dataset_discovery_answer_is_exactly_the_chosen_instances(dataset_store):
    """Reasoned here independently (SPARQL property paths): the instances with a tag under the target."""
    data, store = dataset_store
    below = _subjects(store, f"SELECT ?c WHERE {{ ?c <{RDFS}subClassOf>* <{data.discovery_query()['s']}> }}")
    answer = {item["id"] for item in data.instances_iter() if any(tag["s"] in below for tag in item["tags"])}
    assert len(answer) == data.answer_size == 230
    assert answer == data.expected_answer_ids()


def test_dataset_is_a_dag_with_some_classes_of_two_parents(dataset_store):
    _data, store = dataset_store
    two_parents = list(store.query(
        f"SELECT ?c WHERE {{ ?c <{RDFS}subClassOf> ?a, ?b FILTER(STR(?a) < STR(?b)) }}"))
    assert two_parents
    assert not bool(store.query(f"ASK {{ ?c <{RDFS}subClassOf>+ ?c }}"))


def test_dataset_sparql_query_returns_a_handful_of_rows(dataset_store):
    data, store = dataset_store
    # semreg's default graph holds the closure too; asserted triples plus the closure give the descendants
    closure = f"SELECT DISTINCT ?s WHERE {{ ?s <{RDFS}subClassOf>+ <{class_iri(data.sparql_class)}> }}"
    assert 3 <= len(list(store.query(closure))) <= 30
    assert 1 <= len(list(store.query(data.sparql_query()))) <= 30


def test_dataset_is_deterministic_and_instances_never_expire():
    a, b = Dataset(classes=300, instances=500, answer_size=50), Dataset(classes=300, instances=500, answer_size=50)
    assert a.turtle() == b.turtle()
    assert list(a.instances_iter()) == list(b.instances_iter())
    item = a.instance(7)
    assert item["ttl"] == 0 and len(item["tags"]) == 3
    assert sum(len(batch) for batch in a.batches(128)) == 500


def test_dataset_refuses_impossible_sizes():
    with pytest.raises(ValueError, match="answer size"):
        Dataset(instances=100, answer_size=230)
    with pytest.raises(ValueError, match="classes"):
        Dataset(classes=10)


# -- settings, targets, summaries ---------------------------------------------------------------------------
def _settings(*argv: str):
    parser = argparse.ArgumentParser()
    configure(parser)
    return from_args(parser.parse_args(list(argv)), tuple(SCENARIOS))


def test_settings_quick_preset_and_explicit_flags_win():
    full = _settings()
    assert (full.instances, full.classes, full.duration_s, full.connections) == (10_000, 3000, 10, 32)
    quick = _settings("--quick", "--instances", "2000")
    assert quick.instances == 2000 and quick.classes == 300 and quick.duration_s == 2 and quick.quick
    assert _settings("--only", "closure, discovery").only == ("closure", "discovery")
    assert _settings("cluster").only == ("cluster",)  # `semreg bench cluster`
    assert _settings("--only", "ring", "cluster", "ring").only == ("ring", "cluster")


@pytest.mark.parametrize("argv, message", [
    (("--only", "nope"), "unknown scenario nope"),
    (("--connections", "0"), "--connections must be at least 1"),
    (("--semreg-url", "localhost:8080"), "http"),
])
def test_settings_refuse_bad_flags(argv, message):
    with pytest.raises(ValueError, match=message):
        _settings(*argv)


def test_settings_quick_preset_keeps_the_load_scenarios_small():
    full, quick = _settings(), _settings("--quick")
    assert (full.watches, full.watch_groups, full.checked_instances, full.heartbeat_instances) == (10_000, 100, 1000, 5000)
    assert (full.heartbeat_period_s, full.heartbeat_ttl_s, full.check_interval_s) == (5, 15, 1)
    assert (quick.watches, quick.watch_groups, quick.checked_instances, quick.heartbeat_instances) == (300, 10, 50, 200)
    assert _settings("--quick", "--watches", "1000").watches == 1000
    assert (full.consul_watches, full.churn_s, quick.consul_watches, quick.churn_s) == (1000, 60, 200, 10)
    assert (full.storage_instances, quick.storage_instances) == (100_000, 5000)
    assert _settings("--quick", "--storage-instances", "300").storage_instances == 300


def test_scenarios_are_registered_in_order_with_targets():
    assert list(SCENARIOS) == ["discovery", "many-tags", "cold-discovery", "sparql", "register-1000-tags", "closure",
                               "storage", "at-rest", "watches", "consul-watches", "health-checks", "heartbeat-load",
                               "ring",
                               "paused-owner", "dns", "consul", "cluster", "soak", "scale", "scale-ring", "owlstc",
                               "no-sparql", "noisy-neighbour", "noisy-neighbour-ring"]
    assert SCENARIOS["discovery"].needs == ("wrk", "etcd")
    assert SCENARIOS["watches"].needs == () and SCENARIOS["heartbeat-load"].needs == ("wrk",)
    assert SCENARIOS["ring"].needs == ("wrk", "etcd")
    assert all(s.targets for s in SCENARIOS.values() if s.name != "storage")  # storage reports a baseline
    assert SCENARIOS["storage"].needs == () and SCENARIOS["storage"].targets == ()


def test_the_thesis_client_matches_as_the_default_degrees_do():
    import owlrl
    import rdflib

    from semreg.bench.scenarios.thesis import ANY, CASE_STUDY_ONTOLOGY, EX, SUBCLASS, below, matches

    graph = rdflib.Graph().parse(CASE_STUDY_ONTOLOGY)
    owlrl.DeductiveClosure(owlrl.OWLRL_Semantics).expand(graph)
    works = below(graph, EX + "Obra", (SUBCLASS,))
    assert works is not None and {EX + "Obra", EX + "Livro", EX + "Filme", EX + "Pintura"} <= works
    assert EX + "Terror" not in works
    assert below(graph, ANY, ()) is None
    assert matches(EX + "Livro", works) and not matches(ANY, works) and matches(ANY, None)


def test_the_thesis_table_puts_ours_beside_theirs_and_says_where_k_was_capped():
    from semreg.bench.scenarios.thesis import THESIS, render

    rows = [{"table": table, "nodes": nodes, "cells": {str(k): {"ms": 1.5, "thesis_ms": ms, "k": min(k, nodes)}
                                                       for k, ms in theirs.items()}}
            for (table, nodes), theirs in THESIS.items()]
    header, *lines = render({"rows": rows})
    assert header == ["table", "nodes", "k=1", "k=5", "k=10"] and len(lines) == 6
    assert lines[0] == ["Table 2", "2", "1.5 vs 355.6", "1.5 vs 527.5 (k=2)", "1.5 vs 636.0 (k=2)"]
    assert lines[1][4] == "1.5 vs 2970.1 (k=5)" and lines[1][3] == "1.5 vs 1854.0"


def test_target_check():
    figures = {"ratio": 2.5, "peers": {"semreg": {"p99_ms": 12.0}}}
    assert Target("ratio", "ratio", ">=", 2.0).check(figures)["met"] is True
    assert Target("p99", "peers.semreg.p99_ms", "<=", 10.0, "ms").check(figures)["met"] is False
    assert Target("absent", "peers.etcd.p99_ms", "<=", 1.0).check(figures)["met"] is None
    assert lookup(figures, "peers.semreg") == {"p99_ms": 12.0}


def test_summaries():
    assert ms_summary([0.010, 0.030, 0.020]) == {"median_ms": 20.0, "p90_ms": 30.0, "min_ms": 10.0, "max_ms": 30.0,
                                                 "n": 3}
    merged = median_figures([{"requests_per_s": 10.0, "p99_ms": 5.0}, {"requests_per_s": 30.0, "p99_ms": 1.0},
                             {"requests_per_s": 20.0, "p99_ms": 3.0}])
    assert merged["requests_per_s"] == 20.0 and merged["p99_ms"] == 3.0
    assert merged["runs_requests_per_s"] == [10.0, 30.0, 20.0]


@pytest.mark.parametrize("prefix, end", [("/a/", b"/a0"), ("/semreg-bench/x", b"/semreg-bench/y"), ("", b"\0")])
def test_etcd_prefix_end(prefix, end):
    assert stores.prefix_end(prefix) == end


def test_cli_registers_bench():
    from semreg.cli import build_parser

    args = build_parser().parse_args(["bench", "--quick", "--only", "closure"])
    assert args.command == "bench" and args.quick and callable(args.run)


@pytest.mark.process
def test_missing_wrk_is_a_clear_error(tmp_path):
    env = {**os.environ, "PATH": str(tmp_path)}  # no wrk on this PATH
    done = subprocess.run([sys.executable, "-m", "semreg", "bench", "--only", "sparql", "--json"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert "wrk is not installed" in done.stderr and "apt-get install -y wrk" in done.stderr
    assert done.stdout == ""


# -- the load the bench process makes itself (semreg.bench.aio) -------------------------------------------------
def test_heartbeats_are_spread_evenly_and_each_instance_beats_once_a_period():
    n, period = 5000, 5.0
    schedule = [heartbeat_due(k, n, period) for k in range(3 * n)]
    dues = [due for due, _ in schedule]
    assert dues == sorted(dues) and dues[0] == 0.0
    gaps = {round(b - a, 9) for a, b in zip(dues, dues[1:])}
    assert gaps == {round(period / n, 9)}  # 1,000 a second, evenly
    assert sum(1 for due in dues if 1.0 <= due < 2.0) == 1000
    first_round = [index for due, index in schedule[:n]]
    assert sorted(first_round) == list(range(n))  # every instance once a period
    beats_of_7 = [due for due, index in schedule if index == 7]
    assert beats_of_7 == pytest.approx([7 * period / n, period + 7 * period / n, 2 * period + 7 * period / n])
    assert heartbeat_due(n - 1, n, period)[0] < period  # the last of a round is due before the next round


def test_vmrss_and_open_files_limit_from_proc():
    status = "Name:\tpython\nVmPeak:\t  400000 kB\nVmRSS:\t  370220 kB\nRssAnon:\t  300000 kB\n"
    assert vmrss_bytes(status) == 370220 * 1024
    assert vmrss_bytes("Name:\tkthreadd\n") is None
    limits = ("Limit                     Soft Limit           Hard Limit           Units     \n"
              "Max open files            1024                 20000                files     \n")
    assert max_open_files(limits) == 1024
    assert max_open_files("Max open files            unlimited            unlimited            files\n") is None
    assert process_rss_bytes(os.getpid()) > 0
    assert process_open_files_limit(os.getpid()) == open_files_limit()
    assert process_rss_bytes(None) is None


def test_parse_metrics_and_log_details():
    text = """# HELP semreg_watches blocking reads waiting for a change
# TYPE semreg_watches gauge
semreg_watches 9900.0
semreg_instances{status="critical"} 3.0
semreg_checks_total 1.2345e+04
"""
    series = parse_metrics(text)
    assert series == {"semreg_watches": 9900.0, 'semreg_instances{status="critical"}': 3.0,
                      "semreg_checks_total": 12345.0}
    log = "\n".join([
        '{"level":"info","msg":"check failing","instance":"a","detail":"ReadTimeout: "}',
        '{"level":"info","msg":"check failing","instance":"b","detail":"ReadTimeout: "}',
        '{"level":"info","msg":"check passing","instance":"a","detail":"HTTP 200"}',
        'not json, check failing',
        '{"level":"info","msg":"check failing","instance":"c","detail":"HTTP 503"}'])
    assert log_details(log, "check failing") == {"ReadTimeout: ": 2, "HTTP 503": 1}


def test_log_milestones_split_a_start_up_from_the_lines_logged_since_it_began():
    log = "\n".join([
        '{"ts":"2026-12-03T10:00:00.000Z","msg":"node open","ms":900}',  # the previous run's, before `since`
        '{"ts":"2026-12-03T10:00:05.250Z","msg":"store opened","ms":1200}',
        'ed":"cut at the start of a tail',
        '{"ts":"2026-12-03T10:00:09.000Z","msg":"restoring instances","done":20000}',
        '{"ts":"2026-12-03T10:00:12.500Z","msg":"node open","ms":7000}',
        '{"ts":"not a time","msg":"instances restored"}'])
    since = 1_796_292_004.0  # 2026-12-03T10:00:04Z
    assert log_milestones(log, ("store opened", "instances restored", "node open"), since) == {
        "store opened": 1.25, "node open": 8.5}
    assert log_milestones(log, ("store opened",), since + 60) == {}


def test_wake_statistics():
    assert latency_stats([]) == {"n": 0}
    samples = [n / 1000 for n in range(1, 101)]  # 1..100 ms
    stats = latency_stats(samples)
    assert stats == {"n": 100, "p50_ms": 50.0, "p99_ms": 99.0, "min_ms": 1.0, "max_ms": 100.0}
    assert latency_stats([0.002])["p99_ms"] == 2.0
    assert percentile([1.0, 2.0, 3.0], 0) == 1.0 and percentile([1.0, 2.0, 3.0], 100) == 3.0
    with pytest.raises(ValueError):
        percentile([], 50)


def test_watch_groups_are_round_robin():
    plan = watch_groups(10_000, 100)
    assert len(plan) == 10_000 and set(plan) == set(range(100))
    assert {plan.count(g) for g in range(100)} == {100}
    assert sorted({watch_groups(301, 10).count(g) for g in range(10)}) == [30, 31]


def test_responses_read_back_to_back():
    """The bench's client reads whole responses (framing itself is tested in test_http1.py)."""
    async def read(raw: bytes) -> list[Response]:
        reader = asyncio.StreamReader()
        reader.feed_data(raw)
        reader.feed_eof()
        return [await read_response(reader) for _ in range(3)]

    first, second, third = asyncio.run(read(b"HTTP/1.1 200 OK\r\nX-Semreg-Index: 17\r\nContent-Length: 2\r\n\r\nok"
                                            b"HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n"
                                            b"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"
                                            b"HTTP/1.0 200 OK\r\n\r\nuntil close"))
    assert (first.status, first.body, first.headers["x-semreg-index"], first.keep_alive) == (200, b"ok", "17", True)
    assert (second.status, second.body, second.keep_alive) == (404, b"abcde", True)
    assert (third.status, third.body, third.keep_alive) == (200, b"until close", False)


def test_heartbeater_and_watch_crowd_against_the_local_target():
    """The schedule runs for real against the bench's own HTTP target, which answers 200 to anything."""
    with LoopThread() as loop, HealthTarget(loop) as target:
        assert httpx.get(target.url + "/health").text == "ok"
        beater = Heartbeater(target.url, [f"i{n}" for n in range(20)], period_s=0.2, connections=4)
        running = loop.spawn(beater.run())
        wait_for(lambda: beater.scheduled >= 40, 10, "forty beats scheduled")  # the rate is heartbeat-load's figure
        beater.stop()
        stats = running.result(10)
        assert stats.failed == 0 and stats.statuses == {"200": stats.ok}
        assert stats.ok >= 40 and stats.ok == beater.scheduled  # every beat scheduled was sent and answered
        assert target.hits >= stats.ok and target.connections <= 5
        crowd = WatchCrowd(target.url, [(n % 3, f"/v1/discover?s=x&n={n}") for n in range(50)], concurrency=8)
        loop.run(crowd.start())
        deadline = time.monotonic() + 10
        while len(crowd.wakes) < 50 and time.monotonic() < deadline:
            time.sleep(0.01)
        loop.run(crowd.aclose())
        assert crowd.failed == 0 and crowd.sent == 50 and len(crowd.wakes) == 50
        assert {w.status for w in crowd.wakes} == {200} and sorted(w.group for w in crowd.wakes) == sorted(
            n % 3 for n in range(50))


# -- the peers, under wrk ------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.process
def test_etcd_and_oxigraph_under_wrk(tmp_path):
    """etcd's range read and the Oxigraph server's query, each under one short wrk run; all stopped after."""
    for tool in ("etcd", "wrk", "oxigraph"):
        find_tool(tool)  # MissingTool says which apt/pip command installs it
    peers = Peers(tmp_path)
    try:
        etcd = peers.etcd()
        views = [{"id": f"i{n}", "tags": [{"s": "http://x/A"}]} for n in range(20)]
        prefix = stores.etcd_put_views(etcd.url, "/t/", views)
        one_second = wrk.WrkSettings(threads=1, connections=4, duration_s=1)
        ranged = wrk.run(etcd.url + "/v3/kv/range", one_second, method="POST", body=stores.etcd_range_body(prefix),
                         headers={"Content-Type": "application/json"})
        assert ranged.requests > 0 and ranged.errors == 0
        oxigraph = peers.oxigraph()
        httpx.post(oxigraph.url + "/store", params={"graph": "urn:g"}, content=b"<http://x/a> <http://x/b> <http://x/c> .\n",
                   headers={"Content-Type": "application/n-triples"}).raise_for_status()
        query = httpx.get(oxigraph.url + "/query", params={"query": "SELECT * WHERE { ?s ?p ?o }"},
                          headers={"Accept": "application/sparql-results+json"})
        assert len(query.json()["results"]["bindings"]) == 1  # the union default graph sees the named graph
        queried = wrk.run(str(query.request.url), one_second)
        assert queried.requests > 0 and queried.errors == 0
    finally:
        processes = [peer.proc for peer in peers.started]
        peers.close()
    assert processes and all(proc.poll() is not None for proc in processes)


@pytest.mark.slow
@pytest.mark.timeout(180)
@pytest.mark.process
def test_quick_run_of_the_answer_scenarios():
    """many-tags, cold-discovery and sparql at --quick sizes: the JSON shape and the checks, never the timings."""
    done = subprocess.run([sys.executable, "-m", "semreg", "bench", "--quick", "--only",
                           "many-tags,cold-discovery,sparql", "--json"], cwd=ROOT, capture_output=True, text=True,
                          timeout=170, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    scenarios = json.loads(done.stdout)["scenarios"]
    many, cold, sparql = scenarios["many-tags"], scenarios["cold-discovery"], scenarios["sparql"]
    for figures in scenarios.values():
        assert "error" not in figures, figures["error"]
        assert "warning" not in figures, figures["warning"]
    assert many["answer_instances"] > 5 and many["semreg_response_bytes"] < many["etcd_range_values_bytes"]
    assert set(many["peers"]) == {"semreg", "etcd-range"}
    assert cold["sample_agree"] == cold["sample_questions"] == 25
    assert cold["peers"]["semreg-cold"]["requests_per_s"] > 0 and cold["ratio_oxigraph_semreg_ms"] > 0
    assert set(sparql["peers"]) == {"semreg", "oxigraph", "semreg-distinct", "oxigraph-distinct"}
    assert all(sparql["distinct_sample_agrees"].values()) and sparql["rows"]["semreg"] == sparql["rows"]["oxigraph"]


# -- end to end -------------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.process
def test_quick_run_prints_one_json_object():
    done = subprocess.run([sys.executable, "-m", "semreg", "bench", "--quick", "--only", "register-1000-tags,closure",
                           "--json"], cwd=ROOT, capture_output=True, text=True, timeout=110, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)  # exactly one JSON object: nothing else on stdout
    assert set(report) >= {"machine", "scenarios"}
    assert report["machine"]["cores"] >= 1 and report["machine"]["python"]
    assert list(report["scenarios"]) == ["register-1000-tags", "closure"]
    register, closure = report["scenarios"]["register-1000-tags"], report["scenarios"]["closure"]
    assert "error" not in register and "error" not in closure
    assert register["tags"] == 1000 and register["statuses"] == {"201": 5, "200": 2}
    for summary in (register["create"], register["replace"], closure["second_upload"], closure["small_upload"],
                    closure["foaf_reupload"]):
        assert isinstance(summary["median_ms"], float) and summary["median_ms"] > 0
    assert closure["second_upload"]["n"] == 2 and closure["small_upload"]["n"] == 3
    assert set(closure["ontologies"]) == {"bench-schemaorg", "bench-dbpedia"}
    for figures in (register, closure):
        assert figures["targets"] and all(isinstance(t["met"], bool) for t in figures["targets"])


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.process
def test_quick_run_of_the_load_scenarios():
    """watches, health-checks and heartbeat-load at --quick sizes: the JSON shape, never the timings."""
    done = subprocess.run([sys.executable, "-m", "semreg", "bench", "--quick", "--only",
                           "watches,health-checks,heartbeat-load", "--json"], cwd=ROOT, capture_output=True, text=True,
                          timeout=110, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    scenarios = json.loads(done.stdout)["scenarios"]
    assert list(scenarios) == ["watches", "health-checks", "heartbeat-load"]
    watches, checks, beats = scenarios["watches"], scenarios["health-checks"], scenarios["heartbeat-load"]
    for figures in scenarios.values():
        assert "error" not in figures, figures["error"]
        assert figures["targets"] and all(isinstance(t["met"], bool) for t in figures["targets"])

    assert watches["watches"] == watches["watches_held"] == 300 and watches["groups"] == 10
    assert watches["connect_errors"] == 0 and watches["premature_wakes"] == 0
    assert watches["expected_woken"] == watches["woken"] == watches["wake"]["n"] == 30  # exactly one group
    assert watches["wrong_wakes"] == 0 and watches["irrelevant_wakes"] == 0
    assert watches["watches_after_wake"] == 270 and watches["wake_all"]["n"] == 270
    for key in ("p50_ms", "p99_ms", "max_ms"):
        assert isinstance(watches["wake"][key], float)
    assert watches["server_rss_with_mib"] > 0 and isinstance(watches["bytes_per_watch"], int)

    assert checks["checked_instances"] == 50 and checks["checks_per_s"] > 0 and checks["target_hits_per_s"] > 0
    assert set(checks["peers"]) == {"without-checks", "with-checks"}
    assert isinstance(checks["p99_ratio"], float) and isinstance(checks["check_failure_details"], dict)

    assert beats["heartbeat_instances"] == 200 and beats["scheduled_per_s"] == 40.0
    assert beats["heartbeats_per_s"] > 0 and beats["heartbeats_failed"] == 0 and beats["critical_max"] == 0
    assert beats["listed"] == 200 and beats["listed_not_up"] == {}
    assert set(beats["peers"]) == {"without-heartbeats", "with-heartbeats"}
    for peer in (*checks["peers"].values(), *beats["peers"].values()):
        assert peer["requests_per_s"] > 0 and peer["errors"] == 0


def test_the_consul_churn_takes_each_instance_through_every_step_on_tags_no_saved_query_finds():
    consul = [consul_watches.consul_churn("alone", k) for k in range(2 * len(consul_watches.CONSUL_STEPS))]
    assert [(method, target.split("?")[0].rsplit("/", 1)[-1]) for method, target, _ in consul[:8]] == [
        ("PUT", "register"), ("PUT", "service:bench-cw-churn-alone-000000"), ("PUT", "service:bench-cw-churn-alone-000000"),
        ("PUT", "service:bench-cw-churn-alone-000000"), ("PUT", "service:bench-cw-churn-alone-000000"),
        ("PUT", "bench-cw-churn-alone-000000"), ("PUT", "bench-cw-churn-alone-000000"), ("PUT", "bench-cw-churn-alone-000000")]
    assert [t.split("/")[4] for _, t, _ in consul[1:5]] == ["pass", "warn", "fail", "pass"]
    assert json.loads(consul[8][2])["ID"] == "bench-cw-churn-alone-000001"  # a new instance each round
    public = [consul_watches.public_churn("beside", k) for k in range(len(consul_watches.PUBLIC_STEPS))]
    assert [method for method, _, _ in public] == ["PUT", "PUT", "PUT", "PUT", "PUT", "DELETE"]
    assert [json.loads(body).get("status") for _, _, body in public[1:5]] == [None, "draining", "up", None]
    churned = [json.loads(consul[0][2])["Tags"][0], *json.loads(public[0][2])["tags"],
               *(consul_watches.near_miss(k) for k in range(20))]
    horror = {consul_watches.horror_tag(g) for g in range(consul_watches.QUERIES)}
    assert churned and not horror & set(churned) and all(t.endswith(":Comedy") for t in churned)
    names = {consul_watches.name_of(g) for g in range(consul_watches.QUERIES + consul_watches.NAMES)}
    assert len(names) == 10 and not names & {"bench-cw-churn", "bench-cw-public", "bench-cw-beating", "bench-cw-books"}


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.process
def test_quick_run_of_the_consul_watches_scenario():
    """200 blocked Consul reads beside 3 s of churn: the JSON shape and who woke, never the timings."""
    figures = quick_bench("consul-watches", "--churn-s", "3", timeout_s=110)
    assert figures["targets"] and all(isinstance(t["met"], bool) for t in figures["targets"])
    assert figures["watches"] == figures["watches_held"] == 200 and figures["connect_errors"] == 0
    assert figures["premature_wakes"] == figures["stray_wakes"] == figures["waits_ended"] == 0
    assert figures["watches_during_churn"] == [200] and figures["woken_by_churn"] == []
    for label in ("wake_by_meaning", "wake_by_name"):  # exactly one group each
        assert figures[label]["expected_woken"] == figures[label]["woken"] == 20 and figures[label]["wrong_wakes"] == 0
    assert figures["watches_after_wake"] == 160 and figures["wake_all"]["n"] == figures["wake_all"]["expected"] == 160
    for phase in ("churn_alone", "churn"):
        assert figures[phase]["requests"].get("consul 2xx", 0) > 0 and figures[phase]["failures"] == {}
        assert figures[phase]["heartbeats"] > 0 and figures[phase]["heartbeats_failed"] == 0
    assert isinstance(figures["bytes_per_watch"], int) and isinstance(figures["blocks_per_watch"], float)
    assert isinstance(figures["churn_heap_share_pct"], float)


@pytest.mark.slow
@pytest.mark.timeout(240)
@pytest.mark.process
def test_quick_run_of_the_ring_scenario():
    """Three nodes and etcd beside one node at --quick sizes: the same answers, two copies of each record."""
    ring = quick_bench("ring", timeout_s=230)
    assert sum(ring["records_per_node"].values()) == 2 * 1000
    assert set(ring["peers"]) == {"single-repeated", "ring-repeated", "single-distinct", "ring-distinct"}
    assert ring["distinct_one_at_a_time"]["ring"]["n"] == ring["distinct_one_at_a_time"]["single"]["n"] == 25
    assert ring["register_1000_tags"]["n"] == 5 and ring["ratio_repeated_ring_single"] > 0
    assert len(ring["targets"]) == 3 and all(isinstance(t["met"], bool) for t in ring["targets"])
    assert set(ring["rss_mib"]) == {"single", "n1", "n2", "n3"}


@pytest.mark.slow
@pytest.mark.timeout(180)
@pytest.mark.process
def test_quick_run_of_the_paused_owner_scenario():
    """One round at --quick sizes: the JSON shape, and the stopped node holding every registration after."""
    paused = quick_bench("paused-owner", timeout_s=170)
    assert paused["steady"]["n"] == paused["paused"]["n"] == 10 and len(paused["paused_first_ms"]) == 1
    assert len(paused["caught_up_s"]) == 1 and set(paused["hints"]) == {"kept", "delivered"}
    assert len(paused["targets"]) == 1 and isinstance(paused["targets"][0]["met"], bool)


@pytest.mark.slow
@pytest.mark.timeout(180)
@pytest.mark.process
def test_quick_run_of_the_storage_scenario():
    """A batch load, three restarts on one data directory and the backup (if offered) at --quick sizes: the JSON
    shape, every server holding what was registered (the scenario checks it), never the timings."""
    storage = quick_bench("storage", "--storage-instances", "2000", timeout_s=170)
    load, startup = storage["batch_load"], storage["startup"]
    assert load["instances"] == 1000 and load["instances_per_s"] > 0 and load["seconds"] > 0
    assert startup["instances"] == 2000 and startup["tags_per_instance"] == 3 and startup["register_per_s"] > 0
    assert len(startup["seconds_all"]) == len(startup["stop_seconds"]) == 3
    assert startup["seconds"] == sorted(startup["seconds_all"])[1] and startup["data_dir_bytes"] > 0
    assert len(startup["data_dir_mib_at_stops"]) == 3
    backup = storage["backup"]
    if isinstance(backup, dict):  # a server that offers GET /v1/backup
        assert backup["bytes"] > 0 and storage["restore"]["seconds"] > 0
    else:
        assert backup == "not offered by this server" and "restore" not in storage
    assert storage["targets"] == []


@pytest.mark.process
def test_storage_refuses_an_external_server():
    """It stops and restarts its servers, so --semreg-url is an error of that scenario, not of the run's flags."""
    done = subprocess.run([sys.executable, "-m", "semreg", "bench", "--only", "storage", "--semreg-url",
                           "http://127.0.0.1:9", "--json"], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 1, done.stderr[-3000:]
    assert "without --semreg-url" in json.loads(done.stdout)["scenarios"]["storage"]["error"]
