"""Changes: the pure write engine — write modes, stale checks, limits, file/folder clashes, secrets.

Files in, files out: `apply` reads a `Tree` and returns the new bytes of every changed path, or
raises one KBError. No I/O, no git, no clock. Imports only `kbserver.core` (and detect-secrets);
must not import store, index, services or any edge.
"""

from kbserver.changes.apply import Applied, Tree, apply, sha256_hex
from kbserver.changes.secrets import refuse_secrets, scan_secrets

__all__ = ["Applied", "Tree", "apply", "refuse_secrets", "scan_secrets", "sha256_hex"]
