"""Server settings: one frozen object, units in field names. Each field that a person may set declares
its `semreg serve` flag, and the flag also reads `SEMREG_<FLAG>` from the environment (uvicorn's
`UVICORN_*` convention): `semreg.cli.serve` builds the command line from these declarations, so a new
setting is one line here."""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MiB = 1024 * 1024


def option(default: Any, flag: str, help: str, *, metavar: str | None = None, env: str | None = None,
           choices: tuple[str, ...] | None = None, **kw: Any) -> Any:
    """A settings field with its command-line flag (`--flag`); `env` names its variable when it is not
    `SEMREG_` + the flag in capitals."""
    meta = {"flag": flag, "help": help, "metavar": metavar, "env": env or "SEMREG_" + flag.upper().replace("-", "_"),
            "choices": choices}
    return field(default=default, metadata=meta, **kw)

SPARQL_REPLICA_DIR = "sparql"  # inside the data directory: RocksDB leaves what it does not name alone


@dataclass(frozen=True)
class Settings:
    host: str = option("127.0.0.1", "host", "address to listen on; beyond loopback needs --tokens or --insecure")
    port: int = option(8080, "port", "port to listen on")
    data_dir: Path | None = option(Path("semreg-data"), "data-dir", "pyoxigraph store directory (created if missing)",
                                   metavar="DIR")  # None: in memory (--memory), nothing kept
    ontologies: tuple[Path, ...] = option((), "ontology", "preload ontology files (one or more, and repeatable; .ttl "
                                          ".n3 .owl .rdf .jsonld .nt); an unchanged file is not reasoned again",
                                          metavar="FILE")
    tokens_file: Path | None = option(None, "tokens", "tokens file (JSON), reloaded on SIGHUP; see the docs, Tokens and TLS",
                                      metavar="FILE", env="SEMREG_TOKENS_FILE")
    insecure: bool = option(False, "insecure", "allow listening beyond loopback without tokens (--host, --dns, "
                            "--cluster-listen, --consul-listen)")
    etcd: str = option("", "etcd", "etcd endpoints of the cluster's membership (without it the node runs alone)",
                       metavar="URL,...")
    etcd_ca: Path | None = option(None, "etcd-ca", "CA certificate etcd's certificate is checked against (TLS to "
                                  "etcd; give https:// endpoints)", metavar="FILE")
    etcd_cert: Path | None = option(None, "etcd-cert", "this node's client certificate for etcd (with --etcd-key)",
                                    metavar="FILE")
    etcd_key: Path | None = option(None, "etcd-key", "the key of --etcd-cert", metavar="FILE")
    etcd_user: str = option("", "etcd-user", "the etcd user this node authenticates as (with "
                            "--etcd-password-file)", metavar="NAME")
    etcd_password_file: Path | None = option(None, "etcd-password-file", "file holding --etcd-user's password",
                                             metavar="FILE")
    cluster: str = option("semreg", "cluster", "the cluster's name: its key prefix in etcd", metavar="NAME")
    cluster_listen: str = option("", "cluster-listen", "address of the node-to-node listener (required with --etcd; "
                                 "the internal API is never on the public port)", metavar="HOST:PORT")
    cluster_tls_cert: Path | None = option(None, "cluster-tls-cert", "this node's certificate, served on "
                                           "--cluster-listen and shown to the other nodes (TLS, mutual)",
                                           metavar="FILE")
    cluster_tls_key: Path | None = option(None, "cluster-tls-key", "the key of --cluster-tls-cert", metavar="FILE")
    cluster_tls_ca: Path | None = option(None, "cluster-tls-ca", "CA every node's certificate must be signed by",
                                         metavar="FILE")
    advertise: str = option("", "advertise", "how the other nodes reach this one's --cluster-listen (default "
                            "http://HOST:PORT of that listener; never a wildcard address)", metavar="URL")
    node_id: str = option("", "node-id", "this node's id in the ring (default the advertised host:port); keep it "
                          "across restarts", metavar="ID")
    cluster_secret_file: Path | None = option(None, "cluster-secret", "file holding the secret node-to-node "
                                              "requests carry (required with --etcd)", metavar="FILE")
    replicas: int = option(2, "replicas", "copies of each instance record in a cluster (capped at the members)")
    member_lease_ttl_s: int = option(10, "member-lease", "seconds a node stays a member after it last reached etcd",
                                     metavar="S")
    dns: str = option("", "dns", "also answer DNS (UDP and TCP) on this address for the saved queries: "
                      "_NAME._tcp.DOMAIN SRV, NAME.DOMAIN A/AAAA (off without it)", metavar="ADDR:PORT")
    dns_domain: str = option("semreg.", "dns-domain", "the DNS zone the saved queries are answered in", metavar="DOMAIN")
    dns_ttl_s: int = option(5, "dns-ttl", "seconds a DNS answer may be cached", metavar="S")
    dns_rate_per_s: float = option(200.0, "dns-rate", "DNS queries a second per client address (as many at once); "
                                   "past it REFUSED; 0 = no limit", metavar="QPS")
    dns_tcp_connections: int = option(256, "dns-tcp-connections", "DNS TCP connections held at once; past it a "
                                      "newcomer takes the place of the longest waiting one of the address holding "
                                      "the most", metavar="N")
    dns_tcp_per_address: int = option(16, "dns-tcp-per-address", "DNS TCP connections one client address may hold; "
                                      "past it a new one is closed at once", metavar="N")
    dns_tcp_timeout_s: float = option(10.0, "dns-tcp-timeout", "seconds a DNS TCP connection has to send a whole "
                                      "message, from its opening or its last answer; then it is closed", metavar="S")
    dns_tcp_write_timeout_s: float = option(10.0, "dns-tcp-write-timeout", "seconds a DNS TCP client has to take an "
                                            "answer; then its connection is closed", metavar="S")
    consul_listen: str = option("", "consul-listen", "also serve the Consul-compatible HTTP API (agent, catalog, "
                                "health, status) on this address, over this node's registry and saved queries "
                                "(off without it; Consul's own port is 8500)", metavar="ADDR:PORT")
    json_body_limit_bytes: int = option(4 * MiB, "json-body-limit", "largest JSON body (413 past it)", metavar="BYTES")
    ontology_body_limit_bytes: int = option(32 * MiB, "ontology-body-limit", "largest ontology upload",
                                            metavar="BYTES")
    ontology_xml_depth: int = option(100, "ontology-xml-depth", "deepest an RDF/XML upload's elements may nest (400 "
                                     "past it: parsing takes time quadratic in the depth)", metavar="N")
    restore_body_limit_bytes: int = option(1024 * MiB, "restore-body-limit", "largest backup POST /v1/restore takes",
                                           metavar="BYTES")
    restore_inflated_limit_bytes: int = option(8192 * MiB, "restore-inflated-limit", "most bytes a backup may "
                                               "inflate to (400 as soon as it passes them, while it streams)",
                                               metavar="BYTES")
    restore_line_limit_bytes: int = option(16 * MiB, "restore-line-limit", "longest line a backup may have, and most "
                                           "text one registration's tags and meta may hold (400 naming the line)",
                                           metavar="BYTES")
    sparql: bool = option(True, "sparql", "serve /sparql from a replica of the whole registry on this node; with "
                          "--no-sparql the node keeps no replica and, in a ring, forwards /sparql to a member that "
                          "serves it (alone: 501)")
    sparql_replica: str = option("disk", "sparql-replica", "where the query processes read the registry from: disk "
                                 "(a replica in DATA_DIR/sparql, read from checkpoints; memory stays flat as the "
                                 "registry grows) or memory (a copy in each process, ~12 KiB an instance); without a "
                                 "data directory, memory", choices=("disk", "memory"))
    sparql_time_limit_s: float = option(10.0, "sparql-time-limit", "SPARQL query time limit (503 past it, and the "
                                        "query stops)", metavar="S")
    sparql_result_limit: int = option(100_000, "sparql-result-limit", "most rows or triples a SPARQL answer may have",
                                      metavar="N")
    sparql_workers: int = option(2, "sparql-workers", "query processes kept ready for /sparql", metavar="N")
    sparql_max_workers: int = option(8, "sparql-max-workers", "SPARQL queries evaluated at once, each in its own "
                                     "process; more wait their turn", metavar="N")
    sparql_memory_limit_mib: int = option(2048, "sparql-memory-limit", "memory a SPARQL query may take, in MiB; "
                                          "0 = no cap", metavar="MIB")
    sparql_prestart: bool = True  # start the query processes with the node, not at the first query
    sparql_in_server: bool = option(False, "sparql-in-server", "answer /sparql on the server's event loop (the "
                                    "queries still run in the query processes) instead of handing SPARQL "
                                    "connections to those processes; slower, for comparison")
    forwarded_allow_ips: str = option("127.0.0.1", "forwarded-allow-ips", "addresses (comma-separated, CIDR or *) "
                                      "whose X-Forwarded-For and X-Forwarded-Proto are believed, on every route",
                                      metavar="IPS", env="FORWARDED_ALLOW_IPS")
    max_tags_per_instance: int = option(10_000, "max-tags", "most tags an instance may have", metavar="N")
    max_batch_instances: int = option(10_000, "max-batch", "most instances a batch may hold", metavar="N")
    watch_max_wait_s: float = 300.0
    # request work: budgets, time, and the load it sheds (semreg.work; docs/operations/limits.md)
    max_scored: int = option(200_000, "max-scored", "terms one question may look at and score for closeness in "
                             "meaning (the similar degree), over all its patterns; past it 400", metavar="N")
    max_expanded: int = option(2_000_000, "max-expanded", "registered terms one question's components may reach "
                               "through the hierarchies, over all its patterns; past it 400", metavar="N")
    max_walked: int = option(4_000_000, "max-walked", "registered tags one question may look at to find those that "
                             "match, over all its patterns; past it 400", metavar="N")
    max_matched: int = option(4_000_000, "max-matched", "instances one question may gather from the tags that match, "
                              "over all its patterns, before its limit; past it 400", metavar="N")
    work_time_limit_s: float = option(10.0, "work-time-limit", "seconds one request's work may run on the node "
                                      "(questions, saved queries' checks, expansions); past it 503", metavar="S")
    work_queue: int = option(256, "work-queue", "requests whose work may wait for the node at once; past it 503 "
                             "with Retry-After", metavar="N")
    shed_late_share: float = option(0.5, "shed-late-share", "share of the last 2 s the event loop may spend running "
                                    "late before new request work is refused with 503 and Retry-After (0: never)",
                                    metavar="SHARE")
    stall_log_s: float = option(0.1, "stall-log", "log where the event loop was whenever it stalls longer than "
                                "this (0: off)", metavar="S")
    rate_limit_per_s: float = option(0.0, "rate-limit", "requests a second per token (per client address without "
                                     "tokens); 0 = no limit", metavar="RPS")
    rate_burst: float = option(0.0, "rate-burst", "requests a caller may make at once before the rate applies "
                               "(0: one second's worth)", metavar="N")
    auth_failure_addresses: int = option(20, "auth-failure-addresses", "client addresses named in "
                                         "semreg_auth_failures_total, those that failed last; the others are "
                                         "counted as address=\"other\"", metavar="N")
    auth_failure_log_rate: float = option(10.0, "auth-failure-log-rate", "log lines a second about failed "
                                          "authentications, in all (and at most one a second per address); the "
                                          "failures left out are counted in their address's next line",
                                          metavar="N")
    balance_limit: bool = option(False, "balance-limit", "never route to an instance whose load has reached its "
                                 "capacity (503 instead)")
    strict_terms: bool = option(False, "strict-terms", "refuse (400) a tag or query that names a term no uploaded "
                                "ontology knows, instead of answering with a warning")
    verbose_routing: bool = option(False, "verbose-routing", "log one structured line per routing decision")
    service_stop_timeout_s: float = option(120.0, "service-stop-timeout", "seconds each of the node's services may "
                                           "take to stop (a listener's drain, the ring's hand-off, the RDF writer's "
                                           "last writes); past it the next one stops all the same", metavar="S")
    log_level: str = option("info", "log-level", "how much to log", choices=("debug", "info", "warning", "error"))
    log_format: str = option("json", "log-format", "json (one object a line) or text", choices=("json", "text"))

    @property
    def in_memory(self) -> bool:
        return self.data_dir is None

    @property
    def sparql_replica_dir(self) -> Path | None:
        """Where the query replica lives on disk (`semreg.sparql.checkpoints`), or None: in the processes' memory."""
        if self.sparql_replica != "disk" or self.data_dir is None:
            return None
        return self.data_dir / SPARQL_REPLICA_DIR

    def replace(self, **changes: Any) -> Settings:
        return dataclasses.replace(self, **changes)


def options() -> list[dataclasses.Field[Any]]:
    """The settings a person may set, in declaration order."""
    return [f for f in dataclasses.fields(Settings) if "flag" in f.metadata]


def parse_duration_s(text: str) -> float:
    """`30`, `30s`, `500ms`, `2m` → seconds; ValueError on anything else."""
    text = text.strip().lower()
    for suffix, unit in (("ms", 0.001), ("s", 1.0), ("m", 60.0), ("h", 3600.0)):
        if text.endswith(suffix):
            value, scale = float(text[: -len(suffix)]), unit
            break
    else:
        value, scale = float(text), 1.0
    if value != value or value < 0 or value == float("inf"):
        raise ValueError(f"not a duration: {text!r}")
    return value * scale


def environment(env: Mapping[str, str]) -> dict[str, str]:
    """The `SEMREG_*` variables that set a flag, by field name."""
    return {f.name: env[f.metadata["env"]] for f in options() if f.metadata["env"] in env}
