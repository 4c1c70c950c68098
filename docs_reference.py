"""The documentation's generated reference (a MkDocs hook, `hooks:` in mkdocs.yml): a page that holds the line
`<!-- reference: cli -->` gets every `semreg` command with its flags, read from the parser `semreg` itself runs
(`semreg.cli.build_parser`), and `<!-- reference: configuration -->` every setting of `semreg serve` with its
flag, variable and default, read from `semreg.config.Settings`. Written when the site is built, so the reference
cannot drift from the product; the tests build the site (`dev.py test`) and check these pages
(tests/test_docs_site.py)."""
from __future__ import annotations

import argparse
import dataclasses
import re
from pathlib import Path
from typing import Any

MARKER = re.compile(r"^<!-- reference: (\w+) -->$", re.M)


def on_page_markdown(markdown: str, **_: Any) -> str:
    return MARKER.sub(lambda m: GENERATORS[m.group(1)](), markdown)


def cell(text: object) -> str:
    """Text for a Markdown table cell: one line, `|` escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def invocation(action: argparse.Action) -> str:
    """How an option is written: `--flag METAVAR`, the forms joined (`-h`, `--help`)."""
    if not action.option_strings:
        return f"`{action.metavar or action.dest}`"
    takes = action.nargs != 0
    metavar = action.metavar or (action.dest.upper() if takes else "")
    if isinstance(metavar, tuple):
        metavar = " ".join(metavar)
    if action.choices and not action.metavar and takes:
        metavar = "|".join(str(c) for c in action.choices)
    return ", ".join(f"`{flag}{' ' + metavar if metavar and takes else ''}`" for flag in action.option_strings)


def actions_table(parser: argparse.ArgumentParser) -> list[str]:
    rows = ["| argument | what |", "|---|---|"]
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)) or action.help == argparse.SUPPRESS:
            continue
        what = (action.help or "") % {"default": action.default, "prog": parser.prog} if action.help else ""
        rows.append(f"| {cell(invocation(action))} | {cell(what)} |")
    return rows if len(rows) > 2 else ["(no arguments)"]


def subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    """(name, help, parser) of each sub-command, depth first (`query put` after `query`)."""
    out: list[tuple[str, str, argparse.ArgumentParser]] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, sub in action.choices.items():
                out.append((name, helps.get(name, ""), sub))
                out += [(f"{name} {n}", h, p) for n, h, p in subcommands(sub)]
    return out


def cli() -> str:
    from semreg.cli import build_parser

    parser = build_parser({})  # the defaults as written, not this machine's SEMREG_* variables
    lines = ["## `semreg`", "", cell(parser.description or ""), "", *actions_table(parser), ""]
    for name, help_text, sub in subcommands(parser):
        lines += [f"## `semreg {name}`", "", cell(help_text or sub.description or ""), "", *actions_table(sub), ""]
    return "\n".join(lines)


def default_of(field: dataclasses.Field[Any]) -> str:
    value = field.default
    if value is None or value == "" or value == ():
        return ""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, Path):
        return f"`{value}`"
    return f"`{value}`"


def configuration() -> str:
    from semreg.config import options

    rows = ["| flag | variable | default | what |", "|---|---|---|---|"]
    for field in options():
        meta = field.metadata
        flag = f"--{meta['flag']}"
        if meta.get("metavar"):
            flag += f" {meta['metavar']}"
        elif meta.get("choices"):
            flag += " " + "|".join(meta["choices"])
        rows.append(f"| {cell('`' + flag + '`')} | `{meta['env']}` | {cell(default_of(field))} | {cell(meta['help'])} |")
    return "\n".join(rows)


GENERATORS = {"cli": cli, "configuration": configuration}
