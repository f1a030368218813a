"""Test support shipped with the package: deterministic embeddings and a local Cassandra node."""
