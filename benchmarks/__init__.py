"""The project's benchmarks (``speed``) and studies (``studies``), with their shared helpers (``common``).

Run them from the repository root as modules, e.g. ``python -m benchmarks.speed.throughput`` or
``python -m benchmarks.studies.tuned --preset tuned``; ``benchmarks/README.md`` lists them by question."""
