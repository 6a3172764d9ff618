"""Writing: the one write path (permission, runs, proposals, one commit through the KB's writer),
the commit metadata every use case shares, ask-before-write proposals and their approval,
idempotency keys, and the files reserved for one tool set. Imports reading (privacy, runs) and
access (who may write); never reviewing.
"""
