"""The one signature type: how a number was made, for every built-in, learned and ensemble metric and
for the BERTScore baseline alike, computed from settings (nothing is loaded to write one)."""

from __future__ import annotations

from dataclasses import dataclass

from lightning_metrics.version import __version__


@dataclass(frozen=True)
class Signature:
    """How a number was made, sacrebleu-style: ``name|key:value|...|lightning-metrics:X``.

    Built from a metric instance's own settings, so it changes when they do.
    """

    name: str
    settings: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, name: str, **settings) -> "Signature":
        shown = {k: ("yes" if v is True else "no" if v is False else str(v)) for k, v in settings.items()}
        return cls(name, (*shown.items(), ("lightning-metrics", __version__)))

    def __str__(self) -> str:
        return "|".join([self.name, *(f"{k}:{v}" for k, v in self.settings)])

    def get(self, key: str) -> str | None:
        return dict(self.settings).get(key)

    @classmethod
    def parse(cls, text: str) -> "Signature":
        """The signature a ``str(signature)`` came from."""
        name, *parts = text.split("|")
        return cls(name, tuple(tuple(p.split(":", 1)) for p in parts))

    def replace(self, **settings) -> "Signature":
        """This signature with ``settings`` set: existing keys keep their place, new ones go before the version."""
        shown = {k: str(v) for k, v in settings.items()}
        kept = [(k, shown.pop(k, v)) for k, v in self.settings if k != "lightning-metrics"]
        version = [(k, v) for k, v in self.settings if k == "lightning-metrics"]
        return Signature(self.name, (*kept, *shown.items(), *version))
