"""The watches scenario: 10,000 blocking reads (`?index=&wait=`) held on one server at once.

What holding them costs the server (memory per read), and who wakes on a write, how fast: a write
relevant to one query group must wake exactly that group's reads, a write relevant to none must wake
none, and a write relevant to every query wakes every read still waiting.
"""
from __future__ import annotations

import time
from typing import Any
from urllib.parse import urlencode

import httpx

from semreg.bench.aio.crowd import Wake, WatchCrowd
from semreg.bench.aio.loop import LoopThread
from semreg.bench.context import BenchContext, expect
from semreg.bench.peers import BenchError
from semreg.bench.readings import process_open_files_limit, process_rss_bytes, raise_open_files_limit
from semreg.bench.report import Target
from semreg.bench.scenarios.common import mib, register_batches, remove_instances, scenario, wait_for
from semreg.bench.stats import latency_stats

WATCH_NS = "http://bench.semreg.example/watch#"


def watch_groups(watches: int, groups: int) -> list[int]:
    """The query group of each blocking read: round robin, so group sizes differ by at most one."""
    return [n % groups for n in range(watches)]


def watch_group_iri(group: int) -> str:
    return f"{WATCH_NS}G{group:03d}"


# -- 5. 10,000 blocking reads ---------------------------------------------------------------------------------
@scenario("watches", "10,000 blocking reads (?index=&wait=) held on one server: memory, who wakes on a write, "
          "how fast",
          targets=(Target("wake p99", "wake.p99_ms", "<=", 100.0, "ms"),
                   Target("irrelevant wakes", "irrelevant_wakes", "<=", 0),
                   Target("missed or extra wakes", "wrong_wakes", "<=", 0)))
def watches(ctx: BenchContext) -> dict:
    s = ctx.settings
    n, groups = s.watches, min(s.watch_groups, s.watches)
    soft = open_files_for(n)
    plan = watch_groups(n, groups)
    woken_group = 0
    expected = plan.count(woken_group)
    with ctx.own_semreg() as url, ctx.client(url) as http, LoopThread("semreg-bench-watches") as loop:
        pid = ctx.semreg_pid(url)
        server_files = process_open_files_limit(pid)
        base, indexes = register_watched(ctx, http, groups)
        ctx.wait_settled(http)
        rss_before = process_rss_bytes(pid)
        crowd = WatchCrowd(url, blocking_reads(plan, indexes, s.watch_wait_s), ctx.auth_headers(url))
        held, started, established_s = hold_reads(ctx, http, loop, crowd, groups)
        figures: dict[str, Any] = {"watches": n, "groups": groups, "wait_s": s.watch_wait_s, "watches_held": held,
                   "establish_s": round(established_s, 2),
                   "client_sent_s": round(crowd.all_sent - started, 2) if crowd.all_sent else None,
                   "connect_errors": crowd.failed, "open_files_limit": {"bench": soft, "server": server_files}}
        if crowd.errors:
            figures["connect_error_messages"] = dict(crowd.errors.most_common(5))
        if held < n:
            figures["server_log_tail"] = shortfall(ctx, url, crowd, held, established_s)
        rss_with = process_rss_bytes(pid)
        figures.update({"server_rss_before_mib": mib(rss_before), "server_rss_with_mib": mib(rss_with),
                        "bytes_per_watch": round((rss_with - rss_before) / held) if rss_before and rss_with and held
                        else None})
        premature = len(crowd.wakes)
        one_group, mine = wake_one_group(ctx, http, crowd, woken_group, expected)
        figures.update({"premature_wakes": premature, **one_group})
        figures["watches_after_wake"] = int(ctx.metrics(http).get("semreg_watches", 0))
        figures["irrelevant_wakes"] = wake_none(ctx, http, crowd)
        figures["wake_all"] = wake_all(ctx, http, crowd, groups, held - len(mine))
        loop.run(crowd.aclose(), 60)
        remove_instances(ctx, loop, url, [item["id"] for item in base]
                         + ["bench-watch-one", "bench-watch-other", "bench-watch-all"])
    ctx.ui.log(f"  {held:,} reads held, {figures['bytes_per_watch']} bytes each; a write woke {len(mine)} "
               f"(p99 {figures['wake'].get('p99_ms')} ms), an irrelevant one {figures['irrelevant_wakes']}")
    return figures


def open_files_for(connections: int) -> int:
    """Raise this process's open-files limit as far as it goes: the soft limit after, or BenchError when
    it leaves too few files for `connections` connections (and 256 besides)."""
    soft, hard = raise_open_files_limit()
    if soft < connections + 256:
        raise BenchError(f"this process may open {soft} files (hard limit {hard}), too few for {connections:,} "
                         f"connections; raise the hard limit (ulimit -Hn) or pass --watches under {max(0, soft - 256)}")
    return soft


def register_watched(ctx: BenchContext, http: httpx.Client, groups: int) -> tuple[list[dict[str, Any]], dict[int, int]]:
    """One instance for each query group to answer, and each query's index: (the instances, {group: index})."""
    base: list[dict[str, Any]] = [
        {"id": f"bench-watch-{g:03d}", "service": "bench-watch", "address": "127.0.0.1", "port": 9000 + g,
         "ttl": 0, "tags": [{"s": watch_group_iri(g)}]} for g in range(groups)]
    register_batches(ctx, http, base)
    indexes = {}
    for g in range(groups):  # each query's own index: a read blocks while nothing it answers changes
        indexes[g] = int(expect(http.get("/v1/discover", params={"s": watch_group_iri(g)})).headers["x-semreg-index"])
    return base, indexes


def blocking_reads(plan: list[int], indexes: dict[int, int], wait_s: int) -> list[tuple[int, str]]:
    """(group, request target) of each blocking read: its group's query, at that query's index."""
    return [(g, "/v1/discover?" + urlencode({"s": watch_group_iri(g), "index": indexes[g], "wait": f"{wait_s}s"}))
            for g in plan]


def hold_reads(ctx: BenchContext, http: httpx.Client, loop: LoopThread, crowd: WatchCrowd,
               groups: int, wait_s: float | None = None, over: str = "queries") -> tuple[int, float, float]:
    """Open the crowd's reads (`wait_s` their wait; the settings' by default) and follow the server's count of
    reads held (`http` its public port) until every read is held, failed or answered, or half their wait (two
    minutes at most) has passed: (reads held, start, seconds taken)."""
    n = len(crowd.watches)
    held = 0
    started = time.perf_counter()
    loop.run(crowd.start())
    timeout_s = min(120.0, (wait_s or ctx.settings.watch_wait_s) / 2)
    with ctx.ui.step(f"opening {n:,} blocking reads over {groups} {over}", total=n) as advance:
        while True:
            now_held = int(ctx.metrics(http).get("semreg_watches", 0))
            advance(max(0, now_held - held))
            held = now_held
            if held + crowd.failed + len(crowd.wakes) >= n:
                break
            if time.perf_counter() - started > timeout_s:
                break
            time.sleep(0.1)
    return held, started, time.perf_counter() - started


def shortfall(ctx: BenchContext, url: str, crowd: WatchCrowd, held: int, established_s: float) -> str:
    """Say that fewer reads are held than were opened: the end of the server's log, or BenchError when
    it holds none."""
    n = len(crowd.watches)
    tail = ctx.semreg_log(url, 1500)
    ctx.ui.log(f"[yellow]  only {held:,} of {n:,} blocking reads held after {established_s:.0f} s "
               f"({crowd.failed} connections failed: {dict(crowd.errors.most_common(3))})")
    if held == 0:
        raise BenchError(f"the server held none of {n:,} blocking reads: {dict(crowd.errors.most_common(3))}"
                         f"\n{tail}")
    return tail[-1500:]


def write(ctx: BenchContext, http: httpx.Client, instance_id: str, tags: list[dict]) -> tuple[float, float]:
    """Register `instance_id` with `tags`: (perf_counter when sent, when acknowledged)."""
    body = {"service": "bench-watch", "address": "127.0.0.1", "port": 9999, "ttl": 0, "tags": tags}
    sent = time.perf_counter()
    expect(http.put(f"/v1/instances/{instance_id}", json=body), 200, 201)
    ctx.registered_ids.add(instance_id)
    return sent, time.perf_counter()


def wake_one_group(ctx: BenchContext, http: httpx.Client, crowd: WatchCrowd, group: int,
                   expected: int) -> tuple[dict[str, Any], list[Wake]]:
    """One write relevant to one query group: exactly that group's reads answer. The figures, and the
    wakes of the group."""
    expect(http.get("/healthz"))  # the keep-alive connection is open before the timed write
    before = len(crowd.wakes)
    sent, acked = write(ctx, http, "bench-watch-one", [{"s": watch_group_iri(group)}])
    return wakes_of(crowd, before, group, expected, sent, acked)


def wakes_of(crowd: WatchCrowd, before: int, group: int, expected: int, sent: float,
             acked: float) -> tuple[dict[str, Any], list[Wake]]:
    """The wakes that follow a write relevant to `group` alone (sent and acknowledged at those perf_counter
    times; the crowd had `before` wakes), once `expected` came or 10 s passed, and half a second more: the
    figures (missed and extra wakes, latency from the acknowledgement and from the write), and the group's."""
    wait_for(lambda: len(crowd.wakes) - before >= expected, 10.0)
    time.sleep(0.5)  # a wake past the group's count would show up here
    woken = crowd.wakes[before:]
    mine = [w for w in woken if w.group == group]
    return {
        "write_ms": round((acked - sent) * 1000, 2),
        "woken": len(woken), "expected_woken": expected,
        "wrong_wakes": (len(woken) - len(mine)) + abs(expected - len(mine)),
        "wake": latency_stats([max(0.0, w.at - acked) for w in mine]),
        "wake_from_write": latency_stats([w.at - sent for w in mine]),
        "answered_before_ack": sum(1 for w in mine if w.at < acked),
        "non_200_wakes": sum(1 for w in woken if w.status != 200),
    }, mine


def wake_none(ctx: BenchContext, http: httpx.Client, crowd: WatchCrowd) -> int:
    """One write relevant to none: the reads that answer within a second (none should)."""
    before = len(crowd.wakes)
    write(ctx, http, "bench-watch-other", [{"s": WATCH_NS + "Unwatched"}])
    time.sleep(1.0)
    return len(crowd.wakes) - before


def wake_all(ctx: BenchContext, http: httpx.Client, crowd: WatchCrowd, groups: int, waiting: int) -> dict:
    """One write relevant to every query: every read still waiting answers (and the server is left idle)."""
    before = len(crowd.wakes)
    sent, acked = write(ctx, http, "bench-watch-all", [{"s": watch_group_iri(g)} for g in range(groups)])
    return all_woken(ctx, crowd, before, waiting, sent, acked)


def all_woken(ctx: BenchContext, crowd: WatchCrowd, before: int, waiting: int, sent: float, acked: float) -> dict:
    """The wakes that follow a write relevant to every read still waiting (`waiting` of them; the crowd had
    `before` wakes; sent and acknowledged at those perf_counter times), once all came or a minute passed."""
    with ctx.ui.step(f"waking the other {waiting:,} reads at once"):
        wait_for(lambda: len(crowd.wakes) - before >= waiting, 60.0, 0.01)
    everyone = crowd.wakes[before:]
    return {**latency_stats([max(0.0, w.at - acked) for w in everyone]),
            "expected": waiting, "write_ms": round((acked - sent) * 1000, 2)}
