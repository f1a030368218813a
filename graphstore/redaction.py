"""Store locations fit to print: the one place a password in a location is masked.

Every message that shows a store location, or a part of one, goes through `redact`: the
CLI's error lines, the embedded backend's file messages (a mistyped URL is taken for a file
path) and the parsing of locations (`graphstore.location`).
"""

from __future__ import annotations

import re

URL_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):/*")
"""What starts a URL (`scheme:`, slashes optional): a location starting so is never taken
for a file path, so a mistyped URL (`Cassandra:/user:pw@host/ks`) is refused, not created
as a file whose name holds the password (a file named so is reached as `./name`).  A
one-letter scheme too, as RFC 3986 allows: `x:store.db` made a file named so."""


def redact(location: str) -> str:
    """`location` fit to print: from the first `:` after the scheme and its slashes (from the
    first `:` when there are none) to the last `@`, replaced by `***`.

    Every message that shows a store location, or a part of one, shows this, never the
    location itself.  A scheme is not required: a mistyped URL (`cassandra//app:pw@db1/ks`) is
    a file path, and the messages about files show it too.  Nor are URL rules followed: a
    password with an unescaped "/", "?" or "@" is hidden whole, and so is anything between a
    `:` and an `@` of a file path (over-redacting is the safe mistake).
    """
    scheme = URL_SCHEME.match(location)
    start = scheme.end() if scheme is not None and scheme.group().endswith("/") else 0
    userinfo, at, hosts = location.rpartition("@")
    colon = userinfo.find(":", start)
    if not at or colon < 0:
        return location
    return f"{userinfo[:colon]}:***@{hosts}"
