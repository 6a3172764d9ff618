"""Control plane: agents, token hashes, links, KB metadata, runs and proposals in SQLite (WAL).

Sits beside store and index: imports only kbserver.core. Tokens are never stored in clear.
"""

from kbserver.control.db import AgentRow, ControlPlane, KBRow, ProposalRow, RunRow, hash_token

__all__ = ["AgentRow", "ControlPlane", "KBRow", "ProposalRow", "RunRow", "hash_token"]
