"""The Cassandra 5.0 backend (SAI vector indexes), as a thin layer over cassandra-driver.

- `url`: the `cassandra://` URL and identifier checks;
- `consistency`: the consistency level of each kind of request, and what a search sees;
- `session`: prepared statements, retries and the in-flight bound (`Requests`);
- `schema`: tables, indexes and replication (DDL);
- `queries`: every query template (values are always bound);
- `rows`: rows as model objects;
- `storage`: `CassandraStorage`, the `Storage` interface on top of them.
"""

from graphstore.cassandra.consistency import Consistency
from graphstore.cassandra.storage import CassandraStorage
from graphstore.cassandra.url import CassandraURL, parse_url

__all__ = ["CassandraStorage", "CassandraURL", "Consistency", "parse_url"]
