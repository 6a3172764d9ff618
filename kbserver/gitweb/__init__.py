"""git edge: read-only smart HTTP at `/git/{slug}.git`, so `git clone` and `git fetch` get a KB's history.

Owns the git wire protocol over HTTP: basic/bearer auth, the routes upload-pack needs, refusing push,
and running C git's `upload-pack --stateless-rpc` as a subprocess per request (the event loop only
moves bytes). Pending proposals (`refs/proposals/*`) are hidden unless the admin sends
`X-KB-Proposals: 1`. Without a `git` binary it answers 503; there is no pure-Python fallback.

Calls kbserver.services (authenticate, require_read, the repository path) and uses kbserver.core;
never store, index, control or changes directly, and no other edge (api, mcp, web).
"""

from kbserver.gitweb.http import MAX_BODY_BYTES, PROPOSALS_HEADER, GitEdge, git_app

__all__ = ["MAX_BODY_BYTES", "PROPOSALS_HEADER", "GitEdge", "git_app"]
