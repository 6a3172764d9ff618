"""Pydantic models of the HTTP API's query strings and bodies, and the few answers only the API has.

Answers are the services' own models (kbserver.services.models); /openapi.json is generated from both.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel, StrictBool

from kbserver.core.model import (
    AGENT_PATTERN,
    SLUG_PATTERN,
    VERSION_PATTERN,
    Message,
    Permission,
    WriteRequest,
)
from kbserver.core.paths import MAX_PATH_BYTES, PATH_PATTERN
from kbserver.dialects import registry
from kbserver.services.models import Agent, KBSummary, Link

__all__ = [
    "AgentCreate",
    "AgentWithToken",
    "ErrorOut",
    "FilesQuery",
    "IndexQuery",
    "KBCreate",
    "KBList",
    "LinkIn",
    "Links",
    "NoQuery",
    "ProposalsQuery",
    "ReadQuery",
    "RejectIn",
    "RevertIn",
    "ReviewIn",
    "RunEndIn",
    "RunFilesQuery",
    "RunIn",
    "SearchQuery",
    "UndoIn",
    "VersionsQuery",
    "WriteRequest",
]


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


# What /openapi.json states about the values the server checks (the services enforce them all).
Version = Annotated[str, Field(pattern=VERSION_PATTERN, description="a version: a 40-hex commit id on main")]
Slug = Annotated[str, Field(pattern=SLUG_PATTERN)]
AgentName = Annotated[str, Field(pattern=AGENT_PATTERN)]
FilePath = Annotated[
    str,
    Field(
        min_length=1,
        description="a KB file path (CONTRACT.md §3 Paths)",
        json_schema_extra={"pattern": PATH_PATTERN, "maxLength": MAX_PATH_BYTES},
    ),
]
SearchText = Annotated[str, Field(min_length=1, pattern=r"\S", description="non-blank search text")]
if TYPE_CHECKING:
    ToolSet = str
else:  # the registered tool sets (kbserver.dialects.registry), loaded when the API is imported
    ToolSet = Literal[registry.tool_set_names()]


class ErrorBody(BaseModel):
    code: str
    message: str


class ErrorOut(BaseModel):
    error: ErrorBody


class KBCreate(_In):
    slug: str = Field(pattern=SLUG_PATTERN)
    description: str = Field(default="", max_length=2000)


class KBList(RootModel[list[KBSummary]]):
    """`GET /kbs` answers a bare list."""


class FilesQuery(_In):
    prefix: str = ""
    version: Version | None = None


class ReadQuery(_In):
    version: Version | None = None


class RunFilesQuery(_In):
    prefix: str = ""


class NoQuery(_In):
    pass


class VersionsQuery(_In):
    path: FilePath | None = None
    limit: int = Field(default=50, ge=1, le=200)
    cursor: Version | None = None


class RevertIn(_In):
    version: Version
    message: Message | None = None


class UndoIn(_In):
    message: Message | None = None


class ReviewIn(_In):
    version: Version


class SearchQuery(_In):
    q: SearchText
    limit: int = Field(default=10, ge=1, le=100)
    offset: int = Field(default=0, ge=0)
    prefix: str | None = None
    wait_for: Version | None = Field(
        default=None, description="search once the index covers this version (a write's `version`)"
    )
    timeout: float = Field(default=10.0, ge=0, le=60, description="seconds to wait for `wait_for` at most")


class IndexQuery(_In):
    wait_for: Version | None = None
    timeout: float = Field(default=10.0, ge=0, le=60)


class ProposalsQuery(_In):
    status: Literal["pending", "applying", "approved", "rejected"] | None = None


class RejectIn(_In):
    reason: str | None = Field(default=None, max_length=10_000)


class RunIn(_In):
    kbs: list[Slug] | None = None
    interactive: StrictBool = False
    label: str | None = Field(
        default=None,
        max_length=200,
        description="what the run is for: the reviewer's inbox names its task so",
    )


class RunEndIn(_In):
    """`POST /runs/{id}/end` takes no fields (an empty body or `{}`)."""


def _default_tools() -> list[ToolSet]:
    return ["context"]


class AgentCreate(_In):
    name: str = Field(pattern=AGENT_PATTERN)
    parent: AgentName | None = None
    tools: list[ToolSet] = Field(default_factory=_default_tools, json_schema_extra={"uniqueItems": True})
    auto_record: StrictBool = False


class AgentWithToken(Agent):
    """A new agent or a rotated token: the token is shown this once."""

    token: str


class Links(BaseModel):
    links: list[Link]


class LinkIn(_In):
    kb: Slug
    permission: Permission
