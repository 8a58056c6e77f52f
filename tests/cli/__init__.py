"""Tests of rollax.cli (the rollax command)."""
