"""data_gen: turn any corpus into synthetic (reference, perturbed candidate) training pairs.

Perturbations live in :mod:`data_gen.perturbations` (one module per family), WordNet access in
:mod:`data_gen.wordnet`, the per-pair signals in :mod:`data_gen.signals`, and the command
``lightning-metrics generate`` in :mod:`data_gen.pipeline`.
"""
