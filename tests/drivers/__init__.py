"""Tests of rollax._drivers."""
