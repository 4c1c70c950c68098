"""`dev.py`, the command that sets up and runs the tests: the whole suite installs the programs its tests drive
or stops, and tells the tests it did, so that a test whose program is missing fails instead of skipping; it
builds the documentation site strictly; and `serve` installs the product alone, as `pip install .` does."""
from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path
from types import ModuleType

import pytest
from support import tools
from support.paths import ROOT


def dev() -> ModuleType:
    spec = importlib.util.spec_from_file_location("dev", ROOT / "dev.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_whole_suite_stops_when_a_program_is_missing_and_apt_cannot_install_it() -> None:
    installed = {"etcd", "wrk", "chromium", "openssl", "prometheus", "node", "npm"}  # dig is not
    which = {exe: f"/usr/bin/{exe}" for exe in installed}.get
    with pytest.raises(SystemExit, match="missing system packages dnsutils"):
        dev().ensure_system_packages(which, root=False)
    with pytest.raises(SystemExit, match="missing system packages dnsutils"):
        dev().ensure_system_packages(which, root=True)  # and no apt-get either
    dev().ensure_system_packages({**{e: "x" for e in installed}, "dig": "x"}.get, root=False)  # nothing to do


def test_the_whole_suite_tells_the_tests_it_installed_their_programs_and_the_quick_loop_does_not() -> None:
    whole, quick = dev().suite_env({"PATH": "/usr/bin"}, quick=False), dev().suite_env({"PATH": "/usr/bin"}, quick=True)
    assert whole[tools.REQUIRE] == "1" and tools.REQUIRE not in quick
    assert whole["PATH"].endswith(os.pathsep + "/usr/bin") and whole["PATH"] == quick["PATH"]


def test_a_missing_program_skips_its_test_or_fails_it_when_the_suite_installed_the_programs() -> None:
    needed = [("dig", "dnsutils")]
    tools.check(needed, {}, which=lambda exe: "/usr/bin/dig")  # installed: runs
    with pytest.raises(pytest.skip.Exception, match="dig"):
        tools.check(needed, {}, which=lambda exe: None)
    with pytest.raises(pytest.fail.Exception, match="apt-get install dnsutils"):
        tools.check(needed, {tools.REQUIRE: "1"}, which=lambda exe: None)


def test_the_tests_that_drive_dig_and_prometheus_are_marked_so() -> None:
    """A test needing a program says so with the mark the check reads, not with a skip of its own."""
    for path, needed in (("tests/dns/test_dig.py", ("dig", "dnsutils")),
                         ("tests/http/test_prometheus.py", ("prometheus", "prometheus"))):
        spec = importlib.util.spec_from_file_location(f"marked_{Path(path).stem}", ROOT / path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        marks = {mark.name: mark.args for mark in module.pytestmark}
        assert marks["needs_tool"] == needed and "skipif" not in marks and "skip" not in marks, path


def recording(module: ModuleType, monkeypatch: pytest.MonkeyPatch, code: int = 0) -> list[list[str]]:
    """The commands `dev.py` would run, recorded instead of run."""
    ran: list[list[str]] = []

    def run(cmd: list, **kw: object) -> int:
        ran.append([str(c) for c in cmd])
        return code

    monkeypatch.setattr(module, "run", run)
    return ran


def test_the_whole_suite_builds_the_documentation_site_strictly_and_the_quick_loop_does_not(monkeypatch) -> None:
    module = dev()
    ran = recording(module, monkeypatch)
    assert module.checks({}, typed=True)
    (build,) = [cmd for cmd in ran if Path(cmd[0]).name == "mkdocs"]
    assert build[1:3] == ["build", "--strict"] and "--site-dir" in build
    ran.clear()
    assert module.checks({}, typed=False)
    assert not any(Path(cmd[0]).name == "mkdocs" for cmd in ran)


def test_a_site_that_does_not_build_fails_the_whole_suite(monkeypatch) -> None:
    module = dev()
    ran: list[str] = []
    monkeypatch.setattr(module, "run", lambda cmd, **kw: ran.append(Path(str(cmd[0])).name) or int(ran[-1] == "mkdocs"))
    assert not module.checks({}, typed=True) and ran[-1] == "mkdocs"


def test_serving_installs_the_product_alone_and_testing_the_test_tools(monkeypatch, tmp_path) -> None:
    """`dev.py serve` is a user's first command: it installs what `pip install .` installs, not the test kit."""
    module = dev()
    monkeypatch.setattr(module, "VENV", tmp_path)
    monkeypatch.setattr(module, "PY", tmp_path / "python")
    (tmp_path / "python").touch()
    ran = recording(module, monkeypatch)
    module.ensure_venv("")
    module.ensure_venv("test,bench")
    installs = [cmd[cmd.index("-e") + 1] for cmd in ran if "install" in cmd]
    assert installs == [".", ".[test,bench]"]
    served: list[str] = []
    monkeypatch.setattr(module, "ensure_venv", served.append)
    monkeypatch.setattr(module.os, "execv", lambda *a: None)
    module.cmd_serve([])
    assert served == [""]


def test_the_test_extra_has_what_builds_the_site() -> None:
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    names = {re.split(r"[<>=\[]", requirement)[0] for requirement in extras["test"]}
    assert {"mkdocs", "mkdocs-material"} <= names
    assert not any(name.startswith("mkdocs") for name in
                   (re.split(r"[<>=\[]", r)[0] for r in tomllib.loads((ROOT / "pyproject.toml").read_text())
                    ["project"]["dependencies"]))
