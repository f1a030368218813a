"""Optional dependencies (the `models` extra): imported where first needed, and a one-line
error naming the extra when one is missing, instead of a traceback."""

from __future__ import annotations

from importlib import import_module, metadata
from types import ModuleType

from graphstore.errors import InvalidInputError


def package_versions(*names: str) -> str:
    """The installed versions of the packages `names` (`keybert 0.9.0`; `absent` for one not
    installed, which is no error here: whatever needs it says so when it imports it)."""
    found = []
    for name in names:
        try:
            found.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            found.append(f"{name} absent")
    return ", ".join(found)


def optional_import(name: str, purpose: str) -> ModuleType:
    """The module `name`, or a one-line error naming what needs it (`purpose`) and the
    extra that installs it."""
    try:
        return import_module(name)
    except ImportError as error:
        package = name.split(".", maxsplit=1)[0]
        raise InvalidInputError(
            f"{purpose}: {package} is not installed; pip install 'graphstore[models]'"
        ) from error
