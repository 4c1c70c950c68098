"""Runnable documentation: the shell and Python blocks of the README and the site that a page marks runnable,
and the output each says it prints (the convention is in docs/development.md, "Runnable documentation").

A block is runnable when the line before its fence is `<!-- runnable -->`. Under each command, the lines
starting `#   ` (a hash and three spaces) are what it prints, stdout and stderr as a terminal shows them. In an
expected line `...` stands for any text (as doctest's ELLIPSIS), and the `date:` header for any date. A page
says which servers its blocks talk to with `<!-- servers: 8080:ontologies/obras.ttl 8081 dns:5353 -->` (a port,
and the ontologies that server preloads, or none; `dns:PORT` when the server on 8080 also answers DNS there, as
`--dns 127.0.0.1:PORT`; `tokens:FILE` when it is started with `--tokens FILE`); without it, the one `python3
dev.py serve` starts (8080, obras)."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

RUNNABLE = re.compile(r"^<!-- runnable -->\n```(sh|python)\n(.*?)^```", re.M | re.S)
SERVERS = re.compile(r"^<!-- servers: (.*?) -->$", re.M)
OUTPUT = "#   "
DEFAULT_SERVERS = {8080: ("ontologies/obras.ttl",)}
DATE = re.compile(r"^date: \w{3}, \d\d \w{3} \d{4} \d\d:\d\d:\d\d GMT$")


@dataclass(frozen=True)
class Block:
    language: str  # "sh" or "python"
    code: str
    expected: tuple[str, ...]  # the lines it says it prints


def blocks(page: Path) -> list[Block]:
    """The page's runnable blocks, in order."""
    out = []
    for language, code in RUNNABLE.findall(page.read_text(encoding="utf-8")):
        expected = tuple(line[len(OUTPUT):].rstrip() if line.startswith(OUTPUT) else ""
                         for line in code.splitlines() if line.startswith(OUTPUT) or line == OUTPUT.rstrip())
        out.append(Block(language, code, expected))
    return out


def servers(page: Path) -> dict[int, tuple[str, ...]]:
    """Port → the ontologies the server there preloads, as the page declares them."""
    found = SERVERS.search(page.read_text(encoding="utf-8"))
    if found is None:
        return dict(DEFAULT_SERVERS)
    out: dict[int, tuple[str, ...]] = {}
    for item in found.group(1).split():
        port, _, ontologies = item.partition(":")
        if port.isdigit():
            out[int(port)] = tuple(o for o in ontologies.split(",") if o)
    return out


def option(page: Path, name: str) -> str | None:
    """What the page's servers line says after `NAME:` (`dns:5353` → "5353"), if it says it."""
    found = SERVERS.search(page.read_text(encoding="utf-8"))
    values = [item.partition(":")[2] for item in (found.group(1).split() if found else ()) if item.startswith(name + ":")]
    return values[0] if values else None


def dns_port(page: Path) -> int | None:
    """The DNS port the page's blocks ask (`dig -p PORT`), if the page declares one."""
    port = option(page, "dns")
    return int(port) if port is not None else None


def matches(expected: str, got: str) -> bool:
    """One printed line against the line the page says: `...` is any text; a `date:` header any date."""
    if DATE.match(expected):
        return bool(DATE.match(got))
    pattern = ".*?".join(re.escape(part) for part in expected.split("..."))
    return re.fullmatch(pattern, got) is not None


def differences(expected: tuple[str, ...], printed: str) -> list[str]:
    """What differs between what a block printed and what its page says it prints (nothing: [])."""
    got = [line.rstrip() for line in printed.replace("\r", "").splitlines()]
    if len(got) != len(expected):
        return [f"printed {len(got)} lines, the page says {len(expected)}:", *got]
    return [f"printed {g!r}, the page says {e!r}" for e, g in zip(expected, got) if not matches(e, g)]
