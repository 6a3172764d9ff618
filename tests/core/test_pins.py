"""The checks the two fences of third-party internals share (kbserver.core.pins)."""

from __future__ import annotations

from kbserver.core import pins


class _Holder:
    def __init__(self) -> None:
        self._kept = 1

    def read(self) -> int:
        return self._kept

    @property
    def seen(self) -> int:
        def inner() -> int:
            return self._nested  # type: ignore[attr-defined, no-any-return]

        return inner()


def test_installed_names_the_version_or_none() -> None:
    assert pins.installed("pytest") is not None
    assert pins.installed("no-such-distribution-here") is None


def test_missing_attributes_and_uses_name_each_gap() -> None:
    assert pins.missing_attributes({_Holder: ("read", "seen")}) == []
    assert pins.missing_attributes({_Holder: ("read", "gone", "lost")}) == ["_Holder has no gone, lost"]
    assert pins.missing_uses({_Holder: ("_kept", "_nested")}) == []  # nested functions are read too
    assert pins.missing_uses({_Holder: ("_kept", "_renamed")}) == ["_Holder no longer uses _renamed"]


def test_missing_strings_reads_a_modules_constants() -> None:
    assert pins.missing_strings((("kbserver.core.pins", "fget"),)) == []
    assert pins.missing_strings((("kbserver.core.pins", "never said"),)) == [
        "kbserver.core.pins no longer logs 'never said'"
    ]
