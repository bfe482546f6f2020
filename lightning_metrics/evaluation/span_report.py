"""What a person reads of a unified model's error spans: each segment with its spans marked in the
text (``score --spans``), and a self-contained HTML page (``score --html``): every segment with its
spans highlighted by severity, a legend, span counts per system, and the sentence scores."""

from __future__ import annotations

import html
from collections import Counter
from typing import Optional, Sequence

from lightning_metrics.spans import SEVERITIES

COLOURS = {"minor": "#ffe08a", "major": "#ff9b73", "critical": "#e0457b"}


def marked_text(text: str, spans: Sequence[dict]) -> str:
    """``text`` with each span as ``[words]{severity confidence}``, for a terminal."""
    out, position = [], 0
    for span in sorted(spans, key=lambda s: s["start"]):
        start, end = max(position, span["start"]), span["end"]
        confidence = f" {span['confidence']:.2f}" if "confidence" in span else ""
        out += [text[position:start], f"[{text[start:end]}]{{{span['severity']}{confidence}}}"]
        position = end
    return "".join(out + [text[position:]])


def format_spans(results: dict, mt: dict[str, list[str]]) -> str:
    """Every system's segments: number, score and the text with its spans marked (``score --spans``)."""
    lines = []
    for name, result in results.items():
        lines.append(f"== {name}")
        for i, (score, text, spans) in enumerate(zip(result.scores, mt[name], result.extra["spans"]), start=1):
            lines.append(f"{i:>5}  {score:9.4f}  {marked_text(text, spans)}")
    return "\n".join(lines)


def span_counts_by_severity(spans_per_row: Sequence[Sequence[dict]]) -> Counter:
    return Counter(span["severity"] for spans in spans_per_row for span in spans)


def html_marked(text: str, spans: Sequence[dict]) -> str:
    """``text`` escaped, each span in a ``<mark class="SEVERITY">`` with its confidence as a title."""
    out, position = [], 0
    for span in sorted(spans, key=lambda s: s["start"]):
        start, end = max(position, span["start"]), span["end"]
        title = f"{span['severity']}" + (f", confidence {span['confidence']:.2f}" if "confidence" in span else "")
        out.append(html.escape(text[position:start]))
        out.append(f'<mark class="{span["severity"]}" title="{title}">{html.escape(text[start:end])}</mark>')
        position = end
    out.append(html.escape(text[position:]))
    return "".join(out)


STYLE = """
body{font:15px/1.5 system-ui,sans-serif;margin:2em auto;max-width:70em;color:#222}
h1{font-size:1.4em} table{border-collapse:collapse;margin:1em 0} td,th{padding:.3em .8em;border-bottom:1px solid #ddd}
th{text-align:left;background:#f4f4f4} td.num{text-align:right;font-variant-numeric:tabular-nums}
.src{color:#666;font-size:.9em} mark{border-radius:3px;padding:0 2px}
.legend mark{margin-right:1em}
""" + "".join(f"mark.{k}{{background:{v}}}" for k, v in COLOURS.items())


def html_report(results: dict, mt: dict[str, list[str]], src: Optional[dict] = None, title: str = "") -> str:
    """The page ``score --html`` writes (see the module docstring); ``src`` (per system) adds sources."""
    legend = "".join(f'<mark class="{s}">{s}</mark>' for s in SEVERITIES)
    summary = []
    for name, result in results.items():
        counts = span_counts_by_severity(result.extra["spans"])
        cells = "".join(f'<td class="num">{counts.get(s, 0)}</td>' for s in SEVERITIES)
        summary.append(
            f'<tr><td>{html.escape(name)}</td><td class="num">{result.system_score:.4f}</td>'
            f'<td class="num">{len(result.scores)}</td>{cells}</tr>'
        )
    head = "".join(f"<th>{s} spans</th>" for s in SEVERITIES)
    parts = [
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
        f"<style>{STYLE}</style></head><body><h1>{html.escape(title)}</h1>",
        f'<p class="legend">Error spans by severity: {legend}(hover a span for its confidence)</p>',
        f"<table><tr><th>system</th><th>score</th><th>segments</th>{head}</tr>{''.join(summary)}</table>",
    ]
    for name, result in results.items():
        sources = (src or {}).get(name)
        parts.append(f"<h2>{html.escape(name)}</h2><table><tr><th>#</th><th>score</th><th>translation</th></tr>")
        for i, (score, text, spans) in enumerate(zip(result.scores, mt[name], result.extra["spans"])):
            source = f'<br><span class="src">{html.escape(sources[i])}</span>' if sources else ""
            parts.append(
                f'<tr><td class="num">{i + 1}</td><td class="num">{score:.4f}</td>'
                f"<td>{html_marked(text, spans)}{source}</td></tr>"
            )
        parts.append("</table>")
    parts.append("</body></html>")
    return "\n".join(parts)
