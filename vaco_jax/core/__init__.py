"""The foundation every layer shares: configuration (the config records, their fields, the algorithms' option
groups, validation, presets, grids) and the state records (``types``). Imports nothing else of vaco_jax."""
