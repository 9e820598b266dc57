"""Training as compiled programs: rollout, update, the train program, evaluation, the chunked drivers (simulated
and asynchronous), sweeps, several processes, memory and fingerprints. Imports the layers below, never ``runs``."""
