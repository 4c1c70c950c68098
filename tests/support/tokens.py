"""A token file's tokens of three kinds: a reader, an admin, and a reader bound to the `staging` environment."""
from __future__ import annotations

READ = "read-token-0123456789abcdef"
ADMIN = "admin-token-0123456789abcdef"
BOUND = "bound-token-0123456789abcdef"
TOKENS = {"tokens": [{"name": "reader", "token": READ, "scopes": ["read"]},
                     {"name": "ops", "token": ADMIN, "scopes": ["admin"]},
                     {"name": "staging", "token": BOUND, "scopes": ["read"], "environments": ["staging"]}]}
