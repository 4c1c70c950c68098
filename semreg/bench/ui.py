"""Progress on the terminal (stderr): one live rich display with a line per running step."""
from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Self

from rich.console import Console
from rich.progress import BarColumn, Progress, ProgressColumn, SpinnerColumn, Task, TextColumn, TimeElapsedColumn
from rich.text import Text


class _Count(ProgressColumn):
    """`done/total`, or nothing for a step without a total (a wrk run, a start-up)."""

    def render(self, task: Task) -> Text:
        return Text("" if task.total is None else f"{int(task.completed):,}/{int(task.total):,}", style="progress.download")


class Steps:
    """`with ui.step("loading", total=n) as advance: advance(k)`; a finished step leaves one log line."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(stderr=True)
        self._progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(bar_width=30),
                                  _Count(), TimeElapsedColumn(), console=self.console, transient=True)

    def __enter__(self) -> Self:
        self._progress.start()
        return self

    def __exit__(self, *exc) -> None:
        self._progress.stop()

    def log(self, message: str) -> None:
        self._progress.console.print(message, highlight=False)

    def section(self, title: str) -> None:
        self._progress.console.rule(f"[bold]{title}")

    @contextlib.contextmanager
    def step(self, description: str, total: int | None = None) -> Iterator:
        task = self._progress.add_task(description, total=total)
        started = time.perf_counter()

        def advance(n: int = 1) -> None:
            self._progress.advance(task, n)

        try:
            yield advance
        except BaseException:
            self.log(f"[red]✗[/] {description} ({time.perf_counter() - started:.1f} s)")
            raise
        finally:
            self._progress.remove_task(task)
        self.log(f"[green]✓[/] {description} ({time.perf_counter() - started:.1f} s)")
