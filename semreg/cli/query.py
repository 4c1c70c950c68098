"""`semreg query put|get|list|delete|discover|route`: saved queries, asked by name by the HTTP API, DNS and
Prometheus."""
from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections.abc import Mapping
from typing import Any

from semreg.cli.common import client_for, command, common_options, curies
from semreg.cli.output import Curies, UsageError, print_json, say, table
from semreg.cli.reading import MATCH_HELP, MIN_SIMILARITY_HELP


def _meta(pairs: list[str] | None) -> dict[str, str]:
    out = {}
    for pair in pairs or ():
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"--meta takes KEY=VALUE, not '{pair}'.")
        out[key] = value
    return out


ANY = "https://w3id.org/semreg#Any"
PATTERN_MIN = 24  # columns a pattern keeps when a table is cut to fit a terminal


def _terms(t: Mapping[str, Any], short: Curies) -> str:
    """A pattern as it is typed: CURIEs, and the predicate and object left out when any."""
    terms = [t.get(k) for k in ("s", "p", "o")]
    if all(x in (None, ANY) for x in terms[1:]):
        terms = terms[:1]
    return " ".join(short(x) if x not in (None, ANY) else "any" for x in terms)


def _pattern(q: dict[str, Any], short: Curies) -> str:
    """`S P O`, or a conjunctive query's patterns joined by ` & ` (and what it is provided, after `|`)."""
    if q.get("all") is None:
        return _terms(q, short)
    text = " & ".join(_terms(t, short) for t in q["all"])
    provided = q.get("provided")
    return text + (" | provided " + " & ".join(_terms(t, short) for t in provided) if provided else "")


def _row(q: dict[str, Any], short: Curies) -> list[Any]:
    return [q["name"], _pattern(q, short), q.get("match"), q.get("environment"),
            ",".join(f"{k}={v}" for k, v in (q.get("meta") or {}).items()), q.get("limit") or "", q.get("owner") or ""]


HEADERS = ["NAME", "PATTERN", "MATCH", "ENVIRONMENT", "META", "LIMIT", "OWNER"]
OPTIONAL = {"META", "LIMIT", "OWNER"}  # left out of a table when no row has one


def _table(queries: list[dict[str, Any]], short: Curies) -> None:
    """The queries as a table narrow enough for a terminal: CURIEs, the optional columns no query uses left
    out, and on a terminal too narrow still, each pattern cut short with `…` (`--json` has them whole)."""
    rows = [_row(q, short) for q in queries]
    keep = [k for k, h in enumerate(HEADERS) if h not in OPTIONAL or any(r[k] not in ("", None) for r in rows)]
    headers = [HEADERS[k] for k in keep]
    rows = [[r[k] for k in keep] for r in rows]
    if sys.stdout.isatty():
        width = shutil.get_terminal_size().columns
        others = sum(max(len(h), *(len(str(r[k])) for r in rows)) + 2 for k, h in enumerate(headers) if k != 1)
        room = max(PATTERN_MIN, width - others - 1)
        for r in rows:
            if len(r[1]) > room:
                r[1] = r[1][:room - 1] + "…"
    table(headers, rows)


def run_put(args: argparse.Namespace) -> int:
    if (args.s is None) == (args.all is None):
        raise UsageError("give one pattern (--s, with --p and --o) or several (--all, repeated), not both.")
    if args.provided and args.all is None:
        raise UsageError("--provided goes with --all (a query of several patterns).")
    client = client_for(args)
    result = client.put_query(args.name, s=args.s, p=args.p, o=args.o, match=args.match,
                              environment=args.environment, meta=_meta(args.meta), limit=args.limit,
                              all=args.all, provided=args.provided, min_similarity=args.min_similarity)
    if args.json:
        print_json(result)
    else:
        say(f"saved {result['name']}: {_pattern(result, curies(client, args))} (match {result['match']}, "
            f"environment {result['environment']})")
    return 0


def run_get(args: argparse.Namespace) -> int:
    client = client_for(args)
    result = client.get_query(args.name)
    if args.json:
        print_json(result)
    else:
        _table([result], curies(client, args))
    return 0


def run_list(args: argparse.Namespace) -> int:
    client = client_for(args)
    items = client.list_queries()
    if args.json:
        print_json(items)
    elif not items:
        say("no saved queries.")
    else:
        _table(items, curies(client, args))
    return 0


def run_delete(args: argparse.Namespace) -> int:
    client_for(args).delete_query(args.name)
    if args.json:
        print_json({"name": args.name, "deleted": True})
    else:
        say(f"deleted {args.name}")
    return 0


def run_discover(args: argparse.Namespace) -> int:
    result = client_for(args).saved(args.name).discover()
    if args.json:
        print_json(result)
    elif not result.get("instances"):
        say("no instances.")
    else:
        table(["ID", "SERVICE", "ADDRESS", "DEGREE"],
              [[i["id"], i.get("service"), f"{i.get('address')}:{i.get('port')}", (i.get("match") or {}).get("degree")]
               for i in result["instances"]])
    return 0


def run_route(args: argparse.Namespace) -> int:
    url = client_for(args).saved(args.name).route(policy=args.policy, path=args.path or "")
    if args.json:
        print_json({"url": str(url), "instance": url.instance_id})
    else:
        say(str(url))
    return 0


def add_parser(sub: argparse._SubParsersAction, env: Mapping[str, str] = os.environ) -> None:
    common = common_options(env)
    parent = sub.add_parser("query", help="save, show, list, delete or ask saved queries",
                            description="Saved discovery queries: asked by name over HTTP, DNS and Prometheus.")
    qsub = parent.add_subparsers(dest="query_command", required=True, metavar="ACTION")

    p: Any = command(qsub, "put", common, "save (or replace) a discovery query under a name", run_put)
    p.add_argument("name", help="the query's name: a DNS label (a-z, 0-9, '-')")
    p.add_argument("--s", metavar="TERM", help="subject term (or --all)")
    p.add_argument("--p", metavar="TERM", help="predicate term (default: any)")
    p.add_argument("--o", metavar="TERM", help="object term (default: any)")
    p.add_argument("--match", help=MATCH_HELP)
    p.add_argument("--min-similarity", type=float, metavar="X", help=MIN_SIMILARITY_HELP)
    p.add_argument("--meta", action="append", metavar="KEY=VALUE", help="only instances with this meta (repeatable)")
    p.add_argument("--limit", type=int, metavar="N", help="at most N instances")
    p.add_argument("--all", action="append", metavar="PATTERN",
                   help="instead of --s/--p/--o: a pattern 'S [P O]' every instance must match (repeatable)")
    p.add_argument("--provided", action="append", metavar="TAG",
                   help="with --all: a tag 'S P O' the caller can supply (repeatable)")

    for name, help_, run in (("get", "show a saved query", run_get), ("delete", "delete a saved query", run_delete),
                             ("discover", "what a saved query discovers now", run_discover)):
        p = command(qsub, name, common, help_, run, not_found_exit=True)
        p.add_argument("name")
    command(qsub, "list", common, "list the saved queries", run_list)
    p = command(qsub, "route", common, "the URL a saved query routes to now", run_route, not_found_exit=True)
    p.add_argument("name")
    p.add_argument("--policy", choices=["least-load", "spillover", "round-robin", "limit"])
    p.add_argument("--path", help="path to append to the instance's address")
