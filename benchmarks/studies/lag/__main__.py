"""``python -m benchmarks.studies.lag``: the lag-robustness study's command line (:mod:`.study`)."""

from benchmarks.studies.lag.study import main

main()
