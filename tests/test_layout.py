"""The layout's own rules, beside the import contracts `lint-imports` checks (pyproject.toml): every room
says in its docstring what lives there and what it may import, every package names each of its modules in
its docstring, a module past `MODULE_LINES` is one concept listed here with why, no class is a part calling
the others through methods declared for the type checker, and no function is longer than a screen unless it
is a table."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from support.paths import ROOT

PACKAGE = ROOT / "semreg"
MODULE_LINES = 400
# The modules past MODULE_LINES, each with why it is one concept, in one line (starlette keeps `routing.py` whole
# at 876 lines). A module that long more often hides two ideas, to be split into parts its object owns: a new one
# fails until it is split or listed here.
LONG_MODULES: dict[str, str] = {
    "semreg/registry/local_shard.py": "the shard seam's one object: this process's records, leases and checks in one write order",
    "semreg/registry/registry.py": "every change to an Instance in one place (only it mutates one): leases, statuses, indexes",
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
def test_a_long_module_is_listed_with_why_it_is_one_concept(path: Path):
    lines = len(path.read_text().splitlines())
    name = str(path.relative_to(ROOT))
    assert lines <= MODULE_LINES or name in LONG_MODULES, (
        f"{name} is {lines} lines: split it along its concepts into parts its object owns, or, if it is one "
        f"concept, list it in LONG_MODULES with why")


def test_every_long_module_listed_is_long_and_says_why_in_one_line():
    for name, why in LONG_MODULES.items():
        path = ROOT / name
        assert path.is_file(), f"{name} is listed in LONG_MODULES but does not exist"
        lines = len(path.read_text().splitlines())
        assert lines > MODULE_LINES, f"{name} is {lines} lines: take it off LONG_MODULES"
        assert len(why.split()) >= 8 and "\n" not in why, f"{name}: say in one line why it is one concept"


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
def test_no_class_declares_methods_for_the_type_checker_only(path: Path):
    """A class whose methods exist only under `TYPE_CHECKING` is a part of an object calling the others through
    a shared state: make the parts objects the whole owns, each given what it calls."""
    stubbed = [f"{path.relative_to(ROOT)}:{node.name}" for node in ast.walk(ast.parse(path.read_text()))
               if isinstance(node, ast.ClassDef) and any(
                   isinstance(item, ast.If) and ast.unparse(item.test).endswith("TYPE_CHECKING") for item in node.body)]
    assert not stubbed, f"methods declared for the type checker only in {', '.join(stubbed)}"


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
