"""A name-indexed collection of frozen records with forgiving lookup and suggestions."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, Generic, TypeVar

from ..errors import CatalogError, UnknownNameError
from ..names import closest, norm

R = TypeVar("R")


class Registry(Generic[R]):
    """Records by id, findable by any of their names; `get` raises UnknownNameError with suggestions.

    `Registry.lazy` indexes the names of raw catalog rows and builds a row's record the first time it is
    asked for (each once): a question about one model on one card builds two records, not the whole
    catalog. Iterating builds every record, in catalog order."""

    def __init__(self, kind: str, listing: str, records: list[R], names: Callable[[R], list[str]]) -> None:
        self._setup(kind, listing, [names(rec) for rec in records])
        self._records: list[R | None] = list(records)
        self._rows: Sequence[Any] = ()
        self._build: Callable[[Any], R] | None = None

    @classmethod
    def lazy(cls, kind: str, listing: str, rows: Sequence[Any], names: Callable[[Any], list[str]],
             build: Callable[[Any], R]) -> Registry[R]:
        """Records built on demand by `build(row)`; `names(row)`: the names its record will have."""
        self = cls.__new__(cls)
        self._setup(kind, listing, [names(row) for row in rows])
        self._records = [None] * len(rows)
        self._rows, self._build = rows, build
        return self

    def _setup(self, kind: str, listing: str, names: list[list[str]]) -> None:
        self.kind, self.listing = kind, listing
        index: dict[str, int] = {}
        display: dict[str, str] = {}
        self._index, self._display = index, display
        get = index.get  # every catalog name of every record passes here when a command starts
        for i, all_names in enumerate(names):
            for n in all_names:
                k = norm(n)
                if not k:
                    continue
                other = get(k)
                if other is not None and other != i:
                    raise CatalogError(f"{kind} name '{n}' is used by two records")
                index[k] = i
                display[k] = all_names[0]

    def _record(self, i: int) -> R:
        rec = self._records[i]
        if rec is None:
            assert self._build is not None
            rec = self._records[i] = self._build(self._rows[i])
        return rec

    def __iter__(self) -> Iterator[R]:
        return (self._record(i) for i in range(len(self._records)))

    def __len__(self) -> int:
        return len(self._records)

    def find(self, name: str) -> R | None:
        i = self._index.get(norm(name))
        return None if i is None else self._record(i)

    def get(self, name: str) -> R:
        rec = self.find(name)
        if rec is None:
            raise UnknownNameError(self.kind, name, closest(name, self._display), self.listing)
        return rec
