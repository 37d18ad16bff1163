"""Benchmarks: rankscope against its peers (``python -m bench``); never run as tests."""
