"""The scale-ring scenario: the scale scenario's instances on a ring of three members, each record on two.

Only when named (`semreg bench --only scale-ring --instances N`). etcd and three `semreg serve` members, each
with its own data directory; the first keeps the SPARQL replica (none with `--no-sparql`), the other two are
started with `--no-sparql` and forward `/sparql` to it, as the sizing page's capacity model has a ring run. Then:

    memory       each member's process tree (PSS) once every member's writes settled and a minute later,
                 and the records each holds
    answers      the data set's question and `COLD_REQUESTS` new questions (`match=all`) asked at every
                 member: each member's instances the same, and those the contract's matching finds in the
                 data set (`semreg.bench.oracle`, which a test holds to one node's catalogue)
    hot / cold   through the second member, one at a time
    register     a 1,000-tag registration through the ring, medians
    heartbeats   through the second member, which forwards each to its instance's leader
    summary      the overview's counts (`GET /v1/summary`) through the second member: the first, and then
                 `SUMMARY_CALLS` each after a status change (summed again from every member's kept counts)
    start-up     the third member killed (SIGKILL) and started again on its data directory: seconds to
                 /readyz 200 (its records read back and the ring's changes since caught up)
"""
from __future__ import annotations

import time
from typing import Any

import httpx

from semreg.bench.aio.loop import LoopThread
from semreg.bench.context import BenchContext, expect
from semreg.bench.localcluster import ClusterNode, LocalCluster
from semreg.bench.oracle import Oracle
from semreg.bench.peers import BenchError
from semreg.bench.readings import log_milestones
from semreg.bench.report import Target
from semreg.bench.scenarios.common import scenario
from semreg.bench.scenarios.scale import (
    COLD_LIMIT,
    RELEASE_WAIT_S,
    START_TIMEOUT_S,
    STARTUP_MILESTONES,
    cold_discovery,
    heartbeats,
    hot_discovery,
    new_question_params,
    new_questions,
    thousand_tag_registrations,
    tree_memory,
)
from semreg.bench.scenarios.storage import SETTLE_S, held, register
from semreg.bench.stats import ms_summary

MEMBERS = 3
REPLICAS = 2
SUMMARY_CALLS = 20


@scenario("scale-ring", "--instances instances of 3 tags on a ring of three members with k=2 (the first serving "
          "SPARQL): PSS of each member's process tree, the records each holds, answers identical at every member "
          "and to the contract's matching, hot and cold discovery, a 1,000-tag registration, heartbeats/s through a member, and "
          "a member's start-up after SIGKILL", needs=("etcd",),
          targets=(Target("PSS of the largest member", "largest_member_pss_mib", "<=", 4096.0, "MiB"),
                   Target("answers differing", "answers.differing", "<=", 0.0)))
def scale_ring(ctx: BenchContext) -> dict:
    if ctx.external:
        raise BenchError("scale-ring starts a ring of its own; run it without --semreg-url")
    n = ctx.dataset.instances
    cluster = LocalCluster(ctx.peers.workdir / "scale-ring", replicas=REPLICAS, lease_s=10, name="scale")
    try:
        with ctx.ui.step(f"starting etcd and {MEMBERS} semreg members (k={REPLICAS})"):
            cluster.start(0)
            members = [cluster.add(*member_options(ctx, k)) for k in range(MEMBERS)]
        first, second = members[0].url, members[1].url
        ctx.upload_ontology(first)
        with ctx.client(first, timeout_s=600) as http:
            register_s, retried = register(ctx, http, ctx.dataset)
        settled_s = settle(ctx, members, SETTLE_S * max(1, n // 100_000))
        with ctx.ui.step(f"waiting {RELEASE_WAIT_S:.0f} s for the members to give freed memory back"):
            time.sleep(0.0 if ctx.settings.quick else RELEASE_WAIT_S)
        memory = {m.name: tree_memory(process_of(m)) for m in members}
        figures: dict[str, Any] = {
            "instances": n, "members": MEMBERS, "replicas": REPLICAS, "sparql": ctx.settings.sparql,
            "register_s": round(register_s, 1), "register_per_s": round(n / register_s), "settled_s": settled_s,
            "batches_retried": retried,
            "records_per_member": records(ctx, members), "memory": memory,
            "largest_member_pss_mib": max(m["total_pss_mib"] for m in memory.values()),
            "pss_per_instance_kib": {name: round(m["total_pss_mib"] * 1024 / n, 2) for name, m in memory.items()},
        }
        figures["answers"] = same_answers(ctx, members)
        with ctx.client(second, timeout_s=600) as http:
            figures["hot_discovery"] = hot_discovery(ctx, http)
            # new questions on this member: none of those asked at every member
            figures["cold_discovery"] = cold_discovery(ctx, http, new_questions(ctx, 29, exclude=new_questions(ctx, 11)))
        with ctx.client(first, timeout_s=600) as http:
            figures["register_1000_tags"] = thousand_tag_registrations(ctx, http)
        with LoopThread("semreg-bench-scale-ring") as loop:
            figures["heartbeats"] = heartbeats(ctx, loop, second)
        with ctx.client(second, timeout_s=600) as http:
            figures["summary"] = summary_times(ctx, http)
        figures["restart"] = restart_member(ctx, cluster, members[2])
    finally:
        with ctx.ui.step("stopping the ring"):
            cluster.close()
    ctx.ui.log(f"  {n:,} instances on {MEMBERS} members: largest member {figures['largest_member_pss_mib']:,} MiB PSS, "
               f"hot {figures['hot_discovery']['median_ms']} ms, cold {figures['cold_discovery']['median_ms']} ms, "
               f"{figures['heartbeats']['per_s']:,} heartbeats/s, summary {figures['summary']['median_ms']} ms, "
               f"a member back in {figures['restart']['startup_s']} s, "
               f"{figures['answers']['differing']} answers differing")
    return figures


def summary_times(ctx: BenchContext, http: httpx.Client) -> dict[str, Any]:
    """`GET /v1/summary` through a member: the first one (ms), then `SUMMARY_CALLS`, each after a status change of
    one instance (a change every member's overview is computed again for), and whether any was partial."""
    started = time.perf_counter()
    partial = "partial" in expect(http.get("/v1/summary")).json()
    first_ms = round((time.perf_counter() - started) * 1000, 2)
    path = f"/v1/instances/{ctx.dataset.instance_id(0)}/heartbeat"
    samples = []
    with ctx.ui.step(f"the overview's counts through a member, {SUMMARY_CALLS} times after a status change",
                     total=SUMMARY_CALLS) as advance:
        for k in range(SUMMARY_CALLS):
            expect(http.put(path, json={"status": "draining" if k % 2 == 0 else "up"}))
            started = time.perf_counter()
            partial = "partial" in expect(http.get("/v1/summary")).json() or partial
            samples.append(time.perf_counter() - started)
            advance()
    return {"first_ms": first_ms, **ms_summary(samples), "partial": partial}


def member_options(ctx: BenchContext, k: int) -> tuple[str, ...]:
    """The first member keeps the SPARQL replica unless the run says --no-sparql; the others never do."""
    return () if k == 0 and ctx.settings.sparql else ("--no-sparql",)


def process_of(member: ClusterNode) -> Any:
    assert member.process is not None
    return member.process


def settle(ctx: BenchContext, members: list[ClusterNode], timeout_s: float) -> float:
    """Every member's background writes done: the seconds waited in all."""
    started = time.perf_counter()
    for member in members:
        with ctx.client(member.url) as http:
            ctx.wait_settled(http, timeout_s)
    return round(time.perf_counter() - started, 2)


def records(ctx: BenchContext, members: list[ClusterNode]) -> dict[str, int]:
    out = {}
    for member in members:
        with ctx.client(member.url) as http:
            out[member.name] = held(ctx, http)
    return out


def same_answers(ctx: BenchContext, members: list[ClusterNode]) -> dict[str, int]:
    """Each question asked at every member: the instances must be the same at each and those the question must
    find (all of them when there are at most `COLD_LIMIT`, else `COLD_LIMIT` of them)."""
    asked = new_questions(ctx, 11)  # the scale scenario's new questions
    with ctx.ui.step(f"what {len(asked)} questions must find, from the data set and the contract's definitions"):
        oracle = Oracle(ctx.dataset)
        expected = [oracle.ids(*q) for q in asked]
        del oracle
    differing = compared = 0
    with ctx.ui.step(f"asking them at each of the {len(members)} members", total=len(asked)) as advance:
        clients = [ctx.client(m.url, timeout_s=600) for m in members]
        try:
            for q, want in zip(asked, expected):
                got = [ids(expect(c.get("/v1/discover", params=new_question_params(q)))) for c in clients]
                agree = all(g == got[0] for g in got) and (got[0] == want if len(want) <= COLD_LIMIT
                                                            else len(got[0]) == COLD_LIMIT and got[0] <= want)
                differing += not agree
                compared += 1
                advance()
        finally:
            for c in clients:
                c.close()
    data = ctx.dataset
    want = data.expected_answer_ids()
    for member in members:
        with ctx.client(member.url) as http:
            if ids(expect(http.get("/v1/discover", params=data.discovery_query()))) != want:
                differing += 1
    if differing:
        raise BenchError(f"{differing} of {compared + len(members)} answers differed between the members or "
                         f"from what the questions must find")
    return {"compared": compared * len(members) + len(members), "differing": differing}


def ids(response: httpx.Response) -> set[str]:
    return {view["id"] for view in response.json()["instances"]}


def restart_member(ctx: BenchContext, cluster: LocalCluster, member: ClusterNode) -> dict:
    """SIGKILL, then the member started on its data directory: seconds to /readyz, and its memory then."""
    with ctx.ui.step(f"killing {member.name} (SIGKILL) and starting it again on its data directory"):
        member.kill()
        started, launched = time.perf_counter(), time.time()
        member.start(START_TIMEOUT_S)
        startup_s = round(time.perf_counter() - started, 2)
    phases = log_milestones(member.log(), (*STARTUP_MILESTONES, "node ready"), launched)
    ctx.ui.log(f"  {member.name}'s start-up, seconds from launch: " + ", ".join(f"{m} {s}" for m, s in phases.items()))
    with ctx.client(member.url) as http:
        count = held(ctx, http)
    return {"startup_s": startup_s, "startup_phases_s": phases, "records": count,
            "memory_restarted": tree_memory(process_of(member))}
