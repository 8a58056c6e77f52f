"""Tests of rollax.models."""
