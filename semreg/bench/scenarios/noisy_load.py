"""What the noisy-neighbour scenarios register and ask, as plain data: the load's sizes (`NoisyLoad`, full
and quick), the instances of each kind, the questions the blocking reads ask and the writes that change
their answers (pure)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import orjson

from semreg.bench.aio.adversary import NS
from semreg.bench.aio.probes import Write

WATCH_WAIT_S = 300  # the contract's cap: longer than any phase, so an answer before it is a wake
BATCH = 10_000  # instances a registration batch of the bench holds


@dataclass(frozen=True)
class NoisyLoad:
    instances: int = 3000  # heartbeating, each every period_s: 1,000 a second
    ttl_s: int = 10
    period_s: float = 3.0
    # as many as instances, as a fleet has: a heartbeat leaves late only when every connection is waiting
    # for the server or the bench's loop is behind, never behind a queue of the bench's own
    heartbeat_connections: int = 3000
    watches: int = 300
    groups: int = 30  # questions the reads spread over; the last `quiet_groups` are never written to
    quiet_groups: int = 10
    write_every_s: float = 0.5
    healthz_every_s: float = 0.01
    noisy_instances: int = 800  # instances of two tags whose terms no ontology knows
    patterns: int = 64
    restore_instances: int = 100_000
    batch_instances: int = 10_000
    sparql_at_once: int = 5
    generated_classes: int = 20_000  # the ontology uploaded when DBpedia's is not in --shared-data
    reference_s: float = 20.0
    after_s: float = 10.0


QUICK_LOAD = NoisyLoad(instances=300, heartbeat_connections=300, watches=30, groups=6, quiet_groups=2,
                       noisy_instances=80, patterns=8, restore_instances=2000, batch_instances=300, sparql_at_once=2,
                       generated_classes=400, reference_s=3.0, after_s=2.0)


@dataclass(frozen=True)
class Member:
    name: str
    url: str
    pid: int | None


# -- what the bench registers ---------------------------------------------------------------------------------
def group_term(g: int) -> str:
    return f"{NS}W{g:03d}"


def watch_instance(g: int, flip: bool = False) -> dict[str, Any]:
    """A question's instance (always there), or the one the bench registers and removes to change its answer."""
    return {"id": f"nn-{'flip' if flip else 'watch'}-{g:03d}", "service": f"nn-watch-{g:03d}",
            "address": "127.0.0.1", "port": 7000 + g, "ttl": 0, "tags": [{"s": group_term(g)}]}


def watch_target(g: int) -> str:
    """The question of group g, of one of three kinds by g mod 3."""
    if g % 3 == 0:
        return "/v1/discover?" + urlencode({"s": group_term(g)})
    if g % 3 == 1:
        return "/v1/instances?" + urlencode({"service": f"nn-watch-{g:03d}"})
    return f"/v1/queries/nn-watch-{g:03d}/discover"


def flip(g: int, present: bool) -> Write:
    """The write that changes group g's answer: its changing instance registered, or removed when present."""
    if present:
        return "DELETE", f"/v1/instances/nn-flip-{g:03d}", None
    body = watch_instance(g, flip=True)
    del body["id"]
    return "PUT", f"/v1/instances/nn-flip-{g:03d}", orjson.dumps(body)


def restore_instances(n: int) -> list[dict[str, Any]]:
    return [{"id": f"nn-restore-{i:06d}", "service": "nn-restore", "address": "127.0.0.1", "port": 10000 + i % 1000,
             "ttl": 0, "tags": [{"s": f"{NS}Restored{i % 10}"}]} for i in range(n)]


def heartbeating(n: int, ttl_s: int) -> list[dict[str, Any]]:
    return [{"id": f"nn-hb-{i:05d}", "service": "nn-hb", "address": "127.0.0.1", "port": 20000 + i % 1000,
             "ttl": ttl_s, "tags": [{"s": f"{NS}Beating"}]} for i in range(n)]

