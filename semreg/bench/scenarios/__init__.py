"""The benchmark scenarios, a module a family, and `SCENARIOS`: every scenario, in the order `--only`
names them and the report prints them.

A scenario is `fn(ctx) -> dict of figures` made a `Scenario` by `@scenario` (common.py). Figures:
numbers (or small dicts/lists of numbers) by name; wrk results under `"peers"` by label; a scenario
that compares servers reports a ratio. Targets (`Target`) are checked by the runner and shown, never
asserted. To add a scenario, write it in the module of its family (or a new one), decorate it, and
name it in `SCENARIOS` below; `--only NAME` selects it. A scenario in `ONLY_WHEN_NAMED` is left out of
a run that names none (at-rest sends 120,000 registrations by default; the soak takes half an hour by
default; scale, scale-ring and no-sparql are as long as --instances makes them; the noisy-neighbour ones
first register 100,000 instances).

    common.py        `Scenario` and `@scenario`, and the steps several scenarios share
    discovery.py     discovery, many-tags, cold-discovery: GET /v1/discover against etcd and SPARQL
    sparql.py        sparql: /sparql against the Oxigraph server
    registration.py  register-1000-tags, closure: registering an instance, uploading ontologies
    storage.py       storage: the durable store's batch load, start-up on a full data directory, backup
    at_rest.py       at-rest: registrations at a steady rate, and how long after acknowledgement each is RDF at rest
    scale.py         scale: one node with --instances instances: memory per instance, discovery, registration,
                     heartbeats, a mass expiry's stall, start-up (storage's start and stop, soak's readings)
    watches.py       watches: 10,000 blocking reads held at once
    consul_watches.py consul-watches: 1,000 blocked Consul reads held while other services churn: memory, stray wakes
    liveness.py      health-checks, heartbeat-load: discovery beside active checks and heartbeats
    ring.py          ring: three nodes against one
    paused.py        paused-owner: registrations while one owner of every record is stopped
    thesis.py        cluster: the thesis's tables on rings of 2 and 5 nodes (`semreg bench cluster`)
    dns.py           dns: SRV answers over UDP for a saved query against the same question over HTTP
    consul.py        consul: a saved query's name read through the Consul listener against GET /v1/discover
    owlstc.py        owlstc: OWLS-TC 3's development half (P, R, AP of 14 requests, logic alone and with similar)
    scale_ring.py    scale-ring: the same instances on a ring of three (k=2): memory per member, answers the same
                     at every member and as one node's, discovery, heartbeats, a member's start-up after SIGKILL
    replica.py       no-sparql: what the SPARQL replica costs a node, as what --no-sparql saves (scale's readings)
    soak.py          soak: memory per minute of the server, the SPARQL template and the query processes under
                     steady churn (heartbeats, watches, discoveries, SPARQL, registrations and removals)
    noisy.py         noisy-neighbour, noisy-neighbour-ring: heartbeats, /healthz and blocking reads without and
                     with an adversary looping the heaviest requests, on one node and on a ring of three
    noisy_load.py    what they register and ask, as plain data: the load's sizes, the instances, the questions (pure)
    noisy_phases.py  their run: the load and the probes started, three phases, then the figures
    noisy_figures.py their figures, phase by phase, from what the probes and the adversary recorded (pure)

The scenario modules import common.py (ring also the cold questions of discovery.py), never this
package's `SCENARIOS`: only this module imports them all, so there is no circle among them.
"""
from __future__ import annotations

from semreg.bench.scenarios import (
    at_rest,
    consul,
    consul_watches,
    discovery,
    dns,
    liveness,
    noisy,
    owlstc,
    paused,
    registration,
    replica,
    ring,
    scale,
    scale_ring,
    soak,
    sparql,
    storage,
    thesis,
    watches,
)
from semreg.bench.scenarios.common import Scenario

SCENARIOS: dict[str, Scenario] = {scenario.name: scenario for scenario in (
    discovery.discovery,
    discovery.many_tags,
    discovery.cold_discovery,
    sparql.sparql,
    registration.register_1000_tags,
    registration.closure,
    storage.storage,
    at_rest.at_rest,
    watches.watches,
    consul_watches.consul_watches,
    liveness.health_checks,
    liveness.heartbeat_load,
    ring.ring,
    paused.paused_owner,
    dns.dns_srv,
    consul.consul,
    thesis.cluster,
    soak.soak,
    scale.scale,
    scale_ring.scale_ring,
    owlstc.owlstc,
    replica.no_sparql,
    noisy.noisy_neighbour,
    noisy.noisy_neighbour_ring,
)}

ONLY_WHEN_NAMED = frozenset({"at-rest", "soak", "scale", "scale-ring", "no-sparql", "noisy-neighbour", "noisy-neighbour-ring"})


def default_names() -> list[str]:
    """The scenarios a run that names none runs, in order."""
    return [name for name in SCENARIOS if name not in ONLY_WHEN_NAMED]
