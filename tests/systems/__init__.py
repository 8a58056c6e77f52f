"""Tests of rollax.systems."""
