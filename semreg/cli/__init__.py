"""The `semreg` command: the sub-commands of the modules in `COMMANDS`.

Each module has `add_parser(subparsers)`, which registers its sub-command(s) and sets `run(args) -> int`:
`serve` (a node), `bench`, `registration` (register, deregister, heartbeat), `reading` (instances,
discover, route, watch, tags, expand, concept), `ontology`, `sparql`, `query` (saved queries: put, get, list,
delete, discover, route) and `backup` (backup, restore). What the
client commands share (the registry options, a sub-command's parser, its client) is in `common`; tables, JSON
and exit codes in `output`.

May import every room: it is the top one (the client library for the client commands; the benchmark,
the configuration, the store and the cluster's endpoints for `serve` and `bench`); `semreg.node` from
`serve` alone.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Mapping

COMMANDS = ("semreg.cli.serve", "semreg.cli.bench", "semreg.cli.registration", "semreg.cli.reading", "semreg.cli.ontology",
            "semreg.cli.sparql", "semreg.cli.backup", "semreg.cli.query")


def build_parser(env: Mapping[str, str] = os.environ) -> argparse.ArgumentParser:
    from semreg.cli.common import registry_options

    parser = argparse.ArgumentParser(prog="semreg", description="A semantic service registry.")
    parser.add_argument("--version", action="version", version=f"semreg {_version()}")
    registry_options(parser.add_argument_group("registry (for the client commands; also after the command)"), env,
                     defaults=True)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(name).add_parser(sub)
    return parser


def _version() -> str:
    from semreg import __version__

    return __version__


def main(argv: list[str] | None = None) -> int:
    from semreg.cli.output import show_term_warnings

    parser = build_parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    show_term_warnings()
    try:
        return int(args.run(args) or 0)
    except KeyboardInterrupt:
        return 130
