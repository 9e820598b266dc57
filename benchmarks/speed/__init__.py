"""How fast and how much memory: each module is a command (``python -m benchmarks.speed.<name>``) that prints a
table and writes JSON under ``benchmarks/results``."""
