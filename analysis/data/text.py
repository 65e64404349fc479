"""Text read from a sweep (a spec's title, description, claim texts, group names; names and messages from disk) made
safe for where the reports and commands write it: a terminal, a Markdown file, a CSV cell.

- ``printable``: control characters (terminal escapes, BEL, newlines) and the invisible characters that reorder or
  hide text (bidirectional overrides and isolates, zero-width characters) written as ``\\xNN`` / ``\\uNNNN``;
- ``markdown_text``: the same, newlines kept, and ``<`` before a letter, ``/``, ``!`` or ``?`` (where an HTML tag or
  comment would begin) written as ``&lt;``, so that a Markdown viewer shows a planted ``<script>`` as text;
- ``spreadsheet_cell``: ``printable``, and a cell that a spreadsheet would read as a formula (one beginning with
  ``=``, ``+``, ``-`` or ``@`` that is not a number) prefixed with ``'`` (OWASP, CSV injection).

No pandas here: ``tsweep plan`` and the live log print through ``printable``.
"""

from __future__ import annotations

import re

# C0 and C1 controls and DEL; the bidirectional marks, embeddings, overrides and isolates; zero-width characters,
# the word joiner and invisible operators; line and paragraph separators; the byte-order mark
_INVISIBLE = "\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u2069\ufeff"
_CONTROL = re.compile(f"[\x00-\x1f\x7f-\x9f{_INVISIBLE}]")
_CONTROL_BUT_NEWLINE = re.compile(f"[\x00-\x09\x0b-\x1f\x7f-\x9f{_INVISIBLE}]")
_CONTROL_BUT_NEWLINE_TAB = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_INVISIBLE}]")
_TAG_START = re.compile(r"<(?=[A-Za-z/!?])")
_FORMULA_START = ("=", "+", "-", "@")


def _escaped(m: re.Match) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def printable(text) -> str:
    """``text`` as a string with control characters (terminal escapes, newlines) written as \\xNN and invisible
    ones (bidirectional overrides, zero-width characters) as \\uNNNN: a name or message read from disk, safe to
    print to a terminal or write into a table cell."""
    return _CONTROL.sub(_escaped, str(text))


def markdown_text(text) -> str:
    """``text`` for a Markdown file: ``printable`` with its newlines kept, and an HTML tag's opening ``<`` written
    as ``&lt;`` (a ``<`` before a space, a digit or ``=`` is left as written)."""
    return _TAG_START.sub("&lt;", _CONTROL_BUT_NEWLINE.sub(_escaped, str(text)))


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def spreadsheet_cell(value):
    """A CSV cell: a string ``printable``, and prefixed with ``'`` where a spreadsheet would read it as a formula
    (it begins with ``=``, ``+``, ``-`` or ``@`` and is neither a number nor a lone sign); other values as given."""
    if not isinstance(value, str):
        return value
    text = printable(value)
    if text.startswith(_FORMULA_START) and len(text) > 1 and not _number(text):
        return "'" + text
    return text


def spreadsheet_frame(frame):
    """A copy of the DataFrame ``frame`` with every text cell and column name a ``spreadsheet_cell``: what the
    reports write as CSV."""
    out = frame.copy()
    for column in out.columns:
        if out[column].dtype.kind == "O":  # text (numbers stay numbers)
            out[column] = out[column].map(spreadsheet_cell)
    out.columns = [spreadsheet_cell(c) for c in out.columns]
    return out


def to_csv(frame, path) -> None:
    """The DataFrame ``frame`` as the CSV file ``path`` of a report (``spreadsheet_frame``, no index)."""
    spreadsheet_frame(frame).to_csv(path, index=False)


def without_controls(text: str) -> str:
    """``text`` with its control and invisible characters, newlines and tabs apart, written as in ``printable``:
    what report.html gets (HTML escaping is its writer's)."""
    return _CONTROL_BUT_NEWLINE_TAB.sub(_escaped, text)
