"""The static frame of the HTML reproduction report (semcl.report.html): inline CSS and the page skeleton.

Everything the page needs is in the one file: no stylesheet, font, script or image is fetched, so the
page opens the same from a cluster's scratch disk, an e-mail attachment or a browser without network.
"""

from __future__ import annotations

CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1b1f24; background: #fff;
       margin: 0 auto; padding: 1.2em 2em 3em; max-width: 1500px; }
h1 { font-size: 1.6em; margin: 0.2em 0 0.4em; }
h2 { font-size: 1.25em; margin-top: 2em; padding-top: 0.6em; border-top: 1px solid #d0d7de; }
h3 { font-size: 1.05em; }
code { font: 0.92em ui-monospace, "DejaVu Sans Mono", monospace; background: #f1f3f5; padding: 0 0.25em;
       border-radius: 3px; }
.meta, .legend { color: #57606a; }
.scroll { overflow-x: auto; margin: 0.6em 0; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; }
th, td { border: 1px solid #d0d7de; padding: 0.3em 0.55em; text-align: left; vertical-align: top; }
th { background: #f6f8fa; position: sticky; top: 0; }
table.results td { white-space: nowrap; }
table.results td:first-child, table.results th:first-child { position: sticky; left: 0; background: #f6f8fa; }
td.paper { text-decoration: underline dotted #8c959f; cursor: help; }
td.flag { background: #fff1e5; color: #953800; font-weight: 600; }
td.ni { color: #8c959f; font-style: italic; }
td.empty { color: #8c959f; }
tr.done td:first-child { border-left: 5px solid #1a7f37; }
tr.partial td:first-child { border-left: 5px solid #bf8700; }
tr.none td:first-child { border-left: 5px solid #d0d7de; }
tr.no-profile td { color: #8c959f; }
tr.no-profile td:first-child { border-left: 5px solid #f6f8fa; }
.swatch { display: inline-block; width: 0.9em; height: 0.9em; vertical-align: -0.1em; margin: 0 0.2em 0 0.8em; }
td.verdict-supported { background: #dafbe1; color: #116329; font-weight: 600; }
td.verdict-contradicted { background: #ffebe9; color: #a40e26; font-weight: 600; }
td.verdict-inconclusive { background: #fff8c5; }
td.verdict-missing-runs, td.verdict-not-measured { color: #8c959f; }
td.verdict-consistent { background: #dafbe1; } td.verdict-differs { background: #ffebe9; font-weight: 600; }
td.verdict-n-too-small { color: #8c959f; }
ul.notes { color: #3d444d; font-size: 0.93em; padding-left: 1.3em; }
ul.notes li { margin: 0.15em 0; }
ol.sources { font-size: 0.9em; color: #3d444d; }
figure { margin: 1em 0; }
figure img { max-width: min(100%, 900px); border: 1px solid #d0d7de; }
figcaption { color: #57606a; font-size: 0.9em; }
nav ul { columns: 3; padding-left: 1.2em; }
td.state-done { border-left: 5px solid #1a7f37; }
td.state-partial { border-left: 5px solid #bf8700; }
td.state-none { border-left: 5px solid #d0d7de; }
td.state-no-profile { color: #8c959f; }
span.verdict-supported { color: #116329; font-weight: 600; }
span.verdict-contradicted { color: #a40e26; font-weight: 600; }
"""

STATE_LEGEND = (("done", "#1a7f37", "every run done"), ("partial", "#bf8700", "some runs done"),
                ("none", "#d0d7de", "no run done (not rendered below)"),
                ("no-profile", "#f6f8fa", "no entry for this profile"))


def page(title: str, body: str) -> str:
    """The whole document: `title` is plain text already escaped, `body` HTML."""
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            f"<title>{title}</title>\n<style>{CSS}</style>\n</head>\n<body>\n{body}\n</body>\n</html>\n")
