"""A real browser for the console's tests: Debian's chromium driven by Playwright, headless, with a fresh
profile, on a machine whose network is closed (no background requests, no updates, no QUIC).

`Watched` collects what a page reports that would trouble a person: uncaught errors, `console.error`,
CSP violations and failed requests. A test that makes the server refuse something on purpose says
so first (`expect_refusal(400)`); the browser then reports that response as a failed load, which is
allowed once per expectation. `check_accessibility` injects axe-core (tests/support/vendor/) and fails on a
serious or critical violation; `snapshot` keeps a screenshot under test-artifacts/console/.
"""
from __future__ import annotations

import json
import re
import shutil
import tempfile
from pathlib import Path

from support.paths import ROOT

HERE = Path(__file__).resolve().parent
AXE = (HERE / "vendor" / "axe.min.js").read_text(encoding="utf-8")
ARTIFACTS = ROOT / "test-artifacts" / "console"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]
VIEWPORT = {"width": 1366, "height": 860}  # a laptop screen
BROWSER_THREAD_PREFIX = "browser-worker"
_FAILED_LOAD = re.compile(r"the server responded with a status of (\d{3})")


def chromium_path() -> str:
    path = shutil.which("chromium")
    if path is None:
        raise AssertionError("Debian's chromium is not installed: `python3 dev.py test` installs it with apt-get")
    return path


def launch(playwright, profiles: Path):
    """A persistent context on a fresh profile directory (Playwright's way of passing --user-data-dir)."""
    profile = tempfile.mkdtemp(prefix="profile-", dir=profiles)
    return playwright.chromium.launch_persistent_context(
        profile, executable_path=chromium_path(), headless=True, args=ARGS, viewport=VIEWPORT,
        color_scheme="light", accept_downloads=True, locale="en-GB", timezone_id="UTC")


class Watched:
    """A page and the troubles it reported."""

    def __init__(self, page) -> None:
        self.page = page
        self.troubles: list[str] = []
        self.refusals: list[int] = []
        page.on("console", self._console)
        page.on("pageerror", lambda error: self.troubles.append(f"uncaught: {error}"))
        page.on("requestfailed", self._failed)

    def _console(self, message) -> None:
        if message.type not in ("error", "warning") or message.type == "warning" and "Content Security" not in message.text:
            return
        status = _FAILED_LOAD.search(message.text)
        if status and int(status.group(1)) in self.refusals:
            self.refusals.remove(int(status.group(1)))
            return
        self.troubles.append(f"console {message.type}: {message.text}")

    def _failed(self, request) -> None:
        failure = request.failure or ""
        if "ERR_ABORTED" in failure:  # a watch the page ended itself, leaving a view
            return
        self.troubles.append(f"request failed: {request.method} {request.url}: {failure}")

    def expect_refusal(self, status: int) -> None:
        self.refusals.append(status)

    def assert_clean(self) -> None:
        assert self.troubles == [], "\n".join(self.troubles)


def check_accessibility(page, name: str) -> None:
    """axe-core over the page as it is now, in the light and the dark theme; screenshots of both."""
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        if not page.evaluate("() => typeof window.axe === 'object'"):
            page.evaluate(AXE)
        result = page.evaluate("() => axe.run(document, {resultTypes: ['violations']})")
        bad = [v for v in result["violations"] if v["impact"] in ("serious", "critical")]
        assert bad == [], f"{name} ({scheme}): " + json.dumps(
            [{"id": v["id"], "impact": v["impact"], "help": v["help"],
              "nodes": [n["html"][:160] for n in v["nodes"][:3]]} for v in bad], indent=1)
        snapshot(page, f"{name}-{scheme}")
    page.emulate_media(color_scheme="light")


def snapshot(page, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
