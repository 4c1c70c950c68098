"""The soak scenario: memory under steady churn, minute by minute, for `--minutes` (issue 24).

One fresh server on a data directory holds the synthetic ontology and 3,000 live instances of 3 tags
with a 15 s ttl, heartbeating every 3 s (1,000 heartbeats a second, `Heartbeater`). Beside them, until
the time is up: 300 blocking reads on as many discovery questions, each re-armed as it answers; 50
discoveries a second; 5 SPARQL queries a second, a new one each time; and 5 registrations plus 5
deregistrations a second, of instances that live 10 s each, so the live count stays near 3,000 and the
registry, its change log and the query processes' stores keep seeing new quads replace old ones.

Every minute the proportional set size (PSS, /proc/PID/smaps_rollup: shared pages counted once) and the
RSS of each kind of process: the server, the SPARQL template (`python -m semreg.sparql.worker`, a child
of the server) and the query processes (the template's forks), with the instances the server holds.
The target: the whole tree's PSS at the end within 10% of minute 5 (of minute 1 in a shorter run).

It runs only when named (`semreg bench --only soak --minutes M`), never in a full run: 30 minutes by
default, 1 with --quick (a tenth of the load).
"""
from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import orjson

from semreg.bench.aio.connection import TRANSPORT_ERRORS, Connection, Response
from semreg.bench.aio.heartbeats import Heartbeater
from semreg.bench.aio.loop import LoopThread
from semreg.bench.context import BenchContext
from semreg.bench.dataset import NS, RDFS_SUBCLASSOF, Dataset, class_iri, property_iri
from semreg.bench.peers import BenchError
from semreg.bench.readings import child_pids, command_line, process_pss_bytes, process_rss_bytes
from semreg.bench.report import Target
from semreg.bench.scenarios.common import SPARQL_JSON, MiB, register_batches, scenario
from semreg.bench.stats import latency_stats

KINDS = ("server", "template", "queries")
TEMPLATE_MODULE = "semreg.sparql.worker"  # the template's argv: `python -m semreg.sparql.worker ...`
FROM_MINUTE = 5  # growth is measured from this minute (the first minute in a shorter run) to the end
TREND_WINDOW = 5  # minutes averaged at each end for the trend (`trend`)
DISCOVERY_CLASSES = 200  # the discoveries cycle over this many questions, so their caches can level off
WATCH_WAIT_S = 60
CHURN_LIFE_S = 10  # a churned instance is deregistered this long after its registration (under its ttl)


@dataclass(frozen=True)
class SoakLoad:
    instances: int = 3000  # live: heartbeating, plus the churned ones alive at any moment
    ttl_s: int = 15
    heartbeats_per_s: float = 1000.0  # every heartbeating instance once a period, spread evenly
    heartbeat_connections: int = 16
    watches: int = 300
    discoveries_per_s: float = 50.0
    sparql_per_s: float = 5.0
    churn_per_s: float = 5.0  # registrations a second, and as many deregistrations

    @property
    def churn_window(self) -> int:
        return round(self.churn_per_s * CHURN_LIFE_S)

    @property
    def beating(self) -> int:
        """The instances that heartbeat: the live ones but the churned ones alive at any moment."""
        return self.instances - self.churn_window

    @property
    def period_s(self) -> float:
        return self.beating / self.heartbeats_per_s


QUICK_LOAD = SoakLoad(instances=300, heartbeats_per_s=100.0, heartbeat_connections=4, watches=30,
                      discoveries_per_s=5.0, sparql_per_s=1.0, churn_per_s=1.0)


def render(figures: dict) -> list[list[str]]:
    """The per-minute table: PSS of each kind, the whole tree's PSS and RSS, the instances held and the
    heartbeats answered in the minute (a minute far under the load's rate measured a different load)."""
    header = ["minute", "instances", "server PSS MiB", "template PSS MiB", "queries PSS MiB (n)", "total PSS MiB",
              "total RSS MiB", "heartbeats", "server: Python blocks (k) / C heap in use / kept MiB"]
    rows = figures.get("per_minute", [])
    lines = [[str(r["minute"]), f"{r['instances']:,}", f"{r['server_pss_mib']}", f"{r['template_pss_mib']}",
              f"{r['queries_pss_mib']} ({r['query_processes']})", f"{r['total_pss_mib']}", f"{r['total_rss_mib']}",
              f"{r.get('heartbeats', 0) - (rows[n - 1].get('heartbeats', 0) if n else 0):,}",
              f"{r.get('python_kblocks', 0)} / {r.get('c_heap_in_use_mib', 0)} / {r.get('c_heap_kept_mib', 0)}"]
             for n, r in enumerate(rows)]
    return [header, *lines]


@scenario("soak", "memory under steady churn for --minutes: 3,000 instances heartbeating (1,000/s), 300 blocking "
          "reads, 50 discoveries/s, 5 SPARQL/s, 5 registrations and 5 deregistrations a second; PSS per minute of "
          "the server, the SPARQL template and the query processes",
          targets=(Target("total PSS growth from minute 5", "growth_pct", "<=", 10.0, "%"),),
          render=render)
def soak(ctx: BenchContext) -> dict:
    if ctx.external:
        raise BenchError("soak reads the memory of the server's processes; run it without --semreg-url")
    s = ctx.settings
    load = QUICK_LOAD if s.quick else SoakLoad()
    live = Dataset(classes=s.classes, properties=s.properties, instances=load.beating, tags_per_instance=3,
                   answer_size=min(s.answer_size, load.beating), seed=s.seed)
    with ctx.own_semreg() as url, ctx.client(url) as http, LoopThread("semreg-bench-soak") as loop:
        pid = ctx.semreg_pid(url)
        figures: dict[str, Any] = ctx.upload_ontology(url)
        ids = register_live(ctx, http, live, load)
        figures["settle_s"] = ctx.wait_settled(http)
        headers = ctx.auth_headers(url)
        beater = Heartbeater(url, ids, load.period_s, load.heartbeat_connections, headers)
        tally: Counter[str] = Counter()
        running = [loop.spawn(beater.run())]
        running += [loop.spawn(job) for job in load_jobs(url, headers, ctx.dataset, live, load, tally)]
        try:
            rows = run_minutes(ctx, http, pid, s.minutes, tally, beater)
        finally:
            beater.stop()
            for job in running[1:]:
                job.cancel()
            with contextlib.suppress(Exception):
                running[0].result(60)
    figures.update(summary(rows, load, beater, tally, s.minutes))
    if figures["heartbeats_per_s"] < 0.9 * load.heartbeats_per_s:
        figures["warning"] = (f"the load was not kept: {figures['heartbeats_per_s']:,} heartbeats/s of "
                              f"{load.heartbeats_per_s:,.0f} (lateness p99 {figures['heartbeat_lateness'].get('p99_ms')}"
                              f" ms, ttl {load.ttl_s} s); instances may have lapsed and the minutes are not comparable")
        ctx.ui.log(f"[yellow]  warning: {figures['warning']}")
    g = figures["growth"]
    ctx.ui.log(f"  total PSS {g['from_mib']} → {g['to_mib']} MiB from minute {g['from_minute']} to "
               f"{g['to_minute']} ({g['growth_pct']:+}%, {g['mib_per_min']:+} MiB/min)")
    if figures["trend"] is not None:
        t = figures["trend"]
        ctx.ui.log(f"  mean total PSS of minutes {t['to_minutes'][0]}-{t['to_minutes'][1]} against "
                   f"{t['from_minutes'][0]}-{t['from_minutes'][1]}: {t['from_mib']} → {t['to_mib']} MiB "
                   f"({t['growth_pct']:+}%; server {figures['trend_by_kind']['server']['growth_pct']:+}%)")
    return figures


def register_live(ctx: BenchContext, http, live: Dataset, load: SoakLoad) -> list[str]:
    """The heartbeating instances, with the soak's ttl: their ids."""
    items = [{**live.instance(n), "ttl": load.ttl_s, "meta": {"bench": "soak"}} for n in range(live.instances)]
    with ctx.ui.step(f"registering {len(items):,} instances × 3 tags with a {load.ttl_s} s ttl"):
        register_batches(ctx, http, items)
    return [item["id"] for item in items]


# -- the load, on the bench's event loop ----------------------------------------------------------------------
def load_jobs(url: str, headers: Mapping[str, str], ontology: Dataset, live: Dataset, load: SoakLoad,
              tally: Counter[str]) -> list:
    """The coroutines of every load beside the heartbeats; each runs until cancelled."""
    level2 = ontology.levels[2] if len(ontology.levels) > 2 else ontology.levels[-1]
    watched = [class_iri(level2[n * len(level2) // load.watches % len(level2)]) for n in range(load.watches)]
    jobs: list = [watch(url, headers, {"s": iri}, tally) for iri in watched]
    jobs.append(paced(url, headers, load.discoveries_per_s, 4, discovery_request(ontology), tally, "discovery"))
    jobs.append(paced(url, headers, load.sparql_per_s, 2, sparql_request(ontology.classes), tally, "sparql"))
    # never skipped: every registration is followed by its deregistration, and the live count holds
    jobs.append(paced(url, headers, 2 * load.churn_per_s, 2, churn_request(live, load), tally, "churn", skip=False))
    return jobs


Request = tuple[str, str, bytes | None] | None  # method, target, body; None: nothing due at this turn


def discovery_request(ontology: Dataset) -> Callable[[int], Request]:
    """The k-th discovery: the bench's discovery question, or one of `DISCOVERY_CLASSES` others."""
    known = "/v1/discover?" + urlencode(ontology.discovery_query())

    def make(k: int) -> Request:
        if k % 2 == 0:
            return "GET", known, None
        iri = class_iri(k // 2 * 37 % min(DISCOVERY_CLASSES, ontology.classes))
        return "GET", "/v1/discover?" + urlencode({"s": iri, "p": property_iri(0)}), None
    return make


def sparql_request(classes: int) -> Callable[[int], Request]:
    """The k-th SPARQL query: a class and a limit no earlier query had (until classes × 1,000 queries)."""
    def make(k: int) -> Request:
        query = f"SELECT ?x WHERE {{ ?x <{RDFS_SUBCLASSOF}> <{NS}C{k % classes:05d}> }} LIMIT {1 + k // classes % 1000}"
        return "GET", "/sparql?" + urlencode({"query": query}), None
    return make


def churn_request(live: Dataset, load: SoakLoad) -> Callable[[int], Request]:
    """Even turns register a new instance (3 new tags, the soak's ttl); odd turns deregister the one
    registered `churn_window` registrations before (nothing while the window fills). Over two connections,
    registrations go over one and deregistrations over the other."""
    def make(k: int) -> Request:
        n = k // 2
        if k % 2 == 0:
            body = {**live.instance(live.instances + n), "ttl": load.ttl_s, "meta": {"bench": "soak-churn"}}
            del body["id"]
            return "PUT", f"/v1/instances/bench-soak-churn-{n:07d}", orjson.dumps(body)
        gone = n - load.churn_window
        return ("DELETE", f"/v1/instances/bench-soak-churn-{gone:07d}", None) if gone >= 0 else None
    return make


async def send(conn: Connection, method: str, target: str, body: bytes | None, tally: Counter[str],
               kind: str, headers: Mapping[str, str] | None = None) -> Response | None:
    """One request, counted in `tally` as `kind status-class` (2xx, 4xx, 5xx) or `kind transport`; the
    answer to a failure also as `! kind status: the start of its body`, to be told apart in the figures."""
    try:
        response = await conn.request(method, target, body, headers)
    except TRANSPORT_ERRORS as exc:
        tally[f"{kind} transport"] += 1
        tally[f"! {kind} {type(exc).__name__}: {exc}"[:160]] += 1
        return None
    tally[f"{kind} {response.status // 100}xx"] += 1
    if response.status >= 400:
        tally[f"! {kind} {method} {response.status}: {response.body[:120].decode(errors='replace')}"] += 1
    return response


async def paced(url: str, headers: Mapping[str, str], rate: float, connections: int,
                make: Callable[[int], Request], tally: Counter[str], kind: str, skip: bool = True) -> None:
    """`make(k)` at `rate` a second, turn k due at k/rate, over `connections` keep-alive connections (turn k
    on connection k mod `connections`); with `skip`, a connection that falls a second behind skips the turns
    it missed (counted) rather than bursting."""
    extra = {"Accept": SPARQL_JSON} if kind == "sparql" else {}
    start = time.perf_counter()

    async def worker(first: int) -> None:
        conn = Connection(url, {"Content-Type": "application/json", **headers, **extra})
        k = first
        try:
            while True:
                late = time.perf_counter() - (start + k / rate)
                if late < 0:
                    await asyncio.sleep(-late)
                elif skip and late > 1.0:
                    skipped = int(late * rate) // connections * connections
                    tally[f"{kind} skipped"] += skipped
                    k += skipped
                request = make(k)
                if request is not None:
                    await send(conn, *request, tally, kind)
                k += connections
        finally:
            conn.close()

    await asyncio.gather(*(worker(first) for first in range(connections)))


async def watch(url: str, headers: Mapping[str, str], question: dict[str, str], tally: Counter[str]) -> None:
    """A blocking read on `question`, re-armed at the index of each answer, until cancelled."""
    conn = Connection(url, headers)
    index: str | None = None
    try:
        while True:
            params = {**question, "index": index, "wait": f"{WATCH_WAIT_S}s"} if index else question
            response = await send(conn, "GET", "/v1/discover?" + urlencode(params), None, tally, "watch")
            if response is None or response.status != 200:
                await asyncio.sleep(1.0)
                continue
            answered = response.headers.get("x-semreg-index")
            if index is not None and answered != index:
                tally["watch wakes"] += 1
            index = answered or index
    finally:
        conn.close()


# -- the readings, every minute -------------------------------------------------------------------------------
def tree_kinds(server: int, children: Callable[[int], list[int]],
               argv: Callable[[int], list[str]]) -> dict[str, list[int]]:
    """The pids of each kind: the server; its children started as the SPARQL template; their children,
    the query processes."""
    templates = [pid for pid in children(server) if TEMPLATE_MODULE in argv(pid)]
    return {"server": [server], "template": templates, "queries": [q for t in templates for q in children(t)]}


def read_memory(server: int) -> dict[str, tuple[int, int, int]]:
    """Per kind: (PSS bytes, RSS bytes, processes), summed over the kind's live processes."""
    kinds = tree_kinds(server, child_pids, command_line)
    out = {}
    for kind, pids in kinds.items():
        pss = [process_pss_bytes(pid) for pid in pids]
        rss = [process_rss_bytes(pid) for pid in pids]
        out[kind] = (sum(p or 0 for p in pss), sum(r or 0 for r in rss), sum(1 for p in pss if p is not None))
    return out


def minute_row(minute: int, memory: Mapping[str, tuple[int, int, int]], instances: int) -> dict[str, Any]:
    """One line of the table, in MiB to a tenth."""
    row: dict[str, Any] = {"minute": minute}
    for kind in KINDS:
        row[f"{kind}_pss_mib"] = round(memory[kind][0] / MiB, 1)
    row["total_pss_mib"] = round(sum(memory[kind][0] for kind in KINDS) / MiB, 1)
    for kind in KINDS:
        row[f"{kind}_rss_mib"] = round(memory[kind][1] / MiB, 1)
    row["total_rss_mib"] = round(sum(memory[kind][1] for kind in KINDS) / MiB, 1)
    row["query_processes"] = memory["queries"][2]
    row["instances"] = instances
    return row


def server_heap(metrics: Mapping[str, float]) -> dict[str, Any]:
    """Where the server's memory is, from its `/metrics`: Python's allocated blocks (thousands), the C heap
    in use and freed but kept (MiB); what PSS has beyond those is the store's own mappings and pymalloc's
    arenas."""
    return {"python_kblocks": round(metrics.get("semreg_python_allocated_blocks", 0) / 1000, 1),
            "c_heap_in_use_mib": round(metrics.get('semreg_malloc_bytes{state="in_use"}', 0) / MiB, 1),
            "c_heap_kept_mib": round(metrics.get('semreg_malloc_bytes{state="free_kept"}', 0) / MiB, 1)}


def growth(rows: list[dict[str, Any]], key: str = "total_pss_mib") -> dict[str, Any]:
    """`key` from minute `FROM_MINUTE` (the first minute after 0 when the run is shorter) to the last row:
    in MiB, in % and in MiB a minute."""
    timed = [row for row in rows if row["minute"] >= 1] or rows
    base = next((row for row in timed if row["minute"] == FROM_MINUTE), timed[0])
    last = timed[-1]
    minutes = last["minute"] - base["minute"]
    change = last[key] - base[key]
    return {"from_minute": base["minute"], "to_minute": last["minute"], "from_mib": base[key], "to_mib": last[key],
            "growth_mib": round(change, 1), "growth_pct": round(100 * change / base[key], 1) if base[key] else None,
            "mib_per_min": round(change / minutes, 2) if minutes else 0.0}


def trend(rows: list[dict[str, Any]], key: str = "total_pss_mib", window: int = TREND_WINDOW) -> dict[str, Any] | None:
    """`key`'s mean over the last `window` minutes against its mean over the `window` from minute `FROM_MINUTE`:
    growth that a process rebuilt now and then (the SPARQL replicas' saw-tooth) does not hide or fake at
    a single minute. None when the run is too short for two windows apart."""
    first = [row[key] for row in rows if FROM_MINUTE <= row["minute"] < FROM_MINUTE + window]
    last_minute = rows[-1]["minute"]
    last = [row[key] for row in rows if row["minute"] > last_minute - window]
    if len(first) < window or len(last) < window or last_minute - window + 1 < FROM_MINUTE + window:
        return None
    base, end = sum(first) / window, sum(last) / window
    return {"from_minutes": [FROM_MINUTE, FROM_MINUTE + window - 1], "to_minutes": [last_minute - window + 1, last_minute],
            "from_mib": round(base, 1), "to_mib": round(end, 1), "growth_pct": round(100 * (end - base) / base, 1)}


def run_minutes(ctx: BenchContext, http, pid: int | None, minutes: int, tally: Counter[str],
                beater: Heartbeater) -> list[dict[str, Any]]:
    """A row at the start (minute 0) and at the end of every minute, until `minutes` have passed, with the
    heartbeats answered (and failed) so far."""
    if pid is None:
        raise BenchError("the soak's server has no process to read")

    def row(minute: int) -> dict[str, Any]:
        metrics = ctx.metrics(http)
        held = sum(v for series, v in metrics.items() if series.startswith("semreg_instances{"))
        return {**minute_row(minute, read_memory(pid), int(held)), **server_heap(metrics),
                "heartbeats": beater.stats.ok, "heartbeats_failed": beater.stats.failed}

    rows = [row(0)]
    started = time.perf_counter()
    with ctx.ui.step(f"soaking for {minutes} min", total=minutes) as advance:
        for minute in range(1, minutes + 1):
            time.sleep(max(0.0, started + 60 * minute - time.perf_counter()))
            rows.append(row(minute))
            r = rows[-1]
            advance(1)
            ctx.ui.log(f"  minute {minute}: PSS server {r['server_pss_mib']}, template {r['template_pss_mib']}, "
                       f"queries {r['queries_pss_mib']} ({r['query_processes']}), total {r['total_pss_mib']} MiB "
                       f"(server: {r['python_kblocks']}k Python blocks, C heap {r['c_heap_in_use_mib']} MiB in use, "
                       f"{r['c_heap_kept_mib']} kept); "
                       f"{r['instances']:,} instances; {beater.stats.ok:,} heartbeats "
                       f"({beater.stats.failed} failed); {tally['watch wakes']:,} wakes")
    return rows


def summary(rows: list[dict[str, Any]], load: SoakLoad, beater: Heartbeater, tally: Counter[str],
            minutes: int) -> dict[str, Any]:
    counts = {key: n for key, n in sorted(tally.items()) if not key.startswith("! ")}
    failures = Counter({key[2:]: n for key, n in tally.items() if key.startswith("! ")})
    total = growth(rows)
    return {
        "per_minute": rows, "growth": total, "growth_pct": total["growth_pct"],
        "growth_by_kind": {kind: growth(rows, f"{kind}_pss_mib") for kind in KINDS},
        "trend": trend(rows), "trend_by_kind": {kind: trend(rows, f"{kind}_pss_mib") for kind in KINDS},
        "load": {"instances": load.instances, "ttl_s": load.ttl_s, "heartbeat_period_s": round(load.period_s, 3),
                 "watches": load.watches, "discoveries_per_s": load.discoveries_per_s,
                 "sparql_per_s": load.sparql_per_s, "churn_per_s": load.churn_per_s},
        "heartbeats_per_s": round((rows[-1]["heartbeats"] - rows[0]["heartbeats"]) / (60.0 * minutes), 1),
        "heartbeats_ok": beater.stats.ok,
        "heartbeats_failed": beater.stats.failed,
        "errors_5xx": sum(n for key, n in tally.items() if key.endswith(" 5xx")),
        "transport_errors": sum(n for key, n in tally.items() if key.endswith(" transport")),
        "heartbeat_lateness": latency_stats(beater.stats.lateness_s),
        "requests": counts, "failures": dict(failures.most_common(8)),
    }
