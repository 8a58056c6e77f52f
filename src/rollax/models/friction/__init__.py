"""Friction laws of a finite circular contact patch and the sliding bodies (physics only; public
names in :mod:`rollax.friction`)."""
