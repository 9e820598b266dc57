"""Pure functions over pytrees: distributions, TV distances, advantage estimators, losses, normalisation, networks,
the lag buffer, sample reuse, diagnostics and statistics. Imports only ``vaco_jax.core`` and ``vaco_jax.envs``."""
