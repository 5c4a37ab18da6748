"""
The HAR routes' C{redact} and C{redact_key} parameters
(C{GET /network.har?redact=secrets}, and a session's): over HTTP a policy
is named, never read from a path, so that a caller on loopback can't have
the proxy open files for it.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode

from netlog.api.params import BadParameter
from netlog.har.redact import PolicyError, Redactor, makeKey, namedPolicy

#: The parameters taken here; the rest of the query goes on to the route.
REDACT_PARAMETERS = ("redact", "redact_key")


def takeRedaction(query: bytes) -> tuple[bytes, Redactor | None]:
    """
    The query without the redaction's parameters, and the redactor they ask
    for (None for none).

    @raise BadParameter: a parameter given twice, a policy that is not a
        built-in's name (or C{none}), a key without a policy, or an empty key.
    """
    try:
        pairs = parse_qsl(query.decode("ascii"), keep_blank_values=True)
    except UnicodeDecodeError:
        # the route's own parsing says what is wrong with it
        return query, None
    taken: dict[str, str] = {}
    rest = []
    for name, value in pairs:
        if name not in REDACT_PARAMETERS:
            rest.append((name, value))
        elif name in taken:
            raise BadParameter(name, "given more than once")
        else:
            taken[name] = value
    if not taken:
        return query, None
    if "redact" not in taken:
        raise BadParameter("redact_key", "is only for a redaction: give redact=POLICY too")
    try:
        policy = namedPolicy(taken["redact"])
    except PolicyError as e:
        raise BadParameter("redact", str(e)) from None
    try:
        key = makeKey(taken.get("redact_key"))
    except PolicyError as e:
        raise BadParameter("redact_key", str(e)) from None
    return urlencode(rest).encode("ascii"), Redactor(policy, key) if policy is not None else None
