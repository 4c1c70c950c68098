"""Randomised faults under writes (issue 21): five nodes holding three copies (`--member-lease 5`) and one
real etcd on loopback; four writers register fresh ids and deregister about 30 % of their own acknowledged
ones through random live nodes while faults drawn from a seed hit the ring: a node SIGKILLed and
restarted, a node SIGSTOPped past its lease, two nodes SIGKILLed at once, etcd stopped (never more than
two nodes down). Then everything heals, and every node must hold what was acknowledged: nothing lost, no
acknowledged removal listed, discovered or counted by SPARQL, every node listing the same set, no node
exiting on its own, no 5xx but 503; and every node's Consul listener answering for the whole ring as its
public API does (each instance under its service with the status the listing says, a saved query's name what
its discovery finds). The whole run is bounded (about 90 s).

One seed runs by default; `SEMREG_FAULT_SEEDS=1,2,3` runs one test per seed. The seed and the faults it
drew are printed first; a failure prints the evidence (see `support/invariants.py`).
"""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from support.churn import Churn, Ledger
from support.faults import Chaos, plan, ready
from support.invariants import (
    DISCOVERY,
    SAVED_QUERY,
    error_lines,
    evidence,
    heal_wait,
    read,
    stale_copies_gone,
    summary,
    violations,
)
from support.ring import upload
from support.server import wait_for

from semreg.bench.localcluster import LocalCluster

pytestmark = [pytest.mark.process, pytest.mark.slow]

DEFAULT_SEED = 2105
SEEDS = [int(s) for s in os.environ.get("SEMREG_FAULT_SEEDS", "").replace(" ", "").split(",") if s] or [DEFAULT_SEED]
NODES, REPLICAS, LEASE_S = 5, 3, 5
WRITE_S = 42.0  # writes and faults
HEAL_S = 25.0  # at most, for the ring to be whole again
HEAL_MIN_S = 20.0  # however long a loaded machine took to get here
RUN_S = 90.0  # the whole run, start-up included


def start(workdir: Path) -> LocalCluster:
    """etcd, then five nodes started together (each on its own port and data directory)."""
    cluster = LocalCluster(workdir, replicas=REPLICAS, lease_s=LEASE_S, consul=True)
    try:
        cluster.start(0)
        for _ in range(NODES):
            cluster.add(ready=False)
        wait_for(lambda: all(ready(n) for n in cluster.nodes) and cluster.converged(), 40, "five nodes on one ring")
        upload(cluster.nodes[0])
        with cluster.nodes[0].client() as c:  # the question every node's Consul listener answers as a name
            question = {k: v for k, v in DISCOVERY.items() if k in ("s", "p")}
            assert c.put(f"/v1/queries/{SAVED_QUERY}", json=question).status_code in (200, 201)
    except BaseException:
        cluster.close()
        raise
    return cluster


def answers(ledger: Ledger) -> list[str]:
    """What the writers were answered that no fault excuses: a 5xx other than 503, a 404 to the removal of
    an acknowledged registration, anything else unexpected."""
    out = []
    for iid, event, text in ledger.bad:
        what = ("5xx other than 503" if isinstance(event.status, int) and event.status >= 500 else
                "acknowledged registration answered 404 to its removal" if event.status == 404 else "unexpected")
        out.append(f"{what}: {iid} {event} {text[:160]}")
    return out


def check(cluster: LocalCluster, ledger: Ledger, began: float) -> list[str]:
    """One read of every node after the heal, held against the ledger (the invariants fail on this read);
    when it fails, the evidence at once, then reads again while the run's time lasts, to tell a violation
    that outlives the heal by seconds from one that stays."""
    reading = time.monotonic()
    readings = {n.name: read(n) for n in cluster.nodes}
    read_s = time.monotonic() - reading
    found = violations(ledger, readings)
    print(f"read every node at {reading - began:.0f}s into the run ({read_s:.1f}s):", *summary(found) or ["all hold"],
          sep="\n  ")
    if found or ledger.bad:
        print("evidence:", *evidence(cluster, ledger, found, readings), sep="\n  ")
    if not found:
        return []
    again = found
    while again and time.monotonic() + read_s < began + RUN_S - 5:
        time.sleep(1.0)
        again = violations(ledger, {n.name: read(n) for n in cluster.nodes})
    print(f"read again at {time.monotonic() - began:.0f}s:", *summary(again) or ["all hold now"], sep="\n  ")
    return summary(found)


@pytest.mark.timeout(240)
@pytest.mark.parametrize("seed", SEEDS)
def test_random_faults_lose_no_acknowledged_write_and_bring_back_no_removal(seed: int, tmp_path: Path) -> None:
    began = time.monotonic()
    print(f"\nfault test seed {seed} (rerun: SEMREG_FAULT_SEEDS={seed})")
    cluster = start(tmp_path / "ring")
    failures: list[str] = []
    try:
        faults = plan(seed, [n.name for n in cluster.nodes], WRITE_S)
        print(f"ring ready after {time.monotonic() - began:.1f}s; {len(faults)} faults drawn:", *faults, sep="\n  ")
        with Chaos(cluster, faults, seed) as chaos, Churn(seed, chaos.live, chaos.now) as churn:
            time.sleep(WRITE_S)
            churn.stop()
            chaos.heal()  # while the last requests finish
            chaos.say("healing: every fault undone")
        chaos.say("the last requests answered")
        healed_s, problems = heal_wait(cluster, max(HEAL_MIN_S, min(HEAL_S, RUN_S - 15 - (time.monotonic() - began))))
        chaos.say(f"the ring {'is whole' if not problems else 'is still not whole'}")
        print("played:", *chaos.log, sep="\n  ")
        print("answers:", churn.ledger.statuses(), "\nsets:", {k: len(v) for k, v in churn.ledger.sets().items()})
        print("slow requests:", *churn.ledger.slowest(), sep="\n  ")
        print(f"heal: {'whole' if not problems else 'NOT whole'} after {healed_s:.1f}s", *problems, sep="\n  ")
        if not problems:  # how long a stale copy outlives the heal (reads hide it meanwhile)
            held, gone_s = stale_copies_gone(cluster, sorted(churn.ledger.sets()["removed"]), 8.0)
            left = ("" if not held else f", none left after {gone_s:.1f}s" if gone_s is not None
                    else ", still some after 8s")
            print(f"live copies of acknowledged removals on any node once the ring was whole: {held}{left}")
        failures += [f"the ring was not whole within {healed_s:.0f}s: {p}" for p in problems]
        failures += check(cluster, churn.ledger, began)
        failures += [f"exited on its own: {e}" for e in chaos.exits]
        failures += [f"exited on its own after the heal: {n.name}" for n in cluster.nodes if not n.running]
        failures += answers(churn.ledger)
    finally:
        cluster.close()
        for node in cluster.nodes:
            print(*error_lines(node), sep="\n")
        print(f"seed {seed}: {time.monotonic() - began:.1f}s in all, {len(failures)} failures")
    assert not failures, f"seed {seed}:\n" + "\n".join(failures)
