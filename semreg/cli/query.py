"""`semreg query put|get|list|delete|discover|route`: saved queries, asked by name by the HTTP API, DNS and
Prometheus."""
from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from typing import Any

from semreg.cli.common import client_for, command, common_options
from semreg.cli.output import UsageError, print_json, say, table


def _meta(pairs: list[str] | None) -> dict[str, str]:
    out = {}
    for pair in pairs or ():
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"--meta takes KEY=VALUE, not '{pair}'.")
        out[key] = value
    return out


def _pattern(q: dict[str, Any]) -> str:
    """`S P O`, or a conjunctive query's patterns joined by ` & ` (and what it is provided, after `|`)."""
    if q.get("all") is None:
        return " ".join(str(q.get(k)) for k in ("s", "p", "o"))
    text = " & ".join(" ".join(t[k] for k in "spo") for t in q["all"])
    provided = q.get("provided")
    return text + (" | provided " + " & ".join(" ".join(t[k] for k in "spo") for t in provided) if provided else "")


def _row(q: dict[str, Any]) -> list[Any]:
    return [q["name"], _pattern(q), q.get("match"), q.get("environment"),
            ",".join(f"{k}={v}" for k, v in (q.get("meta") or {}).items()), q.get("limit") or "", q.get("owner") or ""]


HEADERS = ["NAME", "PATTERN", "MATCH", "ENVIRONMENT", "META", "LIMIT", "OWNER"]


def run_put(args: argparse.Namespace) -> int:
    if (args.s is None) == (args.all is None):
        raise UsageError("give one pattern (--s, with --p and --o) or several (--all, repeated), not both.")
    if args.provided and args.all is None:
        raise UsageError("--provided goes with --all (a query of several patterns).")
    result = client_for(args).put_query(args.name, s=args.s, p=args.p, o=args.o, match=args.match,
                                        environment=args.environment, meta=_meta(args.meta), limit=args.limit,
                                        all=args.all, provided=args.provided)
    if args.json:
        print_json(result)
    else:
        say(f"saved {result['name']}: {_pattern(result)} (match {result['match']}, environment "
            f"{result['environment']})")
    return 0


def run_get(args: argparse.Namespace) -> int:
    result = client_for(args).get_query(args.name)
    if args.json:
        print_json(result)
    else:
        table(HEADERS, [_row(result)])
    return 0


def run_list(args: argparse.Namespace) -> int:
    items = client_for(args).list_queries()
    if args.json:
        print_json(items)
    elif not items:
        say("no saved queries.")
    else:
        table(HEADERS, [_row(q) for q in items])
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
    p.add_argument("--match", help="comma list of exact, narrower, broader, overlap; or all")
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
