"""The robots' analyses: rolling and flying phases (:mod:`.phases`), dense trajectories and
their contact extrema (:mod:`.trajectory`), optimal control (:mod:`.optimal`) and the paper's
report (:mod:`.report`); public names in :mod:`rollax.robot`."""
