"""Who is calling and what they may do: the caller's permission on a KB, agents with their tokens
and links, people with roles and passwords, web admin sessions, OAuth connections and client
metadata, and the registry of tool sets an agent may be given. Imports only the service context
and models: every other room asks here.
"""
