"""Where a Cassandra store lives: the `cassandra://` URL and checked CQL identifiers."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from graphstore.errors import InvalidInputError

DEFAULT_PORT = 9042
DEFAULT_TABLE = "graphstore"
PASSWORD_ENV = "GRAPHSTORE_CASSANDRA_PASSWORD"
IDENTIFIER = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,47}")


def identifier(what: str, name: Any) -> str:
    """`name` lower-cased (CQL folds unquoted names), or InvalidInputError if not an identifier."""
    if not isinstance(name, str) or not IDENTIFIER.fullmatch(name):
        raise InvalidInputError(
            f"Cassandra {what} name must be a letter followed by up to 47 letters, digits "
            f"or underscores, got {name!r}"
        )
    return name.lower()


@dataclass(frozen=True)
class CassandraURL:
    """The parts of `cassandra://[user[:password]@]host[:port][,host…]/keyspace[?table=…]`."""

    hosts: list[str]
    port: int
    keyspace: str
    table: str
    username: str | None
    password: str | None

    def __repr__(self) -> str:  # never show the password
        return (
            f"CassandraURL(hosts={self.hosts!r}, port={self.port}, keyspace={self.keyspace!r}, "
            f"table={self.table!r}, username={self.username!r})"
        )


def parse_url(url: str) -> CassandraURL:
    """Split a `cassandra://` URL; a missing password is read from $GRAPHSTORE_CASSANDRA_PASSWORD.

    Error messages name the faulty part only, never the URL, which may hold a password.
    """
    try:
        parts = urlsplit(url)
    except ValueError as error:  # e.g. an unclosed "[" of an IPv6 address
        raise InvalidInputError(f"the cassandra:// URL is malformed: {error}") from None
    if parts.scheme != "cassandra":
        raise InvalidInputError("a Cassandra store URL must start with cassandra://")
    userinfo, _, hostlist = parts.netloc.rpartition("@")
    username: str | None = None
    password: str | None = None
    if userinfo:
        user, has_password, secret = userinfo.partition(":")
        username = unquote(user) or None
        password = unquote(secret) if has_password else None
    if username is not None and password is None:
        password = os.environ.get(PASSWORD_ENV)
    hosts: list[str] = []
    ports: set[int] = set()
    for item in hostlist.split(","):
        host, port = _host_port(item.strip())
        hosts.append(host)
        ports.add(port)
    if len(ports) > 1:
        raise InvalidInputError("all hosts of a cassandra:// URL must use the same port")
    keyspace = unquote(parts.path.strip("/"))
    if not keyspace:
        raise InvalidInputError("a cassandra:// URL must name a keyspace: cassandra://host/ks")
    query = parse_qs(parts.query, keep_blank_values=True)
    unknown = sorted(set(query) - {"table"})
    if unknown:
        raise InvalidInputError(f"unknown cassandra:// URL option(s): {', '.join(unknown)}")
    table = query.get("table", [DEFAULT_TABLE])[-1]
    return CassandraURL(
        hosts=hosts,
        port=ports.pop(),
        keyspace=identifier("keyspace", keyspace),
        table=identifier("table", table),
        username=username,
        password=password,
    )


def _host_port(item: str) -> tuple[str, int]:
    """`host`, `host:port`, `[ipv6]` or `[ipv6]:port`."""
    if item.startswith("["):
        host, _, rest = item[1:].partition("]")
        port = rest.removeprefix(":")
    else:
        host, _, port = item.partition(":")
    if not host:
        raise InvalidInputError("a cassandra:// URL needs at least one host")
    if port and not (port.isdigit() and 0 < int(port) < 65536):
        raise InvalidInputError(f"port of Cassandra host {host!r} must be a number 1-65535")
    return host, int(port) if port else DEFAULT_PORT
