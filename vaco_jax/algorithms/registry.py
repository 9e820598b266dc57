"""Algorithms as data: the registry of :class:`AlgorithmSpec` records, one per algorithm (docs/algorithms.md section 4).

The training loop is shared; an algorithm only says how advantages are estimated (and whether at every gradient
step), which policy the loss's ratios are taken against, and which policy loss to use
(:class:`~vaco_jax.algorithms.record.Algorithm`), plus what the package needs to know about it beside the loss: the
config group of its own options and the metrics ``--diagnostics lean`` keeps (:class:`AlgorithmSpec`). Adding one is
its loss and its record given to :func:`register`, never a loop, and nothing else: its option group becomes a config
field (and so flags, grid names, sweep leaves and config.json entries), its metrics are kept, and benchmark records
of other algorithms leave its options out. The built-in algorithms are :mod:`vaco_jax.algorithms.builtin`.
"""

from __future__ import annotations

from collections.abc import Callable

from vaco_jax.algorithms.builtin import (  # noqa: F401  (re-exported)
    BUILT_IN,
    geppo_eps_multiplier,
    offpolicy_weights,
    uses_exact_tv,
)
from vaco_jax.algorithms.estimators import (  # noqa: F401  (re-exported: the estimators a new algorithm composes)
    baseline_advantages,
    gae_advantages,
    vtrace_advantages,
)
from vaco_jax.algorithms.record import (  # noqa: F401  (re-exported: what a new algorithm is made of)
    AdvantageFn,
    Algorithm,
    AlgorithmSpec,
    PolicyLossFn,
    segments_reason,
)
from vaco_jax.core import plugins
from vaco_jax.core.config import Config, ConfigError, add_option_group, remove_option_group
from vaco_jax.numerics import advantages

ALGORITHMS: dict[str, AlgorithmSpec] = {spec.name: spec for spec in BUILT_IN}
"""Every known algorithm's record by name: the built-in ones, then those :func:`register` added."""

_REGISTERED: set[str] = set()  # names added or replaced with register(): they may read any config group
plugins.check_algorithms_with(lambda name: name in ALGORITHMS)  # a record's plugin is loaded only where needed


def register(
    algorithm: AlgorithmSpec | str,
    factory: Callable[[Config], Algorithm] | None = None,
    *,
    overwrite: bool = False,
) -> AlgorithmSpec:
    """Make an algorithm available by name to the trainer, sweeps, searches and the CLI; returns its record.

    ``algorithm`` is its :class:`AlgorithmSpec` (``register(AlgorithmSpec("dual_clip", build, options=DualClip))``),
    or its name with ``factory`` for one without options of its own (``register("dual_clip", build)``).
    ``build(config)`` returns the :class:`Algorithm`: an advantage estimator (e.g. :func:`gae_advantages`), a policy
    loss with the :class:`PolicyLossFn` signature, and the policy its ratios are taken against; a loss that reads a
    rollout's time axis (per trajectory, along time) says why in ``needs_segments``, or it gets minibatches of shuffled
    samples. The record's ``options`` become the config group ``option_group`` (the algorithm's name unless given).
    Registering a known name again raises unless ``overwrite=True``.

    From the command line, a module that registers algorithms is loaded with ``vaco-jax --plugin MODULE_OR_FILE``.
    """
    spec = algorithm if isinstance(algorithm, AlgorithmSpec) else AlgorithmSpec(algorithm, factory)  # type: ignore[arg-type]
    if factory is not None and isinstance(algorithm, AlgorithmSpec):
        raise TypeError("register(spec) takes the factory in the spec (AlgorithmSpec(name, build, ...)), not beside it")
    if spec.name in ALGORITHMS and not overwrite:
        raise ValueError(f"algorithm {spec.name!r} is already registered; pass overwrite=True to replace it")
    replaced = ALGORITHMS.get(spec.name)
    regrouped = replaced is not None and replaced.options is not None and replaced.option_group == spec.option_group
    if regrouped:  # the group of the same name may be a new class (a notebook cell run again)
        remove_option_group(replaced.option_group)  # type: ignore[arg-type, union-attr]
    try:
        if spec.options is not None:
            add_option_group(spec.option_group, spec.options)  # type: ignore[arg-type]
    except ConfigError:
        if regrouped:
            add_option_group(replaced.option_group, replaced.options)  # type: ignore[arg-type, union-attr]
        raise
    ALGORITHMS[spec.name] = spec
    _REGISTERED.add(spec.name)
    if replaced is not None:
        _drop_unused_group(replaced)
    return spec


def unregister(name: str) -> None:
    """Undo :func:`register` for ``name``: an added algorithm is removed (with its option group, unless another
    algorithm still reads it), a replaced built-in restored."""
    if name not in _REGISTERED:
        raise ValueError(
            f"algorithm {name!r} was not added with register(); registered: {', '.join(sorted(_REGISTERED))}"
        )
    removed = ALGORITHMS.pop(name)
    _REGISTERED.discard(name)
    built_in = {spec.name: spec for spec in BUILT_IN}
    if name in built_in:
        ALGORITHMS[name] = built_in[name]
    _drop_unused_group(removed)


def _drop_unused_group(spec: AlgorithmSpec) -> None:
    """Remove the option group ``spec`` added when no registered algorithm reads it any more."""
    if spec.options is not None and all(other.option_group != spec.option_group for other in ALGORITHMS.values()):
        remove_option_group(spec.option_group)  # type: ignore[arg-type]


def spec_of(name: str) -> AlgorithmSpec:
    """The record of algorithm ``name``; a ValueError naming every known one otherwise."""
    if name not in ALGORITHMS:
        raise ValueError(f"algorithm={name!r} is unknown; choose one of {', '.join(sorted(ALGORITHMS))}")
    return ALGORITHMS[name]


def build(config: Config) -> Algorithm:
    """The algorithm named by ``config.algorithm``, specialised to its static options (and to how the PPO group
    says advantages are estimated: :func:`with_estimation`)."""
    spec = spec_of(config.algorithm)
    algorithm = with_estimation(spec.build(config), config)
    return algorithm._replace(lean_metrics=spec.lean_metrics) if spec.lean_metrics else algorithm


def with_estimation(algorithm: Algorithm, config: Config) -> Algorithm:
    """``algorithm`` with its estimator cut into unrolls of ``ppo.advantage_horizon`` steps
    (:func:`~vaco_jax.numerics.advantages.cut_at_horizon`) and, under ``ppo.advantages_every_step``, GAE re-estimated
    at every gradient step with the live critic (brax's PPO does both). ``ppo.advantage_form`` and re-estimating at
    every step are offered for GAE only: an algorithm whose estimator is another (V-trace's align, a weighted GAE) is
    refused, naming it."""
    horizon = config.ppo.advantage_horizon
    if config.ppo.advantage_form != "lambda" and algorithm.advantage_fn is not gae_advantages:
        raise ConfigError(
            f"ppo.advantage_form={config.ppo.advantage_form} is a form of GAE's advantage; algorithm="
            f"{config.algorithm} with these options estimates its advantages otherwise (not plain GAE): drop "
            "--ppo.advantage-form"
        )
    if config.ppo.advantages_every_step:
        if algorithm.advantage_fn is not gae_advantages or algorithm.advantages_every_step:
            how = (
                "re-estimates its own advantages at every step already"
                if algorithm.advantages_every_step
                else "estimates its advantages otherwise (not plain GAE)"
            )
            raise ConfigError(
                f"ppo.advantages_every_step re-estimates GAE at every gradient step; algorithm={config.algorithm} "
                f"with these options {how}: drop --ppo.advantages-every-step"
            )
        algorithm = algorithm._replace(advantages_every_step=True)
    if horizon:
        estimate = algorithm.advantage_fn

        def within_unrolls(batch, hparams):
            return estimate(batch.replace(truncations=advantages.cut_at_horizon(batch.truncations, horizon)), hparams)

        algorithm = algorithm._replace(advantage_fn=within_unrolls)
    return algorithm


def own_config_groups() -> dict[str, str]:
    """Algorithm name -> the config group of options only it (or its family) reads, from the records."""
    return {name: spec.option_group for name, spec in ALGORITHMS.items() if spec.option_group is not None}


def algorithms_reading(group: str) -> list[str]:
    """The algorithms whose own option group is ``group``, by name."""
    return sorted(name for name, own in own_config_groups().items() if own == group)


def unread_config_groups(algorithm: str) -> frozenset[str]:
    """The algorithm-specific config groups ``algorithm`` never reads: the other algorithms' own groups.

    A benchmark's record of an experiment leaves them out, so that a changed default of another algorithm's
    option (e.g. ``vaco.tv_estimator``) does not make a PPO result look like a different experiment. An algorithm
    added with :func:`register` may read any group: nothing is left out for it.
    """
    if algorithm in _REGISTERED or algorithm not in ALGORITHMS:
        return frozenset()
    groups = own_config_groups()
    return frozenset(groups.values()) - {groups.get(algorithm)}
