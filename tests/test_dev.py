"""`dev.py`, the command that sets up and runs the tests: the whole suite installs the programs its tests drive
or stops, and tells the tests it did, so that a test whose program is missing fails instead of skipping."""
from __future__ import annotations

import importlib.util
import os
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
    installed = {"etcd", "wrk", "chromium", "openssl", "prometheus"}  # dig is not
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
