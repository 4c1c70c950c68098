#!/usr/bin/env python3
"""Set up and run semreg from a fresh checkout, with nothing but Python installed.

    python3 dev.py serve          # virtualenv + dependencies, then a server on ./semreg-data with the example ontology
    python3 dev.py test           # virtualenv + dependencies + system packages (etcd, wrk, chromium), then the whole suite
    python3 dev.py test --quick   # the inner loop: lint, layers, and the tests that start no process of their own

Both are idempotent: a second run reuses the virtualenv and installs only what changed.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / "bin"
PY = BIN / "python"
SHARED = ROOT.parent / "shared"
# Debian packages the tests and benchmarks drive as real peers, and the browser the console's tests
# drive (Playwright's own browser downloads cannot be had here; Debian's chromium can).
SYSTEM_PACKAGES = {"etcd": "etcd-server", "wrk": "wrk", "chromium": "chromium", "openssl": "openssl", "dig": "dnsutils",
                   "prometheus": "prometheus"}
# The suite on every core, a test file to a worker (module fixtures start one server, not one per worker).
PARALLEL = ["-n", "auto", "--dist", "loadfile"]
# Contract examples shipped beside the project, run against the installed `semreg` once each part works.
CONFORMANCE_MARKERS = ["core", "live", "access", "answers", "backup", "queries"]


def say(text: str) -> None:
    print(f"[dev] {text}", flush=True)


def run(cmd: list[str], **kw) -> int:
    say("$ " + " ".join(str(c) for c in cmd))
    return subprocess.call([str(c) for c in cmd], **kw)


def ensure_venv(extras: str) -> None:
    if not PY.exists():
        say(f"creating the virtualenv in {VENV}")
        venv.EnvBuilder(with_pip=True).create(VENV)
        if run([PY, "-m", "pip", "install", "--quiet", "--upgrade", "pip"]) != 0:
            sys.exit("[dev] could not upgrade pip in the virtualenv")
    stamp = VENV / f".installed-{extras}"
    pyproject = ROOT / "pyproject.toml"
    if stamp.exists() and stamp.stat().st_mtime >= pyproject.stat().st_mtime:
        return
    say(f"installing semreg and its dependencies ({extras})")
    if run([PY, "-m", "pip", "install", "--quiet", "--progress-bar", "on", "-e", f".[{extras}]"], cwd=ROOT) != 0:
        sys.exit("[dev] pip install failed; see above")
    stamp.touch()


def ensure_system_packages() -> None:
    missing = [pkg for exe, pkg in SYSTEM_PACKAGES.items() if shutil.which(exe) is None]
    if not missing:
        return
    apt = shutil.which("apt-get")
    if apt is None or os.geteuid() != 0:
        say(f"missing system packages {missing}: install them with apt-get (as root) for the tests that drive them")
        return
    say(f"installing system packages: {' '.join(missing)}")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    if run([apt, "update", "-q"], env=env) != 0 or run([apt, "install", "-y", "-q", *missing], env=env) != 0:
        sys.exit("[dev] apt-get install failed; see above")


def cmd_serve(args: list[str]) -> int:
    ensure_venv("test")
    cmd = [BIN / "semreg", "serve", "--ontology", ROOT / "ontologies" / "obras.ttl", *args]
    say("$ " + " ".join(str(c) for c in cmd))
    os.execv(str(cmd[0]), [str(c) for c in cmd])
    return 0


def checks(env: dict[str, str], typed: bool) -> bool:
    """ruff, then (the full command only) mypy, then the layers between semreg's rooms (import-linter)."""
    steps = [[BIN / "ruff", "check", "semreg", "tests", "dev.py"], *([[BIN / "mypy"]] if typed else []),
             [BIN / "lint-imports"]]
    return all(run(step, cwd=ROOT, env=env) == 0 for step in steps)


def cmd_test(args: list[str]) -> int:
    quick = args[:1] == ["--quick"]
    if quick:
        args = args[1:]
    ensure_venv("test,bench")
    if not quick:
        ensure_system_packages()
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    if quick:
        # The tests that start no process of their own (tests/conftest.py fails one that does) and take less than
        # a few seconds: pure parts and the app in this process. Left to the full command: `process` (servers, the
        # command line, etcd, a browser) and `slow` (large ontologies against owlrl, long properties).
        if not checks(env, typed=False):
            return 1
        return run([PY, "-m", "pytest", "-q", *PARALLEL, "-m", "not process and not slow", "--no-processes", *args],
                   cwd=ROOT, env=env)
    if not args and not checks(env, typed=True):
        return 1
    code = run([PY, "-m", "pytest", "-q", *(args or PARALLEL)], cwd=ROOT, env=env)
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
