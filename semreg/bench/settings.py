"""Benchmark settings: one frozen object, built from the command line over a full or a quick preset."""
from __future__ import annotations

import argparse
import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import semreg

if TYPE_CHECKING:
    from semreg.bench.wrk import WrkSettings


def default_shared_data() -> Path:
    """`../shared/data/ontologies` beside the repository (where CI keeps the same copy)."""
    return Path(semreg.__file__).resolve().parents[2] / "shared" / "data" / "ontologies"


@dataclass(frozen=True)
class BenchSettings:
    instances: int = 10_000
    tags_per_instance: int = 3
    classes: int = 3000
    properties: int = 20
    answer_size: int = 230  # instances the discovery query returns (and etcd's prefix read returns)
    connections: int = 32
    threads: int = 2
    duration_s: int = 10
    warmup_s: int = 1  # a wrk run before each measured one; 0 = a few single requests only
    rounds: int = 1  # measured wrk runs per peer, interleaved; figures are the medians
    batch_size: int = 1000
    register_tags: int = 1000
    register_repeats: int = 20
    register_replacements: int = 5
    closure_rounds: int = 3
    watches: int = 10_000  # blocking reads held at once (scenario watches)
    watch_groups: int = 100  # distinct queries they are spread over
    watch_wait_s: int = 120  # the `wait` of each blocking read: longer than the scenario needs them
    consul_watches: int = 1000  # blocked Consul reads held at once (scenario consul-watches)
    churn_s: int = 60  # seconds of churn on other services beside them (scenario consul-watches)
    checked_instances: int = 1000  # instances with an active HTTP check (scenario health-checks)
    check_interval_s: int = 1
    heartbeat_instances: int = 5000  # instances heartbeating (scenario heartbeat-load)
    heartbeat_period_s: int = 5
    heartbeat_ttl_s: int = 15
    heartbeat_connections: int = 16  # keep-alive connections the heartbeats share
    storage_instances: int = 100_000  # instances a server holds when its start-up is timed (scenario storage)
    minutes: int = 30  # how long the churn load runs (scenario soak)
    at_rest_rate: int = 2000  # registrations of 3 tags a second (scenario at-rest)
    at_rest_seconds: int = 60  # ... for this long
    adversary_s: int = 60  # how long the adversary runs (scenarios noisy-neighbour, noisy-neighbour-ring)
    seed: int = 7
    only: tuple[str, ...] = ()
    quick: bool = False
    json: bool = False
    semreg_url: str | None = None
    token: str | None = None
    shared_data: Path = dataclasses.field(default_factory=default_shared_data)
    keep_temp: bool = False
    sparql: bool = True  # the servers scale starts serve /sparql (False: `semreg serve --no-sparql`)

    @property
    def wrk(self) -> WrkSettings:
        from semreg.bench.wrk import WrkSettings

        return WrkSettings(threads=self.threads, connections=self.connections, duration_s=self.duration_s)

    def public(self) -> dict:
        """The settings a report shows (those that change the figures)."""
        skip = {"json", "keep_temp", "token", "shared_data"}
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in dataclasses.asdict(self).items()
                if k not in skip}


# Sizes a `--quick` smoke run uses; any flag given explicitly still wins.
QUICK = {"instances": 1000, "classes": 300, "duration_s": 2, "warmup_s": 0, "rounds": 1,
         "register_repeats": 5, "register_replacements": 2, "closure_rounds": 2,
         "watches": 300, "watch_groups": 10, "consul_watches": 200, "churn_s": 10, "checked_instances": 50,
         "heartbeat_instances": 200,
         "storage_instances": 5000, "minutes": 1, "adversary_s": 8, "at_rest_rate": 200, "at_rest_seconds": 5}

# flag, settings field, type, help
_SIZES = (
    ("--instances", "instances", int, "instances registered for discovery (default 10000; quick 1000)"),
    ("--tags-per-instance", "tags_per_instance", int, "tags per instance (default 3)"),
    ("--classes", "classes", int, "classes of the synthetic ontology (default 3000; quick 300)"),
    ("--answer-size", "answer_size", int, "instances the discovery query returns (default 230)"),
    ("--connections", "connections", int, "wrk connections (default 32)"),
    ("--threads", "threads", int, "wrk threads (default 2)"),
    ("--duration-s", "duration_s", int, "seconds of each measured wrk run (default 10; quick 2)"),
    ("--warmup-s", "warmup_s", int, "seconds of the wrk warm-up before each run (default 1; quick 0)"),
    ("--rounds", "rounds", int, "measured runs per peer, interleaved; medians are reported (default 1)"),
    ("--register-repeats", "register_repeats", int, "1000-tag registrations timed (default 20; quick 5)"),
    ("--closure-rounds", "closure_rounds", int, "uploads of the second ontology timed, and of the small ones (at least "
     "3) (default 3; quick 2)"),
    ("--watches", "watches", int, "blocking reads held at once (default 10000; quick 300)"),
    ("--watch-groups", "watch_groups", int, "distinct queries the blocking reads spread over (default 100; quick 10)"),
    ("--consul-watches", "consul_watches", int, "blocked Consul reads held at once by consul-watches (default 1000; "
     "quick 200)"),
    ("--churn-s", "churn_s", int, "seconds of churn on other services beside the blocked Consul reads (default 60; "
     "quick 10)"),
    ("--checked-instances", "checked_instances", int, "instances with an active HTTP check, each probed once a "
     "second (default 1000; quick 50)"),
    ("--heartbeat-instances", "heartbeat_instances", int, "instances heartbeating every 5 s (default 5000; quick 200)"),
    ("--storage-instances", "storage_instances", int, "instances a server holds when its start-up on its data "
     "directory is timed (default 100000; quick 5000)"),
    ("--at-rest-rate", "at_rest_rate", int, "registrations of 3 tags a second the at-rest scenario sends, in four "
     "batches a second (default 2000; quick 200)"),
    ("--at-rest-seconds", "at_rest_seconds", int, "seconds the at-rest scenario sends them for (default 60; quick 5)"),
    ("--minutes", "minutes", int, "minutes the soak's churn load runs, memory read at the end of each (default 30; "
     "quick 1)"),
    ("--adversary-s", "adversary_s", int, "seconds the noisy neighbour runs, after a reference without it "
     "(default 60; quick 8)"),
    ("--seed", "seed", int, "seed of the synthetic data set (default 7)"),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object of all figures on stdout")
    parser.add_argument("--quick", action="store_true", help="small sizes and short runs: a smoke test")
    parser.add_argument("scenarios", nargs="*", metavar="SCENARIO",
                        help="run only these scenarios (as --only): `semreg bench cluster` runs the thesis's tables")
    parser.add_argument("--only", metavar="NAME[,NAME]", default="",
                        help="run only these scenarios (comma list of discovery, many-tags, cold-discovery, "
                             "sparql, register-1000-tags, closure, storage, watches, consul-watches, health-checks, "
                             "heartbeat-load, ring, "
                             "paused-owner, dns, cluster, at-rest, soak, scale, scale-ring, owlstc, no-sparql, "
                             "noisy-neighbour, noisy-neighbour-ring; an unknown name lists every scenario; at-rest, soak, "
                             "scale, scale-ring, "
                             "no-sparql and the noisy-neighbour ones run only when named)")
    for flag, dest, kind, text in _SIZES:
        parser.add_argument(flag, dest=dest, type=kind, default=None, metavar="N", help=text)
    parser.add_argument("--semreg-url", metavar="URL", default=None,
                        help="benchmark this running server instead of starting one (its data is cleaned up after)")
    parser.add_argument("--token", default=os.environ.get("SEMREG_TOKEN"),
                        help="bearer token (admin scope) for --semreg-url; default $SEMREG_TOKEN")
    parser.add_argument("--shared-data", metavar="DIR", type=Path, default=None,
                        help=f"directory of the real ontologies (default {default_shared_data()})")
    parser.add_argument("--keep-temp", action="store_true", help="keep the peers' data directories and logs")
    parser.add_argument("--no-sparql", dest="sparql", action="store_false",
                        help="scale: start the server with --no-sparql (no replica, no query processes)")


def from_args(args: argparse.Namespace, scenario_names: tuple[str, ...]) -> BenchSettings:
    """Settings from parsed flags; ValueError with a sentence for a bad value."""
    values: dict = dict(QUICK) if args.quick else {}
    for flag, dest, _kind, _text in _SIZES:
        given = getattr(args, dest, None)
        if given is None:
            continue
        minimum = 0 if dest in ("warmup_s", "seed") else 1
        if given < minimum:
            raise ValueError(f"{flag} must be at least {minimum}, got {given}")
        values[dest] = given
    named = [*args.only.split(","), *getattr(args, "scenarios", ())]
    only = tuple(dict.fromkeys(name.strip() for name in named if name.strip()))
    unknown = [name for name in only if name not in scenario_names]
    if unknown:
        raise ValueError(f"unknown scenario {', '.join(unknown)}; choose from {', '.join(scenario_names)}")
    url = args.semreg_url.rstrip("/") if args.semreg_url else None
    if url and not url.startswith(("http://", "https://")):
        raise ValueError(f"--semreg-url must be an http(s) URL, got {args.semreg_url!r}")
    return BenchSettings(**values, only=only, quick=args.quick, json=args.json, semreg_url=url, token=args.token,
                         shared_data=args.shared_data or default_shared_data(), keep_temp=args.keep_temp,
                         sparql=getattr(args, "sparql", True))
