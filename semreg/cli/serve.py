"""`semreg serve`: run a registry node."""
from __future__ import annotations

import argparse
import ipaddress
import logging
import os
import signal
import sys
from collections.abc import Mapping
from pathlib import Path

from semreg.config import MiB, Settings

log = logging.getLogger("semreg.serve")


def env_default(env: Mapping[str, str], name: str, default):
    return env.get("SEMREG_" + name.upper().replace("-", "_"), default)


def add_parser(sub: argparse._SubParsersAction, env: Mapping[str, str] = os.environ) -> None:
    p = sub.add_parser("serve", help="run a registry node", description="Run a semreg node. Every flag also reads "
                       "SEMREG_<FLAG> from the environment (SEMREG_DATA_DIR, SEMREG_PORT, ...).")
    e = lambda name, default=None: env_default(env, name, default)  # noqa: E731
    p.add_argument("--host", default=e("host", "127.0.0.1"), help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=int(e("port", 8080)), help="port (default 8080)")
    store = p.add_mutually_exclusive_group()
    store.add_argument("--data-dir", default=e("data_dir", "semreg-data"),
                       help="pyoxigraph store directory (default ./semreg-data)")
    store.add_argument("--memory", action="store_true", default=_flag(e("memory")),
                       help="keep everything in memory; nothing survives a restart")
    p.add_argument("--ontology", action="extend", nargs="+", default=_list(e("ontology")), metavar="FILE",
                   help="preload ontology files (one or more, and repeatable; .ttl .n3 .owl .rdf .jsonld .nt)")
    p.add_argument("--tokens", default=e("tokens_file"), metavar="FILE", help="tokens file (JSON); see the README")
    p.add_argument("--insecure", action="store_true", default=_flag(e("insecure")),
                   help="allow listening beyond loopback without tokens")
    p.add_argument("--peers", default=e("peers", ""), metavar="HOST:PORT,...",
                   help="other cluster nodes (not available yet: refused)")
    p.add_argument("--replicas", type=int, default=int(e("replicas", 2)), help="replication factor (default 2)")
    p.add_argument("--json-body-limit", type=int, default=int(e("json_body_limit", 4 * MiB)), metavar="BYTES",
                   help="largest JSON body (default 4 MiB)")
    p.add_argument("--ontology-body-limit", type=int, default=int(e("ontology_body_limit", 32 * MiB)),
                   metavar="BYTES", help="largest ontology upload (default 32 MiB)")
    p.add_argument("--sparql-time-limit", type=float, default=float(e("sparql_time_limit", 10.0)), metavar="S",
                   help="SPARQL query time limit in seconds (default 10)")
    p.add_argument("--sparql-result-limit", type=int, default=int(e("sparql_result_limit", 100_000)),
                   metavar="N", help="most rows or triples a SPARQL answer may have (default 100000)")
    p.add_argument("--sparql-workers", type=int, default=int(e("sparql_workers", 2)), metavar="N",
                   help="query processes kept ready for /sparql (default 2)")
    p.add_argument("--sparql-max-workers", type=int, default=int(e("sparql_max_workers", 8)), metavar="N",
                   help="SPARQL queries evaluated at once, each in its own process; more wait their turn (default 8)")
    p.add_argument("--sparql-memory-limit", type=int, default=int(e("sparql_memory_limit", 2048)), metavar="MIB",
                   help="memory a SPARQL query may take, in MiB; 0 = no cap (default 2048)")
    p.add_argument("--max-tags", type=int, default=int(e("max_tags", 10_000)), metavar="N",
                   help="most tags an instance may have (default 10000)")
    p.add_argument("--max-batch", type=int, default=int(e("max_batch", 10_000)), metavar="N",
                   help="most instances a batch may hold (default 10000)")
    p.add_argument("--rate-limit", type=float, default=float(e("rate_limit", 0)), metavar="RPS",
                   help="requests a second per token (per client address without tokens); 0 = no limit (default)")
    p.add_argument("--rate-burst", type=float, default=float(e("rate_burst", 0)), metavar="N",
                   help="requests a caller may make at once before the rate applies (default: one second's worth)")
    p.add_argument("--balance-limit", action="store_true", default=_flag(e("balance_limit")),
                   help="never route to an instance whose load has reached its capacity (503 instead)")
    p.add_argument("--verbose-routing", action="store_true", default=_flag(e("verbose_routing")),
                   help="log one structured line per routing decision")
    p.add_argument("--log-level", default=e("log_level", "info"), choices=["debug", "info", "warning", "error"])
    p.add_argument("--log-format", default=e("log_format", "json"), choices=["json", "text"])
    p.set_defaults(run=run)


def _flag(value) -> bool:
    return str(value).lower() in ("1", "true", "yes", "on") if value is not None else False


def _list(value) -> list[str]:
    return [v for v in (value or "").split(os.pathsep) if v] if value else []


def settings_from(args: argparse.Namespace) -> Settings:
    return Settings(
        host=args.host, port=args.port, data_dir=None if args.memory else Path(args.data_dir),
        ontologies=tuple(Path(o) for o in args.ontology), tokens_file=Path(args.tokens) if args.tokens else None,
        insecure=args.insecure, peers=tuple(p for p in args.peers.split(",") if p), replicas=args.replicas,
        json_body_limit_bytes=args.json_body_limit, ontology_body_limit_bytes=args.ontology_body_limit,
        sparql_time_limit_s=args.sparql_time_limit, sparql_result_limit=args.sparql_result_limit,
        sparql_workers=args.sparql_workers, sparql_max_workers=args.sparql_max_workers,
        sparql_memory_limit_mib=args.sparql_memory_limit,
        max_tags_per_instance=args.max_tags, max_batch_instances=args.max_batch,
        rate_limit_per_s=args.rate_limit, rate_burst=args.rate_burst or args.rate_limit,
        balance_limit=args.balance_limit, verbose_routing=args.verbose_routing,
        log_level=args.log_level, log_format=args.log_format)


def is_loopback(host: str) -> bool:
    if host in ("localhost",):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def raise_open_files_limit() -> int:
    """Raise the soft limit on open files to the hard one: each watch holds a connection."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard == resource.RLIM_INFINITY:
            hard = 1 << 20
        if soft < hard:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        return hard
    except (ImportError, ValueError, OSError):
        return -1


def _draining_server_class():
    import uvicorn

    class DrainingServer(uvicorn.Server):
        """On SIGTERM/SIGINT, answer blocking reads at once (with their current result) so that the
        graceful drain does not wait out watches that may block for minutes."""

        def __init__(self, config, node) -> None:
            super().__init__(config)
            self.node = node

        def handle_exit(self, sig, frame) -> None:
            super().handle_exit(sig, frame)
            loop = self.node._loop
            if loop is not None and not loop.is_closed():
                loop.call_soon_threadsafe(self.node.stopping)

    return DrainingServer


def run(args: argparse.Namespace) -> int:
    import uvicorn

    from semreg import logs
    from semreg.app import create_app
    from semreg.store import Store, StoreError

    settings = settings_from(args)
    logs.configure(settings.log_level, settings.log_format)
    raise_open_files_limit()
    if not 1 <= settings.sparql_workers <= settings.sparql_max_workers:
        print(f"semreg: --sparql-workers must be at least 1 and at most --sparql-max-workers "
              f"({settings.sparql_workers} and {settings.sparql_max_workers} given).", file=sys.stderr)
        return 2
    if settings.tokens_file is None and not settings.insecure and not is_loopback(settings.host):
        print(f"semreg: refusing to listen on {settings.host} with no tokens: anyone who can reach it could "
              f"deregister every service. Give --tokens FILE, listen on 127.0.0.1, or pass --insecure.",
              file=sys.stderr)
        return 2
    if settings.tokens_file is not None:
        from semreg.auth import Tokens, TokensFileError

        try:
            Tokens(settings.tokens_file)
        except TokensFileError as exc:
            print(f"semreg: {exc}", file=sys.stderr)
            return 2
    if settings.peers:
        print("semreg: --peers: this version runs a single node; clustering (the consistent-hash ring and its "
              "membership) is not built yet. Start it without --peers.", file=sys.stderr)
        return 2
    for path in settings.ontologies:
        if not path.is_file():
            print(f"semreg: --ontology {path}: no such file.", file=sys.stderr)
            return 2
    try:
        store = Store(settings.data_dir)
    except StoreError as exc:
        print(f"semreg: {exc}", file=sys.stderr)
        return 1
    app = create_app(settings, store=store)
    config = uvicorn.Config(app, host=settings.host, port=settings.port, log_config=None, access_log=False,
                            lifespan="on", timeout_graceful_shutdown=10, backlog=4096)
    server = _draining_server_class()(config, app.state.node)
    # uvicorn re-raises the signal that stopped it once it has drained; after a clean drain on
    # SIGTERM the exit status should be 0, so the handler it restores and re-raises is a no-op.
    signal.signal(signal.SIGTERM, lambda signum, frame: None)
    server.run()
    return 0 if server.started else 1
