"""The documentation, run as a reader runs it: every runnable block of the README, the quick start, the how-to
guides and every other page (tests/support/runnable.py says how a page marks one), in order, against the servers the page
says are running (apps in this process served through uvicorn as `semreg serve` serves them), each block's
output compared with what the page says it prints. The servers are on a fake clock, and before each block a
reader's pause passes: minutes, not a sleep, longer than the default ttl (30 s) and `deregister_after` (90 s),
so an example that only works when typed fast fails here."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import runnable
from support.paths import ROOT

pytestmark = pytest.mark.process

DOCS = ROOT / "docs"
# Pages whose runnable blocks the suite runs: what a newcomer types first, then every page of the site.
FIRST = [ROOT / "README.md", DOCS / "getting-started" / "quick-start.md"]
PAGES = [*FIRST, *sorted(p for p in DOCS.rglob("*.md") if p not in FIRST)]
READER_PAUSE_S = 180.0  # reading the next paragraph, then typing the command
VENV_BIN = Path(sys.executable).parent  # where `semreg` and `python3` are once the virtualenv is active


def test_the_pages_a_newcomer_reads_first_have_runnable_blocks():
    """The marker is the only thing that puts a block under test: the README's and the quick start's must keep it."""
    for page in FIRST:
        assert runnable.blocks(page), f"{page.relative_to(ROOT)} has no runnable block"


def test_expected_output_allows_what_legitimately_varies_and_nothing_else():
    assert runnable.matches('{"id":"gw",...,"status":"up",...}', '{"id":"gw","port":9000,"status":"up","x":1}')
    assert not runnable.matches('{"id":"gw",...,"status":"up",...}', '{"id":"gw","status":"critical"}')
    assert runnable.matches("date: Tue, 01 Dec 2026 09:00:00 GMT", "date: Sun, 06 Dec 2026 03:24:19 GMT")
    assert not runnable.matches("location: http://127.0.0.1:9002/x", "location: http://127.0.0.1:9001/x")
    assert runnable.differences(("a", "b"), "a\n") != []


@pytest.fixture
def workdir(tmp_path):
    """A directory as a checkout's top level looks to a reader: its ontologies, saved SPARQL queries and docker/."""
    for name in ("ontologies", "queries", "docker"):
        (tmp_path / name).symlink_to(ROOT / name)
    return tmp_path


def start_servers(in_process, page: Path) -> dict[int, tuple[object, str]]:
    started = {}
    dns, tokens = runnable.dns_port(page), runnable.option(page, "tokens")
    for port, ontologies in runnable.servers(page).items():
        extra: dict[str, object] = {}
        if port == 8080 and dns is not None:
            extra.update(dns="127.0.0.1:0", dns_rate_per_s=0)
        if port == 8080 and tokens is not None:
            extra.update(tokens_file=ROOT / tokens)
        srv = in_process(ontologies=tuple(ROOT / o for o in ontologies), **extra)
        started[port] = (srv, srv.listen())
    return started


def run_block(block: runnable.Block, urls: dict[int, str], cwd: Path, dns: tuple[int, int] | None = None) -> str:
    """Run one block against the servers (the page's ports → theirs; `dns`: the page's DNS port and the server's)."""
    code = block.code
    for port, url in urls.items():
        code = code.replace(f"http://127.0.0.1:{port}", url)
    if dns is not None:
        code = code.replace(f"-p {dns[0]} ", f"-p {dns[1]} ")
    env = {**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}", "SEMREG_URL": urls[8080]}
    env.pop("SEMREG_TOKEN", None)
    # `set -e`: a command that fails anywhere in the block fails it, not only the last one
    argv = ["bash", "-c", "set -e\n" + code] if block.language == "sh" else [sys.executable, "-c", code]
    # stdout and stderr together, in the order a terminal shows them
    done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120, cwd=cwd,
                          env=env)
    printed = done.stdout
    for port, url in urls.items():
        printed = printed.replace(url, f"http://127.0.0.1:{port}").replace(url.removeprefix("http://"),
                                                                            f"127.0.0.1:{port}")
    assert done.returncode == 0, f"exit code {done.returncode}:\n{printed}"
    return printed


def pages_to_run() -> list:
    """Each page with runnable blocks; a page that asks DNS drives dig, a program the test command installs."""
    return [pytest.param(p, marks=[pytest.mark.needs_tool("dig", "dnsutils")] if runnable.dns_port(p) else [])
            for p in PAGES if runnable.blocks(p)]


@pytest.mark.parametrize("page", pages_to_run(), ids=lambda p: str(p.relative_to(ROOT)))
def test_each_runnable_block_prints_what_its_page_says(page, in_process, workdir):
    started = start_servers(in_process, page)
    urls = {port: url for port, (_, url) in started.items()}
    page_dns = runnable.dns_port(page)
    dns = (page_dns, started[8080][0].node.dns.port) if page_dns is not None else None
    for number, block in enumerate(runnable.blocks(page), 1):
        for srv, _ in started.values():
            srv.advance(READER_PAUSE_S)
        printed = run_block(block, urls, workdir, dns)
        wrong = runnable.differences(block.expected, printed)
        assert not wrong, f"{page.relative_to(ROOT)}, runnable block {number}:\n" + "\n".join(wrong)
