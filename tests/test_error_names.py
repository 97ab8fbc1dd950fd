"""Every error's name says it is one, and the old names still work, with a warning."""

from __future__ import annotations

import pytest

import durables
from durables import errors


def test_every_exported_error_name_ends_in_error() -> None:
    exported = [getattr(durables, name) for name in durables.__all__]
    errors_ = [e for e in exported if isinstance(e, type) and issubclass(e, BaseException)]
    assert len(errors_) > 10
    assert [e.__name__ for e in errors_ if not e.__name__.endswith("Error")] == []


@pytest.mark.parametrize("module", [durables, errors])
@pytest.mark.parametrize(
    ("old", "new"),
    [("ChannelNotFound", "ChannelNotFoundError"), ("DurableNotFound", "DurableNotFoundError")],
)
def test_an_old_error_name_warns_and_is_the_new_class(module: object, old: str, new: str) -> None:
    with pytest.warns(DeprecationWarning, match=new):
        found = getattr(module, old)
    assert found is getattr(durables, new)


def test_an_old_name_catches_what_the_library_raises() -> None:
    with pytest.warns(DeprecationWarning):
        from durables.errors import ChannelNotFound
    with pytest.raises(ChannelNotFound), durables.connect("memory://error-names") as client:
        client.get_channel("nowhere")


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_error"):
        _ = durables.no_such_error
