"""Benchmarks: figures, not pass/fail. Each prints JSON lines and a table; speeds are given
as ratios against a baseline measured in the same run, on the same machine."""
