"""Query templates.

Only the quoted, validated table names (`{nodes}`, `{tags}`), `?` markers and a `{where}` of
filter restrictions (`graphstore.cassandra.filters`: `filter_terms CONTAINS ?` and ranges on
range columns, whose names are hashes) are ever formatted in; every value is bound.
"""

SELECT_LINKS = "SELECT links, filter_terms FROM {nodes} WHERE node_id = ?"
SELECT_NODE = "SELECT node_id, text, metadata, links, embedding FROM {nodes} WHERE node_id = ?"
INSERT_NODE = (
    "INSERT INTO {nodes} (node_id, text, metadata, links, embedding, outgoing, filter_terms) "
    "VALUES (?, ?, ?, ?, ?, ?, ?)"
)
DELETE_NODE = "DELETE FROM {nodes} WHERE node_id = ?"
INSERT_TAG = (
    "INSERT INTO {tags} (kind, tag, node_id, embedding, outgoing, filter_terms) "
    "VALUES (?, ?, ?, ?, ?, ?)"
)
DELETE_TAG = "DELETE FROM {tags} WHERE kind = ? AND tag = ? AND node_id = ?"
SEARCH_NODES = (
    "SELECT node_id, text, metadata, links, embedding, similarity_cosine(embedding, ?) "
    "FROM {nodes}{where} ORDER BY embedding ANN OF ? LIMIT ?"
)
SEARCH_HITS = (
    "SELECT node_id, embedding, outgoing, similarity_cosine(embedding, ?), filter_terms "
    "FROM {nodes}{where} ORDER BY embedding ANN OF ? LIMIT ?"
)
SEARCH_TAG = (
    "SELECT node_id, embedding, outgoing, similarity_cosine(embedding, ?), filter_terms "
    "FROM {tags} WHERE kind = ? AND tag = ?{where} ORDER BY embedding ANN OF ? LIMIT ?"
)
SCAN_SEARCH = "SELECT node_id, text, metadata, links, embedding FROM {nodes}{where}"
SCAN_HITS = "SELECT node_id, embedding, outgoing, filter_terms FROM {nodes}{where}"
SCAN_TAG = (
    "SELECT node_id, embedding, outgoing, filter_terms FROM {tags} "
    "WHERE kind = ? AND tag = ?{where}"
)
TAG_MEMBERS = "SELECT node_id, filter_terms FROM {tags} WHERE kind = ? AND tag = ?{where}"
READ_TAG = (
    "SELECT node_id, embedding, outgoing, filter_terms FROM {tags} WHERE kind = ? AND tag = ? "
    "LIMIT ?"
)
COUNT_TAG = "SELECT COUNT(*) FROM {tags} WHERE kind = ? AND tag = ?{where}"
SCAN_NODES = "SELECT node_id, links, outgoing, filter_terms FROM {nodes}"
SCAN_TAGS = "SELECT kind, tag, node_id, outgoing, filter_terms FROM {tags}"
SCAN_TAG_KEYS = "SELECT kind, tag FROM {tags}"
SCAN_NODE_IDS = "SELECT node_id FROM {nodes}"
