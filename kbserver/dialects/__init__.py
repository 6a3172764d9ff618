"""Memory dialects: the tool sets other agent platforms speak (memory, semantic, typed, auto,
memory_tool), each mapped onto KB files with YAML front matter and onto the write path.

Each dialect is one `Dialect` declaration (registry.py): the built-in ones are listed there, others
come from installed packages (entry points `kbserver.dialects`). Calls kbserver.services and uses
kbserver.core; never store, index, control or an edge. Every change a dialect makes is one version
through the same write path as `write_context`.
"""
