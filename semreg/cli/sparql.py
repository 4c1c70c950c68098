"""`semreg sparql QUERY`: run a SPARQL query; a table by default, or the server's own format."""
from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from semreg.cli.common import client_for, command, common_options, curies
from semreg.cli.output import UsageError, print_json, sparql_table

# SELECT/ASK get results in the first type, CONSTRUCT/DESCRIBE a graph in the second: the server
# negotiates within the kind of result the query makes.
ACCEPT = {
    "table": "application/sparql-results+json, text/turtle;q=0.9",
    "json": "application/sparql-results+json, application/ld+json;q=0.9",
    "xml": "application/sparql-results+xml, application/rdf+xml;q=0.9",
    "csv": "text/csv",
    "tsv": "text/tab-separated-values",
    "turtle": "text/turtle",
    "ntriples": "application/n-triples",
    "jsonld": "application/ld+json",
    "rdfxml": "application/rdf+xml",
}


def query_text(arg: str) -> str:
    """The query: the argument itself, `-` for stdin, or `@FILE`."""
    if arg == "-":
        return sys.stdin.read()
    if arg.startswith("@"):
        path = Path(arg[1:])
        if not path.is_file():
            raise UsageError(f"{path}: no such query file.")
        return path.read_text(encoding="utf-8")
    return arg


def run_sparql(args: argparse.Namespace) -> int:
    fmt = "json" if args.json else args.format
    client = client_for(args)
    result = client.sparql(query_text(args.query), accept=args.accept or ACCEPT[fmt])
    if isinstance(result, str):
        sys.stdout.write(result if result.endswith("\n") or not result else result + "\n")
    elif fmt == "table" and isinstance(result, dict):
        sparql_table(result, curies(client, args))
    else:
        print_json(result)
    return 0


def add_parser(sub: argparse._SubParsersAction, env: Mapping[str, str] = os.environ) -> None:
    p = command(sub, "sparql", common_options(env), "run a SPARQL query and print its results", run_sparql)
    p.add_argument("query", help="the query text, - for stdin, or @FILE")
    p.add_argument("--format", choices=sorted(ACCEPT), default="table",
                   help="table (default; IRIs as CURIEs), or the server's json, xml, csv, tsv, or a graph format "
                        "for CONSTRUCT/DESCRIBE")
    p.add_argument("--accept", help="an Accept header of your own, printed as the server sends it")
