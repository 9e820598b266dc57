"""Which method is most robust to lag, and does the simulator predict a real system: each study is a command
(``python -m benchmarks.studies.<name>``); the two lag benchmarks are packages of one layout (specs, study,
report)."""
