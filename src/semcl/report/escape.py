"""Text escaped for where it is written: a LaTeX table or comment, a Markdown table cell or line.

Tables carry text the suite does not write itself: paper sources and row labels from the registry, and the
sources a user gives `semcl numbers` (checked to be one line when added, semcl.report.user_numbers.plain_text).
A results folder is shared, so every format treats that text as data: a line break must not leave a
`% ` comment of a .tex table (the next line would be LaTeX: `\\input`, `\\write18`), a `|` must not split a
Markdown cell, an HTML tag must not render. HTML pages escape with `html.escape` (semcl.report.html); every CSV
is written by semcl.csv_files, which keeps a leading `=` from becoming a spreadsheet formula.
"""

from __future__ import annotations

import re
import unicodedata

_BREAKS = ("Cc", "Cf", "Zl", "Zp")  # line breaks, tabs, other controls and invisible format characters
_TEX = {"\\": r"\textbackslash{}", "{": r"\{", "}": r"\}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#",
        "_": r"\_", "^": r"\^{}", "~": r"\~{}", "±": r"$\pm$", "—": "--"}
_HTML_TAG = re.compile(r"<(?=[A-Za-z/!?])")  # the start of a tag or comment; "p < 0.05" stays as it is


def one_line(text: str) -> str:
    """`text` with every control, format or line-separator character replaced by a space."""
    return "".join(" " if unicodedata.category(ch) in _BREAKS else ch for ch in str(text))


def tex_text(text: str) -> str:
    """Text typeset in a LaTeX table: every special character as its literal, on one line."""
    return "".join(_TEX.get(ch, ch) for ch in one_line(text))


def tex_comment(text: str) -> str:
    """A `% ` comment line: TeX ignores the rest of a line after `%`, so only a line break could end it."""
    return "% " + one_line(text)


def md_text(text: str) -> str:
    """A Markdown line (a note, a list item): one line, no HTML tag."""
    return _HTML_TAG.sub("&lt;", one_line(text))


def md_cell(text: str) -> str:
    """A Markdown table cell: a Markdown line whose `|` does not end the cell."""
    return md_text(text).replace("|", r"\|")
