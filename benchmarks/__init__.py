"""Benchmarks: write scaling, traversal latency and retrieval quality (see README.md)."""
