"""What an algorithm is: the record a factory builds for one config (:class:`Algorithm`: advantage estimator,
policy loss, ratio reference, state), and the record the registry keeps (:class:`AlgorithmSpec`: that factory with
everything else the package needs to know about the algorithm, its option group and the metrics it keeps at
``--diagnostics lean``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import NamedTuple, Protocol

import jax

from vaco_jax.algorithms.state import AlgoState, Signals, keep_state, no_state
from vaco_jax.core.config import Config
from vaco_jax.core.types import Transitions
from vaco_jax.numerics import losses
from vaco_jax.numerics.distributions import DistParams


class AdvantageFn(Protocol):
    def __call__(self, batch: Transitions, hparams: Config) -> tuple[jax.Array, jax.Array]:
        """Return ``(advantages, value_targets)``, each [T, ...], from the estimating stage of ``batch``: scaled
        ``rewards``, the critic's ``values`` and ``next_values``, ``terminations``, ``truncations``, and the
        policy being evaluated in ``learner_log_probs`` (pi_T; pi_theta where an algorithm re-estimates its
        advantages at every gradient step) against ``behaviour_log_probs``. An estimator should stop its recursion
        where ``terminations`` or ``truncations`` is set, bootstrapping a truncation from ``next_values``:
        ``ppo.advantage_horizon`` cuts the rollout into unrolls by setting ``truncations``, so an estimator that
        ignores them ignores the horizon too."""
        ...


class PolicyLossFn(Protocol):
    def __call__(
        self,
        log_probs: jax.Array,
        dist_params: DistParams,
        batch: Transitions,
        advantages: jax.Array,
        hparams: Config,
        state: AlgoState,
    ) -> tuple[jax.Array, losses.Metrics]:
        """Return ``(policy_loss, metrics)``.

        ``log_probs`` [T, B] and ``dist_params`` (logits [T, B, A] for discrete actions) are
        pi_theta's on the minibatch ``batch`` (the learning stage of the record,
        :meth:`~vaco_jax.core.types.Transitions.for_gradient_steps`); ``advantages`` [T, B] are the ones this step uses.
        By default a minibatch holds shuffled samples, shaped [1, B] (a time axis of length 1, no rollout in it); a
        loss that reads a rollout's time axis declares it with :attr:`Algorithm.needs_segments` and then gets whole
        environment segments, [T, B].
        """
        ...


class TargetNetwork(NamedTuple):
    """A target network of the algorithm's own as its ratio reference pi_T (RLlib's APPO), in place of the learner at
    the start of each iteration: a copy of the actor, refreshed after every ``every``-th update as
    ``tau * learner + (1 - tau) * target`` (:func:`vaco_jax.algorithms.state.refresh_target`), ``tau`` read from
    the hparams (a traced leaf)."""

    every: int
    tau: Callable[[Config], jax.Array]


class Algorithm(NamedTuple):
    """A named composition of an advantage estimator and a policy loss.

    ``update_state`` adapts the algorithm's own state once per iteration from that iteration's ``Signals`` (PPO-KL's
    coefficient, GePPO's step size); ``actor_step_scale``, when given, multiplies the actor's optimiser update (not
    the critic's) by a factor read from that state (a learning-rate scale: Adam's update is linear in the step
    size). ``advantage_weights``, when given, are the importance weights of the per-minibatch advantage
    standardisation (:func:`vaco_jax.numerics.advantages.standardize`; GePPO: pi_T/beta); otherwise it is unweighted.
    ``needs_segments``, when given, says why the loss needs a rollout's time axis inside each minibatch (whole
    environment segments, ``ppo.minibatch=segments``); an algorithm that re-estimates its advantages at every step
    (with the live critic V_phi, for pi_theta or, ``every_step_policy="reference"``, for the batch's ratio
    reference pi_T) needs them too (:func:`segments_reason`). Every other loss takes minibatches of shuffled
    samples by default. ``lean_metrics`` are the metrics ``--diagnostics lean`` keeps for it (its
    :class:`AlgorithmSpec`'s). ``step_signals`` name metrics of its policy loss that ``update_state`` adapts to,
    averaged over the iteration's gradient steps (kept at every ``--diagnostics`` level until then; IMPACT's
    ``kl/target``). ``target_network``, when given, makes the ratio reference pi_T a network of its own
    (:class:`TargetNetwork`). ``reads_clip_eps`` says whether its policy loss reads ``ppo.clip_eps`` (PPO's clip
    and the losses built on it); where it does not (IMPALA, PPO-KL, VACO's filter, CISPO), the command line refuses
    a sweep axis of it and warns of its flag, either of which would change nothing the run does.
    """

    name: str
    advantage_fn: AdvantageFn
    policy_loss_fn: PolicyLossFn
    ratio_ref: str  # "behaviour" (beta) or "learner" (pi_T): the policy the loss's ratios are taken against
    advantages_every_step: bool = False  # recompute advantages at every gradient step with the live critic
    every_step_policy: str = "current"  # ...for pi_theta ("current", IMPALA) or the ratio reference ("reference", APPO)
    init_state: Callable[[Config], AlgoState] = no_state
    update_state: Callable[[AlgoState, Signals, Config], tuple[AlgoState, losses.Metrics]] = keep_state
    actor_step_scale: Callable[[AlgoState], jax.Array] | None = None
    advantage_weights: Callable[[Transitions], jax.Array] | None = None
    needs_segments: str | None = None
    lean_metrics: tuple[str, ...] = ()  # set from its AlgorithmSpec by registry.build
    reads_clip_eps: bool = True  # its policy loss reads ppo.clip_eps (tests/test_algorithms.py checks each built-in)
    step_signals: tuple[str, ...] = ()
    target_network: TargetNetwork | None = None


def segments_reason(algorithm: Algorithm) -> str | None:
    """Why ``algorithm``'s gradient steps need whole environment segments (a rollout's time axis inside each
    minibatch), or None when minibatches of shuffled samples serve it."""
    if algorithm.needs_segments is not None:
        return algorithm.needs_segments
    if algorithm.advantages_every_step:
        return f"{algorithm.name} re-estimates its advantages along each rollout segment at every gradient step"
    return None


@dataclasses.dataclass(frozen=True)
class AlgorithmSpec:
    """One algorithm as the registry knows it: everything about it in one record.

    ``build(config)`` returns its :class:`Algorithm` specialised to the config's static options. ``option_group``
    names the config group of options that only this algorithm (or its family) reads: a built-in's group is declared
    on :class:`~vaco_jax.core.config.Config` (``vaco``, ``impact``, ...); an algorithm from outside the package gives
    its group's dataclass as ``options`` (a ``flax.struct`` dataclass with a default for every field and, optionally,
    a ``check()`` that raises :class:`~vaco_jax.core.config.ConfigError`), and registering it makes the group a field
    of the config (``--<group>.<field>`` flags, dotted names in grids, traced leaves in sweeps, config.json). A
    benchmark's record of another algorithm leaves the group out (:func:`registry.unread_config_groups`).
    ``lean_metrics`` are the names or name prefixes (ending in ``/``) of its own metrics that
    ``--diagnostics lean`` keeps: its trust region's or adaptation's values.
    """

    name: str
    build: Callable[[Config], Algorithm]
    option_group: str | None = None
    options: type | None = None
    lean_metrics: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.name or any(c.isspace() for c in self.name):
            raise ValueError(f"algorithm name {self.name!r} must be a non-empty word (it is --algorithm's value)")
        if not callable(self.build):
            raise TypeError(f"algorithm {self.name!r}: build must be a function of the config, got {self.build!r}")
        if self.options is not None and self.option_group is None:
            object.__setattr__(self, "option_group", self.name)  # the group takes the algorithm's name
        object.__setattr__(self, "lean_metrics", tuple(self.lean_metrics))
