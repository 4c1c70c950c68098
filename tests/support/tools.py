"""Programs the tests drive as real peers (Debian's `dig`, `prometheus`): a test that needs one is marked
`@pytest.mark.needs_tool(executable, package)`. Where it is missing the test is skipped, unless the test
command said it installed every such program (`SEMREG_REQUIRE_TOOLS=1`, set by `python3 dev.py test`): then a
missing one is a failure, so that a lost install step cannot turn the tests that need it green."""
from __future__ import annotations

import shutil
from collections.abc import Callable, Iterable, Mapping

import pytest

REQUIRE = "SEMREG_REQUIRE_TOOLS"


def check(needed: Iterable[tuple[str, str]], environ: Mapping[str, str],
          which: Callable[[str], str | None] = shutil.which) -> None:
    """Skip, or fail when `environ` requires the tools, for the first of `needed` (executable, Debian package)
    that is not installed."""
    for executable, package in needed:
        if which(executable) is not None:
            continue
        missing = f"{executable} (Debian's {package}) is not installed"
        if environ.get(REQUIRE) == "1":
            pytest.fail(f"{missing}, though {REQUIRE}=1 says the test command installed it: "
                        f"apt-get install {package}", pytrace=False)
        pytest.skip(missing)
