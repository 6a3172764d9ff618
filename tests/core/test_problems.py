"""Validation errors in words: the field as a path, what is wrong and what is allowed."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from kbserver.core.model import WriteRequest
from kbserver.core.problems import problems


def _said(body: dict[str, Any]) -> list[str]:
    with pytest.raises(ValidationError) as err:
        WriteRequest.model_validate(body)
    return [f"{p['field']}: {p['problem']}" for p in problems(err.value, "body")]


def test_the_writes_mistakes_in_words() -> None:
    assert _said({"files": [{"path": "a.md", "mode": "apend", "content": "x"}]}) == [
        "files[0].mode: 'apend' is not a mode; use create, append, edit, overwrite or delete"
    ]
    assert _said({"files": [{"path": "a.md", "content": "x"}]}) == [
        "files[0].mode: is missing; use create, append, edit, overwrite or delete"
    ]
    sha = {"path": "a.md", "mode": "edit", "old_string": "x", "new_string": "y", "expected_sha256": "zz"}
    assert _said({"files": [sha]}) == [
        "files[0].expected_sha256: must be a sha256: 64 lowercase hex digits, "
        "as a read of the file returned it"
    ]
    assert _said({"files": [{"path": "a.md", "mode": "create"}]}) == ["files[0].content: is required"]
    assert _said({"files": "x"}) == ["files: must be a list (a JSON array)"]
    said = _said({"files": [], "bogus": 1})
    assert said[0] == "files: is empty; give at least one" and said[1].startswith(
        "bogus: is not a field here"
    )
    for text in said:
        assert "Input" not in text and "pattern" not in text and "tag" not in text
