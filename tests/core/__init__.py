"""Tests of rollax._core."""
