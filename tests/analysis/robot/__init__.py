"""Tests of rollax.analysis.robot."""
