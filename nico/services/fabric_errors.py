"""What a tenant may read of a fabric error.

The reconciler stores the manager's error as operators need it (``nvlink_domain.last_error``: the
NMX-C/NMX-M endpoint, the manager's own words); operators read it in the log, the metrics and the
admin CLI. Tenants see what is wrong in their terms: no endpoint address, credential or stack text.
"""

from __future__ import annotations

import re

UNREACHABLE = (
    "The fabric manager for this NVLink domain is unreachable; partition changes in this domain wait "
    "until it is back"
)
NOT_CONFIGURED = (
    "No fabric manager is configured for this NVLink domain yet; partition changes in this domain wait "
    "until the provider configures one"
)
REFUSED = (
    "The fabric manager for this NVLink domain refused a change; the provider has been notified and "
    "nico keeps retrying"
)
SLOW = (
    "The fabric manager for this NVLink domain has not finished a change in time; nico keeps checking on it"
)

# What the reconciler's labels start with (nico.reconciler.domain_pass.error_label).
_KNOWN = (
    (re.compile(r"^(Failed to reach NMX-[CM]|NMX-[CM] refused): no NMX-C endpoint"), NOT_CONFIGURED),
    (re.compile(r"^Failed to reach NMX-[CM]\b"), UNREACHABLE),
    (re.compile(r"^NMX-[CM] refused\b"), REFUSED),
    (re.compile(r"^Failed to complete NMX-[CM] operation in time\b"), SLOW),
)
# Anything else (the planner's own words, say) is shown with addresses blanked out, first line only.
_ADDRESS = re.compile(
    r"\b[a-z][a-z0-9+.-]*://[^\s()<>\[\]'\"]+"  # URLs
    r"|\[[0-9a-fA-F:]+\](?::\d+)?"  # [IPv6]:port
    r"|\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b"  # IPv4[:port]
    r"|\b[A-Za-z0-9.-]+:\d{2,5}\b",  # host:port
)
HIDDEN = "[address hidden]"


def tenant_error_message(raw: str | None) -> str | None:
    """``raw`` (a stored domain error) as a tenant may read it."""
    if raw is None:
        return None
    for pattern, message in _KNOWN:
        if pattern.search(raw):
            return message
    first = raw.strip().splitlines()[0] if raw.strip() else ""
    return _ADDRESS.sub(HIDDEN, first)
