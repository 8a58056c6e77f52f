"""The ball and disk robots of Putkaradze & Rogers: bodies (:mod:`.ball`, :mod:`.disk`), rails,
controls, quaternions and the flight models (physics only; public names in :mod:`rollax.robot`)."""
