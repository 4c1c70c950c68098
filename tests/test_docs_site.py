"""The documentation site's structure, checked without building it (the full test command builds it strictly,
dev.py): the generated reference pages name every command, flag and setting the product has, every page is
in the navigation, and nothing links outside the repository."""
from __future__ import annotations

import argparse
import importlib.util
import re
from types import ModuleType

import yaml
from support.paths import ROOT

from semreg import config
from semreg.cli import build_parser

DOCS = ROOT / "docs"


def hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_reference", ROOT / "docs_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def parsers(parser: argparse.ArgumentParser, prefix: str = "semreg") -> dict[str, argparse.ArgumentParser]:
    out = {prefix: parser}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out.update(parsers(sub, f"{prefix} {name}"))
    return out


def test_the_cli_reference_has_every_command_and_every_flag_of_the_parser():
    page = hook().cli()
    sections = dict(re.findall(r"^## `(semreg[^`]*)`\n(.*?)(?=^## |\Z)", page, re.M | re.S))
    every = parsers(build_parser({}))
    assert set(sections) == set(every)
    for name, parser in every.items():
        for action in parser._actions:
            if action.help != argparse.SUPPRESS and not isinstance(action, (argparse._HelpAction,
                                                                             argparse._SubParsersAction)):
                shown = action.option_strings or [action.metavar or action.dest]
                assert all(f"`{flag}" in sections[name] for flag in shown), (name, shown)


def test_the_configuration_reference_has_every_setting_with_its_flag_and_variable():
    table = hook().configuration()
    for field in config.options():
        row = next((line for line in table.splitlines() if f"`--{field.metadata['flag']}" in line), None)
        assert row is not None and f"`{field.metadata['env']}`" in row, field.name


def test_the_reference_pages_ask_for_the_generated_text():
    hooked = hook()
    asking = {m.group(1): p for p in DOCS.rglob("*.md") for m in hooked.MARKER.finditer(p.read_text())}
    assert asking == {"cli": DOCS / "reference" / "cli.md", "configuration": DOCS / "reference" / "configuration.md"}
    for page in asking.values():
        assert "<!-- reference:" not in hooked.on_page_markdown(page.read_text())


def nav_pages(nav) -> list[str]:
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, dict):
        return [p for value in nav.values() for p in nav_pages(value)]
    return [p for item in nav for p in nav_pages(item)]


def test_every_page_is_in_the_navigation_and_the_build_is_strict():
    site = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    assert site["strict"] is True and site["validation"]["anchors"] == "warn"
    listed = nav_pages(site["nav"])
    assert sorted(listed) == sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md"))


def test_no_page_links_outside_the_repository():
    """A clone from a forge must have every link: nothing under ../shared or beside the checkout."""
    for page in [ROOT / "README.md", *DOCS.rglob("*.md")]:
        text = page.read_text()
        assert "../shared" not in text.replace("(`../shared/conformance`)", ""), page
        prose = re.sub(r"`[^`\n]*`", "", re.sub(r"^```.*?^```", "", text, flags=re.M | re.S))  # code is not a link
        for target in re.findall(r"\]\((?!https?:|#|mailto:)([^)#\s]+)", prose):
            assert (page.parent / target).resolve().is_relative_to(ROOT), (page, target)
            assert (page.parent / target).exists(), (page, target)
