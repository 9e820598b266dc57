"""The earlier, untuned lag-robustness study: ``specs`` (data), ``cells`` (running), ``report`` (statistics,
verdict, README), ``figures``; ``study`` is the command line (``python -m benchmarks.studies.lag``)."""
