"""The lag-robustness study as a package: specs (data), cells (running), report (statistics, verdict, README), figures.

The command line is ``benchmarks/lag_robustness.py``."""
