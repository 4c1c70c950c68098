"""The query pool with its real processes: replica changes, deadlines that kill, crashes, priorities."""
from __future__ import annotations

import asyncio
import os
import signal
import time

import orjson
import pyoxigraph as ox
import pytest

from semreg.errors import BadRequest, Unavailable
from semreg.sparql import replica
from semreg.sparql.job import Job
from semreg.sparql.pool import LONG_QUERY_S, QueryPool
from semreg.storage.store import RECORDS, REGISTRY

pytestmark = pytest.mark.process

EX = "http://ex.org/"
COUNT_REGISTRY = f"SELECT (COUNT(*) AS ?n) {{ GRAPH <{REGISTRY.value}> {{ ?s ?p ?o }} }}"  # the instances' quads
RUNAWAY = "SELECT (COUNT(*) AS ?n) WHERE { ?a ?b ?c . ?d ?e ?f . ?g ?h ?i . ?j ?k ?l }"


def n(local: str) -> ox.NamedNode:
    return ox.NamedNode(EX + local)


def small_store(count: int = 300) -> ox.Store:
    store = ox.Store()
    store.extend(ox.Quad(n(f"s{i}"), n("p"), ox.Literal(str(i)), n("g")) for i in range(count))
    store.add(ox.Quad(n("hidden"), n("p"), ox.Literal("secret"), RECORDS))
    return store


def job(query: str, time_limit_s: float = 5.0, prefixes: dict[str, str] | None = None, accept: str | None = None) -> Job:
    return Job(query, (), (), accept, None, prefixes, time_limit_s, time_limit_s, None)


def publish_instances(pool: QueryPool, count: int, tickets: bool = False) -> None:
    """`count` one-quad instances into the registry graph, a batch each (with the feed's tickets, as
    the node publishes them, when `tickets`)."""
    for k in range(count):
        added = [ox.Quad(ox.NamedNode(f"urn:semreg:instance:i{k}"), n("p"), ox.Literal("x" * 50), REGISTRY)]
        pool.publish(("changes", [replica.instances_change([], added)]))
        if tickets:
            pool.note_requested(k + 1)
            pool.publish(("ticket", k + 1))


async def ask(pool: QueryPool, query: str, time_limit_s: float = 5.0, **kw) -> dict:
    output = await pool.evaluate(job(query, time_limit_s, **kw), 0, time.monotonic() + time_limit_s)
    return orjson.loads(output.body)


def count(answer: dict) -> int:
    return int(answer["results"]["bindings"][0]["n"]["value"])


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):  # gone before or while /proc was read
        return False


def niceness(pid: int) -> int:
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        return int(stat.read().rsplit(")", 1)[1].split()[16])


def living_niceness(pids) -> list[int]:
    """The niceness of each of these processes still alive (one may retire between listing and reading)."""
    out = []
    for pid in pids:
        try:
            out.append(niceness(pid))
        except FileNotFoundError:
            continue
    return out


@pytest.fixture(params=["memory", "disk"])
def replica_on(request: pytest.FixtureRequest, tmp_path) -> dict:
    """The pool's options for a replica in each process's memory, or on disk (read from checkpoints)."""
    return {} if request.param == "memory" else {"on_disk": tmp_path / "replica"}


async def until(condition, timeout_s: float = 10.0, what: str = "condition"):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{what} did not happen within {timeout_s} s")


def test_answers_from_a_snapshot_without_the_hidden_graph(replica_on: dict):
    async def main():
        pool = QueryPool.over_store(small_store(), hidden=[RECORDS], min_workers=1, **replica_on)
        try:
            assert count(await ask(pool, "SELECT (COUNT(*) AS ?n) { ?s ?p ?o }")) == 300
            assert (await ask(pool, "ASK { ?s ?p 'secret' }"))["boolean"] is False
        finally:
            await pool.close()
    run(main())


def test_published_changes_are_seen_by_the_next_query_in_every_process():
    async def main():
        store = small_store(10)
        pool = QueryPool.over_store(store, hidden=[RECORDS], min_workers=2, max_workers=2)
        try:
            assert count(await ask(pool, "SELECT (COUNT(*) AS ?n) { ?s ?p ?o }")) == 10
            added = [ox.Quad(ox.NamedNode("urn:semreg:instance:a"), n("p"), ox.Literal("x"), REGISTRY)]
            pool.publish(("changes", [replica.instances_change([], added),
                                      replica.graph_change(n("g"), [ox.Triple(n("only"), n("p"), n("o"))])]))
            # two at once: both processes answer, and both have the change
            answers = await asyncio.gather(*[ask(pool, "SELECT (COUNT(*) AS ?n) { ?s ?p ?o }") for _ in range(2)])
            assert [count(a) for a in answers] == [2, 2]
            pool.publish(("changes", [replica.instances_change(["urn:semreg:instance:a"], []),
                                      replica.graph_change(n("g"), None)]))
            assert count(await ask(pool, "SELECT (COUNT(*) AS ?n) { ?s ?p ?o }")) == 0
        finally:
            await pool.close()
    run(main())


def test_a_worker_forked_right_after_a_change_sees_it_though_the_template_held_it_back():
    async def main():
        pool = QueryPool.over_store(small_store(10), hidden=[RECORDS], min_workers=1, max_workers=2)
        try:
            assert count(await ask(pool, "SELECT (COUNT(*) AS ?n) { ?s ?p ?o }")) == 10
            added = [ox.Quad(ox.NamedNode("urn:semreg:instance:a"), n("p"), ox.Literal("x"), REGISTRY)]
            pool.publish(("changes", [replica.instances_change([], added)]))
            forked = pool.forked
            # two at once: the second needs a new fork, made from the template with the change applied first
            answers = await asyncio.gather(*[ask(pool, "SELECT (COUNT(*) AS ?n) { ?s ?p ?o }") for _ in range(2)])
            assert pool.forked == forked + 1 and [count(a) for a in answers] == [11, 11]
        finally:
            await pool.close()
    run(main())


def test_an_idle_worker_takes_in_every_change_that_came_while_it_waited():
    async def main():
        pool = QueryPool.over_store(small_store(10), hidden=[RECORDS], min_workers=1, max_workers=1)
        try:
            assert count(await ask(pool, "SELECT (COUNT(*) AS ?n) { ?s ?p ?o }")) == 10
            [worker] = pool.pids()[1:]
            forked = pool.forked
            publish_instances(pool, 100)  # more batches than a worker keeps unapplied: it applies them while idle
            answer = await ask(pool, COUNT_REGISTRY)
            assert count(answer) == 100
            assert pool.pids()[1:] == [worker] and pool.forked == forked  # the same process, caught up
        finally:
            await pool.close()
    run(main())


def test_an_idle_worker_far_behind_is_replaced_by_a_fork_that_sees_every_change(monkeypatch):
    monkeypatch.setattr("semreg.sparql.pool_stream.DEFER_LIMIT_BYTES", 2000)

    async def main():
        pool = QueryPool.over_store(small_store(10), hidden=[RECORDS], min_workers=1, max_workers=1)
        try:
            assert count(await ask(pool, "SELECT (COUNT(*) AS ?n) { ?s ?p ?o }")) == 10
            [worker] = pool.pids()[1:]
            forked = pool.forked
            publish_instances(pool, 40)  # each change held for the idle worker until it has fallen too far behind
            await until(lambda: pool.forked > forked, what="a fresh fork")
            await until(lambda: not alive(worker), what="the stale worker gone")
            answer = await ask(pool, COUNT_REGISTRY)
            assert count(answer) == 40
        finally:
            await pool.close()
    run(main())


def test_a_query_past_its_deadline_gets_503_and_its_process_is_killed_and_replaced(caplog, replica_on: dict):
    """Stopped by its time limit (the pool says so, with the limit), not by anything else; how long a runaway
    takes to be answered is a figure of `semreg bench noisy`."""
    async def main():
        pool = QueryPool.over_store(small_store(), min_workers=1, max_workers=1, **replica_on)
        try:
            await ask(pool, "ASK {}")
            before = set(pool.pids()[1:])
            with pytest.raises(Unavailable) as caught, caplog.at_level("INFO", logger="semreg"):
                await ask(pool, RUNAWAY, time_limit_s=0.3)
            assert "time limit of 0.3 s" in caught.value.message
            assert [(r.getMessage(), r.time_limit_s) for r in caplog.records if r.getMessage().startswith("query")] == [
                ("query stopped at its time limit", 0.3)]
            assert pool.killed == 1
            for pid in before:
                await until(lambda pid=pid: not alive(pid), what=f"process {pid} gone")
            assert (await ask(pool, "ASK {}"))["boolean"] is True  # a fresh fork answers
            assert set(pool.pids()[1:]).isdisjoint(before)
        finally:
            await pool.close()
    run(main())


def test_a_query_that_waited_past_its_deadline_never_runs(replica_on: dict):
    async def main():
        pool = QueryPool.over_store(small_store(), min_workers=1, max_workers=1, **replica_on)
        try:
            await ask(pool, "ASK {}")
            runaway = asyncio.ensure_future(ask(pool, RUNAWAY, time_limit_s=1.0))
            await until(lambda: pool.busy == 1, what="the runaway running")
            with pytest.raises(Unavailable):
                await ask(pool, "ASK {}", time_limit_s=0.2)  # waits behind it, then gives up
            assert pool.killed == 0 and pool.waiting == 0
            with pytest.raises(Unavailable):
                await runaway
            assert pool.killed == 1
        finally:
            await pool.close()
    run(main())


def test_runaways_take_a_process_each_and_a_small_query_beside_them_answers_first(replica_on: dict):
    async def main():
        pool = QueryPool.over_store(small_store(), min_workers=2, max_workers=8, **replica_on)
        try:
            await ask(pool, "ASK {}")
            runaways = [asyncio.ensure_future(ask(pool, RUNAWAY, time_limit_s=3.0)) for _ in range(5)]
            await until(lambda: pool.busy == 5, what="five runaways running")
            assert (await ask(pool, "ASK { ?s ?p ?o }"))["boolean"] is True
            assert not any(r.done() for r in runaways)  # answered while all five still ran
            results = await asyncio.gather(*runaways, return_exceptions=True)
            assert all(isinstance(r, Unavailable) for r in results)
            assert pool.killed == 5
        finally:
            await pool.close()
    run(main())


def test_processes_run_below_the_server_and_long_queries_drop_to_the_lowest_priority(replica_on: dict):
    async def main():
        pool = QueryPool.over_store(small_store(), min_workers=1, max_workers=2, **replica_on)
        try:
            await ask(pool, "ASK {}")
            own = os.getpriority(os.PRIO_PROCESS, 0)
            assert all(n >= own + 5 for n in living_niceness(pool.pids()))
            runaway = asyncio.ensure_future(ask(pool, RUNAWAY, time_limit_s=LONG_QUERY_S + 1.0))
            await until(lambda: pool.busy == 1, what="the runaway running")
            worker = next(w for w in pool.processes.workers if w.state == "busy")
            assert worker.pid is not None
            await until(lambda: niceness(worker.pid) == 19, what="the long query demoted")
            with pytest.raises(Unavailable):
                await runaway
        finally:
            await pool.close()
    run(main())


def test_a_demoted_worker_that_finishes_retires(replica_on: dict):
    async def main():
        store = small_store(200)
        pool = QueryPool.over_store(store, hidden=[RECORDS], min_workers=1, max_workers=1, **replica_on)
        slow = "SELECT (COUNT(*) AS ?n) WHERE { ?a ?b ?c . ?d ?e ?f . ?g ?h ?i }"  # 8 million rows: seconds
        try:
            await ask(pool, "ASK {}")
            first = pool.pids()[1]
            pool_job = asyncio.ensure_future(ask(pool, slow, time_limit_s=30.0))
            await until(lambda: niceness(first) == 19 or pool_job.done(), what="demotion or the end")
            if pool_job.done():
                pytest.fail("the slow query ended before it counted as long; make it slower")
            assert count(await pool_job) == 200 ** 3
            await until(lambda: not alive(first), what="the demoted worker retired")
            assert (await ask(pool, "ASK {}"))["boolean"] is True
        finally:
            await pool.close()
    run(main())


def test_a_worker_that_dies_mid_query_answers_503_and_is_replaced(replica_on: dict):
    async def main():
        pool = QueryPool.over_store(small_store(), min_workers=1, max_workers=1, **replica_on)
        try:
            await ask(pool, "ASK {}")
            runaway = asyncio.ensure_future(ask(pool, RUNAWAY, time_limit_s=20.0))
            await until(lambda: pool.busy == 1, what="the runaway running")
            os.kill(pool.pids()[1], signal.SIGKILL)
            with pytest.raises(Unavailable) as caught:
                await runaway
            assert "stopped while evaluating" in caught.value.message
            assert (await ask(pool, "ASK {}"))["boolean"] is True
        finally:
            await pool.close()
    run(main())


def test_a_template_that_dies_is_started_again_from_a_fresh_snapshot(replica_on: dict):
    async def main():
        store = small_store(5)
        pool = QueryPool.over_store(store, hidden=[RECORDS], min_workers=1, max_workers=3, **replica_on)
        try:
            await ask(pool, "ASK {}")
            template = pool.pids()[0]
            store.add(ox.Quad(n("late"), n("p"), ox.Literal("x"), n("g")))  # only in the next snapshot
            os.kill(template, signal.SIGKILL)  # its workers go with it
            await until(lambda: pool.pids() and pool.pids()[0] != template and pool.processes.template is not None
                        and pool.processes.template.transport is not None, what="a new template")
            answers = await asyncio.gather(*[ask(pool, "SELECT (COUNT(*) AS ?n) { ?s ?p ?o }") for _ in range(3)])
            assert {count(a) for a in answers} == {6}
        finally:
            await pool.close()
    run(main())


def test_prefixes_travel_once_per_version_and_a_query_prefix_wins(replica_on: dict):
    async def main():
        pool = QueryPool.over_store(small_store(3), hidden=[RECORDS], min_workers=1, max_workers=1, **replica_on)
        try:
            query = "SELECT (COUNT(*) AS ?n) { ?s ex:p ?o }"
            output = await pool.evaluate(job(query, prefixes={"ex": EX}), 1, time.monotonic() + 5)
            assert count(orjson.loads(output.body)) == 3
            output = await pool.evaluate(job(query, prefixes={"ex": EX}), 1, time.monotonic() + 5)
            assert count(orjson.loads(output.body)) == 3  # the worker kept them: sent without
            output = await pool.evaluate(job(query, prefixes={"ex": "http://elsewhere/"}), 2, time.monotonic() + 5)
            assert count(orjson.loads(output.body)) == 0
            with pytest.raises(BadRequest):
                await pool.evaluate(job("SELECT * { ?s nope:p ?o }", prefixes={}), 3, time.monotonic() + 5)
        finally:
            await pool.close()
    run(main())


def test_extra_workers_retire_when_idle(replica_on: dict):
    async def main():
        pool = QueryPool.over_store(small_store(), min_workers=1, max_workers=4, idle_s=0.2, **replica_on)
        try:
            await asyncio.gather(*[ask(pool, "SELECT (COUNT(*) AS ?n) { ?a ?b ?c . ?d ?e ?f }") for _ in range(4)])
            assert pool.forked >= 2
            await until(lambda: pool.workers == 1, what="back to one worker")
        finally:
            await pool.close()
    run(main())


def test_stop_answers_everything_at_once_and_leaves_no_process(replica_on: dict):
    async def main():
        pool = QueryPool.over_store(small_store(), min_workers=1, max_workers=1, **replica_on)
        await ask(pool, "ASK {}")
        pids = pool.pids()
        running = asyncio.ensure_future(ask(pool, RUNAWAY, time_limit_s=30.0))
        waiting = asyncio.ensure_future(ask(pool, "ASK {}", time_limit_s=30.0))
        await until(lambda: pool.busy == 1 and pool.waiting == 1, what="one running, one waiting")
        await pool.close()
        assert running.done() and waiting.done()  # answered by the close itself, the runaway's 30 s not waited out
        for task in (running, waiting):
            with pytest.raises(Unavailable) as caught:
                await task
            assert "stopping" in caught.value.message
        for pid in pids:
            await until(lambda pid=pid: not alive(pid), what=f"process {pid} gone")
        with pytest.raises(Unavailable):
            await ask(pool, "ASK {}")
    run(main())


def test_a_stale_worker_hands_its_connections_over_and_they_see_every_change(monkeypatch):
    """A connection the pool adopted survives its worker's replacement, and its next query sees the changes."""
    import socket

    from semreg.access.tokens import Tokens
    from semreg.sparql.service import Gate

    monkeypatch.setattr("semreg.sparql.pool_stream.DEFER_LIMIT_BYTES", 2000)

    async def main():
        pool = QueryPool.over_store(small_store(10), hidden=[RECORDS], min_workers=1, max_workers=2)
        pool.set_gate(Gate(Tokens(None), None, False, False, False, None, 5.0, None, 1 << 20, 1 << 20))
        listener = socket.create_server(("127.0.0.1", 0))
        client = socket.create_connection(listener.getsockname())
        served, _ = listener.accept()
        loop = asyncio.get_running_loop()

        async def query(text: str) -> dict:
            request = f"GET /sparql?query={text} HTTP/1.1\r\nHost: t\r\n\r\n".encode()
            await loop.sock_sendall(client, request)
            data = b""
            while b"\r\n\r\n" not in data or len(data.partition(b"\r\n\r\n")[2]) < int(
                    data.split(b"content-length: ")[1].split(b"\r\n")[0]):
                data += await loop.sock_recv(client, 65536)
            return orjson.loads(data.partition(b"\r\n\r\n")[2])

        try:
            await pool.start()
            await until(lambda: pool.ready, what="a worker ready")
            client.setblocking(False)
            assert pool.adopt(served, b"")
            count_all = f"SELECT%20(COUNT(*)%20AS%20%3Fn)%20%7B%20GRAPH%20%3C{REGISTRY.value}%3E%20%7B%3Fs%20%3Fp%20%3Fo%7D%20%7D"
            assert count(await query(count_all)) == 0
            [worker] = pool.pids()[1:]
            publish_instances(pool, 40, tickets=True)
            await until(lambda: not alive(worker), what="the stale worker gone")
            assert count(await query(count_all)) == 40  # the same connection, in a fresh fork
            assert worker not in pool.pids()
        finally:
            client.close()
            listener.close()
            await pool.close()
    run(main())


def test_a_worker_worn_by_changes_is_replaced_while_queried_and_answers_stay_whole(monkeypatch):
    """A worker that took in changes worth more than its share of the snapshot leaves for a fresh fork even
    while queries keep it current (they never let it fall behind), and no answer misses a change."""
    monkeypatch.setattr("semreg.sparql.replica.WEAR_FLOOR_BYTES", 3000)

    async def main():
        pool = QueryPool.over_store(small_store(10), hidden=[RECORDS], min_workers=1, max_workers=1)
        try:
            query = COUNT_REGISTRY
            assert count(await ask(pool, query)) == 0
            [worker] = pool.pids()[1:]
            forked = pool.forked
            for k in range(40):  # every change asked for by a query at once: the worker is never behind
                publish_instances_from(pool, k)
                assert count(await ask(pool, query)) == k + 1
            await until(lambda: pool.forked > forked, what="a fresh fork")
            await until(lambda: not alive(worker), what="the worn worker gone")
            assert count(await ask(pool, query)) == 40
        finally:
            await pool.close()
    run(main())


def publish_instances_from(pool: QueryPool, k: int, size: int = 50) -> None:
    """Instance `k` (one quad of a `size`-character literal) with the feed's ticket, as `publish_instances`
    does for the first `count`."""
    added = [ox.Quad(ox.NamedNode(f"urn:semreg:instance:i{k}"), n("p"), ox.Literal("x" * size), REGISTRY)]
    pool.note_requested(k + 1)
    pool.publish(("changes", [replica.instances_change([], added)]))
    pool.publish(("ticket", k + 1))


def test_forks_turned_away_while_starting_give_their_slots_back(monkeypatch):
    """A worker replaced while it was still starting (its fork not yet connected) gives its slot back: more
    such replacements than there are slots leave the pool able to fork."""
    monkeypatch.setattr("semreg.sparql.pool_stream.DEFER_LIMIT_BYTES", 2000)

    async def main():
        pool = QueryPool.over_store(small_store(10), hidden=[RECORDS], min_workers=1, max_workers=1)
        try:
            query = COUNT_REGISTRY
            assert count(await ask(pool, query)) == 0
            published = 0
            for _ in range(2 * 1 + 2 + 5):  # more rounds than the pool has slots (two a worker, and two)
                [worker] = pool.pids()[1:]
                os.kill(worker, signal.SIGKILL)
                await until(lambda w=worker: w not in pool.pids(), what="the killed worker gone")
                for _ in range(20):  # while its replacement starts: it falls behind before it is up
                    publish_instances_from(pool, published)
                    published += 1
                assert count(await asyncio.wait_for(ask(pool, query), 30)) == published
        finally:
            await pool.close()
    run(main())


def test_every_worker_worn_by_a_burst_is_replaced_after_it_one_at_a_time(monkeypatch):
    """After a bulk load the changes stop: the workers it wore leave one after another all the same, each
    for a fresh fork of the template, and answers hold every change."""
    monkeypatch.setattr("semreg.sparql.replica.WEAR_FLOOR_BYTES", 3000)

    async def main():
        pool = QueryPool.over_store(small_store(10), hidden=[RECORDS], min_workers=2, max_workers=2)
        try:
            query = COUNT_REGISTRY
            assert count(await ask(pool, query)) == 0
            await until(lambda: len(pool.pids()) == 3, what="two workers")
            first = set(pool.pids()[1:])
            burst = [replica.instances_change([], [ox.Quad(ox.NamedNode(f"urn:semreg:instance:i{k}"), n("p"),
                                                           ox.Literal("x" * 50), REGISTRY)]) for k in range(40)]
            pool.note_requested(1)
            pool.publish(("changes", burst))  # one batch nobody queries wears out both workers at once
            pool.publish(("ticket", 1))
            await until(lambda: not first & set(pool.pids()) and len(pool.pids()) == 3, what="both replaced")
            assert count(await ask(pool, query)) == 40
        finally:
            await pool.close()
    run(main())


def test_a_template_that_rebuilt_its_copy_has_its_workers_forked_anew(monkeypatch):
    """Past `WEAR_FLOOR_BYTES` of changes the template rebuilds its copy and says so: the workers forked
    from the old copy hold its pages alone from then on, so they leave for forks of the new one, one at a
    time, and answers hold every change throughout. (The pool's own wear check is put out of reach here: only
    the template's word replaces them.)"""
    total = replica.WEAR_FLOOR_BYTES // 2000 + 200  # 2,000-byte changes past the template's floor
    monkeypatch.setattr("semreg.sparql.replica.WEAR_FLOOR_BYTES", 1 << 40)

    async def main():
        pool = QueryPool.over_store(small_store(10), hidden=[RECORDS], min_workers=2, max_workers=2)
        try:
            query = COUNT_REGISTRY
            assert count(await ask(pool, query)) == 0
            await until(lambda: len(pool.pids()) == 3, what="two workers")
            first = set(pool.pids()[1:])
            for k in range(total):
                publish_instances_from(pool, k, size=2000)
            await until(lambda: not first & set(pool.pids()) and len(pool.pids()) == 3, timeout_s=60,
                        what="both workers forked anew")
            assert count(await ask(pool, query)) == total
        finally:
            await pool.close()
    run(main())


def test_a_copy_grown_by_a_load_is_rebuilt_once_the_changes_stop():
    """Changes worth a tenth of the copy (past `WEAR_FLOOR_BYTES`), then none for `settle_s`: the template
    rebuilds its copy from its snapshot (a store grown by changes holds a third more than one loaded) and the
    workers leave for forks of the new one, one at a time; answers hold every change throughout."""
    big = ox.Store()  # a 40 MiB snapshot: its tenth is past the floor, its half far from it
    big.extend(ox.Quad(n(f"s{i}"), n("p"), ox.Literal("y" * 100), n("g")) for i in range(250_000))
    changes = replica.WEAR_FLOOR_BYTES // 2000 + 200  # 2,000-byte changes: ~4.4 MiB

    async def main():
        pool = QueryPool.over_store(big, hidden=[RECORDS], min_workers=2, max_workers=2, settle_s=0.5)
        try:
            # the first question waits for the template to load the 40 MiB snapshot: seconds on a loaded machine,
            # so more than the usual 5 s limit
            assert count(await ask(pool, COUNT_REGISTRY, time_limit_s=60)) == 0
            await until(lambda: len(pool.pids()) == 3, timeout_s=30, what="two workers")
            first = set(pool.pids()[1:])
            for k in range(changes):
                publish_instances_from(pool, k, size=2000)
                if k % 500 == 0:  # a worker that asks keeps up, so none is replaced for falling behind
                    assert count(await ask(pool, COUNT_REGISTRY)) == k + 1
            assert count(await ask(pool, COUNT_REGISTRY)) == changes
            await until(lambda: not first & set(pool.pids()) and len(pool.pids()) == 3, timeout_s=60,
                        what="both workers forked anew")
            assert count(await ask(pool, COUNT_REGISTRY)) == changes
        finally:
            await pool.close()
    asyncio.run(asyncio.wait_for(main(), 120))


# -- the replica on disk (`semreg.sparql.checkpoints`) -----------------------------------------------------
def checkpoints_on_disk(root) -> list[int]:
    return sorted(int(p.name) for p in (root / "checkpoints").iterdir())


def pss_kib(pids) -> int:
    """The proportional set size of these processes together (one that retired meanwhile counts nothing)."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as rollup:
                total += next(int(line.split()[1]) for line in rollup if line.startswith("Pss:"))
        except (FileNotFoundError, ProcessLookupError):
            continue
    return total


def test_on_disk_every_acknowledged_change_is_in_the_next_query_of_every_worker(tmp_path):
    """Changes acknowledged (their ticket on the page) before a query are in its answer, in whichever worker
    answers; a checkpoint is cut once for the workers waiting together; old checkpoints go once no worker
    reads them."""
    async def main():
        root = tmp_path / "replica"
        pool = QueryPool.over_store(small_store(10), hidden=[RECORDS], min_workers=2, max_workers=2, on_disk=root)
        try:
            assert count(await ask(pool, "SELECT (COUNT(*) AS ?n) { ?s ?p ?o }")) == 10
            for round_ in range(1, 6):
                publish_instances_ticketed(pool, round_)
                answers = await asyncio.gather(*[ask(pool, COUNT_REGISTRY) for _ in range(2)])
                assert [count(a) for a in answers] == [round_ * 3] * 2
            cuts = pool.checkpoint_cuts  # what /metrics says (semreg_sparql_checkpoints_total)
            # the first, then about one a round for both workers, never one a query each
            assert cuts is not None and 5 <= cuts <= 11
            await until(lambda: len(checkpoints_on_disk(root)) <= 2, what="old checkpoints removed")
            assert (await ask(pool, "ASK { ?s ?p 'secret' }"))["boolean"] is False
        finally:
            await pool.close()
    run(main())


def publish_instances_ticketed(pool: QueryPool, round_: int) -> None:
    """Three one-quad instances, each acknowledged as the node acknowledges a write: its ticket on the page
    before the change, the ticket in the stream after it."""
    for k in range(3):
        ticket = (round_ - 1) * 3 + k + 1
        pool.note_requested(ticket)
        added = [ox.Quad(ox.NamedNode(f"urn:semreg:instance:r{ticket}"), n("p"), ox.Literal("x"), REGISTRY)]
        pool.publish(("changes", [replica.instances_change([], added)]))
        pool.publish(("ticket", ticket))


def test_on_disk_a_removed_instance_and_a_replaced_graph_are_gone_from_the_next_answer(tmp_path):
    async def main():
        pool = QueryPool.over_store(small_store(10), hidden=[RECORDS], min_workers=1, max_workers=1,
                                    on_disk=tmp_path / "replica")
        try:
            await ask(pool, "ASK {}")  # started: what is published from now on reaches it
            publish_instances_ticketed(pool, 1)
            assert count(await ask(pool, COUNT_REGISTRY)) == 3
            pool.note_requested(4)
            pool.publish(("changes", [replica.instances_change(["urn:semreg:instance:r1"], []),
                                      replica.graph_change(n("g"), [ox.Triple(n("only"), n("p"), n("o"))])]))
            pool.publish(("ticket", 4))
            assert count(await ask(pool, COUNT_REGISTRY)) == 2
            assert count(await ask(pool, "SELECT (COUNT(*) AS ?n) { GRAPH <http://ex.org/g> { ?s ?p ?o } }")) == 1
        finally:
            await pool.close()
    run(main())


def test_on_disk_a_query_waits_for_a_change_acknowledged_but_not_yet_published(tmp_path):
    """The page says ticket 1 was acknowledged; the change reaches the stream only later: the query waits for it
    (it does not answer from the checkpoint it has)."""
    async def main():
        pool = QueryPool.over_store(small_store(10), hidden=[RECORDS], min_workers=1, max_workers=1,
                                    on_disk=tmp_path / "replica")
        try:
            await ask(pool, "ASK {}")
            pool.note_requested(1)
            asked = asyncio.ensure_future(ask(pool, COUNT_REGISTRY))
            await until(lambda: pool.stream.checkpoints.waiting, what="the worker waiting for ticket 1")
            assert not asked.done()
            added = [ox.Quad(ox.NamedNode("urn:semreg:instance:late"), n("p"), ox.Literal("x"), REGISTRY)]
            pool.publish(("changes", [replica.instances_change([], added)]))
            pool.publish(("ticket", 1))
            assert count(await asked) == 1
        finally:
            await pool.close()
    run(main())


def test_on_disk_the_workers_hold_no_copy_of_the_graphs(tmp_path):
    """40,000 instances of 30 quads: each worker in memory holds a copy (or shares the template's until it
    writes), a worker on disk only what it read. Proportional set sizes, the same data both ways. (At 20,000
    the workers on disk took 35-39 MiB and in memory 114-220, but once 74 against 109 in a whole run of the
    suite: the in-memory side grows with the data, the other does not.)"""
    big = ox.Store()
    for k in range(40_000):
        i = ox.NamedNode(f"urn:semreg:instance:i{k}")
        big.extend(ox.Quad(i, n(f"p{j}"), ox.Literal(f"value {k} {j}"), REGISTRY) for j in range(30))

    async def tree(options: dict) -> int:
        pool = QueryPool.over_store(big, min_workers=2, max_workers=2, **options)
        try:
            assert count(await ask(pool, COUNT_REGISTRY, time_limit_s=60)) == 1_200_000
            await asyncio.gather(*[ask(pool, COUNT_REGISTRY, time_limit_s=60) for _ in range(2)])
            return pss_kib(pool.pids())
        finally:
            await pool.close()

    in_memory = run(tree({}))
    on_disk = run(tree({"on_disk": tmp_path / "replica"}))
    assert on_disk * 2 < in_memory, (on_disk, in_memory)


def test_a_burst_of_passes_held_for_the_template_is_answered_as_its_last_pass_left_it(replica_on: dict):
    """Passes of the feed's shape (the instances they put said), held for the template while they pour in and
    taken together (on disk: one bulk load of the ones about different instances): an instance put again, one
    removed, and one put back after its removal are in the next query's answer as the last pass left them."""
    def put(k: int, value: str) -> tuple:
        iri = f"urn:semreg:instance:b{k}"
        return iri, [ox.Quad(ox.NamedNode(iri), n("v"), ox.Literal(value), REGISTRY)]

    async def main():
        pool = QueryPool.over_store(small_store(10), hidden=[RECORDS], min_workers=1, max_workers=1, **replica_on)
        try:
            await ask(pool, "ASK {}")  # started: what is published from now on reaches it
            passes = [[(k, "one") for k in range(0, 4)], [(k, "one") for k in range(4, 8)],
                      [(1, "two"), (8, "one")], [(2, None)], [(2, "back"), (9, "one")]]
            published: set[int] = set()
            for ticket, views in enumerate(passes, start=1):
                pool.note_requested(ticket)
                gone = [f"urn:semreg:instance:b{k}" for k, _ in views if k in published]
                quads = [q for k, value in views if value is not None for q in put(k, value)[1]]
                pool.publish(("changes", [replica.instances_change(
                    gone, quads, [put(k, "")[0] for k, value in views if value is not None])]))
                pool.publish(("ticket", ticket))
                published |= {k for k, value in views if value is not None}
                published -= {k for k, value in views if value is None}
            answer = await ask(pool, f"SELECT ?s ?v {{ GRAPH <{REGISTRY.value}> {{ ?s <{EX}v> ?v }} }}")
            got = sorted((b["s"]["value"].rsplit(":", 1)[1], b["v"]["value"]) for b in answer["results"]["bindings"])
            assert got == sorted([(f"b{k}", "one") for k in (0, 3, 4, 5, 6, 7, 8, 9)] + [("b1", "two"), ("b2", "back")])
        finally:
            await pool.close()
    run(main())
