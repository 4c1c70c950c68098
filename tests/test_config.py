"""`semreg serve`'s flags come from the settings fields, each also read from its SEMREG_* variable."""
from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from semreg.cli import serve
from semreg.config import Settings


def parse(argv: list[str], env: dict[str, str] | None = None) -> Settings:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    serve.add_parser(sub, env or {})
    return serve.settings_from(parser.parse_args(["serve", *argv]))


def test_defaults_are_the_settings_defaults():
    assert parse([]) == Settings(rate_burst=0.0)


def test_flags_and_variables_set_every_kind_of_field():
    settings = parse([], {"SEMREG_PORT": "9999", "SEMREG_ONTOLOGY": "a.ttl:b.owl", "SEMREG_INSECURE": "true",
                          "SEMREG_SPARQL_TIME_LIMIT": "2.5", "SEMREG_TOKENS_FILE": "t.json", "SEMREG_LOG_FORMAT": "text",
                          "SEMREG_RATE_LIMIT": "5"})
    assert settings.port == 9999 and settings.ontologies == (Path("a.ttl"), Path("b.owl")) and settings.insecure
    assert settings.sparql_time_limit_s == 2.5 and settings.tokens_file == Path("t.json")
    assert settings.log_format == "text" and settings.rate_burst == 5.0  # a burst defaults to one second's worth
    assert parse(["--memory"]).data_dir is None
    assert parse([], {"SEMREG_MEMORY": "1"}).data_dir is None
    assert parse(["--ontology", "x.ttl", "y.ttl", "--ontology", "z.ttl"]).ontologies == tuple(
        Path(p) for p in ("x.ttl", "y.ttl", "z.ttl"))


@pytest.mark.parametrize("argv, env, on", [([], {}, True), (["--no-sparql"], {}, False), ([], {"SEMREG_SPARQL": "0"}, False),
                                          (["--sparql"], {"SEMREG_SPARQL": "false"}, True),
                                          (["--no-sparql"], {"SEMREG_SPARQL": "1"}, False)])
def test_a_setting_on_by_default_is_turned_off_by_its_no_flag_or_variable(argv, env, on):
    assert parse(argv, env).sparql is on


def test_a_flag_wins_over_its_variable():
    assert parse(["--port", "7000"], {"SEMREG_PORT": "9999"}).port == 7000


@pytest.mark.parametrize("argv, env", [(["--port", "x"], {}), ([], {"SEMREG_PORT": "x"}),
                                      (["--log-level", "loud"], {}), (["--memory", "--data-dir", "d"], {})])
def test_a_bad_value_is_a_usage_error(argv, env, capsys):
    with pytest.raises(SystemExit) as caught:
        parse(argv, env)
    assert caught.value.code == 2 and "error:" in capsys.readouterr().err
