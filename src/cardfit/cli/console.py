"""The console `cardfit plan` prints to: the bytes rich writes for markup lines and borderless tables, without
importing rich (its console and table modules are ~45 ms of a cold start, a third of the answer).

What it reproduces, as rich 15 does it: markup tags naming a style (`[bold]…[/]`), word wrapping at the
console width (rich/_wrap.py `divide_line`, trailing spaces kept up to the width), tables without a box
(column width = widest cell + one space of padding between columns; narrowed as rich narrows them when the
console is narrower, cells wrapped or cut with '…'; left or right justified, every cell padded to its
column), the console width (a terminal's own, else $COLUMNS or 120; rich's `Console.size` rules for
$COLUMNS, $LINES and a dumb terminal), and ANSI styles where rich writes them (a terminal, FORCE_COLOR,
TTY_COMPATIBLE; none on a dumb terminal; NO_COLOR drops colours, keeps bold and dim), one escape sequence
per rich segment. Everything else is printed by rich itself (`Unhandled`): markup it does not know,
characters whose cell width it does not know, a column narrower than its padding, Windows consoles, Jupyter.
tests/test_console.py renders real plans through both and compares the bytes."""

from __future__ import annotations

import os
import sys
from typing import Any

# SGR parameters rich writes for the styles cardfit's markup names (rich/style.py attribute bits: bold 1,
# dim 2; rich/color.py standard colours: 30 + the colour's number)
ATTRIBUTES = {"bold": 1, "dim": 2}
COLOURS = {"red": 31, "green": 32, "yellow": 33, "magenta": 35, "white": 37}
# Characters one cell wide that cardfit prints beyond printable ASCII (rich/cells.py agrees; the test checks)
NARROW = frozenset("·×–—…≈≤≥−‘’“”•→←")

Style = tuple[frozenset[int], "int | None"]  # (attributes, foreground colour)
NULL: Style = (frozenset(), None)


class Unhandled(Exception):
    """Something only rich prints as rich does: the output goes through rich."""


class Table:
    """A borderless table: `add_column(header, justify, style)`, `add_row(*markup cells)`; printed by this
    console or, when it cannot, as a rich Table(box=None, pad_edge=False, header_style=…)."""

    def __init__(self, header_style: str = "bold") -> None:
        self.header_style = header_style
        self.columns: list[tuple[str, str, str]] = []
        self.rows: list[tuple[str, ...]] = []

    def add_column(self, header: str, justify: str = "left", style: str = "") -> None:
        self.columns.append((header, justify, style))

    def add_row(self, *cells: str) -> None:
        self.rows.append(cells)

    def to_rich(self) -> Any:
        from rich.table import Table as RichTable

        t = RichTable(show_header=True, header_style=self.header_style, box=None, pad_edge=False)
        for header, justify, style in self.columns:
            t.add_column(header, justify=justify, style=style or None)  # type: ignore[arg-type]
        for row in self.rows:
            t.add_row(*row)
        return t


class Console:
    """Collects what is printed (markup strings and Tables) and writes it at `flush()`: the same bytes as
    rich's Console(highlight=False, soft_wrap=False, emoji=False, width=`width`), rich itself writing them
    where this console cannot."""

    def __init__(self, width: int | None) -> None:
        self._asked_width = width
        self._items: list[str | Table] = []

    def print(self, obj: str | Table = "") -> None:
        self._items.append(obj)

    def flush(self) -> None:
        items, self._items = self._items, []
        try:
            text = _Writer(self._asked_width).render(items)
            sys.stdout.write(text)
        except (Unhandled, UnicodeEncodeError):
            self._rich(items)
            return
        sys.stdout.flush()

    def _rich(self, items: list[str | Table]) -> None:
        from rich.console import Console as RichConsole

        c = RichConsole(highlight=False, soft_wrap=False, width=self._asked_width, emoji=False)
        for obj in items:
            c.print(obj.to_rich() if isinstance(obj, Table) else obj)


class _Writer:
    def __init__(self, asked_width: int | None) -> None:
        env = os.environ
        import builtins

        if sys.platform == "win32" or hasattr(builtins, "get_ipython") \
                or getattr(sys.stdin, "__module__", "").startswith("idlelib"):
            raise Unhandled("Windows console, Jupyter or IDLE")
        terminal = _is_terminal(env)
        dumb = terminal and env.get("TERM", "").lower() in ("dumb", "unknown")
        self.width = _width(asked_width, env, dumb)
        if self.width < 1:
            raise Unhandled("no width")
        self.styled = terminal and not dumb
        self.colour = env.get("NO_COLOR", "") == ""

    def render(self, items: list[str | Table]) -> str:
        out: list[str] = []
        for obj in items:
            lines = self._table(obj) if isinstance(obj, Table) else self._text(obj)
            for line in lines:
                out.extend(self._ansi(text, style) for text, style in line)
                out.append("\n")
        return "".join(out)

    def _ansi(self, text: str, style: Style) -> str:
        if not self.styled or not text:
            return text
        attrs, colour = style
        codes = sorted(attrs)
        if colour is not None and self.colour:
            codes.append(colour)
        return f"\x1b[{';'.join(map(str, codes))}m{text}\x1b[0m" if codes else text

    # -- markup lines (rich Text: split at newlines, each wrapped at the width) --

    def _text(self, markup: str) -> list[list[tuple[str, Style]]]:
        plain, spans = _markup(markup)
        lines: list[list[tuple[str, Style]]] = []
        start = 0
        for part in plain.split("\n"):
            end = start + len(part)
            line_spans = _clip(spans, start, end)
            start = end + 1
            breaks = _divide(part, self.width)
            bounds = [0, *breaks, len(part)]
            for a, b in zip(bounds, bounds[1:], strict=False):
                text, sub = part[a:b], _clip(line_spans, a, b)
                if len(text) > self.width:  # rich's rstrip_end, then truncate (fold: crop)
                    trailing = len(text) - len(text.rstrip())
                    text = text[:len(text) - min(trailing, len(text) - self.width)][:self.width]
                    sub = [(s, min(e, len(text)), st) for s, e, st in sub if s < len(text)]
                lines.append(_pieces(text, sub, NULL))
        return lines

    # -- tables (rich Table(box=None, pad_edge=False)) --

    def _table(self, t: Table) -> list[list[tuple[str, Style]]]:
        n = len(t.columns)
        if not n or any(len(row) != n for row in t.rows):
            raise Unhandled("no columns or a ragged table")
        cells = [[_markup(h) for h, _, _ in t.columns], *([_markup(c) for c in row] for row in t.rows)]
        if any("\n" in plain for row in cells for plain, _ in row):
            raise Unhandled("a cell of several lines")
        pads = [(0 if i == 0 else 1, 0 if i == n - 1 else 1) for i in range(n)]
        longest = [max(len(row[i][0]) for row in cells) for i in range(n)]
        widths = self._widths(longest, pads)
        header_style = _style(t.header_style)
        styles = [_style(style) for _, _, style in t.columns]
        lines: list[list[tuple[str, Style]]] = []
        for r, row in enumerate(cells):
            rendered = []
            for i, (plain, spans) in enumerate(row):
                base = header_style if r == 0 else styles[i]
                left, right = pads[i]
                inner = widths[i] - left - right
                if inner < 1:
                    raise Unhandled("a column narrower than its padding")
                cell = []
                for text, sub in _wrap_cell(plain, spans, inner, t.columns[i][1]):
                    cell.append([*([(" " * left, base)] if left else []), *_pieces(text, sub, base),
                                 *([(" " * right, base)] if right else [])])
                rendered.append((cell, base))
            height = max(len(cell) for cell, _ in rendered)
            for k in range(height):
                line: list[tuple[str, Style]] = []
                for i, (cell, base) in enumerate(rendered):
                    blank = height - len(cell)
                    # rich aligns the header to the bottom of its row, every other cell to the top
                    j = k - blank if r == 0 else k
                    line.extend(cell[j] if 0 <= j < len(cell) else [(" " * widths[i], base)])
                lines.append(line)
        return lines

    def _widths(self, longest: list[int], pads: list[tuple[int, int]]) -> list[int]:
        """rich Table._calculate_column_widths (no expand, no fixed widths, every column may wrap)."""
        width = self.width
        extras = [left + right for left, right in pads]
        widths = [_measure(n, extra, width) or 1 for n, extra in zip(longest, extras, strict=True)]
        if sum(widths) <= width:
            return widths
        widths = _collapse(widths, width)
        if sum(widths) > width:
            widths = _ratio_reduce(sum(widths) - width, [1] * len(widths), widths, widths)
        return [_measure(n, extra, w) or 0 for n, extra, w in zip(longest, extras, widths, strict=True)]


def _measure(longest: int, extra: int, width: int) -> int:
    """The maximum of rich's Measurement of a padded text cell (and of its column) at `width`."""
    if width < 1:
        return 0
    if width - extra < 1:
        return width
    text = min(longest, width - extra)
    return min((text if text >= 1 else 0) + extra, width)


def _collapse(widths: list[int], limit: int) -> list[int]:
    """rich Table._collapse_widths with every column wrappable."""
    total = sum(widths)
    excess = total - limit
    while total and excess > 0:
        widest = max(widths)
        second = max((w if w != widest else 0) for w in widths)
        difference = widest - second
        ratios = [1 if w == widest else 0 for w in widths]
        if not any(ratios) or not difference:
            break
        widths = _ratio_reduce(excess, ratios, [min(excess, difference)] * len(widths), widths)
        total = sum(widths)
        excess = total - limit
    return widths


def _ratio_reduce(total: int, ratios: list[int], maximums: list[int], values: list[int]) -> list[int]:
    """rich/_ratio.py ratio_reduce."""
    ratios = [ratio if m else 0 for ratio, m in zip(ratios, maximums, strict=True)]
    total_ratio = sum(ratios)
    if not total_ratio:
        return values[:]
    remaining = total
    out = []
    for ratio, maximum, value in zip(ratios, maximums, values, strict=True):
        if ratio and total_ratio > 0:
            distributed = min(maximum, round(ratio * remaining / total_ratio))
            out.append(value - distributed)
            remaining -= distributed
            total_ratio -= ratio
        else:
            out.append(value)
    return out


def _crop(spans: list[Span], length: int) -> list[Span]:
    return [(s, min(e, length), st) for s, e, st in spans if s < length]


def _wrap_cell(plain: str, spans: list[Span], width: int, justify: str) -> list[tuple[str, list[Span]]]:
    """rich Text.wrap of a table cell: overflow "ellipsis" (a word longer than the cell is cut with '…'),
    then justified to the cell's width."""
    if justify not in ("left", "right"):
        raise Unhandled("justification")
    bounds = [0, *_divide(plain, width, fold=False), len(plain)]
    out = []
    for a, b in zip(bounds, bounds[1:], strict=False):
        text, sub = plain[a:b], _clip(spans, a, b)
        if len(text) > width:  # rstrip_end
            trailing = len(text) - len(text.rstrip())
            text = text[:len(text) - min(trailing, len(text) - width)]
            sub = _crop(sub, len(text))
        if justify == "right":
            text = text.rstrip()
            sub = _crop(sub, len(text))
        if len(text) > width:  # truncate with an ellipsis
            text = text[:width - 1] + "…"
            sub = _crop(sub, len(text))
        if justify == "right":
            shift = width - len(text)
            text, sub = " " * shift + text, [(s + shift, e + shift, st) for s, e, st in sub]
        else:
            text += " " * (width - len(text))
        out.append((text, sub))
    return out


def _is_terminal(env: Any) -> bool:
    """rich Console.is_terminal (no force_terminal given)."""
    compatible = env.get("TTY_COMPATIBLE", "")
    if compatible in ("0", "1"):
        return compatible == "1"
    force = env.get("FORCE_COLOR")
    if force is not None:
        return force != ""
    try:
        return sys.stdout.isatty()
    except ValueError:
        return False


def _width(asked: int | None, env: Any, dumb: bool) -> int:
    """rich Console's width: __init__ ($COLUMNS when no width is given, $LINES) and the `size` property."""
    width = asked
    if width is None:
        columns = env.get("COLUMNS")
        if columns is not None and columns.isdigit():
            width = int(columns)
    lines = env.get("LINES")
    if width is not None and lines is not None and lines.isdigit():
        return width
    if dumb:
        return 80
    if width is not None:
        return width
    for fd in (0, 1, 2):
        try:
            width = os.get_terminal_size(fd)[0]
        except (AttributeError, ValueError, OSError):
            continue
        break
    columns = env.get("COLUMNS")
    if columns is not None and columns.isdigit():
        width = int(columns)
    return width or 80


def _style(name: str) -> Style:
    attrs: set[int] = set()
    colour = None
    for word in name.split():
        if word in ATTRIBUTES:
            attrs.add(ATTRIBUTES[word])
        elif word in COLOURS:
            colour = COLOURS[word]
        else:
            raise Unhandled(f"style {word!r}")
    return frozenset(attrs), colour


def _combine(styles: list[Style]) -> Style:
    attrs: frozenset[int] = frozenset()
    colour = None
    for a, c in styles:
        attrs |= a
        colour = c if c is not None else colour
    return attrs, colour


Span = tuple[int, int, Style]


def _markup(markup: str) -> tuple[str, list[Span]]:
    """Plain text and style spans of rich markup, for the tags that name styles (`[bold]`, `[/]`,
    `[/bold]`); anything else rich would read as a tag, an escape or a character of unknown width is
    Unhandled."""
    for ch in markup:
        if not (" " <= ch <= "~" or ch == "\n" or ("\xa0" <= ch < "\u0300" and ch != "\xad") or ch in NARROW):
            raise Unhandled(f"character {ch!r}")
    if "[" not in markup:
        return markup, []
    import re

    tags = re.compile(r"((\\*)\[([a-z#/@][^[]*?)])")  # rich/markup.py RE_TAGS
    plain: list[str] = []
    length = 0
    stack: list[tuple[int, str]] = []
    spans: list[tuple[int, int, str]] = []
    position = 0
    for match in tags.finditer(markup):
        full, escapes, tag = match.groups()
        if escapes or "=" in tag or "\\" in markup[position:match.start()]:
            raise Unhandled("escape or tag parameters")
        text = markup[position:match.start()]
        plain.append(text)
        length += len(text)
        position = match.end()
        if tag.startswith("/"):
            name = tag[1:].strip()
            if not name:
                if not stack:
                    raise Unhandled("[/] closes nothing")
                start, opened = stack.pop()
            else:
                found = [k for k, (_, t) in enumerate(stack) if t == name]
                if not found:
                    raise Unhandled("closing tag matches nothing")
                start, opened = stack.pop(found[-1])
            spans.append((start, length, opened))
        else:
            if tag != tag.strip() or not tag:
                raise Unhandled("tag spacing")
            _style(tag)
            stack.append((length, tag))
    tail = markup[position:]
    if "\\" in tail:
        raise Unhandled("escape")
    plain.append(tail)
    length += len(tail)
    while stack:
        start, opened = stack.pop()
        spans.append((start, length, opened))
    if any(s >= e for s, e, _ in spans):
        raise Unhandled("empty span")
    ordered = sorted(spans[::-1], key=lambda s: s[0])
    return "".join(plain), [(s, e, _style(name)) for s, e, name in ordered]


def _clip(spans: list[Span], start: int, end: int) -> list[Span]:
    """The spans of text[start:end], positioned in it (rich Text.divide: positive overlaps only)."""
    out = []
    for s, e, st in spans:
        a, b = max(0, s - start), min(e - start, end - start)
        if b > a:
            out.append((a, b, st))
    return out


def _pieces(text: str, spans: list[Span], base: Style) -> list[tuple[str, Style]]:
    """rich Text.render: a segment between every two span boundaries, styled by the base style and the
    spans open there (in span order)."""
    if not spans:
        return [(text, base)]
    bounds = sorted({0, len(text), *(s for s, _, _ in spans), *(e for _, e, _ in spans)})
    out = []
    for a, b in zip(bounds, bounds[1:], strict=False):
        if b > a:
            out.append((text[a:b], _combine([base, *(st for s, e, st in spans if s <= a and b <= e)])))
    return out


def _divide(text: str, width: int, fold: bool = True) -> list[int]:
    """rich/_wrap.py divide_line, for characters one cell wide."""
    import re

    breaks: list[int] = []
    offset = 0
    for match in re.finditer(r"\s*\S+\s*", text):  # rich's words(): contiguous, as its chained re.match
        start, word = match.start(), match.group(0)
        length = len(word.rstrip())
        if width - offset >= length:
            offset += len(word)
        elif length > width and not fold:
            if start:
                breaks.append(start)
            offset = len(word)
        elif length > width:
            chunks = [word[i:i + width] for i in range(0, len(word), width)]
            for k, chunk in enumerate(chunks):
                if start:
                    breaks.append(start)
                if k == len(chunks) - 1:
                    offset = len(chunk)
                else:
                    start += len(chunk)
        elif offset and start:
            breaks.append(start)
            offset = len(word)
    return breaks
