"""Web admin edge (`/admin`): people browse, review, revert, approve and edit what agents wrote.

Parses a form or a URL, calls kbserver.services, renders a jinja2 template: never decides. The only
package that imports jinja2. Never imports store, index, control or changes.
"""

from kbserver.web.site import admin_app

__all__ = ["admin_app"]
