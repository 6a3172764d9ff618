"""Services: the one API for every edge (HTTP, MCP, web, CLI).

The only layer that decides: who may do what, which run sees which snapshot, when a write becomes a
proposal. Imports store, changes, index, control and core; never an edge.
"""

from kbserver.services.context import Services

__all__ = ["Services"]
