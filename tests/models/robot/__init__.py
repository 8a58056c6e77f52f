"""Tests of rollax.models.robot."""
