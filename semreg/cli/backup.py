"""`semreg backup FILE` and `semreg restore FILE [--force]`: the whole registry (instances, ontologies as
uploaded, client-set prefixes, saved queries) to one gzipped N-Quads file and back (`GET /v1/backup`,
`POST /v1/restore`).

A backup is written to `FILE.part`, checked whole, then renamed: a cut download never leaves a file that
looks like a backup. A restore checks the whole file before sending anything, as the server will, with the
same two limits (`--restore-inflated-limit`, `--restore-line-limit`, read from the same SEMREG_* variables as
`semreg serve`'s), and names the line where a corrupt, truncated or oversized one breaks. Both show progress on
stderr when it is a terminal, and nothing else there otherwise.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any

import httpx

from semreg import config
from semreg.cli.common import client_for, command, common_options
from semreg.cli.output import API_ERROR, UsageError, print_json, say, warn
from semreg.client import Client, Unreachable
from semreg.client.calls import describe_transport_error, error_from
from semreg.storage import backup, backup_reading
from semreg.storage.lines import Limits

LIMITS = ("restore_inflated_limit_bytes", "restore_line_limit_bytes")  # settings both sides apply to a backup


class _Quiet:
    """What a run shows when stderr is not a terminal: nothing."""

    def __enter__(self) -> _Quiet:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    @contextlib.contextmanager
    def step(self, description: str, total: int | None = None) -> Iterator[Callable[[int], None]]:
        yield _nothing


def _nothing(n: int = 1) -> None:
    return None


def _progress(args: argparse.Namespace) -> Any:
    show = args.progress if args.progress is not None else sys.stderr.isatty()
    if not show:
        return _Quiet()
    from semreg.bench.ui import Steps

    return Steps()


def _absolute(advance: Callable[[int], None]) -> Callable[..., None]:
    """`advance(delta)` fed from a callback that says how far it is (`n` so far)."""
    seen = [0]

    def told(n: int, total: int = 0) -> None:
        advance(n - seen[0])
        seen[0] = n
    return told


def _check(path: Path, ui: Any, limits: Limits, shown: str | None = None) -> dict[str, int] | None:
    """What the backup in `path` holds, read whole; None (the reason said) when it is not a complete one."""
    with ui.step(f"checking {shown or path.name}", total=path.stat().st_size) as advance, open(path, "rb") as f:
        try:
            with backup_reading.read(f, _absolute(advance), limits) as contents:
                return contents.counts()
        except backup.BadBackup as exc:
            warn(f"{path}: {exc.message}")
            return None


def _limits(args: argparse.Namespace) -> Limits:
    return Limits(args.restore_inflated_limit_bytes, args.restore_line_limit_bytes)


def _download(client: Client, into: IO[bytes], advance: Callable[[int], None]) -> None:
    """`GET /v1/backup` streamed into `into`, from the first registry URL that answers."""
    timeout = httpx.Timeout(client.timeout_s, read=max(client.timeout_s, 600.0))
    failed: list[tuple[str, str]] = []
    for url in client.urls:
        try:
            with client.http.stream("GET", url + "/v1/backup", timeout=timeout) as response:
                if response.status_code >= 400:
                    response.read()
                    raise error_from(response, "/v1/backup")
                for chunk in response.iter_bytes():
                    into.write(chunk)
                    advance(len(chunk))
                return
        except httpx.TransportError as exc:
            failure = describe_transport_error(exc)
            if failure is None:
                raise
            failed.append((url, failure[0]))
            into.seek(0)
            into.truncate()
    raise Unreachable("no registry URL could be reached: " + "; ".join(f"{u}: {r}" for u, r in failed), failed)


def run_backup(args: argparse.Namespace) -> int:
    client = client_for(args)
    path = Path(args.file)
    if path.is_dir():
        raise UsageError(f"{args.file} is a directory; give the backup file's name.")
    part = path.with_name(path.name + ".part")
    try:
        with _progress(args) as ui:
            with ui.step("downloading the backup") as advance, open(part, "wb") as f:
                _download(client, f, advance)
            counts = _check(part, ui, _limits(args), path.name)
        if counts is None:
            warn("no backup was written.")
            return API_ERROR
        os.replace(part, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            part.unlink()
        client.close()
    if args.json:
        print_json({**counts, "file": str(path), "bytes": path.stat().st_size})
    else:
        say(f"backed up {counts['instances']} instances, {counts['ontologies']} ontologies, {counts['prefixes']} "
            f"prefixes and {counts['queries']} saved queries to {path} ({path.stat().st_size:,} bytes)")
    return 0


def run_restore(args: argparse.Namespace) -> int:
    path = Path(args.file)
    if not path.is_file():
        raise UsageError(f"{args.file}: no such file." if not path.exists() else f"{args.file} is not a file.")
    client = client_for(args)
    try:
        with _progress(args) as ui:
            if _check(path, ui, _limits(args)) is None:
                warn("nothing was restored.")
                return API_ERROR
            with ui.step("restoring (sending, then applying)", total=path.stat().st_size) as advance:
                result = client.restore(path, force=args.force, progress=_absolute(advance))
    finally:
        client.close()
    if args.json:
        print_json(result)
    else:
        say(f"restored {result.get('instances')} instances, {result.get('ontologies')} ontologies, "
            f"{result.get('prefixes')} prefixes and {result.get('queries', 0)} saved queries from {path}")
    return 0


def add_parser(sub: argparse._SubParsersAction, env: Mapping[str, str] = os.environ) -> None:
    common = common_options(env)
    progress_help = "progress bars on stderr (default: when stderr is a terminal)"
    p = command(sub, "backup", common, "write the whole registry (instances, ontologies as uploaded, client-set "
                "prefixes) to a gzipped N-Quads file, while it keeps serving (admin token)", run_backup)
    p.add_argument("file", help="the backup file to write, e.g. registry.nq.gz")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None, help=progress_help)
    _limit_options(p, env)
    p = command(sub, "restore", common, "load a backup into an empty registry, node or ring (admin token); the "
                "whole file is checked first", run_restore)
    p.add_argument("file", help="a file semreg backup (or GET /v1/backup) wrote")
    p.add_argument("--force", action="store_true",
                   help="restore into a registry that holds something: the backup's instances, ontologies and "
                        "prefixes replace those of the same id or name; nothing else is removed")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None, help=progress_help)
    _limit_options(p, env)


def _limit_options(p: argparse.ArgumentParser, env: Mapping[str, str]) -> None:
    """The limits a restore reads a backup with, as `semreg serve` takes them (flag, SEMREG_* variable, default):
    the file is checked here as the server will check it."""
    from_env = config.environment(env)
    for f in config.options():
        if f.name in LIMITS:
            meta = f.metadata
            p.add_argument("--" + meta["flag"], dest=f.name, type=int, metavar=meta["metavar"],
                           default=from_env.get(f.name, f.default),
                           help=f"{meta['help']} (env {meta['env']}; default {f.default}, as the server's)")
