"""The noisy-neighbour scenarios: what the adversary sends and how its answers are classified, the phases,
the wakes matched to their writes, the figures and their table (pure, from made-up rows); the probes, the
heartbeats' answer times and the adversary's child process against the bench's own local target; and a
quick run of each scenario end to end, whose figures are checked for shape, never for timings."""
from __future__ import annotations

import argparse
import json
import os
import time
from urllib.parse import parse_qs, urlsplit

import orjson
import pytest
from support.bench_runs import quick_bench

from semreg.bench import configure
from semreg.bench.aio import adversary as adv
from semreg.bench.aio.heartbeats import Heartbeater, lease_end
from semreg.bench.aio.loop import LoopThread
from semreg.bench.aio.probes import WatchLog, loop_lag, probe_health, rearmed_watch
from semreg.bench.aio.target import HealthTarget
from semreg.bench.readings import cpu_ticks, tree_cpu_seconds
from semreg.bench.scenarios import SCENARIOS, default_names
from semreg.bench.scenarios import noisy_figures as nf
from semreg.bench.scenarios.noisy_load import QUICK_LOAD, NoisyLoad, flip, heartbeating, watch_instance, watch_target
from semreg.bench.settings import from_args

PHASES = nf.Phases((10.0, 20.0, 80.0, 90.0))


def _settings(*argv: str):
    parser = argparse.ArgumentParser()
    configure(parser)
    return from_args(parser.parse_args(list(argv)), tuple(SCENARIOS))


# -- what the adversary sends -------------------------------------------------------------------------------
def test_the_discovery_asks_64_unknown_patterns_with_a_new_floor_every_time():
    assert adv.similar_patterns(64)[5] == {"s": "ho:Ask5Widget", "p": "ho:rel5", "o": "ho:Ask5Style"}
    body = orjson.loads(adv.similar_body(3, 64))
    assert body["match"] == "all,similar" and len(body["all"]) == 64
    assert body["all"][5] == {"s": "ho:Ask197Widget", "p": "ho:rel197", "o": "ho:Ask197Style"}  # 3·64 + 5
    asked = [p["s"] for k in range(100) for p in orjson.loads(adv.similar_body(k, 64))["all"]]
    assert len(set(asked)) == 6400  # new terms every time: no score is ever cached
    floors = [adv.similarity_floor(k) for k in range(100_000)]
    assert floors[0] == 0.011 and len(set(floors)) == len(floors) and max(floors) < 0.03  # never a cached floor
    assert len({adv.runaway_target(k) for k in range(50)}) == 50
    query = parse_qs(urlsplit(adv.runaway_target(4)).query)["query"][0]
    assert "GRAPH <urn:semreg:registry>" in query and query.endswith("LIMIT 5")


def test_the_instances_the_discovery_scores_and_those_of_the_batch():
    noisy = adv.noisy_instance(7)
    assert noisy["tags"] == ["ho:Widget14Service ho:hasGenre ho:Genre14Style",
                             "ho:Widget15Service ho:hasGenre ho:Genre15Style"]
    batch = adv.batch_instances(25)
    assert [b["id"] for b in batch][:2] == ["nn-batch-00000", "nn-batch-00001"] and len({b["id"] for b in batch}) == 25
    assert {b["tags"][0]["s"] for b in batch} == {f"{adv.NS}Batch{k}" for k in range(10)}


@pytest.mark.parametrize("status, headers, body, outcome", [
    (None, {}, b"", "transport"),
    (200, {}, b"{}", "2xx"),
    (204, {}, b"", "2xx"),
    (400, {}, b'{"error": "the question would score 51,200 terms; the budget is 10,000 (--similar-budget)."}',
     "400-budget"),
    (400, {}, b'{"error": "too broad", "budget": "expansions"}', "400-budget"),
    (400, {}, b'{"error": "s: unknown prefix zz."}', "other-4xx"),
    (413, {}, b'{"error": "too large"}', "other-4xx"),
    (429, {"retry-after": "1"}, b"", "429"),
    (503, {"retry-after": "2"}, b'{"error": "shedding"}', "503-retry-after"),
    (503, {}, b'{"error": "no Retry-After"}', "other-5xx"),
    (500, {}, b"Internal Server Error", "other-5xx"),
])
def test_every_answer_is_classified(status, headers, body, outcome):
    assert adv.classify(status, headers, body) == outcome


# -- what the bench registers and asks ------------------------------------------------------------------------
def test_three_kinds_of_question_and_writes_that_alternate():
    assert [watch_target(g).split("?")[0] for g in range(3)] == ["/v1/discover", "/v1/instances",
                                                                  "/v1/queries/nn-watch-002/discover"]
    method, target, body = flip(4, present=False)
    assert (method, target) == ("PUT", "/v1/instances/nn-flip-004")
    sent = json.loads(body)
    assert sent["service"] == watch_instance(4)["service"] and sent["tags"] == watch_instance(4)["tags"]
    assert flip(4, present=True) == ("DELETE", "/v1/instances/nn-flip-004", None)
    beating = heartbeating(3, 10)
    assert [b["ttl"] for b in beating] == [10, 10, 10] and beating[2]["id"] == "nn-hb-00002"


def test_the_load_is_a_thousand_heartbeats_a_second_and_the_quick_one_a_tenth():
    full = NoisyLoad()
    assert full.instances / full.period_s == 1000.0 and full.ttl_s == 10 and full.watches == 300
    assert QUICK_LOAD.instances / QUICK_LOAD.period_s == 100.0
    assert _settings().adversary_s == 60 and _settings("--quick").adversary_s == 8
    assert _settings("--adversary-s", "120").adversary_s == 120
    with pytest.raises(ValueError, match="--adversary-s must be at least 1"):
        _settings("--adversary-s", "0")
    assert {"noisy-neighbour", "noisy-neighbour-ring"} <= set(SCENARIOS)
    assert not {"noisy-neighbour", "noisy-neighbour-ring"} & set(default_names())
    assert SCENARIOS["noisy-neighbour-ring"].needs == ("etcd",) and SCENARIOS["noisy-neighbour"].needs == ()
    assert [t.path for t in SCENARIOS["noisy-neighbour-ring"].targets][-1] == "members_lapsed"


# -- phases and figures -------------------------------------------------------------------------------------
def test_phases_bound_each_row():
    assert [PHASES.of(t) for t in (9.9, 10.0, 19.99, 20.0, 79.0, 80.0, 89.9, 90.0)] == [
        None, "reference", "reference", "adversary", "adversary", "after", "after", None]
    assert PHASES.seconds("adversary") == 60.0
    assert PHASES.split([(15.0, "a"), (25.0, "b"), (95.0, "c")]) == {"reference": ["a"], "adversary": ["b"],
                                                                     "after": []}


def test_heartbeats_by_the_phase_they_were_due_in():
    beats = [(11.0, 11.001, 11.003, 200),  # 2 ms from due
             (19.9, 19.9, 21.0, 200),  # due in the reference, answered in the adversary's phase
             (30.0, 30.5, 32.5, 200),  # left the bench half a second late
             (31.0, 31.0, 33.0, 0),  # the connection failed
             (32.0, 32.0, 32.1, 503)]
    figures = nf.heartbeat_figures(beats, PHASES)
    ref, adversary = figures["reference"], figures["adversary"]
    assert ref["heartbeats"] == {"sent": 2, "answered": 2, "failed": 0, "answered_per_s": 0.2}
    assert ref["heartbeat_from_due"]["max_ms"] == pytest.approx(1100.0)
    assert adversary["heartbeats"]["sent"] == 3 and adversary["heartbeats"]["failed"] == 2
    assert adversary["heartbeat_from_due"]["max_ms"] == 2500.0 and adversary["heartbeat_from_sent"]["max_ms"] == 2000.0
    assert adversary["heartbeat_lateness_at_sender"]["max_ms"] == 500.0
    assert figures["after"]["heartbeats"]["sent"] == 0 and figures["after"]["heartbeat_from_due"] == {"n": 0}


def test_probes_count_what_was_not_answered():
    rows = [(12.0, 12.004, 200), (13.0, 13.2, 200), (30.0, 35.0, 200), (31.0, 31.5, 0)]
    figures = nf.probe_figures(rows, PHASES)
    assert figures["reference"]["max_ms"] == 200.0 and figures["reference"]["failed"] == 0
    assert figures["adversary"]["n"] == 1 and figures["adversary"]["max_ms"] == 5000.0
    assert figures["adversary"]["failed"] == 1


W1, W2 = (1.0, 1.1, True), (2.0, 2.1, True)


@pytest.mark.parametrize("writes, wakes, armed, samples, wrong, missed, refused", [
    ([W1], [1.05], 0.0, [(1.1, pytest.approx(-0.05), pytest.approx(0.05))], [], 0, 0),  # before the ack
    ([W1], [1.3], 0.0, [(1.1, pytest.approx(0.2), pytest.approx(0.3))], [], 0, 0),
    ([W1, W2], [2.5], 0.0, [(1.1, pytest.approx(1.4), pytest.approx(1.5))], [], 0, 0),  # one wake for two writes
    ([W1], [1.3, 1.6], 0.0, [(1.1, pytest.approx(0.2), pytest.approx(0.3))], [1.6], 0, 0),  # the second: wrong
    ([W1, W2], [1.5], 0.0, [(1.1, pytest.approx(0.4), pytest.approx(0.5))], [], 1, 0),  # the second missed
    ([W1, W2], [2.5], 1.5, [(2.1, pytest.approx(0.4), pytest.approx(0.5))], [], 0, 0),  # armed after the first
    ([W1], [], None, [], [], 0, 0),  # never armed: nothing expected
    ([], [3.0], None, [], [3.0], 0, 0),
    ([(96.0, 96.1, True)], [], 0.0, [], [], 0, 0),  # too near the end to count as missed
    ([(1.0, 1.2, False)], [1.1], 0.0, [], [], 0, 1),  # a refused write that changed the answer anyway
    ([(1.0, 1.2, False), W2], [2.5], 0.0, [(2.1, pytest.approx(0.4), pytest.approx(0.5))], [], 0, 0),
    ([(1.0, 1.2, False)], [], 0.0, [], [], 0, 0),  # a refused write is not waited for
])
def test_wakes_are_matched_to_the_writes_they_answer(writes, wakes, armed, samples, wrong, missed, refused):
    assert nf.match_wakes(writes, wakes, armed, end=100.0) == (samples, wrong, missed, refused)


def test_wake_figures_over_reads_and_questions():
    logs = [WatchLog(0, armed_at=5.0, wakes=[30.2]), WatchLog(0, armed_at=5.0, wakes=[30.05]),
            WatchLog(1, armed_at=5.0, wakes=[40.0]),  # a question never written to: wrong
            WatchLog(0, armed_at=None)]
    figures = nf.wake_figures(logs, {0: [(30.0, 30.1, True)]}, PHASES, end=90.0)
    adversary = figures["per_phase"]["adversary"]
    assert adversary["wakes"]["n"] == 2 and adversary["wakes"]["max_ms"] == pytest.approx(100.0)
    assert adversary["wakes_before_ack"] == 1 and adversary["wakes_from_write"]["max_ms"] == pytest.approx(200.0)
    assert adversary["wrong_wakes"] == 1 and figures["per_phase"]["reference"]["wrong_wakes"] == 0
    assert (figures["waited_for"], figures["woken"], figures["missed"], figures["wrong"]) == (2, 2, 0, 1)
    assert figures["wrong_by_question"] == {"001": 1} and figures["unarmed"] == 1


def test_outcomes_per_kind():
    outcomes = [adv.Outcome("discover-similar", "2xx", 20.0, 2.0), adv.Outcome("discover-similar", "2xx", 23.0, 4.0),
                adv.Outcome("upload", "other-5xx", 21.0, 15.0, "500: Internal Server Error"),
                adv.Outcome("sparql", "503-retry-after", 22.0, 10.0, "503: the query ran past 10 s")]
    figures = nf.outcome_figures(outcomes)
    assert figures["per_kind"]["discover-similar"] == {"n": 2, "2xx": 2, "latency": {
        "n": 2, "p50_ms": 2000.0, "p99_ms": 4000.0, "min_ms": 2000.0, "max_ms": 4000.0}}
    assert figures["per_kind"]["upload"]["answers"] == {"500: Internal Server Error": 1}
    assert figures["outcomes"] == {"2xx": 2, "503-retry-after": 1, "other-5xx": 1} and figures["failures"] == 1


def test_cluster_figures_count_lapsed_members_and_ring_changes():
    alive = {"n1": "alive", "n2": "alive", "n3": "alive"}
    rows = [(11.0, "n1", alive, "a"), (11.0, "n2", alive, "a"),
            (30.0, "n2", {**alive, "n1": "suspect"}, "a"),
            (31.0, "n2", {**alive, "n1": "faulty"}, "b"), (31.5, "n3", {**alive, "n1": "faulty"}, "b"),
            (85.0, "n2", alive, "a")]
    figures = nf.cluster_figures(rows, PHASES)
    assert figures["members_lapsed"] == 1 and figures["lapsed_seen"] == ["n2 saw n1", "n3 saw n1"]
    assert figures["first_lapse_phase"] == {"n1": "adversary"} and figures["suspect_seen"] == 1
    assert figures["ring_changes"] == 2 and figures["ring_changes_per_phase"] == {"reference": 0, "adversary": 1,
                                                                                "after": 1}


def test_cpu_and_series_per_phase():
    assert nf.cpu_percent([100.0, 105.0, 165.0, 166.0], PHASES) == {"reference": 50.0, "adversary": 100.0,
                                                                    "after": 10.0}
    assert nf.cpu_percent([None, 1.0, 2.0, 3.0], PHASES)["reference"] is None
    assert nf.series_max([(12.0, "n", 0.0), (30.0, "n", 2000.0), (31.0, "n", 5.0)], PHASES) == {
        "reference": 0.0, "adversary": 2000.0, "after": None}
    stat = "4242 (python -m x) S 1 4242 4242 0 -1 4194304 100 0 0 0 250 50 7 3 20 0 1 0"
    assert cpu_ticks(stat) == 250 + 50 + 7 + 3 and cpu_ticks("4242 (x) S") is None
    assert tree_cpu_seconds(os.getpid()) > 0 and tree_cpu_seconds(None) is None


def test_the_table_puts_the_phases_side_by_side_with_the_goals():
    phase = {"heartbeats": {"sent": 60_000}, "heartbeat_from_due": {"p99_ms": 11_900.0}, "server_cpu_pct": 99.5}
    header, *rows = nf.render({"reference": {"heartbeats": {"sent": 20_000}}, "adversary": phase})
    assert header == ["figure", "reference", "adversary", "after", "goal (adversary)"]
    table = {row[0]: row[1:] for row in rows}
    assert table["heartbeats sent"] == ["20,000", "60,000", "-", ""]
    assert table["heartbeat from due p99 ms"] == ["-", "11,900.0", "-", "<= 20"]
    assert table["server CPU % of a core"][1] == "99.5"
    ring = nf.render({"adversary": {"server_cpu_pct": {"n1": 90.0, "n2": 10.0}}})
    assert {row[0]: row[2] for row in ring[1:]}["server CPU % of a core"] == "n1 90.0 n2 10.0"


def test_a_heartbeat_answer_gives_the_end_of_its_lease():
    assert lease_end(b'{"id":"a","status":"up","expires_at":"2026-12-05T07:10:08.942Z"}') == pytest.approx(
        1796454608.942)
    assert lease_end(b"ok") is None and lease_end(b"[]") is None and lease_end(b'{"expires_at": 3}') is None


# -- against the bench's own local target ---------------------------------------------------------------------
def test_probes_and_answered_heartbeats_against_the_local_target():
    with LoopThread() as loop, HealthTarget(loop) as target:
        beater = Heartbeater(target.url, [f"i{n}" for n in range(10)], period_s=0.1, connections=2, answers=True)
        health: list = []
        lag: list = []
        log = WatchLog(0)
        jobs = [loop.spawn(beater.run()), loop.spawn(probe_health(target.url, 0.01, health)),
                loop.spawn(loop_lag(0.01, lag)), loop.spawn(rearmed_watch(target.url, "/v1/discover?s=x", 30, log))]
        deadline = time.monotonic() + 10
        while (len(beater.stats.beats) < 20 or len(health) < 20 or not log.errors) and time.monotonic() < deadline:
            time.sleep(0.02)
        beater.stop()
        for job in jobs[1:]:
            job.cancel()
        jobs[0].result(10)
    assert len(beater.stats.beats) >= 20 and {status for *_, status in beater.stats.beats} == {200}
    assert all(due <= sent <= answered for due, sent, answered, _ in beater.stats.beats)
    assert beater.stats.critical_answers == 0  # the target's "ok" gives no lease to outlive
    assert len(health) >= 20 and {status for *_, status in health} == {200}
    assert len(lag) >= 10 and all(late >= 0 for _, late in lag)
    # the target answers without an index: the read does not spin, it says so and waits a second
    assert log.armed_at is None and not log.wakes and log.errors == {"no X-Semreg-Index": 1}


def test_heartbeats_that_leave_after_their_lease_ended_are_counted_per_instance():
    """A server whose every answer gives a lease already over: each instance's second heartbeat is a lapse."""
    import asyncio
    import datetime as dt

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while head := await reader.readuntil(b"\r\n\r\n"):
            length = [line for line in head.lower().split(b"\r\n") if line.startswith(b"content-length:")]
            await reader.readexactly(int(length[0].split(b":")[1]) if length else 0)
            over = (dt.datetime.now(dt.UTC) - dt.timedelta(seconds=1)).isoformat()
            body = orjson.dumps({"id": "x", "status": "up", "expires_at": over})
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                         % (len(body), body))

    with LoopThread() as loop:
        async def start() -> asyncio.AbstractServer:
            return await asyncio.start_server(serve, "127.0.0.1", 0)

        server = loop.run(start(), 10)
        port = server.sockets[0].getsockname()[1]
        beater = Heartbeater(f"http://127.0.0.1:{port}", [f"i{n}" for n in range(5)], period_s=0.1, connections=5,
                             answers=True)
        running = loop.spawn(beater.run())
        deadline = time.monotonic() + 10
        while beater.stats.critical_answers < 15 and time.monotonic() < deadline:
            time.sleep(0.02)
        beater.stop()
        running.result(10)
        loop.call(server.close)
    assert beater.stats.lapsed == {0, 1, 2, 3, 4} and beater.stats.critical_answers >= 15
    assert beater.stats.failed == 0


@pytest.mark.process
def test_the_adversary_runs_in_a_child_process_and_reports_every_outcome(tmp_path):
    ontology, backup = tmp_path / "o.ttl", tmp_path / "b.nq.gz"
    ontology.write_text("<http://x/a> <http://x/b> <http://x/c> .\n")
    backup.write_bytes(b"\x1f\x8b not really")
    with LoopThread() as loop, HealthTarget(loop) as target:
        plan = adv.AdversaryPlan(target.url, str(ontology), str(backup), patterns=4, batch_instances=3,
                                 sparql_at_once=2)
        neighbour = adv.Adversary(plan)
        neighbour.start()
        deadline = time.monotonic() + 60
        while target.hits < 200 and time.monotonic() < deadline:
            time.sleep(0.05)
        outcomes, unfinished, error = neighbour.stop()
    assert error == ""
    kinds = {o.kind for o in outcomes}
    assert kinds == {"discover-similar", "query-put", "upload", "batch", "delete", "backup", "restore", "sparql"}
    assert {o.outcome for o in outcomes} == {"2xx"} and all(o.seconds >= 0 for o in outcomes)
    assert sum(unfinished.values()) <= len(plan.lanes) + plan.sparql_at_once


# -- end to end, at quick sizes ---------------------------------------------------------------------------------
def _quick(name: str, timeout_s: int) -> dict:
    figures = quick_bench(name, timeout_s=timeout_s)
    for phase in nf.PHASES:
        assert figures[phase]["heartbeats"]["sent"] > 0 and figures[phase]["healthz"]["n"] > 0
        assert figures[phase]["bench_loop_lag"]["n"] > 0
    assert figures["watches"]["unarmed"] == 0 and figures["watches"]["woken"] > 0
    assert figures["load"]["instances"] == 300 and isinstance(figures["leases_lost"], int)
    kinds = set(figures["adversary_requests"])
    assert {"discover-similar", "query-put", "upload"} <= kinds, kinds
    assert all(isinstance(t["met"], bool) for t in figures["targets"])
    return figures


@pytest.mark.slow
@pytest.mark.timeout(240)
@pytest.mark.process
def test_quick_noisy_neighbour():
    figures = _quick("noisy-neighbour", 230)
    assert isinstance(figures["adversary"]["server_cpu_pct"], float)
    assert figures["adversary"]["server_rss_max_mib"] > 0


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.process
def test_quick_noisy_neighbour_ring():
    figures = _quick("noisy-neighbour-ring", 290)
    assert set(figures["adversary"]["server_cpu_pct"]) == {"n1", "n2", "n3"}
    assert isinstance(figures["members_lapsed"], int) and isinstance(figures["ring_changes"], int)
