"""Server settings: one frozen object, units in field names, every flag also read from `SEMREG_*`."""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

MiB = 1024 * 1024


@dataclass(frozen=True)
class Settings:
    host: str = "127.0.0.1"
    port: int = 8080
    data_dir: Path | None = Path("semreg-data")  # None: in memory, nothing kept
    ontologies: tuple[Path, ...] = ()
    tokens_file: Path | None = None
    insecure: bool = False
    peers: tuple[str, ...] = ()
    replicas: int = 2
    json_body_limit_bytes: int = 4 * MiB
    ontology_body_limit_bytes: int = 32 * MiB
    sparql_time_limit_s: float = 10.0
    sparql_result_limit: int = 100_000
    sparql_workers: int = 2  # query processes kept ready
    sparql_max_workers: int = 8  # queries evaluated at once; more wait their turn
    sparql_memory_limit_mib: int = 2048  # address space a query process may add to what it forked with
    sparql_prestart: bool = True  # start the query processes with the node, not at the first query
    max_tags_per_instance: int = 10_000
    max_batch_instances: int = 10_000
    watch_max_wait_s: float = 300.0
    rate_limit_per_s: float = 0.0  # 0: no limit
    rate_burst: float = 0.0  # 0: one second's worth
    reap_interval_s: float = 0.25
    log_level: str = "info"
    log_format: str = "json"  # json | text
    verbose_routing: bool = False
    balance_limit: bool = False
    extra: Mapping[str, str] = field(default_factory=dict)

    @property
    def in_memory(self) -> bool:
        return self.data_dir is None

    def replace(self, **changes) -> "Settings":
        return dataclasses.replace(self, **changes)


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
