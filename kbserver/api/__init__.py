"""HTTP API edge (/api/v1): parse requests, call a service, render JSON. Never decides.

Imports services and core only; never store, index or control directly.
"""

from kbserver.api.openapi import openapi_document
from kbserver.api.routes import ENDPOINTS, api_routes

__all__ = ["ENDPOINTS", "api_routes", "openapi_document"]
