"""The console `cardfit plan` and `cardfit deploy` print to: rich, imported only where it is needed, and a
plain writer of cardfit's own for the common case, where rich would print no escape codes (a pipe or a file,
no FORCE_COLOR or TTY_COMPATIBLE asking for them) and importing rich (its console and table modules, a third
of a ~0.1 s answer) would buy nothing.

The plain format is small and owned here: a markup line is its text without cardfit's style tags, split at
newlines and word-wrapped at the width (words break at spaces; a line keeps the spaces after its last word up
to the width); a table is its columns side by side, each as wide as its widest cell, two spaces apart, left
or right justified, every cell padded to its column. That is what rich prints for the same markup and a
borderless Table (`to_rich`) whenever the table fits the width and no word is wider than it; anything
else (a table wider than the width, a word longer than the line, markup beyond cardfit's style tags,
characters outside the ranges below, a terminal) is printed by rich itself. tests/test_console.py holds the
two outputs equal on real plans at many widths and on random text and tables."""

from __future__ import annotations

import os
import sys
from typing import Any

# The style words cardfit's markup names (cli/render.py VERDICT_STYLE, bold headers, dim notes): a tag made
# of them is dropped in plain text; any other tag goes to rich.
STYLE_WORDS = frozenset({"bold", "dim", "red", "green", "yellow", "magenta", "white"})
# Unicode ranges whose printable letters, digits, punctuation, symbols and spaces that are not East Asian
# wide or fullwidth (UAX #11, through `unicodedata`) a terminal draws one cell wide: up to U+10FF (Latin,
# Greek, Cyrillic, …; Hangul jamo start at U+1100) and U+2000–U+22FF (punctuation, arrows, maths: `×`, `—`,
# `≈`, `≤`, `→`). tests/test_console.py checks every one against rich's cell widths.
ONE_CELL_RANGES = ((0x20, 0x1100), (0x2000, 0x2300))


def escape(text: str) -> str:
    """Text printed as it is inside markup (a model or card name read from a file or a catalog: `a[red]b`,
    `x[/]y`): every `[` escaped as rich reads it (`\\[`, with any backslashes before it doubled), so the
    plain writer leaves the line to rich, which prints the brackets. Text without a `[` (nearly every name)
    comes back as it is, without compiling the pattern."""
    if "[" not in text:
        return text
    import re

    return re.sub(r"(\\*)\[", lambda m: m.group(1) * 2 + "\\[", text)


class Unhandled(Exception):
    """Something the plain writer does not print: rich prints it."""


class Table:
    """A borderless table: `add_column(header, justify, style)`, `add_row(*markup cells)`; printed by the
    plain writer or as a rich Table(box=None, pad_edge=False, header_style=…). `title`: a line of markup
    above it, left-justified over the table's width (rich's title_justify="left")."""

    def __init__(self, header_style: str = "bold", title: str = "") -> None:
        self.header_style = header_style
        self.title = title
        self.columns: list[tuple[str, str, str]] = []
        self.rows: list[tuple[str, ...]] = []

    def add_column(self, header: str, justify: str = "left", style: str = "") -> None:
        self.columns.append((header, justify, style))

    def add_row(self, *cells: str) -> None:
        self.rows.append(cells)

    def to_rich(self) -> Any:
        from rich.table import Table as RichTable

        t = RichTable(show_header=True, header_style=self.header_style, box=None, pad_edge=False,
                      title=self.title or None, title_justify="left")
        for header, justify, style in self.columns:
            t.add_column(header, justify=justify, style=style or None)  # type: ignore[arg-type]
        for row in self.rows:
            t.add_row(*row)
        return t


class Verbatim:
    """A line printed as it is written, never read as markup nor wrapped at the width (a shell command: a
    line break pasted into a shell ends it); rich's print(text, style=…, markup=False, soft_wrap=True)."""

    def __init__(self, text: str, style: str = "") -> None:
        self.text = text
        self.style = style


class Console:
    """Collects what is printed (markup strings, Verbatim lines and Tables) and writes it at `flush()`: as
    plain text where rich would write no escape codes and the plain format holds it, else through rich's
    Console(highlight=False, soft_wrap=False, emoji=False, width=`width`)."""

    def __init__(self, width: int | None) -> None:
        self._asked_width = width
        self._items: list[str | Table | Verbatim] = []

    def print(self, obj: str | Table | Verbatim = "") -> None:
        self._items.append(obj)

    def flush(self) -> None:
        items, self._items = self._items, []
        width = plain_width(self._asked_width)
        if width is not None:
            try:
                sys.stdout.write(render_plain(items, width))
            except (Unhandled, UnicodeEncodeError):  # an encoding error is raised before anything is written
                pass
            else:
                sys.stdout.flush()
                return
        self._rich(items)

    def _rich(self, items: list[str | Table | Verbatim]) -> None:
        from rich.console import Console as RichConsole

        c = RichConsole(highlight=False, soft_wrap=False, width=self._asked_width, emoji=False)
        for obj in items:
            if isinstance(obj, Verbatim):
                c.print(obj.text, style=obj.style or None, markup=False, soft_wrap=True)
            else:
                c.print(obj.to_rich() if isinstance(obj, Table) else obj)


def plain_width(asked: int | None) -> int | None:
    """The width plain text is written at, or None where rich must print: a terminal (it styles), a variable
    that may make rich style a pipe (FORCE_COLOR, TTY_COMPATIBLE), Windows, Jupyter or IDLE (rich writes
    through their own channels), or no width given (rich finds a terminal's)."""
    import builtins

    env = os.environ
    if asked is None or asked < 1 or "FORCE_COLOR" in env or "TTY_COMPATIBLE" in env \
            or sys.platform == "win32" or hasattr(builtins, "get_ipython") \
            or getattr(sys.stdin, "__module__", "").startswith("idlelib"):
        return None
    try:
        return None if sys.stdout.isatty() else asked
    except (AttributeError, ValueError):  # no stdout, or a closed one: rich decides
        return None


def render_plain(items: list[str | Table | Verbatim], width: int) -> str:
    """The plain text of `items` at `width` columns; Unhandled where the plain format does not hold them."""
    lines: list[str] = []
    for obj in items:
        if isinstance(obj, Table):
            lines += table_lines(obj, width)
        elif isinstance(obj, Verbatim):
            lines.append(verbatim(obj.text))
        else:
            for line in strip_markup(obj).split("\n"):
                lines += wrap(line, width)
    return "".join(line + "\n" for line in lines)


def strip_markup(markup: str) -> str:
    """The text of markup whose only tags are cardfit's styles (`[bold]`, `[green]`, `[bold red]`, closed by
    `[/]`); Unhandled for any other bracket or a backslash (rich reads those), a `[/]` that closes nothing,
    or a character outside ONE_CELL_RANGES."""
    if "\\" in markup:
        raise Unhandled("a backslash (an escape to rich)")
    parts = markup.split("[")
    out = [parts[0]]
    depth = 0
    for part in parts[1:]:
        tag, sep, rest = part.partition("]")
        if tag == "/" and sep and depth:
            depth -= 1
        elif sep and tag and set(tag.split(" ")) <= STYLE_WORDS:
            depth += 1
        else:
            raise Unhandled(f"markup [{tag}{sep}")
        out.append(rest)
    text = "".join(out)
    if not text.replace("\n", "").isprintable():
        raise Unhandled("a control character or a space other than ' '")
    if not text.isascii():
        for ch in set(text):
            if not ch.isascii() and not one_cell(ch):
                raise Unhandled(f"character {ch!r}")
    return text


def verbatim(text: str) -> str:
    """A Verbatim line as written: one line of printable characters (the only white space ' '), each in
    ONE_CELL_RANGES; Unhandled otherwise (rich expands tabs, breaks lines, measures wide characters)."""
    if not text.isprintable():
        raise Unhandled("a control character or a space other than ' '")
    if not text.isascii():
        for ch in set(text):
            if not one_cell(ch):
                raise Unhandled(f"character {ch!r}")
    return text


def one_cell(ch: str) -> bool:
    """Whether `ch` is drawn one cell wide (ONE_CELL_RANGES)."""
    import unicodedata

    code = ord(ch)
    return any(lo <= code < hi for lo, hi in ONE_CELL_RANGES) and ch.isprintable() \
        and unicodedata.east_asian_width(ch) not in ("W", "F") and unicodedata.category(ch)[0] in "LNPSZ"


def wrap(line: str, width: int) -> list[str]:
    """`line` word-wrapped at `width`: a word (with the spaces after it, the first one with the spaces before
    it too: an indented line) goes on the current line while its letters fit, else it starts the next;
    spaces past the width are dropped."""
    if (line[:1] == " " and not line.strip(" ")) or not line.isprintable():  # the only white space is ' '
        raise Unhandled("a line of spaces, a control character or other white space")
    import re

    lines: list[str] = []
    current = ""
    for word in re.findall(r" *[^ ]+ *", line):  # each word with the spaces after it (rich's _wrap.words)
        letters = len(word.rstrip(" "))
        if letters > width:
            raise Unhandled("a word wider than the line")
        if current and len(current) + letters > width:
            lines.append(current[:width])
            current = ""
        current += word
    lines.append(current[:width])
    return lines


def table_lines(t: Table, width: int) -> list[str]:
    """The header and rows of `t`, columns two spaces apart; Unhandled when they do not fit `width`."""
    n = len(t.columns)
    if not n or any(len(row) != n for row in t.rows):
        raise Unhandled("no columns or a ragged table")
    if any(justify not in ("left", "right") for _, justify, _ in t.columns):
        raise Unhandled("justification")
    cells = [[strip_markup(h) for h, _, _ in t.columns], *([strip_markup(c) for c in row] for row in t.rows)]
    title = [strip_markup(t.title)] if t.title else []
    if any("\n" in c or c != c.strip(" ") or "  " in c for row in (*cells, title) for c in row):
        raise Unhandled("a cell or title of several lines or with runs of spaces")
    widths = [max(len(row[i]) for row in cells) for i in range(n)]
    table_width = sum(widths) + 2 * (n - 1)
    if min(widths) < 1 or table_width > width:
        raise Unhandled("an empty column or a table wider than the line")
    if title and len(title[0]) > table_width:
        raise Unhandled("a title wider than the table (rich wraps it)")
    head = [title[0].ljust(table_width)] if title else []  # rich pads a left-justified title to the table
    return head + ["  ".join(c.rjust(w) if justify == "right" else c.ljust(w)
                             for c, w, (_, justify, _) in zip(row, widths, t.columns, strict=True))
                   for row in cells]
