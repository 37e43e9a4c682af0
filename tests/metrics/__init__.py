"""Tests of skdpvi.metrics."""
