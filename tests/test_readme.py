"""The README's Quick start, run as a reader runs it: its shell blocks in bash (curl against the server on a
loopback port, through uvicorn as `python3 dev.py serve` runs it), then its Python block, in order, with
a reader's pause before each step. The server is on a fake clock, so a pause is minutes, not a sleep:
longer than the default ttl (30 s) and `deregister_after` (90 s), which is how the example used to fail
its readers. What each command prints is checked against what the README says it prints.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from support.paths import ONTOLOGIES, ROOT

pytestmark = pytest.mark.process

README = ROOT / "README.md"
SERVED = "http://127.0.0.1:8080"  # the address the README's commands name (dev.py serve's)
READER_PAUSE_S = 180.0  # reading the next paragraph, then typing the command
EX = "http://example.org/obras#"
DATE = re.compile(r"^date: \w{3}, \d\d \w{3} \d{4} \d\d:\d\d:\d\d GMT$")


def quick_start() -> list[tuple[str, str]]:
    """The Quick start's code blocks, in order: `(language, text)`."""
    text = README.read_text(encoding="utf-8")
    section = text.split("## Quick start: the case study", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```(sh|python)\n(.*?)```", section, re.S)


def steps(block: str) -> list[tuple[str, list[str]]]:
    """A block's commands, each with the output its `#   ` comment lines say it prints."""
    out: list[tuple[str, list[str]]] = []
    for line in block.splitlines():
        if line.startswith("#   ") and out:
            out[-1][1].append(line[4:])
        elif line.strip():
            out.append((line, []))
    return out


@pytest.fixture
def server(in_process):
    srv = in_process(ontologies=(ONTOLOGIES / "obras.ttl",))  # as `python3 dev.py serve` preloads it
    return srv, srv.listen()


def bash(script: str, url: str) -> str:
    done = subprocess.run(["bash", "-c", script.replace(SERVED, url)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and not done.stderr, done.stderr
    return done.stdout


def test_the_quick_start_as_a_reader_runs_it(server):
    srv, url = server
    blocks = quick_start()
    assert [language for language, _ in blocks] == ["sh", "sh", "python"]
    (_, registrations), (_, questions), (_, python) = blocks

    srv.advance(READER_PAUSE_S)
    printed = [json.loads(line) for line in bash(registrations, url).splitlines()]
    assert [(v["id"], v["status"]) for v in printed] == [(n, "up") for n in ("gw", "livros", "filmes", "pinturas")]
    assert not any("warnings" in v for v in printed), "the example names only terms of the ontology"

    for command, said in steps(questions):
        srv.advance(READER_PAUSE_S)  # the registrations are still there
        output = bash(command, url)
        if any("..." in line for line in said):  # a sketch of a JSON answer: the facts it shows
            answer = json.loads(output)
            assert [(m["tag"]["s"], m["degree"], m["distance"], m["instances"]) for m in answer["matches"]] == [
                (EX + "Filme", "narrower", 1, [{"id": "filmes"}]), (EX + "Livro", "narrower", 1, [{"id": "livros"}])]
            assert answer["truncated"] is False
            assert [(v["id"], v["match"]["degree"], v["match"]["distance"]) for v in answer["instances"]] == [
                ("filmes", "narrower", 1), ("livros", "narrower", 1)]
            assert all(f'"{part}"' in " ".join(said) for part in ("matches", "truncated", "instances"))
        else:  # printed as it is
            lines = [line.rstrip("\r") for line in output.splitlines()]
            assert len(lines) == len(said), (lines, said)
            for got, expected in zip(lines, said):
                if DATE.match(expected):
                    assert DATE.match(got), got
                else:
                    assert got == expected.replace(SERVED, url)

    srv.advance(READER_PAUSE_S)
    ran = subprocess.run([sys.executable, "-c", python.replace(SERVED, url)], capture_output=True, text=True,
                         timeout=60, cwd=ROOT)
    assert ran.returncode == 0, ran.stderr
    said = [line.removeprefix("#   ") for line in python.splitlines() if line.startswith("#   ")]
    assert ran.stdout.splitlines() == said == ["['filmes', 'livros']"]
