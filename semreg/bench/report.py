"""Targets, the machine a run happened on, and the two outputs: rich tables or one JSON object."""
from __future__ import annotations

import operator
import os
import platform
import sys
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata

from rich.console import Console
from rich.table import Table

_OPS = {">=": operator.ge, "<=": operator.le}


@dataclass(frozen=True)
class Target:
    """A speed goal on one figure, named by a dotted path into the scenario's figures."""

    label: str
    path: str
    op: str  # ">=" or "<="
    value: float
    unit: str = ""

    def check(self, figures: dict) -> dict:
        value = lookup(figures, self.path)
        met = _OPS[self.op](value, self.value) if isinstance(value, (int, float)) else None
        return {"label": self.label, "figure": self.path, "value": value, "op": self.op, "target": self.value,
                "unit": self.unit, "met": met}


def lookup(figures: dict, path: str):
    value = figures
    for key in path.split("."):
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return value


def machine() -> dict:
    from semreg.bench.peers import tool_version

    def version(dist: str) -> str | None:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return None

    cpu = None
    try:
        with open("/proc/cpuinfo") as info:
            cpu = next((line.split(":", 1)[1].strip() for line in info if line.startswith("model name")), None)
    except OSError:
        pass
    try:
        memory_gib = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1024**3, 1)
    except (ValueError, OSError, AttributeError):
        memory_gib = None
    return {
        "cores": os.cpu_count(),
        "cores_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "cpu": cpu,
        "memory_gib": memory_gib,
        "load_average": [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None,
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "semreg": version("semreg"),
        "pyoxigraph": version("pyoxigraph"),
        "oxigraph_server": tool_version("oxigraph"),
        "etcd": tool_version("etcd"),
        "wrk": tool_version("wrk"),
    }


# -- human output ------------------------------------------------------------------------------------------
def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:,.1f}" if abs(value) >= 100 else f"{value:,.3g}" if abs(value) < 1 else f"{value:,.2f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def _flatten(figures: dict, prefix: str = "") -> list[tuple[str, object]]:
    rows = []
    for key, value in figures.items():
        if key in ("peers", "targets") and not prefix:
            continue
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value and len(value) <= 12:
            rows.extend(_flatten(value, name + "."))
        else:
            rows.append((name, value))
    return rows


PEER_COLUMNS = (("requests_per_s", "req/s"), ("p50_ms", "p50 ms"), ("p90_ms", "p90 ms"), ("p99_ms", "p99 ms"),
                ("max_ms", "max ms"), ("errors", "errors"))


def print_scenario(console: Console, name: str, summary: str, figures: dict,
                   render: Callable[[dict], list[list[str]]] | None = None) -> None:
    console.rule(f"[bold]{name}[/] — {summary}")
    if "error" in figures:
        console.print(f"[red]error:[/] {figures['error']}", highlight=False)
    elif render is not None:
        header, *lines = render(figures)
        table = Table(title=name, title_justify="left")
        for n, column in enumerate(header):
            table.add_column(column, justify="left" if n < 2 else "right")
        for line in lines:
            table.add_row(*line)
        console.print(table)
    peers = figures.get("peers") or {}
    if peers:
        table = Table(title="wrk", title_justify="left")
        table.add_column("peer")
        for _key, title in PEER_COLUMNS:
            table.add_column(title, justify="right")
        for label, result in peers.items():
            table.add_row(label, *(_fmt(result.get(key)) for key, _title in PEER_COLUMNS))
        console.print(table)
    rows = [(k, v) for k, v in _flatten(figures) if k != "error"]
    if rows:
        table = Table(title="figures", title_justify="left", show_header=False)
        table.add_column("figure", style="dim", overflow="fold")
        table.add_column("value", overflow="fold")
        for key, value in rows:
            table.add_row(key, _fmt(value))
        console.print(table)
    targets = figures.get("targets") or []
    if targets:
        table = Table(title="targets", title_justify="left")
        for column in ("target", "figure", "value", "goal", "met"):
            table.add_column(column, justify="right" if column in ("value", "goal") else "left", overflow="fold")
        for t in targets:
            met = {True: "[green]yes[/]", False: "[red]no[/]", None: "[yellow]n/a[/]"}[t["met"]]
            unit = f" {t['unit']}" if t["unit"] else ""
            table.add_row(t["label"], t["figure"], _fmt(t["value"]) + (unit if t["value"] is not None else ""),
                          f"{t['op']} {_fmt(t['target'])}{unit}", met)
        console.print(table)


def print_machine(console: Console, info: dict) -> None:
    parts = [f"{info['cores']} cores", info.get("cpu") or "", f"Python {info['python']}",
             f"load {info.get('load_average')}"]
    versions = ", ".join(f"{k} {v}" for k, v in info.items()
                         if k in ("semreg", "pyoxigraph", "oxigraph_server", "etcd", "wrk") and v)
    console.print(" · ".join(p for p in parts if p), highlight=False)
    console.print(versions, style="dim", highlight=False)
