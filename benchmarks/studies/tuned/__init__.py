"""The tuned lag benchmark: ``specs`` (methods, search spaces, presets, as data), ``study`` (tuning and test cells,
the command line: ``python -m benchmarks.studies.tuned``), ``report`` (statistics, tables, figures)."""
