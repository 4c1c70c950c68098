"""Who may do what: bearer tokens, their scopes, the environments they are bound to and the
ownership of registrations (`tokens`), token buckets per caller (`ratelimit`), failed authentications
throttled without refusing a valid credential (`failures`) and reported to an operator (`failure_report`).

May import: `semreg.registry.selector` (environment names) and the top-level modules. Must not import
SPARQL, the cluster or HTTP: the HTTP gate and the query processes both check callers with it.
"""
