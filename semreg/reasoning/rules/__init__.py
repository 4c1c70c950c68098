"""The OWL 2 RL rules as forward triggers: `triggers` holds the vocabulary, the trigger tables and how a
fact runs them; `properties`, `classes`, `datatypes` and `schema` hold the rules of the profile's
tables 4-5, 6-7, 8 and 9, each registering itself in those tables.

Importing any module of this package imports the four rule modules first (below), so the tables are
always full. Pure: imports nothing of semreg.
"""
from semreg.reasoning.rules import classes, datatypes, properties, schema  # noqa: F401  (each fills the trigger tables)
