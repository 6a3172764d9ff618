"""kbserver: versioned, reviewable memory for AI agents; every knowledge base is a git repository."""

__version__ = "0.1.0"
