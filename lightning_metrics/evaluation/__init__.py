"""Judging metrics and systems: correlation with human ratings (:mod:`.evaluate`), paired
significance between systems (:mod:`.significance`), and plots (:mod:`.plots`)."""
