"""Store: bare git repositories, one per KB; commits, compare-and-swap of main, history and diffs.

The only package (with gitweb) that imports dulwich. It knows git, not agents: above it,
everything is a version (a 40-hex commit id) and a path. Must not import services or edges.
"""

from kbserver.store.diffs import Change
from kbserver.store.repo import CommitInfo, KBRepo
from kbserver.store.repos import Repos
from kbserver.store.views import TreeView
from kbserver.store.writer import CommitPlan, Fence

__all__ = ["Change", "CommitInfo", "CommitPlan", "Fence", "KBRepo", "Repos", "TreeView"]
