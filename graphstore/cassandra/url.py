"""Where a Cassandra store lives: the `cassandra://` URL and checked CQL identifiers.

Options: `table=prefix`, `replication_factor=N` (a new keyspace's SimpleStrategy factor),
`consistency=LEVEL` (writes and key reads), `read_consistency=` and `write_consistency=`
(one kind each, over `consistency`).  Each is validated; none reaches CQL unchecked.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from graphstore.cassandra.consistency import DEFAULT_LEVEL, Consistency
from graphstore.errors import InvalidInputError

DEFAULT_PORT = 9042
DEFAULT_TABLE = "graphstore"
PASSWORD_ENV = "GRAPHSTORE_CASSANDRA_PASSWORD"
OPTIONS = ("table", "replication_factor", "consistency", "read_consistency", "write_consistency")
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
    """The parts of `cassandra://[user[:password]@]host[:port][,host…]/keyspace[?options]`."""

    hosts: list[str]
    port: int
    keyspace: str
    table: str
    username: str | None
    password: str | None
    replication: dict[str, str | int] | None = None
    consistency: Consistency = field(default_factory=Consistency)

    def __repr__(self) -> str:  # never show the password
        return (
            f"CassandraURL(hosts={self.hosts!r}, port={self.port}, keyspace={self.keyspace!r}, "
            f"table={self.table!r}, username={self.username!r}, "
            f"replication={self.replication!r}, consistency={self.consistency!r})"
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
    if not parts.netloc:  # `cassandra:///…`: what follows the third "/" would be read as a path
        raise InvalidInputError("a cassandra:// URL needs a host: cassandra://host/keyspace")
    if "@" in url[len(parts.scheme) + 3 + len(parts.netloc) :]:
        # An unescaped "/", "?" or "#" in the password ended the host part early: the rest
        # of the password would be read (and reported) as the keyspace or an option.
        raise InvalidInputError(
            "the user name and password of a cassandra:// URL must be percent-encoded when "
            "they hold '/', '?' or '#'"
        )
    userinfo, _, hostlist = parts.netloc.rpartition("@")
    username: str | None = None
    password: str | None = None
    if userinfo:
        user, has_password, secret = userinfo.partition(":")
        username = unquote(user) or None
        password = unquote(secret) if has_password else None
    if username is not None and password is None:
        password = os.environ.get(PASSWORD_ENV)
        if password is None:  # the driver's "Password must not be null" named neither way
            raise InvalidInputError(
                f"the cassandra:// URL names user {username!r} but no password: give it as "
                f"user:password@ (percent-encoded) or in ${PASSWORD_ENV}"
            )
    hosts: list[str] = []
    ports: set[int] = set()  # those given: a host without one takes theirs (`db1,db2:9043`)
    for item in hostlist.split(","):
        host, port = _host_port(item.strip())
        hosts.append(host)
        ports.update([port] if port is not None else [])
    if len(ports) > 1:
        raise InvalidInputError("all hosts of a cassandra:// URL must use the same port")
    keyspace = unquote(parts.path.strip("/"))
    if not keyspace:
        raise InvalidInputError("a cassandra:// URL must name a keyspace: cassandra://host/ks")
    query = parse_qs(parts.query, keep_blank_values=True)
    unknown = sorted(set(query) - set(OPTIONS))
    if unknown:
        raise InvalidInputError(f"unknown cassandra:// URL option(s): {', '.join(unknown)}")
    repeated = sorted(name for name, values in query.items() if len(values) > 1)
    if repeated:
        raise InvalidInputError(f"cassandra:// URL option(s) given twice: {', '.join(repeated)}")
    if parts.fragment or url.endswith("#"):
        raise InvalidInputError("a cassandra:// URL has no '#' part: remove it")
    table = query.get("table", [DEFAULT_TABLE])[-1]
    both = query.get("consistency", [DEFAULT_LEVEL])[-1]
    consistency = Consistency(
        read=query.get("read_consistency", [both])[-1],
        write=query.get("write_consistency", [both])[-1],
    )
    return CassandraURL(
        hosts=hosts,
        port=ports.pop() if ports else DEFAULT_PORT,
        keyspace=identifier("keyspace", keyspace),
        table=identifier("table", table),
        username=username,
        password=password,
        replication=_replication(query.get("replication_factor", [None])[-1]),
        consistency=consistency,
    )


def _replication(factor: str | None) -> dict[str, str | int] | None:
    """SimpleStrategy with the URL's `replication_factor`, or None when not given."""
    if factor is None:
        return None
    if not (factor.isdigit() and 0 < int(factor) < 100):
        raise InvalidInputError(
            f"replication_factor in a cassandra:// URL must be a number 1-99, got {factor!r}"
        )
    return {"class": "SimpleStrategy", "replication_factor": int(factor)}


def _host_port(item: str) -> tuple[str, int | None]:
    """`host`, `host:port`, `[ipv6]` or `[ipv6]:port` (None: no port given)."""
    if item.startswith("["):
        host, _, rest = item[1:].partition("]")
        port = rest.removeprefix(":")
    else:
        host, _, port = item.partition(":")
    if not host:
        raise InvalidInputError("a cassandra:// URL needs at least one host")
    if port and not (port.isdigit() and 0 < int(port) < 65536):
        raise InvalidInputError(f"port of Cassandra host {host!r} must be a number 1-65535")
    return host, int(port) if port else None
