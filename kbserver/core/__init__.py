"""Core: the error hierarchy, the shared data models and the path rules.

Pure code (stdlib and pydantic only). Must not import any other kbserver package.
"""
