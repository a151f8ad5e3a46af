"""Rental rules (set sizes, volume discounts, minimum term) and verdict thresholds, from data/rental.toml."""

from __future__ import annotations

from functools import cache, lru_cache

from .loader import builtin, builtin_path
from .records import record
from .schema import check_keys, check_tables


@record(slots=True)
class RentalRules:
    set_sizes: tuple[int, ...]
    node_size: int
    min_term_days: int
    discounts: tuple[tuple[int, float], ...]  # (from this many cards, fraction off), ascending
    tight_single_bytes: int
    tight_per_card_bytes: int
    rule_of_thumb: tuple[float, float]

    def discount(self, count: int) -> float:
        return _discount(self.discounts, count)

    def nodes(self, count: int) -> int:
        """Nodes a set of `count` cards spans (node_size cards per node)."""
        return max(-(-count // self.node_size), 1)

    def larger_sets(self, min_count: int = 1, max_nodes: int = 64) -> list[int]:
        """Set sizes to try after one card, smallest first: 2/4/8 inside a node, then whole nodes."""
        sizes = [n for n in self.set_sizes if n > 1 and n >= min_count]
        return sizes + [self.node_size * k for k in range(2, max_nodes + 1)]


# Kept by tiers and count: a deploy search prices every card set it sizes and every replica count it times
# (core/fit.py set_price), tens of thousands of times over a handful of counts.
@lru_cache(maxsize=1024)
def _discount(discounts: tuple[tuple[int, float], ...], count: int) -> float:
    """The fraction off `count` cards: the largest of the tiers (from this many cards, fraction off) it
    reaches, 0 below them all."""
    return max((f for n, f in discounts if count >= n), default=0.0)


# the keys of data/rental.toml (its tables map onto RentalRules by the reader below)
RENTAL_KEYS = frozenset({"set_sizes", "node_size", "min_term_days", "discount", "source"})
DISCOUNT_KEYS = frozenset({"min_count", "fraction", "source"})
VERDICT_KEYS = frozenset({"tight_single_bytes", "tight_per_card_bytes", "rule_of_thumb_low",
                          "rule_of_thumb_high", "source"})


@cache
def default_rental() -> RentalRules:
    d = builtin("rental.toml")
    path = builtin_path("rental.toml")
    check_tables(d, ("rental", "verdict"), path=path)
    r, v = d["rental"], d["verdict"]
    check_keys(r, RENTAL_KEYS, table="rental", path=path, record="rental")
    check_keys(v, VERDICT_KEYS, table="verdict", path=path, record="verdict")
    for x in r["discount"]:
        check_keys(x, DISCOUNT_KEYS, table="rental.discount", path=path, record=str(x.get("min_count", "?")))
    return RentalRules(
        set_sizes=tuple(r["set_sizes"]), node_size=r["node_size"],
        min_term_days=r["min_term_days"],
        discounts=tuple(sorted((x["min_count"], x["fraction"]) for x in r["discount"])),
        tight_single_bytes=v["tight_single_bytes"], tight_per_card_bytes=v["tight_per_card_bytes"],
        rule_of_thumb=(v["rule_of_thumb_low"], v["rule_of_thumb_high"]),
    )
