"""Tests of skdpvi.noise_aware."""
