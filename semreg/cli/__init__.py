"""The `semreg` command: one sub-command per module in `COMMANDS`.

Each module has `add_parser(subparsers)`, which registers its sub-command(s) and sets `run(args) -> int`.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Mapping

COMMANDS = ("semreg.cli.serve", "semreg.cli.bench", "semreg.cli.commands", "semreg.cli.ontology", "semreg.cli.sparql")


def build_parser(env: Mapping[str, str] = os.environ) -> argparse.ArgumentParser:
    from semreg.cli.commands import registry_options

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
