"""Query templates.

Only the quoted, validated table names (`{nodes}`, `{tags}`, `{hot}`, `{hot_tags}`, `{meta}`), `?`
markers and a `{where}` of filter restrictions (`graphstore.cassandra.filters`:
`filter_terms CONTAINS ?` and ranges on range columns, whose names are hashes) are ever
formatted in; every value is bound.
"""

# Nodes
# Reads by key come in pairs: `IN` (one request for many keys, on one node) and `=` (one per
# key, each routed to a replica of its row, on a cluster): `Requests.run_keys`.
SELECT_PLACEMENTS = (
    "SELECT node_id, links, tag_buckets, filter_terms FROM {nodes} WHERE node_id IN ?",
    "SELECT node_id, links, tag_buckets, filter_terms FROM {nodes} WHERE node_id = ?",
)
SELECT_NODES = (
    "SELECT node_id, text, metadata, links, embedding FROM {nodes} WHERE node_id IN ?",
    "SELECT node_id, text, metadata, links, embedding FROM {nodes} WHERE node_id = ?",
)
INSERT_NODE = (
    "INSERT INTO {nodes} (node_id, text, metadata, links, embedding, outgoing, filter_terms, "
    "tag_buckets) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
DELETE_NODE = "DELETE FROM {nodes} WHERE node_id = ?"
SEARCH_HITS = (
    "SELECT node_id, embedding, outgoing, similarity_cosine(embedding, ?), filter_terms "
    "FROM {nodes}{where} ORDER BY embedding ANN OF ? LIMIT ?"
)
"""The nearest passages: what ranks and expands them (a search reads the passages it returns
by key at its end, since an ANN row may be one deleted, `CassandraStorage._current`)."""
SCAN_HITS = "SELECT node_id, embedding, outgoing, filter_terms FROM {nodes}{where}"

# Small parts (read whole; the static `buckets` says which buckets a hot tag has)
INSERT_TAG = (
    "INSERT INTO {tags} (kind, tag, node_id, embedding, outgoing, filter_terms) "
    "VALUES (?, ?, ?, ?, ?, ?)"
)
DELETE_TAG = "DELETE FROM {tags} WHERE kind = ? AND tag = ? AND node_id = ?"
READ_TAGS = (
    "SELECT kind, tag, buckets, node_id, embedding, outgoing, filter_terms FROM {tags} "
    "WHERE kind = ? AND tag IN ?",
    "SELECT kind, tag, buckets, node_id, embedding, outgoing, filter_terms FROM {tags} "
    "WHERE kind = ? AND tag = ?",
)
READ_TAG_KEYS = "SELECT tag, buckets, node_id, filter_terms FROM {tags} WHERE kind = ? AND tag = ?"
READ_BUCKETS = "SELECT buckets FROM {tags} WHERE kind = ? AND tag = ? LIMIT 1"
ADD_BUCKETS = "UPDATE {tags} SET buckets = buckets + ? WHERE kind = ? AND tag = ?"

# Hot parts (bucketed, SAI-indexed) and the hot-tag directory (counters of hot rows)
INSERT_HOT = (
    "INSERT INTO {hot} (kind, tag, bucket, node_id, embedding, outgoing, filter_terms) "
    "VALUES (?, ?, ?, ?, ?, ?, ?)"
)
DELETE_HOT = "DELETE FROM {hot} WHERE kind = ? AND tag = ? AND bucket = ? AND node_id = ?"
SEARCH_HOT = (
    "SELECT node_id, embedding, outgoing, similarity_cosine(embedding, ?), filter_terms "
    "FROM {hot} WHERE kind = ? AND tag = ? AND bucket = ?{where} ORDER BY embedding ANN OF ? "
    "LIMIT ?"
)
SCAN_HOT_BUCKET = (
    "SELECT node_id, embedding, outgoing, filter_terms FROM {hot} "
    "WHERE kind = ? AND tag = ? AND bucket = ?{where}"
)
HOT_MEMBERS = (
    "SELECT node_id, filter_terms FROM {hot} WHERE kind = ? AND tag = ? AND bucket = ?{where}"
)
COUNT_HOT = "SELECT COUNT(*) FROM {hot} WHERE kind = ? AND tag = ? AND bucket = ?{where}"
ADD_HOT_ROWS = "UPDATE {hot_tags} SET rows = rows + ? WHERE directory = 0 AND kind = ? AND tag = ?"
READ_HOT_TAGS = "SELECT kind, tag, rows FROM {hot_tags} WHERE directory = 0"
READ_HOT_ROWS = "SELECT rows FROM {hot_tags} WHERE directory = 0 AND kind = ? AND tag = ?"

# Full scans (stats, check, maintenance)
# The store's settings (`name` → `value`)
CREATE_META = "CREATE TABLE IF NOT EXISTS {meta} (name text PRIMARY KEY, value text)"
SELECT_META = "SELECT name, value FROM {meta}"
INSERT_META = "INSERT INTO {meta} (name, value) VALUES (?, ?)"
SELECT_MODEL = "SELECT value FROM {meta} WHERE name = 'model'"
INSERT_MODEL = "INSERT INTO {meta} (name, value) VALUES ('model', ?) IF NOT EXISTS"
REPLACE_MODEL = "UPDATE {meta} SET value = ? WHERE name = 'model' IF value = ?"

SCAN_NODES = "SELECT node_id, links, outgoing, filter_terms, tag_buckets, metadata FROM {nodes}"
SCAN_NODE_IDS = "SELECT node_id FROM {nodes}"
SCAN_METADATA = "SELECT node_id, metadata FROM {nodes}"
SCAN_TAGS = "SELECT kind, tag, buckets, node_id, outgoing, filter_terms FROM {tags}"
SCAN_HOT = "SELECT kind, tag, bucket, node_id, outgoing, filter_terms FROM {hot}"
SCAN_TAG_KEYS = "SELECT kind, tag, node_id FROM {tags}"
SCAN_HOT_KEYS = "SELECT kind, tag FROM {hot}"
