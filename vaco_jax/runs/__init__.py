"""Runs on disk: the output directory, sessions, checkpoints, metric writers, plots, saved runs, comparisons and
calibration. Imports every layer below; only ``vaco_jax.cli`` imports it."""
