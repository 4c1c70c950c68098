"""`semreg ontology put|get|list|delete`: the registry's ontologies."""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from semreg.cli.common import client_for, command, common_options
from semreg.cli.output import UsageError, print_json, say, table
from semreg.client.calls import Progress
from semreg.rdf import media

LARGE_BYTES = 1024 * 1024  # files from this size get a progress bar when stderr is a terminal


@contextlib.contextmanager
def upload_progress(name: str, size: int, show: bool) -> Iterator[Progress | None]:
    """A rich progress bar on stderr, fed by `(sent, total)` calls; then a spinner while the server reasons."""
    if not show:
        yield None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        SpinnerColumn,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )
    from rich.progress import Progress as Bar

    bar = Bar(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), DownloadColumn(),
              TransferSpeedColumn(), TimeRemainingColumn(), console=Console(stderr=True))
    with bar:
        task = bar.add_task(f"uploading {name}", total=size)

        def update(sent: int, total: int) -> None:
            bar.update(task, completed=sent,
                       description=f"{name}: reasoning" if sent >= total else f"uploading {name}")

        yield update


def run_put(args: argparse.Namespace) -> int:
    client = client_for(args)
    content_type = args.content_type
    data: bytes | Path
    path = Path(args.file)
    if args.file == "-" or (path.exists() and not path.is_file() and not path.is_dir()):
        # stdin, or what reads like it: /dev/null, /dev/stdin, a pipe such as <(curl ...); Turtle unless told
        data = _read(sys.stdin.buffer if args.file == "-" else path)
        size = len(data)
        if content_type is None and args.file != "-":
            content_type = media.of_file(path)
    else:
        if path.is_dir():
            raise UsageError(f"{args.file} is a directory; give an RDF file.")
        if not path.is_file():
            raise UsageError(f"{args.file}: no such file.")
        if content_type is None and media.of_file(path) is None:
            raise UsageError(f"cannot tell the RDF format of {path.name} from its suffix; give --content-type.")
        data = path
        size = path.stat().st_size
    show = args.progress if args.progress is not None else (size >= LARGE_BYTES and sys.stderr.isatty())
    with upload_progress(args.name, size, bool(show) and isinstance(data, Path)) as progress:
        result = client.put_ontology(args.name, data, content_type=content_type, progress=progress)
    if args.json:
        print_json(result)
    else:
        say(f"uploaded {result.get('name', args.name)}: {result.get('triples')} triples, "
            f"{result.get('inferred')} inferred by it (of {result.get('inferred_total', '?')} in the closure), "
            f"{result.get('concepts', '?')} concepts; reasoning {result.get('reasoning_ms', '?')} ms")
    return 0


def _read(source: Any) -> bytes:
    if isinstance(source, Path):
        try:
            return source.read_bytes()
        except OSError as exc:
            raise UsageError(f"{source}: {exc.strerror or exc}.") from None
    return source.read()


def run_get(args: argparse.Namespace) -> int:
    accept = args.accept or media.WRITTEN["jsonld" if args.json else args.format]
    text = client_for(args).get_ontology(args.name, accept=accept)
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0


def run_list(args: argparse.Namespace) -> int:
    items = client_for(args).ontologies()
    if args.json:
        print_json(items)
    elif not items:
        say("no ontologies.")
    else:
        table(["NAME", "TRIPLES", "INFERRED", "UPLOADED", "MEDIA TYPE"],
              [[o["name"], o.get("triples"), o.get("inferred"), o.get("uploaded_at"), o.get("media_type")]
               for o in items])
    return 0


def run_delete(args: argparse.Namespace) -> int:
    client_for(args).delete_ontology(args.name)
    if args.json:
        print_json({"name": args.name, "deleted": True})
    else:
        say(f"deleted {args.name}")
    return 0


def add_parser(sub: argparse._SubParsersAction, env: Mapping[str, str] = os.environ) -> None:
    common = common_options(env)
    parent = sub.add_parser("ontology", help="upload, fetch, list or delete ontologies",
                            description="Manage the registry's ontologies.")
    osub = parent.add_subparsers(dest="ontology_command", required=True, metavar="ACTION")

    p: Any = command(osub, "put", common, "upload or replace an ontology from a file", run_put)
    p.add_argument("name", help="the ontology's name in the registry")
    p.add_argument("file", help=f"RDF file ({' '.join(sorted(media.FILE_SUFFIXES))}), or - for stdin (Turtle by "
                   f"default, as for a pipe or a device such as /dev/null)")
    p.add_argument("--content-type", help="media type, when the suffix does not tell it")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress bar on stderr (default: for files of 1 MiB or more, on a terminal)")

    p = command(osub, "get", common, "print an ontology's RDF", run_get, not_found_exit=True)
    p.add_argument("name")
    p.add_argument("--format", choices=sorted(media.WRITTEN), default="turtle", help="default turtle; --json = jsonld")
    p.add_argument("--accept", help="an Accept header, instead of --format")
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")

    command(osub, "list", common, "list the ontologies: their triples, and the entailed triples each one's upload "
                                  "added to the closure (INFERRED)", run_list)

    p = command(osub, "delete", common, "delete an ontology", run_delete, not_found_exit=True)
    p.add_argument("name")
