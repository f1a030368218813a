"""The Cassandra 5.0 backend (SAI vector indexes), as a thin layer over cassandra-driver.

- `url`: the `cassandra://` URL and identifier checks;
- `consistency`: the consistency level of each kind of request, and what a search sees;
- `session`: prepared statements, retries and the in-flight bound (`Requests`);
- `schema`: tables, indexes and replication (DDL); `tables`: one store's tables on the server
  (dimension, upgrade of older stores, drop);
- `queries`: every query template (values are always bound);
- `rows`: rows as model objects;
- `layout`: where a tag row lives (a small tag's partition, read whole, or one bucket of a
  hot tag, SAI-indexed); `hot_tags`: the directory of hot tags and their buckets;
- `writes`: the write path (one logged batch per node); `tag_reads`: reading tags (small
  parts by `IN`, buckets by ANN, in one wave);
- `filters` and `ranges`: metadata filters as SAI restrictions and the range columns they use;
- `check`: `check` and `stats` by full scans;
- `storage`: `CassandraStorage`, the `Storage` interface on top of them.
"""

from graphstore.cassandra.consistency import Consistency
from graphstore.cassandra.layout import TagLayout
from graphstore.cassandra.storage import CassandraStorage
from graphstore.cassandra.url import CassandraURL, parse_url

__all__ = ["CassandraStorage", "CassandraURL", "Consistency", "TagLayout", "parse_url"]
