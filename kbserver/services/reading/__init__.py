"""Reading: files and folders of a version, full-text and semantic search with hybrid ranking,
runs (snapshots pinned at their start), retrieval counters of memories, and the privacy rule
that hides one agent's memories from another on every surface. Never writes a version.
"""
