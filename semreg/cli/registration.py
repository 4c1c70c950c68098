"""Client sub-commands that change an instance's registration: register (optionally staying to
heartbeat), deregister, heartbeat. Their shared options are `semreg.cli.common`'s."""
from __future__ import annotations

import argparse
import os
import signal
import sys
import time
import uuid
from collections.abc import Mapping
from typing import Any

from semreg.cli.common import client_for, command, common_options
from semreg.cli.output import API_ERROR, INTERRUPTED, OK, UNREACHABLE, UsageError, print_json, say, warn
from semreg.client import Registration, Unreachable
from semreg.client.calls import instance_body


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


def add_parser(sub: argparse._SubParsersAction, env: Mapping[str, str] = os.environ) -> None:
    common = common_options(env)
    add_register(sub, common)

    p = command(sub, "deregister", common, "deregister an instance", run_deregister, not_found_exit=True)
    p.add_argument("id")

    p = command(sub, "heartbeat", common, "renew an instance's ttl once", run_heartbeat, not_found_exit=True)
    p.add_argument("id")
    p.add_argument("--load", type=float, help="the instance's current load")
    p.add_argument("--status", choices=["up", "blocked", "draining"])


def add_register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
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
    p.add_argument("--deregister-after", type=float, metavar="S",
                   help="delete it once critical this many seconds past its last heartbeat; 0 = never "
                        "(default 90 with a ttl, never with --ttl 0)")
    p.add_argument("--weight", type=int, default=1)
    p.add_argument("--capacity", type=int)
    p.add_argument("--meta", action="append", default=[], metavar="K=V", help="metadata (repeatable)")
    checks = p.add_mutually_exclusive_group()
    checks.add_argument("--check-http", metavar="URL", help="active health check: a URL answering 2xx")
    checks.add_argument("--check-tcp", metavar="HOST:PORT", help="active health check: a port accepting")
    p.add_argument("--check-interval", type=float, metavar="S", help="seconds between checks")
    p.add_argument("--keep-alive", action="store_true",
                   help="stay in the foreground heartbeating every ttl/3; Ctrl-C deregisters")
