"""Hub ids where a folder is taken: ``Unbabel/wmt22-comet-da``, ``google/metricx-24-hybrid-large-v2p6``
(``@REVISION`` picks a revision), resolved through ``huggingface_hub``'s cache.

A cached snapshot resolves offline; online (``HF_HUB_OFFLINE`` unset) a missing one downloads. A missing
one offline is one line naming the id, the cache folder looked in, and how to fetch it. The cache is
``$HF_HUB_CACHE``, else ``$HF_HOME/hub``, else ``~/.cache/huggingface/hub``, read when an id is resolved.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from lightning_metrics.errors import LightningMetricsError

HUB_ID = re.compile(r"(?P<repo>[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*)(?:@(?P<revision>[\w./-]+))?")


@dataclass(frozen=True)
class HubSnapshot:
    """A resolved id: the snapshot's folder, the repository and the revision (the commit) it holds."""

    folder: Path
    repo: str
    revision: str


def is_hub_id(text: str) -> bool:
    """Whether ``text`` names a hub repository (``org/name[@revision]``) and no folder here."""
    return not Path(text).expanduser().exists() and HUB_ID.fullmatch(str(text)) is not None


def hub_cache() -> Path:
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    home = os.environ.get("HF_HOME") or Path.home() / ".cache" / "huggingface"
    return Path(home).expanduser() / "hub"


def offline() -> bool:
    return any(
        os.environ.get(v, "").lower() in ("1", "true", "yes") for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def resolve_hub_id(text: str) -> HubSnapshot:
    """The local snapshot of the hub id ``text`` (module docstring)."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError, RepositoryNotFoundError

    match = HUB_ID.fullmatch(str(text))
    if match is None:
        raise LightningMetricsError(f"{text!r} is not a hub id (org/name, or org/name@revision)")
    repo, revision, cache = match["repo"], match["revision"], hub_cache()
    try:
        folder = Path(snapshot_download(repo, revision=revision, cache_dir=str(cache), local_files_only=offline()))
    except LocalEntryNotFoundError:
        raise LightningMetricsError(
            f"{repo}{'@' + revision if revision else ''}: not in the Hugging Face cache {cache} and HF_HUB_OFFLINE is "
            f"set; fetch it where there is a network (huggingface-cli download {repo}"
            f"{' --revision ' + revision if revision else ''}, with HF_HOME pointing here), or unset HF_HUB_OFFLINE"
        ) from None
    except (RepositoryNotFoundError, HfHubHTTPError, OSError) as e:
        raise LightningMetricsError(f"{repo}: could not be fetched from the hub ({str(e).splitlines()[0]})") from None
    return HubSnapshot(folder, repo, folder.name)


def local_or_hub(text: str) -> tuple[str, HubSnapshot | None]:
    """``text`` itself when it is a path here (or not a hub id), else its resolved snapshot folder and the snapshot."""
    if not is_hub_id(str(text)):
        return str(text), None
    snapshot = resolve_hub_id(str(text))
    return str(snapshot.folder), snapshot
