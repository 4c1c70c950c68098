"""The layout's own rules, beside the import contracts `lint-imports` checks (pyproject.toml): every room
says in its docstring what lives there and what it may import, every package names each of its modules in
its docstring, no module holds more than one idea's worth
of lines, and no function is longer than a screen unless it is a table."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from support.paths import ROOT

PACKAGE = ROOT / "semreg"
MODULE_LINES = 400
# Modules allowed past MODULE_LINES, each with its own ceiling and why it is one idea (starlette keeps
# `routing.py` whole at 876 lines): a module past 400 lines more often hides two ideas, so each is listed.
LONG_MODULES: dict[str, tuple[int, str]] = {
    "semreg/registry/local_shard.py": (450, "the one object behind the shard seam: the registry of this process "
                                            "with its durable records, lease timer and checks, every write applied "
                                            "in one order; its parts (registry, removals, revisions, health) are "
                                            "modules of their own already"),
}
FUNCTION_LINES = 60
# Functions that are declarations read top to bottom (a parser's table of flags), not logic to split.
TABLES: dict[str, str] = {}


def modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "vendor" not in p.parts)


def test_every_room_says_what_lives_there_and_what_it_may_import():
    rooms = sorted(p.parent for p in PACKAGE.glob("*/__init__.py"))
    assert rooms, "semreg has subpackages"
    for room in rooms:
        doc = ast.get_docstring(ast.parse((room / "__init__.py").read_text())) or ""
        assert len(doc.split()) >= 20, f"{room.name}/__init__.py says too little about its room"
        assert "import" in doc, f"{room.name}/__init__.py does not say what it may import"


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_a_module_holds_one_idea(path: Path):
    lines = len(path.read_text().splitlines())
    ceiling = LONG_MODULES.get(str(path.relative_to(ROOT)), (MODULE_LINES, ""))[0]
    assert lines <= ceiling, f"{path.relative_to(ROOT)} is {lines} lines: split it along its concepts"


def test_every_long_module_listed_is_long_and_says_why():
    for name, (ceiling, why) in LONG_MODULES.items():
        lines = len((ROOT / name).read_text().splitlines())
        assert MODULE_LINES < lines <= ceiling, f"{name} is {lines} lines: take it off LONG_MODULES or split it"
        assert len(why.split()) >= 10, f"{name}: say why it is one idea"


def packages() -> list[Path]:
    return sorted(p.parent for p in PACKAGE.rglob("__init__.py") if "vendor" not in p.parts)


def members(package: Path) -> list[str]:
    """A package's modules and subpackages, by name."""
    modules = [p.stem for p in package.glob("*.py") if p.stem != "__init__"]
    return sorted(modules + [p.parent.name for p in package.glob("*/__init__.py")])


def named(doc: str, dotted: str, name: str) -> bool:
    """Whether a docstring names a module as code: `name`, `name/`, `name.py` or `semreg.room.name`."""
    n = re.escape(name)
    return re.search(rf"`{n}/?`|`{re.escape(dotted)}\.{n}[`.]|(?<![\w./]){n}(?:\.py|/)(?![\w])", doc) is not None


@pytest.mark.parametrize("package", packages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_a_package_names_each_of_its_modules_in_its_docstring(package: Path):
    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""
    dotted = ".".join(package.relative_to(ROOT).parts)
    missing = [name for name in members(package) if not named(doc, dotted, name)]
    assert not missing, f"{dotted}'s docstring does not name {', '.join(missing)}: say in a line what each is"


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_function_is_longer_than_a_screen(path: Path):
    long = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            where = f"{path.relative_to(ROOT)}:{node.name}"
            if length > FUNCTION_LINES and where not in TABLES:
                long.append(f"{where} ({length} lines)")
    assert not long, f"split into named steps: {', '.join(long)}"
