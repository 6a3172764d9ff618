"""Following main: the follower turns new heads into tree diffs for its sinks (the search index, the
embedding vectors), each sink's worker and pace, the feeds that tell every process of new heads, and
what each sink covers (progress). Imports the store, index, vectors and the service parts; never a
use case above it.
"""
