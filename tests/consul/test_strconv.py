"""Go's strconv as Consul reads clients' values: ParseInt with base 0, ParseBool and Unquote, as tables."""
from __future__ import annotations

import pytest

from semreg.consul import strconv


@pytest.mark.parametrize("text, value", [("1234", 1234), ("-5", -5), ("+7", 7), ("0x4D2", 1234), ("0X4d2", 1234),
                                         ("0o17", 15), ("017", 15), ("0b101", 5), ("1_000", 1000), ("0", 0),
                                         ("00", 0), ("0x_1F", 31), ("9223372036854775807", 2**63 - 1),
                                         ("-9223372036854775808", -(2**63))])
def test_parse_int_reads_as_go_does_with_base_0(text, value):
    assert strconv.parse_int(text) == value


@pytest.mark.parametrize("text", ["", "-", "1.5", "08", "abc", " 1", "1 ", "1__0", "_1", "--1", "١٢",
                                  "9223372036854775808", "0x"])
def test_what_parse_int_refuses(text):
    with pytest.raises(ValueError):
        strconv.parse_int(text)


@pytest.mark.parametrize("text, value", [("1", True), ("t", True), ("TRUE", True), ("True", True), ("0", False),
                                         ("F", False), ("false", False)])
def test_parse_bool(text, value):
    assert strconv.parse_bool(text) is value


@pytest.mark.parametrize("text", ["yes", "", "tRue", "2"])
def test_what_parse_bool_refuses(text):
    with pytest.raises(ValueError):
        strconv.parse_bool(text)


@pytest.mark.parametrize("body, text", [("plain", "plain"), ("a\\tb", "a\tb"), ("\\x41\\u00e9\\U0001F600", "Aé😀"),
                                        ("\\101", "A"), ("\\\\d", "\\d"), ('\\"', '"'), ("\\xff", "\ufffd")])
def test_unquote_reads_go_s_escapes(body, text):
    assert strconv.unquote(body) == text


@pytest.mark.parametrize("body", ["\\d", "\\'", "a\\", "\\x4", "\\u12", "\\uD800", "\\400", "line\nbreak"])
def test_what_unquote_refuses(body):
    with pytest.raises(ValueError):
        strconv.unquote(body)
