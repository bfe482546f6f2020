"""A peer's metric in our terms (:class:`PeerModel`): what each reader (:mod:`.comet`, :mod:`.bleurt`)
makes of a peer's files, and what :func:`lightning_metrics.importers.import_metric` builds and writes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

import torch

# encoder buffers that older transformers saved with the weights and newer ones rebuild
REBUILT_BUFFERS = ("embeddings.position_ids", "embeddings.token_type_ids")


@dataclass
class PeerModel:
    """A peer's metric in our terms: ``family`` built with ``hparams`` on ``encoder``'s config and
    tokenizer (a folder or hub name) takes ``state``; ``origin`` records where it came from.
    ``reserved_positions``: where the peer truncates, fewer tokens than the encoder's positions.
    ``write_encoder(folder)``, where given, writes that config and tokenizer (converted from the
    peer's own files) instead of :func:`~lightning_metrics.encoders.save_encoder_files`."""

    family: str
    hparams: dict
    state: dict[str, torch.Tensor]
    encoder: str
    origin: dict = field(default_factory=dict)
    write_encoder: Optional[Callable[[str], None]] = None
    reserved_positions: Optional[int] = None  # the peer tokenises to max_position_embeddings minus this
    max_length: Optional[int] = None  # the peer's own input length (MetricX's), where it has one
