"""The consul-watches scenario: 1,000 blocked Consul reads held on one server while other services churn.

Consul's clients watch a service with `GET /v1/health/service/NAME?index=N&wait=` (and the catalog's read): on a
server of its own started with `--consul-listen`, `--consul-watches` such reads (health and catalog in turn, some
with `passing`, as consul-template asks) are spread over five saved queries' names (answered by meaning) and five
plain service names, each at its read's `X-Consul-Index`, and held. The churn, for `--churn-s`, is on services none
of them answers: through the Consul listener, registrations with a TTL check passed, warned, failed, put in
maintenance and out, and deregistered; through the public port, registrations, heartbeats with a load, drains and
removals, and 200 instances heartbeating. Its tags are near misses no saved query finds: books of the watched
kinds, and pamphlets, of another genre.

The churn runs twice: alone, before the reads are opened, then beside them. What it shows: what a held read costs
the server (RSS, PSS and Python's allocated blocks, before and with the reads); whether that stays flat under
churn: the server's memory at the start and the end of each phase, and how much more Python's heap grew beside
the reads than alone, against what the reads took (the store's write buffer and the change log grow under churn
whatever is watched, and RSS follows the store's buffer up and down, so RSS at two moments says little of the
reads); the wakes the churn caused (stray: none is the target, the soak's rule); then that a change one group's
reads answer wakes exactly that group (one by meaning, one by name: missed and extra wakes, latency after the
write's acknowledgement), and that one batch every name answers wakes every read still waiting.

The wait is the node's cap (300 s), so that no read ends by its wait before the scenario does; a read that
answers with the index it was asked at ended by its wait, and is counted apart from a wake.
"""
from __future__ import annotations

import functools
import statistics
import time
from collections import Counter
from typing import Any
from urllib.parse import urlencode

import httpx
import orjson

from semreg.bench.aio.crowd import WatchCrowd
from semreg.bench.aio.heartbeats import Heartbeater
from semreg.bench.aio.loop import LoopThread
from semreg.bench.context import BenchContext, expect
from semreg.bench.peers import BenchError, free_port
from semreg.bench.readings import process_open_files_limit, process_pss_bytes, process_rss_bytes
from semreg.bench.report import Target
from semreg.bench.scenarios.common import mib, register_batches, scenario
from semreg.bench.scenarios.soak import Request, paced, server_heap
from semreg.bench.scenarios.watches import all_woken, hold_reads, open_files_for, shortfall, wakes_of, watch_groups

PREFIX = "cw"
NS = "http://bench.semreg.example/consul-watch#"
QUERIES = 5  # groups 0-4: saved queries' names, answered by meaning
NAMES = 5  # groups 5-9: plain service names
WAIT_S = 300  # the node's cap on a blocking read's wait
HEARTBEATING = 200  # instances of another service heartbeating through the public port
HEARTBEAT_PERIOD_S = 2.0  # so 100 heartbeats a second
CONSUL_CHURN_PER_S = 20.0  # agent API calls a second (one connection, in order)
PUBLIC_CHURN_PER_S = 20.0  # public API calls a second (one connection, in order)
SAMPLE_S = 5.0  # memory read this often while the churn runs
HEAP = ("python_kblocks", "c_heap_in_use_mib", "c_heap_kept_mib", "watches", "topics")
CONSUL_STEPS = ("register", "pass", "warn", "fail", "pass", "maintenance on", "maintenance off", "deregister")
PUBLIC_STEPS = ("register", "heartbeat", "drain", "up", "heartbeat", "remove")


def ontology() -> str:
    """Works of each watched kind, each with its books, and a genre property: a saved query asks for works of one
    kind of horror, and finds its books (narrower)."""
    lines = [f"@prefix {PREFIX}: <{NS}> .", "@prefix owl: <http://www.w3.org/2002/07/owl#> .",
             "@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .",
             f"{PREFIX}:Work a owl:Class . {PREFIX}:Genre a owl:Class . {PREFIX}:hasGenre a owl:ObjectProperty .",
             f"{PREFIX}:Horror a owl:Class ; rdfs:subClassOf {PREFIX}:Genre .",
             f"{PREFIX}:Comedy a owl:Class ; rdfs:subClassOf {PREFIX}:Genre .",
             f"{PREFIX}:Pamphlet a owl:Class ; rdfs:subClassOf {PREFIX}:Work ."]
    for g in range(QUERIES):
        lines.append(f"{PREFIX}:Work{g} a owl:Class ; rdfs:subClassOf {PREFIX}:Work . "
                     f"{PREFIX}:Book{g} a owl:Class ; rdfs:subClassOf {PREFIX}:Work{g} .")
    return "\n".join(lines) + "\n"


def name_of(group: int) -> str:
    """The service name a group's reads ask for: a saved query's, or a plain one."""
    return f"bench-works-{group}" if group < QUERIES else f"bench-svc-{group - QUERIES}"


def horror_tag(g: int) -> str:
    """A tag the saved query of group `g` finds (a book of its kind of work, of horror)."""
    return f"{PREFIX}:Book{g % QUERIES} {PREFIX}:hasGenre {PREFIX}:Horror"


def near_miss(k: int) -> str:
    """A tag no saved query finds: a book of a watched kind, or a pamphlet, of comedy."""
    subject = f"{PREFIX}:Book{k % QUERIES}" if k % (QUERIES + 1) else f"{PREFIX}:Pamphlet"
    return f"{subject} {PREFIX}:hasGenre {PREFIX}:Comedy"


def read_target(group: int, n: int, index: int | None = None) -> str:
    """The n-th read of a group: health and catalog in turn, one in five with `passing`; blocking at `index`."""
    kind = ("health", "catalog")[n // (QUERIES + NAMES) % 2]
    params: dict[str, Any] = {"passing": "1"} if n % 5 == 0 and kind == "health" else {}
    if index is not None:
        params.update(index=index, wait=f"{WAIT_S}s")
    return f"/v1/{kind}/service/{name_of(group)}" + (f"?{urlencode(params)}" if params else "")


@scenario("consul-watches", "1,000 blocked Consul reads (health and catalog, ?index=&wait=) over saved queries' "
          "names and plain names while other services churn: memory per read and over the churn, stray wakes, who "
          "wakes on a change, how fast",
          targets=(Target("stray wakes under churn", "stray_wakes", "<=", 0),
                   Target("missed or extra wakes", "wrong_wakes", "<=", 0),
                   Target("wake p99", "wake_p99_ms", "<=", 100.0, "ms"),
                   Target("Python heap growth beside the reads beyond the churn's own, of what the reads took",
                          "churn_heap_share_pct", "<=", 10.0, "%")))
def consul_watches(ctx: BenchContext) -> dict:
    if ctx.external:
        raise BenchError("consul-watches starts a server with --consul-listen and reads its memory; run it without "
                         "--semreg-url")
    s = ctx.settings
    n, groups = s.consul_watches, QUERIES + NAMES
    if s.churn_s > WAIT_S - 120:
        raise BenchError(f"--churn-s {s.churn_s} leaves the reads too little of their {WAIT_S} s wait; at most "
                         f"{WAIT_S - 120}")
    soft = open_files_for(n)
    plan = watch_groups(n, groups)
    consul_port = free_port()
    consul_url = f"http://127.0.0.1:{consul_port}"
    with ctx.own_semreg("--consul-listen", f"127.0.0.1:{consul_port}") as url, ctx.client(url) as http, \
            ctx.client(consul_url) as consul, LoopThread("semreg-bench-consul-watches") as loop:
        pid = ctx.semreg_pid(url)
        beating = set_up(ctx, http)
        ctx.wait_settled(http)
        alone = churn(ctx, http, loop, url, consul_url, beating, pid, "alone")
        targets = [(g, read_target(g, k, index_of(consul, read_target(g, k)))) for k, g in enumerate(plan)]
        without = sample(ctx, http, pid, 0.0)
        crowd = WatchCrowd(consul_url, targets, index_header="x-consul-index")
        held, started, established_s = hold_reads(ctx, http, loop, crowd, groups, WAIT_S, "names")
        asked = {g: int(target.rpartition("index=")[2].partition("&")[0]) for g, target in targets}
        figures: dict[str, Any] = {
            "watches": n, "groups": {"saved_queries": QUERIES, "names": NAMES}, "wait_s": WAIT_S, "watches_held": held,
            "establish_s": round(established_s, 2), "connect_errors": crowd.failed,
            "open_files_limit": {"bench": soft, "server": process_open_files_limit(pid)},
            "premature_wakes": len(crowd.wakes)}
        if crowd.errors:
            figures["connect_error_messages"] = dict(crowd.errors.most_common(5))
        if held < n:
            figures["server_log_tail"] = shortfall(ctx, url, crowd, held, established_s)
        figures.update(memory_held(held, without, sample(ctx, http, pid, 0.0)))
        before = len(crowd.wakes)
        beside = churn(ctx, http, loop, url, consul_url, beating, pid, f"beside {held:,} held reads")
        figures.update(churn_figures(alone, beside, crowd, before, asked, held, figures))
        figures.update(wake_groups(ctx, consul, http, crowd, plan, held))
        loop.run(crowd.aclose(), 60)
    ctx.ui.log(f"  {held:,} Consul reads held, {figures['bytes_per_watch']} bytes ({figures['blocks_per_watch']} "
               f"Python blocks) each; over {s.churn_s} s of churn RSS {beside['rss_start_mib']} → "
               f"{beside['rss_end_mib']} MiB (alone {alone['rss_start_mib']} → {alone['rss_end_mib']}), Python heap "
               f"{figures['churn_blocks_per_watch']:+} blocks a read beyond the churn's own "
               f"({figures['churn_heap_share_pct']}% of what the reads took); {figures['stray_wakes']} "
               f"stray wakes; a change woke its group (p99 {figures['wake_p99_ms']} ms at most), {figures['wrong_wakes']} "
               f"missed or extra; one every name answers woke {figures['wake_all']['n']:,} of "
               f"{figures['wake_all']['expected']:,}")
    return figures


def set_up(ctx: BenchContext, http: httpx.Client) -> list[str]:
    """The ontology, a saved query for each query group, an instance each query finds and one under each plain
    name, and the instances of another service that heartbeat during the churn: their ids."""
    expect(http.put("/v1/ontologies/consul-watches", content=ontology(), headers={"Content-Type": "text/turtle"}),
           200, 201)
    ctx.uploaded_ontologies.add("consul-watches")
    for g in range(QUERIES):
        expect(http.put(f"/v1/queries/{name_of(g)}", json={"s": f"{PREFIX}:Work{g}", "p": f"{PREFIX}:hasGenre",
                                                           "o": f"{PREFIX}:Horror"}), 200, 201)
    base = [{"id": f"bench-cw-q{g}", "service": "bench-cw-books", "address": "127.0.0.1", "port": 9000 + g, "ttl": 0,
             "tags": [horror_tag(g)]} for g in range(QUERIES)]
    base += [{"id": f"bench-cw-s{j}", "service": name_of(QUERIES + j), "address": "127.0.0.1", "port": 9100 + j,
              "ttl": 0, "tags": [near_miss(j)]} for j in range(NAMES)]
    beating = [{"id": f"bench-cw-beat-{k:04d}", "service": "bench-cw-beating", "address": "127.0.0.1",
                "port": 10_000 + k, "ttl": 15, "tags": [near_miss(k)]} for k in range(HEARTBEATING)]
    with ctx.ui.step(f"registering {len(base)} watched and {len(beating)} heartbeating instances, "
                     f"{QUERIES} saved queries"):
        register_batches(ctx, http, base + beating)
    for g in range(QUERIES):  # each query finds its one book
        found = expect(http.get(f"/v1/queries/{name_of(g)}/discover")).json()["instances"]
        if [i["id"] for i in found] != [f"bench-cw-q{g}"]:
            raise BenchError(f"the saved query {name_of(g)} finds {[i['id'] for i in found]}, not bench-cw-q{g}")
    return [str(item["id"]) for item in beating]


def index_of(consul: httpx.Client, target: str) -> int:
    """The `X-Consul-Index` of a read answered at once (the index its blocking read waits at)."""
    return int(expect(consul.get(target)).headers["x-consul-index"])


def memory_held(held: int, without: dict[str, Any], with_reads: dict[str, Any]) -> dict[str, Any]:
    """What holding the reads cost the server (its `sample` before and with them): RSS and PSS, and Python's
    allocated blocks, per read."""
    def per(key: str, scale: int = 1) -> float | None:
        before, after = without[key], with_reads[key]
        return round(scale * (after - before) / held, 1) if before is not None and after is not None and held \
            else None
    rss, pss = per("rss"), per("pss")
    return {"server_rss_before_mib": mib(without["rss"]), "server_rss_with_mib": mib(with_reads["rss"]),
            "server_pss_before_mib": mib(without["pss"]), "server_pss_with_mib": mib(with_reads["pss"]),
            "bytes_per_watch": round(rss) if rss is not None else None,
            "pss_bytes_per_watch": round(pss) if pss is not None else None,
            "blocks_per_watch": per("python_kblocks", 1000)}


# -- the churn ------------------------------------------------------------------------------------------------
def consul_churn(phase: str, k: int) -> Request:
    """The k-th agent API call: each instance of `bench-cw-churn` goes through `CONSUL_STEPS`, a new one after."""
    cycle, step = divmod(k, len(CONSUL_STEPS))
    sid = f"bench-cw-churn-{phase[:5]}-{cycle:06d}"
    match CONSUL_STEPS[step]:
        case "register":
            body = {"ID": sid, "Name": "bench-cw-churn", "Tags": [near_miss(cycle), "churn"], "Address": "127.0.0.1",
                    "Port": 20_000 + cycle % 10_000, "Check": {"TTL": "120s", "Status": "passing"}}
            return "PUT", "/v1/agent/service/register", orjson.dumps(body)
        case "maintenance on" | "maintenance off" as what:
            return "PUT", f"/v1/agent/service/maintenance/{sid}?enable={'true' if what.endswith('on') else 'false'}", None
        case "deregister":
            return "PUT", f"/v1/agent/service/deregister/{sid}", None
        case verb:
            return "PUT", f"/v1/agent/check/{verb}/service:{sid}", None


def public_churn(phase: str, k: int) -> Request:
    """The k-th public API call: each instance of `bench-cw-public` goes through `PUBLIC_STEPS`, a new one after."""
    cycle, step = divmod(k, len(PUBLIC_STEPS))
    iid = f"bench-cw-public-{phase[:5]}-{cycle:06d}"
    match PUBLIC_STEPS[step]:
        case "register":
            body = {"service": "bench-cw-public", "address": "127.0.0.1", "port": 30_000 + cycle % 10_000, "ttl": 30,
                    "tags": [near_miss(cycle + 1)]}
            return "PUT", f"/v1/instances/{iid}", orjson.dumps(body)
        case "remove":
            return "DELETE", f"/v1/instances/{iid}", None
        case what:
            status = {"drain": b', "status": "draining"', "up": b', "status": "up"'}.get(what, b"")
            return "PUT", f"/v1/instances/{iid}/heartbeat", b'{"load": %d%s}' % (k % 7, status)


def churn(ctx: BenchContext, http: httpx.Client, loop: LoopThread, url: str, consul_url: str, beating: list[str],
          pid: int | None, phase: str) -> dict[str, Any]:
    """`--churn-s` of churn on the other services (its instances' ids marked with `phase`), the server's memory read
    every `SAMPLE_S`, and a second after the server settled: the figures."""
    churn_s = ctx.settings.churn_s
    tally: Counter[str] = Counter()
    beater = Heartbeater(url, beating, HEARTBEAT_PERIOD_S, connections=2)
    samples = [sample(ctx, http, pid, 0.0)]
    beats = loop.spawn(beater.run())
    running = [loop.spawn(paced(consul_url, {}, CONSUL_CHURN_PER_S, 1, functools.partial(consul_churn, phase), tally,
                                "consul", skip=False)),
               loop.spawn(paced(url, {}, PUBLIC_CHURN_PER_S, 1, functools.partial(public_churn, phase), tally, "public",
                                skip=False))]
    started = time.perf_counter()
    try:
        with ctx.ui.step(f"churning other services for {churn_s} s {phase}", total=churn_s) as advance:
            done = 0
            while (elapsed := time.perf_counter() - started) < churn_s:
                time.sleep(min(SAMPLE_S, churn_s - elapsed))
                samples.append(sample(ctx, http, pid, time.perf_counter() - started))
                advance(int(samples[-1]["s"]) - done)
                done = int(samples[-1]["s"])
    finally:
        beater.stop()
        for job in running:
            job.cancel()
        beats.result(30)
    ctx.wait_settled(http)
    time.sleep(1.0)  # what the last changes started is done, and a wake they caused has arrived
    samples.append(sample(ctx, http, pid, time.perf_counter() - started))
    first, last = samples[0], samples[-1]

    def grew(key: str) -> Any:
        return None if first[key] is None or last[key] is None else last[key] - first[key]
    return {
        "churn_s": churn_s, "rss_start_mib": mib(first["rss"]), "rss_end_mib": mib(last["rss"]),
        "rss_max_mib": mib(max(x["rss"] or 0 for x in samples)), "pss_start_mib": mib(first["pss"]),
        "pss_end_mib": mib(last["pss"]), "rss_growth_bytes": grew("rss"), "pss_growth_bytes": grew("pss"),
        "python_kblocks_growth": round(grew("python_kblocks"), 1),
        "python_kblocks_trend": trend(samples[:-1], "python_kblocks", churn_s),
        "c_heap_in_use_growth_mib": round(grew("c_heap_in_use_mib"), 1),
        "heartbeats": beater.stats.ok, "heartbeats_failed": beater.stats.failed,
        "requests": {key: v for key, v in sorted(tally.items()) if not key.startswith("! ")},
        "failures": dict(Counter({key[2:]: v for key, v in tally.items() if key.startswith("! ")}).most_common(5)),
        "per_sample": [{"s": round(x["s"], 1), "rss_mib": mib(x["rss"]), "pss_mib": mib(x["pss"]),
                        **{key: x[key] for key in HEAP}} for x in samples],
    }


def churn_figures(alone: dict[str, Any], beside: dict[str, Any], crowd: WatchCrowd, before: int,
                  asked: dict[int, int], held: int, per_watch: dict[str, Any]) -> dict[str, Any]:
    """The churn's figures: both phases; the reads that answered during the second (`before` the crowd's wakes
    when it began), as wakes (a new index: stray, since nothing they answer changed) and reads whose wait ended
    (the index `asked` of their group); and the Python heap's growth beside the reads beyond its growth alone (each
    phase's `trend`), per held read, and as a share of what the reads took (flat: a small share; the store's and
    the change log's growth under churn is the same in both phases, and RSS follows the store's write buffer up and
    down)."""
    answered = crowd.wakes[before:]
    ended = sum(1 for w in answered if w.index == asked[w.group])
    extra = beside["python_kblocks_trend"] - alone["python_kblocks_trend"]
    took = per_watch.get("blocks_per_watch")
    return {"churn_alone": alone, "churn": beside, "stray_wakes": len(answered) - ended, "waits_ended": ended,
            "woken_by_churn": sorted({name_of(w.group) for w in answered if w.index != asked[w.group]}),
            "churn_blocks_per_watch": round(1000 * extra / held, 1) if held else None,
            "churn_heap_share_pct": round(100 * 1000 * extra / (took * held), 1) if took and held else None,
            "churn_rss_bytes_per_watch": round(beside["rss_growth_bytes"] / held)
            if held and beside["rss_growth_bytes"] is not None else None,
            "watches_during_churn": sorted({x["watches"] for x in beside["per_sample"]})}


def trend(samples: list[dict[str, Any]], key: str, seconds: float) -> float:
    """How much `key` grew over `seconds` by the least-squares line through the samples: Python's count of blocks
    includes garbage its collector has not reached yet, which two readings alone can catch at any height."""
    return round(statistics.linear_regression([x["s"] for x in samples], [x[key] for x in samples]).slope * seconds, 1)


def sample(ctx: BenchContext, http: httpx.Client, pid: int | None, at_s: float) -> dict[str, Any]:
    """The server's memory at `at_s` into the churn: RSS, PSS, where its heap is (`server_heap`), the reads held
    and the topics the hub tracks."""
    metrics = ctx.metrics(http)
    return {"s": at_s, "rss": process_rss_bytes(pid), "pss": process_pss_bytes(pid), **server_heap(metrics),
            "watches": int(metrics.get("semreg_watches", 0)), "topics": int(metrics.get("semreg_watch_topics", 0))}


# -- the wakes ------------------------------------------------------------------------------------------------
def register(consul: httpx.Client, sid: str, name: str, tags: list[str]) -> tuple[float, float]:
    """Register through the agent API: (perf_counter when sent, when acknowledged)."""
    body = {"ID": sid, "Name": name, "Tags": tags, "Address": "127.0.0.1", "Port": 9999}
    sent = time.perf_counter()
    expect(consul.put("/v1/agent/service/register", json=body))
    return sent, time.perf_counter()


def wake_groups(ctx: BenchContext, consul: httpx.Client, http: httpx.Client, crowd: WatchCrowd, plan: list[int],
                held: int) -> dict[str, Any]:
    """A change one saved query's name answers, then one a plain name answers: each wakes exactly its group; then
    one batch every name answers wakes every read still waiting."""
    expect(consul.get("/v1/status/leader"))  # the keep-alive connection is open before the timed write
    figures: dict[str, Any] = {}
    woken = 0
    wrong = 0
    for label, group, write in (
            ("by_meaning", 0, lambda: register(consul, "bench-cw-wake-q", "bench-cw-books", [horror_tag(0)])),
            ("by_name", QUERIES, lambda: register(consul, "bench-cw-wake-s", name_of(QUERIES), ["v2"]))):
        before = len(crowd.wakes)
        sent, acked = write()
        one, mine = wakes_of(crowd, before, group, plan.count(group), sent, acked)
        figures[f"wake_{label}"] = one
        woken += len(mine)
        wrong += one["wrong_wakes"]
    figures["wrong_wakes"] = wrong
    p99s = [figures[f"wake_{label}"]["wake"].get("p99_ms") for label in ("by_meaning", "by_name")]
    figures["wake_p99_ms"] = max((p for p in p99s if p is not None), default=None)  # the slower group's
    figures["watches_after_wake"] = int(ctx.metrics(http).get("semreg_watches", 0))
    everyone = [{"id": f"bench-cw-all-{j}", "service": name_of(QUERIES + j), "address": "127.0.0.1", "port": 9200 + j,
                 "ttl": 0, "tags": [horror_tag(g) for g in range(QUERIES) if g % NAMES == j]} for j in range(NAMES)]
    before = len(crowd.wakes)
    sent = time.perf_counter()
    expect(http.post("/v1/instances/batch", json={"instances": everyone}))
    figures["wake_all"] = all_woken(ctx, crowd, before, held - woken, sent, time.perf_counter())
    return figures

