"""Running the chosen scenarios with their peers, and printing the figures."""
from __future__ import annotations

import argparse
import contextlib
import shutil
import signal
import sys
import tempfile
import time
import traceback
from pathlib import Path

import httpx
import orjson
from rich.console import Console

from semreg.bench import report
from semreg.bench.context import BenchContext
from semreg.bench.peers import BenchError, MissingTool, Peers, find_tool
from semreg.bench.scenarios import SCENARIOS, default_names
from semreg.bench.scenarios.common import Scenario
from semreg.bench.settings import BenchSettings, from_args
from semreg.bench.ui import Steps


def run(args: argparse.Namespace) -> int:
    console = Console(stderr=True)
    try:
        settings = from_args(args, tuple(SCENARIOS))
    except ValueError as exc:
        console.print(f"[red]semreg bench:[/] {exc}", highlight=False)
        return 2
    chosen = [SCENARIOS[name] for name in (settings.only or default_names())]
    try:
        for tool in sorted({tool for s in chosen for tool in s.needs}):
            find_tool(tool)
    except MissingTool as exc:
        console.print(f"[red]semreg bench:[/] {exc}", highlight=False)
        return 2
    with _terminate_as_interrupt():
        results, machine = execute(settings, chosen, console)
    output = {"machine": machine, "settings": settings.public(), "scenarios": results}
    if settings.json:
        sys.stdout.write(orjson.dumps(output, option=orjson.OPT_INDENT_2).decode() + "\n")
        sys.stdout.flush()
    else:
        out = Console()
        report.print_machine(out, machine)
        for scenario in chosen:
            report.print_scenario(out, scenario.name, scenario.summary, results[scenario.name], scenario.render)
    return 1 if any("error" in figures for figures in results.values()) else 0


def execute(settings: BenchSettings, chosen: list[Scenario], console: Console) -> tuple[dict, dict]:
    """Run the scenarios in order; every peer started is stopped before this returns or raises."""
    machine = report.machine()
    workdir = Path(tempfile.mkdtemp(prefix="semreg-bench-"))
    peers = Peers(workdir)
    results: dict[str, dict] = {}
    try:
        with Steps(console) as ui:
            ctx = BenchContext(settings, ui, peers)
            try:
                for scenario in chosen:
                    results[scenario.name] = run_scenario(ctx, scenario)
            finally:
                with contextlib.suppress(Exception):
                    ctx.cleanup()
    finally:
        try:
            peers.close()
        finally:
            if settings.keep_temp:
                console.print(f"peer data and logs kept in {workdir}", highlight=False)
            else:
                shutil.rmtree(workdir, ignore_errors=True)
    return results, machine


def run_scenario(ctx: BenchContext, scenario: Scenario) -> dict:
    ctx.ui.section(scenario.name)
    started = time.perf_counter()
    try:
        figures = scenario.run(ctx)
    except BenchError as exc:
        figures = {"error": str(exc)}
    except httpx.HTTPError as exc:  # a peer went away or hung: one line is enough
        request = getattr(exc, "_request", None)
        where = f" on {request.method} {request.url}" if request is not None else ""
        figures = {"error": f"{type(exc).__name__}{where}: {exc}"}
    except Exception as exc:
        figures = {"error": f"{type(exc).__name__}: {exc}"}
        ctx.ui.log(traceback.format_exc())
    if "error" in figures:
        ctx.ui.log(f"[red]{scenario.name} failed:[/] {figures['error']}")
    else:
        figures["targets"] = [target.check(figures) for target in scenario.targets]
    figures["elapsed_s"] = round(time.perf_counter() - started, 1)
    return figures


@contextlib.contextmanager
def _terminate_as_interrupt():
    """SIGTERM and SIGHUP unwind like Ctrl-C, so the `finally` blocks stop the peers."""
    def interrupt(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")

    previous = {}
    with contextlib.suppress(ValueError):  # not the main thread: leave signals alone
        for sig in (signal.SIGTERM, signal.SIGHUP):
            previous[sig] = signal.signal(sig, interrupt)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
