"""What building one rating source gives: its rows in the readers' columns, and its accounts (rows
dropped by reason, parts left out whole, the checks it passed, the files it read)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from snapshot import Snapshot

# every source's columns, in this order; a source adds its own after them (raw, annotators, spans, ...)
COLUMNS = ("lp", "src", "mt", "ref", "score", "system", "doc_id", "seg_id", "year", "domain")
RANK_COLUMNS = ("lp", "src", "ref", "pos", "neg", "pos_system", "neg_system", "doc_id", "seg_id", "year", "domain")


@dataclass
class Built:
    """One source. ``kind`` is ``da``, ``mqm`` or ``ranks``; ``fmt`` the file it is written as
    (``csv``; ``jsonl`` where a column holds lists, as MQM's spans do)."""

    name: str
    kind: str
    fmt: str = "csv"
    rows: list[dict] = field(default_factory=list)
    dropped: Counter = field(default_factory=Counter)
    left_out: list[str] = field(default_factory=list)
    checks: dict = field(default_factory=dict)
    read: list[str] = field(default_factory=list)

    def drop(self, reason: str, n: int = 1) -> None:
        if n:
            self.dropped[reason] += n

    def reads(self, snapshot: Snapshot, path: str) -> None:
        """Records that ``path`` of ``snapshot`` was read (repository, commit and path go to the manifest)."""
        self.read.append(f"{snapshot.name}@{snapshot.commit()[:12]}:{path}")

    def columns(self) -> list[str]:
        first = RANK_COLUMNS if self.kind == "ranks" else COLUMNS
        extra = [c for c in (self.rows[0] if self.rows else {}) if c not in first]
        return [*first, *extra]

    def summary(self) -> str:
        """One line: rows kept, rows dropped by reason, parts left out."""
        dropped = sum(self.dropped.values())
        reasons = "; ".join(f"{n} {why}" for why, n in self.dropped.most_common())
        line = f"{self.name}: {len(self.rows)} rows kept, {dropped} dropped" + (f" ({reasons})" if reasons else "")
        if self.left_out:
            line += "; left out: " + "; ".join(self.left_out)
        return line


def stripped(text: str) -> str:
    """A text as the joins compare it: surrounding whitespace removed (copies of a segment differ there)."""
    return text.strip()


def is_human(system: str) -> bool:
    """Human translations (references and the human 'systems' the releases rate) are not system outputs."""
    name = system.lower()
    return name.startswith(("human", "ref")) or name in ("ref", "refb")
