#!/usr/bin/env python3
"""Set up and run semreg from a fresh checkout, with nothing but Python installed.

    python3 dev.py serve          # virtualenv + semreg's runtime, then a server on ./semreg-data with the example ontology
    python3 dev.py test           # virtualenv + test tools + system packages (etcd, wrk, chromium, ...), the site, the suite
    python3 dev.py test --quick   # the inner loop: lint, layers, and the tests that start no process of their own

Both are idempotent: a second run reuses the virtualenv and installs only what changed.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import venv
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / "bin"
PY = BIN / "python"
SHARED = ROOT.parent / "shared"
# Debian packages the tests and benchmarks drive as real peers, and the browser the console's tests
# drive (Playwright's own browser downloads cannot be had here; Debian's chromium can).
# node and npm run node-consul, the npm Consul client, against the Consul listener (tests/consul/node/).
SYSTEM_PACKAGES = {"etcd": "etcd-server", "wrk": "wrk", "chromium": "chromium", "openssl": "openssl", "dig": "dnsutils",
                   "prometheus": "prometheus", "node": "nodejs", "npm": "npm"}
# The suite on every core, a test file to a worker (module fixtures start one server, not one per worker).
PARALLEL = ["-n", "auto", "--dist", "loadfile"]
# Contract examples shipped beside the project, run against the installed `semreg` once each part works.
CONFORMANCE_MARKERS = ["core", "live", "access", "answers", "backup", "queries", "consul"]


def say(text: str) -> None:
    print(f"[dev] {text}", flush=True)


def run(cmd: list[str], **kw) -> int:
    say("$ " + " ".join(str(c) for c in cmd))
    return subprocess.call([str(c) for c in cmd], **kw)


def ensure_venv(extras: str) -> None:
    """The virtualenv with semreg installed in it (editable) and the given extras ("" : the runtime alone)."""
    if not PY.exists():
        say(f"creating the virtualenv in {VENV}")
        venv.EnvBuilder(with_pip=True).create(VENV)
        if run([PY, "-m", "pip", "install", "--quiet", "--upgrade", "pip"]) != 0:
            sys.exit("[dev] could not upgrade pip in the virtualenv")
    stamp = VENV / f".installed-{extras or 'runtime'}"
    pyproject = ROOT / "pyproject.toml"
    if stamp.exists() and stamp.stat().st_mtime >= pyproject.stat().st_mtime:
        return
    say(f"installing semreg and its dependencies ({extras or 'the runtime alone'})")
    if run([PY, "-m", "pip", "install", "--quiet", "--progress-bar", "on", "-e", f".[{extras}]" if extras else "."],
           cwd=ROOT) != 0:
        sys.exit("[dev] pip install failed; see above")
    stamp.touch()


def ensure_system_packages(which=shutil.which, root: bool | None = None) -> None:
    """Install the Debian packages of SYSTEM_PACKAGES that are missing, or stop: the whole suite drives them, and
    it fails (rather than skips) a test whose program is missing (`SEMREG_REQUIRE_TOOLS`, tests/support/tools.py)."""
    missing = [pkg for exe, pkg in SYSTEM_PACKAGES.items() if which(exe) is None]
    if not missing:
        return
    apt = which("apt-get")
    if apt is None or not (os.geteuid() == 0 if root is None else root):
        sys.exit(f"[dev] missing system packages {' '.join(missing)}, which the tests drive, and apt-get cannot be run "
                 f"here (as root) to install them: install them, then run this again")
    say(f"installing system packages: {' '.join(missing)}")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    if run([apt, "update", "-q"], env=env) != 0 or run([apt, "install", "-y", "-q", *missing], env=env) != 0:
        sys.exit("[dev] apt-get install failed; see above")
    still = [pkg for exe, pkg in SYSTEM_PACKAGES.items() if which(exe) is None]
    if still:
        sys.exit(f"[dev] apt-get installed, but {' '.join(still)} still provide no program; see above")


def cmd_serve(args: list[str]) -> int:
    ensure_venv("")  # the product alone: serving needs none of the test tools (pip install . installs the same)
    cmd = [BIN / "semreg", "serve", "--ontology", ROOT / "ontologies" / "obras.ttl", *args]
    say("$ " + " ".join(str(c) for c in cmd))
    os.execv(str(cmd[0]), [str(c) for c in cmd])
    return 0


def checks(env: dict[str, str], typed: bool) -> bool:
    """ruff, then (the full command only) mypy, then the layers between semreg's rooms (import-linter), then (the full
    command only) the documentation site, built strictly: a broken link or anchor, a page left out of the
    navigation, or a generated reference page that fails, fails the tests."""
    steps = [[BIN / "ruff", "check", "semreg", "tests", "dev.py", "docs_reference.py"],
             *([[BIN / "mypy"]] if typed else []), [BIN / "lint-imports"]]
    if not all(run(step, cwd=ROOT, env=env) == 0 for step in steps):
        return False
    return not typed or build_site(env) == 0


def build_site(env: dict[str, str]) -> int:
    """`mkdocs build --strict` into a directory thrown away afterwards: the check is the build, not its output."""
    with tempfile.TemporaryDirectory(prefix="semreg-site-") as site:
        return run([BIN / "mkdocs", "build", "--strict", "--quiet", "--site-dir", site], cwd=ROOT,
                   env={**env, "NO_MKDOCS_2_WARNING": "1"})  # the theme's notice about its successor, not a finding


def suite_env(environ: Mapping[str, str], quick: bool) -> dict[str, str]:
    """The tests' environment: the virtualenv's programs first; the whole suite, after installing the system
    packages, also says so (`SEMREG_REQUIRE_TOOLS=1`: a test whose program is missing fails, never skips)."""
    env = {**environ, "PATH": f"{BIN}{os.pathsep}{environ.get('PATH', '')}"}
    if not quick:
        env["SEMREG_REQUIRE_TOOLS"] = "1"
    return env


def cmd_test(args: list[str]) -> int:
    quick = args[:1] == ["--quick"]
    if quick:
        args = args[1:]
    ensure_venv("test,bench")
    if not quick:
        ensure_system_packages()
    env = suite_env(os.environ, quick)
    if quick:
        # The tests that start no process of their own (tests/conftest.py fails one that does) and take less than
        # a few seconds: pure parts and the app in this process. Left to the full command: `process` (servers, the
        # command line, etcd, a browser) and `slow` (large ontologies against owlrl, long properties).
        if not checks(env, typed=False):
            return 1
        return run([PY, "-m", "pytest", "-q", "-rs", *PARALLEL, "-m", "not process and not slow", "--no-processes",
                    *args], cwd=ROOT, env=env)
    if not args and not checks(env, typed=True):
        return 1
    code = run([PY, "-m", "pytest", "-q", "-rs", *(args or PARALLEL)], cwd=ROOT, env=env)
    if code != 0 or args:
        return code
    if not (SHARED / "conformance").is_dir():
        say(f"no contract examples at {SHARED / 'conformance'}; skipping them")
        return code
    for marker in CONFORMANCE_MARKERS:
        code = run([PY, "-m", "pytest", "-q", "-p", "no:cacheprovider", SHARED / "conformance", "-m", marker],
                   cwd=ROOT, env=env)
        if code != 0:
            return code
    return 0


def main(argv: list[str]) -> int:
    commands = {"serve": cmd_serve, "test": cmd_test}
    if not argv or argv[0] not in commands:
        print(__doc__.strip())
        return 2
    return commands[argv[0]](argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
