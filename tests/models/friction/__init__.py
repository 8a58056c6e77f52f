"""Tests of rollax.models.friction."""
