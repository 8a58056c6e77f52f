"""Tests of rollax._integrate."""
