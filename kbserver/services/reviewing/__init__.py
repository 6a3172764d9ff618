"""Reviewing: what people do with what agents wrote. History and diffs of versions, revert and
undo, the reviewed-up-to marker and the inbox of unreviewed writes, a KB's activity at a glance,
and proposals as a person judges them. Imports writing and reading; nothing below imports it.
"""
