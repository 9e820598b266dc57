"""``python -m vaco_jax.cli ...``: the ``vaco-jax`` command (a multi-process run's supervisor starts its worker so)."""

import sys

from vaco_jax.cli import main

sys.exit(main())
