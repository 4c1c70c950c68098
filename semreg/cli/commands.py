"""Client sub-commands against a running registry: register, deregister, heartbeat, instances,
discover, route, watch, tags, expand, concept. (`ontology` and `sparql` live in their own modules.)

Every command takes `--url` (SEMREG_URL), `--token` (SEMREG_TOKEN), `--environment` (SEMREG_ENVIRONMENT),
`--timeout` and `--json`.
"""
from __future__ import annotations

import argparse
import os
import signal
import sys
import time
import uuid
from collections.abc import Mapping
from typing import Any

from semreg.cli.output import (
    API_ERROR,
    EXIT_CODES,
    INTERRUPTED,
    OK,
    UNREACHABLE,
    Curies,
    UsageError,
    discover_table,
    guarded,
    instances_table,
    print_json,
    say,
    table,
    warn,
)
from semreg.client import Client, Registration, SemregClientError, Unreachable
from semreg.client.calls import instance_body

DEFAULT_URL = "http://127.0.0.1:8080"
MATCH_HELP = "degrees to accept: a comma list of exact, narrower, broader, overlap, or 'all' (default exact,narrower)"


def registry_options(target: Any, env: Mapping[str, str], defaults: bool) -> None:
    """`--url`, `--token`, `--environment`, `--timeout` and `--json`, which every client command takes on
    either side of its name (`semreg --url U discover ...` or `semreg discover ... --url U`). The top-level parser holds the
    defaults; a command's own copies hold none (`SUPPRESS`), or they would overwrite what was given before
    the command's name."""
    url, timeout = env.get("SEMREG_URL", DEFAULT_URL), env.get("SEMREG_TIMEOUT", "10")

    def default(value: Any) -> Any:
        return value if defaults else argparse.SUPPRESS

    target.add_argument("--url", default=default(url), metavar="URL[,URL...]",
                        help=f"registry URL(s), tried in turn (env SEMREG_URL; default {url})")
    target.add_argument("--token", default=default(env.get("SEMREG_TOKEN")), help="bearer token (env SEMREG_TOKEN)")
    target.add_argument("--environment", default=default(env.get("SEMREG_ENVIRONMENT") or None), metavar="NAME",
                        help="register in and read this environment; '*' reads every one (env SEMREG_ENVIRONMENT; "
                             "default: the registry's, 'default')")
    # kept as text until a client command runs (`client_for`), so a bad SEMREG_TIMEOUT cannot break `serve`
    target.add_argument("--timeout", default=default(timeout), metavar="S",
                        help=f"seconds per request (env SEMREG_TIMEOUT; default {timeout})")
    target.add_argument("--json", action="store_true", default=default(False),
                        help="print the server's JSON (one document) instead of a table")


def common_options(env: Mapping[str, str]) -> argparse.ArgumentParser:
    """The options every client command shares (a parent parser), without defaults: those are the top-level
    parser's (`registry_options`)."""
    p = argparse.ArgumentParser(add_help=False)
    registry_options(p.add_argument_group("registry"), env, defaults=False)
    return p


def command(sub: argparse._SubParsersAction, name: str, common: argparse.ArgumentParser, help: str,
            run: Any, not_found_exit: bool = False, **kw: Any) -> argparse.ArgumentParser:
    p = sub.add_parser(name, help=help, description=help[0].upper() + help[1:] + ".", parents=[common],
                       epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter, **kw)
    p.set_defaults(run=guarded(run), not_found_exit=not_found_exit)
    return p


def client_for(args: argparse.Namespace) -> Client:
    """A client for one command: no cache (each command is one process), the usual retries."""
    try:
        timeout_s = float(args.timeout)
    except ValueError:
        raise UsageError(f"--timeout (or SEMREG_TIMEOUT) takes seconds, not '{args.timeout}'.") from None
    try:
        return Client(args.url, token=args.token, timeout_s=timeout_s, cache_ttl_s=0, environment=args.environment)
    except ValueError as exc:
        raise UsageError(f"--url: {exc}") from None


def curies(client: Client, args: argparse.Namespace) -> Curies:
    """IRIs → CURIEs for tables, with the registry's prefixes (full IRIs if they cannot be read)."""
    if args.json:
        return Curies()
    try:
        return Curies(client.prefixes())
    except SemregClientError:
        return Curies()


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


# -- register, deregister, heartbeat ---------------------------------------------------------------
def meta_pairs(items: list[str]) -> dict[str, str]:
    meta = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--meta takes key=value, not '{item}'.")
        meta[key] = value
    return meta


def run_register(args: argparse.Namespace) -> int:
    check: dict[str, Any] | None = None
    if args.check_http:
        check = {"http": args.check_http}
    elif args.check_tcp:
        check = {"tcp": args.check_tcp}
    if args.check_interval is not None:
        if check is None:
            raise UsageError("--check-interval needs --check-http or --check-tcp.")
        check["interval"] = args.check_interval
    if not args.tag and not args.no_tags:
        raise UsageError("give what the instance handles with --tag 'S [P O]' (repeatable), or --no-tags for an "
                         "instance that discovery by meaning will never find.")
    if args.tag and args.no_tags:
        raise UsageError("--no-tags and --tag contradict each other.")
    iid = args.id or f"{args.service}-{uuid.uuid4().hex[:8]}"
    body = instance_body(args.service, args.address, args.port, args.tag, args.ttl, args.weight, args.capacity,
                         meta_pairs(args.meta), check, args.scheme, args.deregister_after)
    client = client_for(args)
    reg = Registration(client, iid, body).open() if args.keep_alive else None
    # one-shot: the lease runs on without this process
    view = (reg.instance or {}) if reg is not None else client.put_instance(iid, body)
    if args.json:
        print_json(view)
    else:
        say(f"registered {view.get('id', iid)} ({view.get('service')}, {view.get('address')}:{view.get('port')}, "
            f"{len(view.get('tags', []))} tag(s)); expires {view.get('expires_at') or 'never'}")
    return keep_alive(reg) if reg is not None else 0


class Stopped(Exception):
    """SIGTERM: asked to stop, which is no interruption."""


def keep_alive(reg: Any) -> int:
    """Heartbeat in the foreground until Ctrl-C (then exit 130) or SIGTERM (then 0), deregistering first."""
    def stop(signum: int, frame: Any) -> None:
        raise Stopped

    every = f"every {seconds(reg.interval_s)} s" if reg.interval_s else "never (ttl 0)"
    code = OK
    previous = signal.signal(signal.SIGTERM, stop)
    try:
        print(f"heartbeating {every}; Ctrl-C deregisters {reg.id}", file=sys.stderr, flush=True)
        while True:
            time.sleep(0.25)
    except KeyboardInterrupt:
        code = INTERRUPTED
    except Stopped:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
    reg.close()
    if reg.last_error is not None:
        warn(f"could not deregister {reg.id}: {reg.last_error}")
        return UNREACHABLE if isinstance(reg.last_error, Unreachable) else API_ERROR
    print(f"deregistered {reg.id}", file=sys.stderr, flush=True)
    return code


def seconds(value: float) -> str:
    """Seconds for people: at most one decimal (`3.3`, `10`)."""
    return f"{value:.1f}".removesuffix(".0")


def run_deregister(args: argparse.Namespace) -> int:
    client_for(args).deregister(args.id)
    if args.json:
        print_json({"id": args.id, "deregistered": True})
    else:
        say(f"deregistered {args.id}")
    return 0


def run_heartbeat(args: argparse.Namespace) -> int:
    result = client_for(args).heartbeat(args.id, load=args.load, status=args.status)
    if args.json:
        print_json(result)
    else:
        say(f"{result['id']} {result['status']}, expires {result.get('expires_at') or 'never'}")
    return 0


# -- reading ---------------------------------------------------------------------------------------
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
    result = client.discover(s, p, o, match=args.match, service=args.service, status=args.status, limit=args.limit,
                             tags=args.tags)
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

    p = command(sub, "register", common, "register an instance (optionally staying to heartbeat)", run_register)
    p.add_argument("--id", help="instance id (default SERVICE-<random>)")
    p.add_argument("--service", required=True)
    p.add_argument("--address", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--scheme", default="http")
    p.add_argument("--tag", action="append", default=[], metavar="TAG",
                   help="'S [P O]' as CURIEs or IRIs, e.g. 'ex:Livro ex:temUmGenero ex:Terror' (repeatable)")
    p.add_argument("--no-tags", action="store_true", help="register with no tags (on purpose: --tag is required otherwise)")
    p.add_argument("--ttl", type=float, default=30.0, help="seconds; 0 = no expiry (default 30)")
    p.add_argument("--deregister-after", type=float, metavar="S", help="seconds after the last heartbeat")
    p.add_argument("--weight", type=int, default=1)
    p.add_argument("--capacity", type=int)
    p.add_argument("--meta", action="append", default=[], metavar="K=V", help="metadata (repeatable)")
    checks = p.add_mutually_exclusive_group()
    checks.add_argument("--check-http", metavar="URL", help="active health check: a URL answering 2xx")
    checks.add_argument("--check-tcp", metavar="HOST:PORT", help="active health check: a port accepting")
    p.add_argument("--check-interval", type=float, metavar="S", help="seconds between checks")
    p.add_argument("--keep-alive", action="store_true",
                   help="stay in the foreground heartbeating every ttl/3; Ctrl-C deregisters")

    p = command(sub, "deregister", common, "deregister an instance", run_deregister, not_found_exit=True)
    p.add_argument("id")

    p = command(sub, "heartbeat", common, "renew an instance's ttl once", run_heartbeat, not_found_exit=True)
    p.add_argument("id")
    p.add_argument("--load", type=float, help="the instance's current load")
    p.add_argument("--status", choices=["up", "blocked", "draining"])

    p = command(sub, "instances", common, "list instances, or show one", run_instances)
    p.add_argument("id", nargs="?", help="show this instance (exit 4 if it is not registered)")
    p.add_argument("--service", help="only this service")

    p = command(sub, "discover", common, "find instances whose tags match a pattern", run_discover)
    add_pattern(p)
    p.add_argument("--status", choices=["up", "any"], help="'any' includes blocked, draining and critical")
    p.add_argument("--limit", type=int)
    p.add_argument("--tags", action="store_true", help="with --json: each instance with its tags")

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
