"""The data value of a literal (`semreg.reasoning.literals`): which literals dt-eq makes the same."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from semreg.reasoning.literals import value
from semreg.reasoning.rules.triggers import RDF, RL_DATATYPES, XSD

# (datatype, lexical form) pairs, and whether the two have the same data value
SAME = [
    ((XSD + "int", "42"), (XSD + "int", "+042"), True),
    ((XSD + "integer", "42"), (XSD + "decimal", "42.0"), True),
    ((XSD + "byte", "-42"), (XSD + "long", "-0042"), True),
    ((XSD + "decimal", "3.141"), (XSD + "decimal", "+03.1410"), True),
    ((XSD + "double", "3.141"), (XSD + "double", "+0.31410E+01"), True),
    ((XSD + "float", "3.141"), (XSD + "float", "+0.31410E+01"), True),
    ((XSD + "double", "1.5"), (XSD + "float", "1.5"), False),
    ((XSD + "double", "1"), (XSD + "integer", "1"), False),
    ((XSD + "double", "0.0"), (XSD + "double", "-0.0"), False),
    ((XSD + "dateTime", "2009-04-21T12:30:15"), (XSD + "dateTime", "2009-04-21T12:30:15.00"), True),
    ((XSD + "dateTimeStamp", "2009-04-21T12:30:15-05:00"), (XSD + "dateTime", "2009-04-21T17:30:15Z"), True),
    ((XSD + "dateTime", "2009-04-21T12:30:15"), (XSD + "dateTime", "2009-04-21T12:30:15Z"), False),
    ((XSD + "boolean", "true"), (XSD + "boolean", "1"), True),
    ((XSD + "boolean", "true"), (XSD + "boolean", "0"), False),
    ((XSD + "string", "abc"), (XSD + "token", "abc"), True),
    ((XSD + "string", "abc"), (RDF + "PlainLiteral", "abc@"), True),
    ((RDF + "PlainLiteral", "abc@de"), (RDF + "PlainLiteral", "abc@DE"), True),
    ((XSD + "string", "abc"), (XSD + "string", "abd"), False),
    ((XSD + "hexBinary", "0FB7"), (XSD + "hexBinary", "0fb7"), True),
    ((XSD + "hexBinary", "00"), (XSD + "base64Binary", "AA=="), False),
    ((XSD + "anyURI", "http://a/b"), (XSD + "anyURI", " http://a/b "), True),
    ((RDF + "XMLLiteral", "<a/>"), (RDF + "XMLLiteral", "<a></a>"), True),
    ((RDF + "XMLLiteral", "<a y='2' x='1'/>"), (RDF + "XMLLiteral", '<a x="1" y="2"/>'), True),
    ((RDF + "XMLLiteral", "&#65;<b>c</b>"), (RDF + "XMLLiteral", "A<b>c</b>"), True),
    ((RDF + "XMLLiteral", "<a/>"), (RDF + "XMLLiteral", " <a/>"), False),  # a text node more
    ((RDF + "XMLLiteral", "<a>b</a>"), (RDF + "XMLLiteral", "<a>c</a>"), False),
    ((RDF + "XMLLiteral", "<a><!--b--></a>"), (RDF + "XMLLiteral", "<a></a>"), False),
]


@pytest.mark.parametrize("a, b, same", SAME, ids=[f"{a[1]} {b[1]}" for a, b, _ in SAME])
def test_same_data_value(a, b, same):
    va, vb = value(*a), value(*b)
    assert va is not None and vb is not None
    assert (va == vb) is same


ILL_TYPED = [(XSD + "byte", "300"), (XSD + "positiveInteger", "0"), (XSD + "int", "4.2"), (XSD + "boolean", "yes"),
             (XSD + "double", "NaN"), (XSD + "dateTimeStamp", "2009-04-21T12:30:15"), (XSD + "hexBinary", "ABC"),
             (RDF + "PlainLiteral", "no tag"), (XSD + "date", "2009-04-21"), (RDF + "XMLLiteral", "<x:a/>"),
             (RDF + "XMLLiteral", "&nbsp;"), (RDF + "XMLLiteral", "<a>")]


@pytest.mark.parametrize("datatype, lexical", ILL_TYPED)
def test_no_value_is_equal_only_to_itself(datatype, lexical):
    """Ill-typed, or a datatype whose values are not compared: None, so dt-eq pairs it with nothing."""
    assert value(datatype, lexical) is None


def test_language_tags_compare_in_lower_case():
    assert value(RDF + "langString", "chat", "FR") == value(RDF + "langString", "chat", "fr")
    assert value(RDF + "langString", "chat", "fr") != value(RDF + "langString", "chat", "en")


@given(st.sampled_from(RL_DATATYPES + (XSD + "gYear", "http://example.org/dt")), st.text(max_size=40),
       st.one_of(st.none(), st.sampled_from(["en", "EN-gb", ""])))
def test_any_lexical_form_gives_a_value_or_none(datatype, lexical, language):
    """Literals come from uploaded ontologies: no lexical form makes the reasoner raise."""
    v = value(datatype, lexical, language)
    assert v is None or hash(v) == hash(value(datatype, lexical, language))
