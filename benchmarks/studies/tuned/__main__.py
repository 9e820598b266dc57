"""``python -m benchmarks.studies.tuned``: the tuned lag benchmark's command line (:mod:`.study`)."""

from benchmarks.studies.tuned.study import main

main()
