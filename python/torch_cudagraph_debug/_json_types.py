"""Type aliases for JSON metadata: what ``run_metadata`` and point ``metadata`` accept
(``JSONValue``) and what runs hand back (``FrozenJSONValue``, immutable containers)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeAlias

JSONScalar: TypeAlias = str | bool | int | float | None
# The recursion goes through string forward references inside the containers.
JSONValue: TypeAlias = JSONScalar | list["JSONValue"] | dict[str, "JSONValue"]
FrozenJSONValue: TypeAlias = (
    JSONScalar | tuple["FrozenJSONValue", ...] | Mapping[str, "FrozenJSONValue"]
)

__all__ = ["FrozenJSONValue", "JSONScalar", "JSONValue"]
