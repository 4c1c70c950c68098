"""Client sub-commands that read the registry: instances, discover, route, watch, tags, expand, concept.
Their shared options are `semreg.cli.common`'s."""
from __future__ import annotations

import argparse
import os
import time
from collections.abc import Mapping

from semreg.cli.common import client_for, command, common_options, curies
from semreg.cli.output import UsageError, discover_table, instances_table, print_json, say, table

MATCH_HELP = ("degrees to accept: a comma list of exact, narrower, broader, overlap, or 'all' (default "
              "exact,narrower); add 'similar' for near misses close in meaning (never in the default nor in 'all')")
MIN_SIMILARITY_HELP = "with 'similar' in --match: the least similarity, 0 to 1, a near miss needs"


def pattern(args: argparse.Namespace) -> tuple[str, str | None, str | None]:
    """`S [P [O]]`, as separate arguments or one quoted string."""
    terms = " ".join(args.pattern).split()
    if not 1 <= len(terms) <= 3:
        raise UsageError(f"a pattern is one to three terms (S [P [O]]), not {len(terms)}.")
    s, p, o = (terms + [None, None])[:3]
    return s, p, o  # type: ignore[return-value]


def add_pattern(p: argparse.ArgumentParser) -> None:
    p.add_argument("pattern", nargs="+", metavar="TERM",
                   help="S [P [O]]: terms as CURIEs (ex:Obra), full IRIs or <IRIs>; 'a' is rdf:type")
    p.add_argument("--match", help=MATCH_HELP)
    p.add_argument("--service", help="only instances of this service")


def run_instances(args: argparse.Namespace) -> int:
    client = client_for(args)
    if args.id:
        args.not_found_exit = True
        view = client.instance(args.id)
        if args.json:
            print_json(view)
        else:
            short = curies(client, args)
            instances_table([view], short)
            if view.get("tags"):
                say("tags:")
                for tag in view["tags"]:
                    say("  " + short.tag(tag))
        return 0
    views = client.instances(service=args.service)
    if args.json:
        print_json(views)
    else:
        instances_table(views, curies(client, args))
    return 0


def run_discover(args: argparse.Namespace) -> int:
    client = client_for(args)
    s, p, o = pattern(args)
    if args.also or args.provided or args.rank == "score":  # several patterns at once (or scored): POST /v1/discover
        first = " ".join(t for t in (s, p, o) if t)
        result = client.discover_all([first, *(args.also or ())], provided=args.provided, match=args.match,
                                     service=args.service, status=args.status, limit=args.limit, tags=args.tags,
                                     min_similarity=args.min_similarity, rank=args.rank)
    else:
        result = client.discover(s, p, o, match=args.match, service=args.service, status=args.status,
                                 limit=args.limit, tags=args.tags, min_similarity=args.min_similarity)
    if args.json:
        print_json(result)
    else:
        discover_table(result, curies(client, args))
    return 0


def run_route(args: argparse.Namespace) -> int:
    s, p, o = pattern(args)
    url = client_for(args).route(s, p, o, match=args.match, service=args.service, policy=args.policy,
                                 path=args.path)
    if args.json:
        print_json({"url": str(url), "instance": url.instance_id})
    else:
        say(str(url))
    return 0


def run_watch(args: argparse.Namespace) -> int:
    client = client_for(args)
    s, p, o = pattern(args)
    short = curies(client, args)
    results = client.watch(s, p, o, match=args.match, service=args.service, status=args.status, wait_s=args.wait,
                           tags=args.tags)
    for seen, result in enumerate(results, 1):  # until Ctrl-C: exit 130, as any command
        if args.json:
            print_json(result, compact=True)
        else:
            if seen > 1:
                say("")
            say(f"# {time.strftime('%H:%M:%S')}  {len(result.get('instances', []))} instance(s)")
            discover_table(result, short)
        if args.count and seen >= args.count:
            break
    return 0


def run_tags(args: argparse.Namespace) -> int:
    client = client_for(args)
    result = client.tags()
    if args.json:
        print_json(result)
        return 0
    short = curies(client, args)
    rows = [[short(t["s"]), short(t["p"]), short(t["o"]), t["instances"]] for t in result["tags"]]
    if rows:
        table(["SUBJECT", "PREDICATE", "OBJECT", "INSTANCES"], rows)
    else:
        say("no tags.")
    return 0


def run_expand(args: argparse.Namespace) -> int:
    client = client_for(args)
    s, p, o = pattern(args)
    result = client.expand(s, p, o, match=args.match)
    if args.json:
        print_json(result)
        return 0
    short = curies(client, args)
    rows = [[part, short(c["iri"]), c.get("degree"), c.get("distance")]
            for part in ("s", "p", "o") for c in result.get("components", {}).get(part, [])]
    table(["COMPONENT", "CONCEPT", "DEGREE", "DISTANCE"], rows)
    tags = result.get("tags", [])
    say("")
    if tags:
        table(["REGISTERED TAG", "DEGREE", "DISTANCE"],
              [[short.tag(t["tag"]), t.get("degree"), t.get("distance")] for t in tags])
    else:
        say("no registered tag matches.")
    return 0


def run_concept(args: argparse.Namespace) -> int:
    client = client_for(args)
    result = client.concept(args.term)
    if args.json:
        print_json(result)
        return 0
    short = curies(client, args)
    rows = []
    for key, value in result.items():
        shown = listed([short(v) for v in value], None if args.all else LISTED) if isinstance(value, list) else \
            short(value)
        rows.append([key, shown or "-"])
    table(["FIELD", "VALUE"], rows)
    return 0


LISTED = 10  # items of a list a table shows before "... and N more" (--all shows every one)


def listed(items: list[str], limit: int | None) -> str:
    if limit is None or len(items) <= limit:
        return ", ".join(items)
    return ", ".join(items[:limit]) + f", ... and {len(items) - limit} more"


def add_parser(sub: argparse._SubParsersAction, env: Mapping[str, str] = os.environ) -> None:
    common = common_options(env)

    p = command(sub, "instances", common, "list instances, or show one", run_instances)
    p.add_argument("id", nargs="?", help="show this instance (exit 4 if it is not registered)")
    p.add_argument("--service", help="only this service")

    p = command(sub, "discover", common, "find instances whose tags match a pattern", run_discover)
    add_pattern(p)
    p.add_argument("--min-similarity", type=float, metavar="X", help=MIN_SIMILARITY_HELP)
    p.add_argument("--status", choices=["up", "any"], help="'any' includes blocked, draining and critical")
    p.add_argument("--limit", type=int)
    p.add_argument("--tags", action="store_true", help="with --json: each instance with its tags")
    p.add_argument("--and", dest="also", action="append", metavar="PATTERN",
                   help="one more pattern every instance must match too, as one quoted string 'S [P O]' "
                        "(repeatable; POST /v1/discover with all)")
    p.add_argument("--provided", action="append", metavar="TAG",
                   help="a tag the caller can supply, 'S P O': an instance's tags on its predicate must each be "
                        "covered by one (repeatable)")
    p.add_argument("--rank", choices=["degree", "score"],
                   help="with 'similar' in --match: score ranks by the learned matchmaker's score alone, the degrees "
                        "mixed (POST /v1/discover; default degree)")

    p = command(sub, "route", common, "print the URL of the instance the registry routes a pattern to", run_route)
    add_pattern(p)
    p.add_argument("--policy", choices=["least-load", "spillover", "round-robin", "limit"])
    p.add_argument("--path", default="", help="appended to the instance's URL, e.g. /books")

    p = command(sub, "watch", common, "print a discovery result and each change to it until Ctrl-C", run_watch)
    add_pattern(p)
    p.add_argument("--status", choices=["up", "any"])
    p.add_argument("--tags", action="store_true", help="with --json: each instance with its tags")
    p.add_argument("--wait", type=float, default=30.0, metavar="S", help="long-poll seconds (default 30)")
    p.add_argument("--count", type=int, metavar="N", help="stop after N results (the first included)")

    command(sub, "tags", common, "list every registered tag", run_tags)

    p = command(sub, "expand", common, "show what each term of a pattern expands to", run_expand)
    p.add_argument("pattern", nargs="+", metavar="TERM", help="S [P [O]]")
    p.add_argument("--match", help=MATCH_HELP)

    p = command(sub, "concept", common, "show a concept: label, parents, children", run_concept,
                not_found_exit=True)
    p.add_argument("term", help="a CURIE or IRI")
    p.add_argument("--all", action="store_true",
                   help=f"list every parent, child, ancestor and descendant (default: the first {LISTED} of each)")
