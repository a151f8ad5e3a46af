"""A name-indexed collection of frozen records with forgiving lookup and suggestions."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from ..errors import CatalogError, UnknownNameError
from ..names import closest, norm

R = TypeVar("R")


class Registry(Generic[R]):
    """Records by id, findable by any of their names; `get` raises UnknownNameError with suggestions."""

    def __init__(self, kind: str, listing: str, records: list[R], names: Callable[[R], list[str]]) -> None:
        self.kind, self.listing = kind, listing
        self._records = records
        self._index: dict[str, R] = {}
        self._display: dict[str, str] = {}
        for rec in records:
            all_names = names(rec)
            for n in all_names:
                k = norm(n)
                if not k:
                    continue
                other = self._index.get(k)
                if other is not None and other is not rec:
                    raise CatalogError(f"{kind} name '{n}' is used by two records")
                self._index[k] = rec
                self._display[k] = all_names[0]

    def __iter__(self) -> Iterator[R]:
        return iter(self._records)

    def __len__(self) -> int:
        return len(self._records)

    def find(self, name: str) -> R | None:
        return self._index.get(norm(name))

    def get(self, name: str) -> R:
        rec = self.find(name)
        if rec is None:
            raise UnknownNameError(self.kind, name, closest(name, self._display), self.listing)
        return rec
