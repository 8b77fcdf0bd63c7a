"""Data only: the known-failure knowledge base (*.toml), read by parsers.knowledge."""
