"""The training loader that resumes mid-epoch (:class:`ResumableLoader`).

Its state is the sampler's epoch and the number of batches it has yielded in it; Lightning does
not prefetch from a loader with a length, so that is the number of batches the training loop has
taken. The data module saves that state in every checkpoint (``state_dict``) and passes it to the
loader it builds after a resume (Lightning's own loader-state restore is skipped when the
optimiser setup has built the loader early, as ``estimated_stepping_batches`` does). The first
pass over that epoch then skips those batches at the index level: nothing is read or collated,
and under DDP each rank skips in its own shard (the skip wraps the sampler Lightning installed).
"""

from __future__ import annotations

import itertools
from typing import Any, Optional

from torch.utils.data import DataLoader


class _SkipFirst:
    """A batch sampler whose next pass starts ``skip`` batches in (once); its length stays whole."""

    def __init__(self, batches, skip: int = 0):
        self.batches, self.skip = batches, skip

    def __len__(self) -> int:
        return len(self.batches)

    def __iter__(self):
        skip, self.skip = self.skip, 0
        return itertools.islice(iter(self.batches), skip, None)


class ResumableLoader(DataLoader):
    """A training DataLoader that resumes mid-epoch where it was checkpointed (see the module docstring)."""

    def __init__(self, *args: Any, resume: Optional[dict] = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._skipper = _SkipFirst(super()._index_sampler)
        self._epoch, self._yielded = 0, 0
        self._resume: Optional[dict] = dict(resume) if resume else None

    @property
    def _index_sampler(self):
        skipper = self.__dict__.get("_skipper")
        return skipper if skipper is not None else super()._index_sampler

    def _sampler_epoch(self) -> int:
        return int(getattr(self.sampler, "epoch", 0) or 0)

    def __iter__(self):
        epoch, skip = self._sampler_epoch(), 0
        if self._resume is not None and int(self._resume.get("epoch", -1)) == epoch:
            batches = int(self._resume.get("batches", 0))
            skip = batches if 0 < batches < len(self) else 0
        self._resume = None
        self._skipper.skip = skip
        self._epoch, self._yielded = epoch, skip
        for batch in super().__iter__():
            self._yielded += 1
            yield batch

    def state_dict(self) -> dict:
        return {"epoch": self._epoch, "batches": self._yielded}

    def load_state_dict(self, state_dict: dict) -> None:
        self._resume = dict(state_dict)
