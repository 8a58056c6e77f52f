"""Tests of rollax.analysis."""
