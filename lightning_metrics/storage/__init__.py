"""The files this project owns: the export folder (:mod:`.artifact`) and Lightning checkpoints
(:mod:`.checkpoint`: the one reader, and the starting weights of ``init_from``)."""
