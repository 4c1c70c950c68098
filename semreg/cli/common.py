"""What every client sub-command shares: the registry options, the parser of a sub-command, and its client.

Every command takes `--url` (SEMREG_URL), `--token` (SEMREG_TOKEN), `--environment` (SEMREG_ENVIRONMENT),
`--timeout` and `--json`. The commands themselves: `semreg.cli.registration` (register, deregister,
heartbeat), `semreg.cli.reading` (instances, discover, route, watch, tags, expand, concept),
`semreg.cli.ontology` and `semreg.cli.sparql`.
"""
from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from semreg.cli.output import EXIT_CODES, Curies, UsageError, guarded
from semreg.client import Client, SemregClientError

DEFAULT_URL = "http://127.0.0.1:8080"


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

