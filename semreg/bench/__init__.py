"""`semreg bench`: speed figures of semreg next to etcd and the Oxigraph server, measured with wrk.

    runner.py     runs the chosen scenarios, stops every peer, prints tables or JSON
    settings.py   flags and presets (full, --quick) → one frozen BenchSettings
    peers.py      etcd, Oxigraph and semreg processes on free loopback ports; tools; BenchError
    wrk.py        running wrk (Lua script for bodies) and parsing its report
    dataset.py    the synthetic ontology and instances, with the discovery query's known answer
    context.py    what a scenario gets: lazy peers, data loading, interleaved wrk runs
    stores.py     the same data into etcd and the Oxigraph server
    scenarios/    the scenarios (`@scenario`), each `fn(ctx) -> figures`, a module a family; SCENARIOS
    aio/          load made in the bench process on asyncio: long polls, heartbeats, a health-check target
    readings.py   what the bench reads off a process: /proc (memory, open files), metrics, its log
    stats.py      summaries of durations (nearest-rank percentiles)
    report.py     targets, machine info, tables
    ui.py         progress on the terminal: one live display with a line per running step
    oracle.py     what a question must find in the synthetic data set, from the contract's definitions alone
    localcluster.py  etcd and `semreg serve` nodes on free loopback ports (the cluster scenarios', and the tests')
    owlstc.py     OWLS-TC 3 (the OWL-S service retrieval test collection) read as semreg sees it
    retrieval.py  precision, recall and average precision of a ranked answer against relevance judgments

Figures are reported (medians, ratios, and whether each target was met), never asserted: the exit
status is 0 when every scenario ran, 1 when one failed, 2 for bad flags or a missing tool.

May import, of semreg, only `semreg.http1.client` (the framing of its own HTTP/1.1 load) and the
package's place on disk: the servers it measures are separate processes, driven over HTTP as any
client would drive them. Only the command line (`semreg.cli.bench`) imports it.
"""
from __future__ import annotations

import argparse

from semreg.bench.settings import add_arguments

DESCRIPTION = ("Benchmark semreg: discovery against an etcd prefix read of the same records (also with five "
               "1,000-tag instances among the matches), a new question on every request against the same questions "
               "as SPARQL on the Oxigraph server, SPARQL against the Oxigraph server, a 1,000-tag registration, the "
               "closure of two real ontologies, what the durable store costs (a batch load, a start-up on 100,000 "
               "instances, a backup and its restore), 10,000 blocking reads held at once, discovery beside 1,000 "
               "active health checks a second and beside 1,000 heartbeats a second, and a ring of three nodes against "
               "one. "
               "Starts every peer itself on loopback; "
               "needs wrk and etcd (apt-get install -y wrk etcd-server).")


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the flags and `run`; cheap, so `semreg --help` does not import the benchmark."""
    add_arguments(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from semreg.bench.runner import run as run_bench

    return run_bench(args)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="semreg bench", description=DESCRIPTION)
    configure(parser)
    args = parser.parse_args(argv)
    try:
        return run(args)
    except KeyboardInterrupt:
        return 130
