"""The training program: ``make_train(config)`` -> a pure ``train(key, hparams) -> (state, metrics)``.

One iteration (:meth:`TrainProgram.update_step`) reads like the paper's pseudocode:
sample lags, collect a rollout with stale actors, estimate advantages, run the
epochs, push the new snapshot, compute diagnostics. The whole training is a
``lax.scan`` of that step; the host driver runs the same step in chunks.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from vaco_jax import envs
from vaco_jax.algorithms import registry as algorithms
from vaco_jax.algorithms.state import keep_state, refresh_target
from vaco_jax.core.config import Config, ConfigError, NetworkConfig, extended
from vaco_jax.core.types import ActorSnapshot, PyTree, TrainState, Transitions
from vaco_jax.core.validation import validate
from vaco_jax.envs.base import ActionSpec, init_episode_stats, reset_when_due
from vaco_jax.numerics import diagnostics, lag, losses, normalization, reuse, tv
from vaco_jax.numerics.distributions import for_actions
from vaco_jax.numerics.networks import Networks
from vaco_jax.training import evaluation
from vaco_jax.training.minibatch_plan import (  # noqa: F401  (resolved_split re-exported)
    minibatch_note,
    resolve_minibatch,
    resolved_split,
)
from vaco_jax.training.rollout import act, collect_rollout
from vaco_jax.training.update import Learner, make_optimizer, run_epochs

Metrics = dict[str, jax.Array]
EVAL_STREAM = 0x5EED  # folded into a state's key for its evaluation: a stream apart from training's
RESET_STREAM = 0x5E7  # folded into it for env.reset_every's resets: the run's other streams stay as they were


def validate_config(config: Config) -> Config:
    """Full host-side validation, including environment and algorithm names; backend defaults resolved. The config
    holds every option group a registered algorithm added (:func:`vaco_jax.core.config.extended`), at its defaults
    where ``config`` lacks it."""
    config = extended(config)
    if not envs.is_known(config.env.name):  # the closest id and every known one (vaco_jax.envs)
        raise ConfigError(envs.unknown_env_message(config.env.name))
    validate(config, known_algorithms=algorithms.ALGORITHMS)
    config = resolve_defaults(config)
    if config.env.normalizer_form != "clipped" and not config.env.normalize_observations:
        raise ConfigError(
            f"env.normalizer_form={config.env.normalizer_form} shapes normalised observations, and {config.env.name}'s "
            "are not normalised: add --env.normalize-observations, or drop --env.normalizer-form"
        )
    return config


def resolve_defaults(config: Config) -> Config:
    """``config`` with every backend- and algorithm-dependent default filled in: ``env.normalize_observations=None``
    (the backend's choice) and ``ppo.minibatch=auto``
    (:func:`~vaco_jax.training.minibatch_plan.resolve_minibatch`); the option groups registered
    algorithms added, at their defaults where ``config`` lacks them."""
    config = extended(config)
    if config.env.normalize_observations is None:
        normalize = envs.default_normalization(config.env.name)
        config = config.replace(env=config.env.replace(normalize_observations=normalize))
    return resolve_minibatch(config)


def check_action_options(config: Config, spec: ActionSpec) -> None:
    """Refuse the options that the env's action space cannot take, saying what to change."""
    env = config.env.name
    if spec.discrete:
        for name in ("distribution", "std"):  # a categorical policy has neither: their defaults only
            path, value, default = f"network.{name}", getattr(config.network, name), getattr(NetworkConfig(), name)
            if value != default:
                raise ConfigError(
                    f"{path}={value!r} is for continuous actions, and {env} has discrete ones (a categorical "
                    f"policy): leave {path} at {default!r}"
                )
    elif config.vaco.tv_estimator == "exact":
        raise ConfigError(
            f"vaco.tv_estimator='exact' needs discrete actions, and {env} has continuous ones: "
            "use vaco.tv_estimator=auto (or sample)"
        )
    elif config.network.distribution == "tanh_gaussian" and not (
        np.all(np.isfinite(spec.low)) and np.all(np.isfinite(spec.high))
    ):
        raise ConfigError(
            f"network.distribution='tanh_gaussian' squashes actions into the action bounds, and {env}'s are not "
            f"finite (low {spec.low}, high {spec.high}): use network.distribution=gaussian"
        )


class TrainProgram:
    """A compiled-program factory bound to one static configuration.

    Calling it, ``program(key, hparams=None)``, runs the whole training as one pure function: ``jax.jit(program)(key)``.
    ``hparams`` is a :class:`Config` with the same static fields whose traced leaves may differ (a sweep point).

    Warning: do not ``vmap`` a call that initialises (``program`` or :meth:`init`): parameters must be initialised
    outside the vmapped program (platform trap 1). Batch runs with :meth:`init_batched` and a vmapped :meth:`run`, as
    :mod:`vaco_jax.training.driver` and :mod:`vaco_jax.training.sweep` do.
    """

    def __init__(self, config: Config):
        self.config = config = validate_config(config)
        self.env = envs.from_config(config.env)
        self.networks = Networks.for_config(config, self.env.action_spec, self.env.observation_size)
        check_action_options(config, self.env.action_spec)
        self.dist = for_actions(self.env.action_spec.discrete, config.network.distribution)
        self.algorithm = algorithms.build(config)

    def minibatch_note(self) -> str:
        """How the gradient steps split each batch, in words: a run's first line says so (not silently)."""
        return minibatch_note(self.config, self.algorithm)

    # ------------------------------------------------------------------ public entry points

    def __call__(self, key: jax.Array, hparams: Config | None = None) -> tuple[TrainState, Metrics]:
        """Initialise and train for ``config.num_iterations``; metrics are [I] per name."""
        hparams = self._check_hparams(hparams)
        return self.run(self.init(key, hparams), hparams, self.config.num_iterations)

    def init(self, key: jax.Array, hparams: Config | None = None) -> TrainState:
        """The state before iteration 0: fresh networks, a buffer full of snapshot 0, reset envs."""
        hparams = self._check_hparams(hparams)
        param_key, env_key, run_key = jax.random.split(key, 3)
        params = self.networks.init(param_key)
        obs_norm = normalization.init(self.env.observation_size)
        num_envs = self.config.env.num_envs
        env_state, observations = self.env.reset(jax.random.split(env_key, num_envs))
        state = TrainState(
            params=params,
            opt_state=make_optimizer(self.config, hparams).init(params),
            obs_norm=obs_norm,
            lag_buffer=lag.init_buffer(ActorSnapshot(params.actor, obs_norm), self.config.lag.max_lag),
            env_state=env_state,
            observations=observations,
            episode_stats=init_episode_stats(num_envs),
            algo_state=self.algorithm.init_state(hparams),
            key=run_key,
            iteration=jnp.zeros((), jnp.int32),
            target_actor=params.actor if self.algorithm.target_network is not None else None,
        )
        if self.config.reuse.num_batches > 1:
            state = state.replace(reuse_buffer=self._empty_reuse_buffer(state))
        return state

    def _empty_reuse_buffer(self, state: TrainState) -> reuse.ReuseBuffer:
        """Sample reuse's buffer, shaped like one batch of the acting stage (its shapes traced, nothing run)."""
        groups = self.config.lag.num_actors
        behaviour = lag.gather(state.lag_buffer, jnp.zeros((groups,), jnp.int32))

        def one_batch():
            args = (state.env_state, state.observations, state.episode_stats, state.key)
            return act(self.env, self.networks, self.dist, behaviour, *args, num_steps=self.config.env.num_steps)[3]

        return reuse.init_buffer(jax.eval_shape(one_batch), groups, self.config.reuse.num_batches)

    def init_batched(self, keys: jax.Array, hparams: Config) -> TrainState:
        """One state per run [S] (``hparams`` leaves stacked [S]), initialised one at a time."""
        return jax.lax.map(lambda args: self.init(*args), (keys, hparams))

    def run(
        self, state: TrainState, hparams: Config, num_iterations: int, first_iteration: jax.Array | None = None
    ) -> tuple[TrainState, Metrics]:
        """``num_iterations`` update steps as one ``lax.scan``; metrics [I] per name.

        With ``eval.every`` > 0, the learner is evaluated (:meth:`evaluate`) after every ``eval.every``-th iteration
        and after the last one, and the :data:`~vaco_jax.training.evaluation.METRICS` are NaN at the other iterations.
        ``first_iteration`` (default ``state.iteration``) is the iteration the call starts at: the driver passes it
        unbatched, so that under ``vmap`` the schedule stays a real branch and skipped evaluations cost nothing.
        """
        every = self.config.eval.every
        if every == 0:
            return jax.lax.scan(lambda s, _: self.update_step(s, hparams), state, None, length=num_iterations)
        first = state.iteration if first_iteration is None else first_iteration

        def step(state: TrainState, iteration: jax.Array) -> tuple[TrainState, Metrics]:
            state, metrics = self.update_step(state, hparams)
            done = iteration + 1
            due = (done % every == 0) | (done == self.config.num_iterations)
            scores = jax.lax.cond(due, lambda: self.evaluate(state), evaluation.skipped)
            return state, {**metrics, **scores}

        return jax.lax.scan(step, state, first + jnp.arange(num_iterations, dtype=jnp.int32))

    def evaluate(self, state: TrainState, key: jax.Array | None = None) -> Metrics:
        """The learner's evaluation (:func:`vaco_jax.training.evaluation.run_episodes`) on ``eval.episodes`` fresh
        environments per policy; the key is derived from the state's without consuming it (training is unchanged)."""
        key = jax.random.fold_in(state.key, EVAL_STREAM) if key is None else key
        scores = evaluation.run_episodes(
            self.env,
            self.networks,
            self.dist,
            ActorSnapshot(state.params.actor, state.obs_norm),
            key,
            episodes=self.config.eval.episodes,
            max_steps=evaluation.max_steps_for(self.env, self.config.eval.max_steps),
        )
        return {name: scores[name] for name in evaluation.METRICS}

    # ------------------------------------------------------------------ one iteration

    def update_step(self, state: TrainState, hparams: Config) -> tuple[TrainState, Metrics]:
        """One learner update T -> T + 1 (docs/algorithms.md sections 2 to 5)."""
        config, iteration = self.config, state.iteration
        key, lag_key, rollout_key, epoch_key = jax.random.split(state.key, 4)

        # 1. Which snapshot each actor group acts with (backward lag).
        lags = lag.sample_lags(lag_key, hparams.lag, iteration)  # hparams.lag: config's static fields, traced k, p
        behaviour = lag.gather(state.lag_buffer, iteration - lags)  # [G] snapshots
        learner = ActorSnapshot(state.params.actor, state.obs_norm)  # pi_T, the buffer's slot T

        # 2. Rollout with stale actors, every env reset first where env.reset_every is due; pi_T's log-probs recorded.
        envs_now = (state.env_state, state.observations, state.episode_stats)
        reset_key = jax.random.fold_in(state.key, RESET_STREAM)
        envs_now = reset_when_due(self.env, envs_now, reset_key, iteration, config.env.reset_every)
        env_state, observations, episode_stats, rollout = collect_rollout(
            self.env,
            self.networks,
            self.dist,
            behaviour,
            learner,
            lags,
            *envs_now,
            rollout_key,
            num_steps=config.env.num_steps,
        )
        state = state.replace(env_state=env_state, observations=observations, episode_stats=episode_stats, key=key)
        return self.learn(state, rollout, lags, epoch_key, hparams)

    def learn(
        self, state: TrainState, rollout: Transitions, lags: jax.Array, epoch_key: jax.Array, hparams: Config
    ) -> tuple[TrainState, Metrics]:
        """Steps 3 to 7 of an iteration on a collected batch: advantages, epochs, the new snapshot, diagnostics.

        ``rollout`` holds the behaviour and the learner's (pi_T) log-probs; ``lags`` [G] are its groups' lags;
        ``state`` already carries the environments after the rollout and the key of the next iteration. The
        simulator (:meth:`update_step`) and the asynchronous learner (:mod:`vaco_jax.training.asynchronous`) both call
        it.
        """
        config, iteration = self.config, state.iteration

        # The observation statistics absorb this batch after the gradient steps (default) or before them.
        normalize = config.env.normalize_observations
        obs_norm = state.obs_norm
        if normalize and config.env.normalizer_update == "before":
            obs_norm = normalization.update(obs_norm, rollout.observations)

        # 3. Advantages with the critic V_T (under sample reuse: on this batch and the stored ones, scored under pi_T).
        reused = self.join_reused(state, rollout) if state.reuse_buffer is not None else rollout
        learned = reused  # its pi_T is the algorithm's own target network where it has one (diagnostics: the learner)
        if state.target_actor is not None:
            learned = self.score_under(ActorSnapshot(state.target_actor, state.obs_norm), reused)
        batch, values = self.estimate_advantages(state.replace(obs_norm=obs_norm), learned, hparams)

        # 4. Epochs x minibatches of gradient steps (forward lag).
        learner = Learner(self.networks, self.dist, self.algorithm, make_optimizer(config, hparams), config)
        params, opt_state, train_metrics = run_epochs(
            state.params, state.opt_state, batch, obs_norm, state.algo_state, epoch_key, learner, hparams
        )

        # 5. The new actor snapshot (parameters + normaliser statistics) enters the lag buffer; under sample reuse
        # this batch enters the reuse buffer (the oldest leaves) and the diagnostics below read this batch only.
        if normalize and config.env.normalizer_update == "after":
            obs_norm = normalization.update(obs_norm, rollout.observations)
        snapshot = ActorSnapshot(params.actor, obs_norm)
        lag_buffer = lag.push(state.lag_buffer, snapshot, iteration + 1)
        reuse_buffer, reuse_metrics = state.reuse_buffer, {}
        if reuse_buffer is not None:
            reuse_metrics = self.reuse_diagnostics(reuse_buffer, reused, snapshot, lags, iteration)
            reuse_buffer = reuse.push(reuse_buffer, rollout, iteration - lags, iteration)
            num_envs = rollout.rewards.shape[1]  # this batch's columns come first in the joined one
            values, batch = values[:, :num_envs], batch.replace(value_targets=batch.value_targets[:, :num_envs])

        # 6. Diagnostics (docs/algorithms.md section 5).
        next_dist_params = self.networks.policy(snapshot, rollout.observations)
        next_log_probs = self.dist.log_prob(next_dist_params, rollout.actions)
        update_kl = losses.approx_kl(next_log_probs, rollout.behaviour_log_probs)  # KL(beta || pi_{T+1}), k3
        lag_and_tv = diagnostics.lag_and_tv(lags, rollout, next_log_probs, next_dist_params)

        # 7. The algorithm's own state adapts to this iteration (PPO-KL's coefficient, GePPO's step size).
        # tv/forward: the exact per-state TV where actions are discrete (the sample estimate's typical value is
        # about half of it under heavy lag, see algorithms.uses_exact_tv), the importance-weighted one otherwise
        forward_tv = lag_and_tv.get("tv/forward_exact", lag_and_tv["tv/forward"])
        forward_tv = reuse_metrics.get("reuse/tv_forward", forward_tv)  # under reuse: over every batch trained on
        signals = {"kl/update": update_kl, "tv/forward": forward_tv}
        signals.update({name: train_metrics[name] for name in self.algorithm.step_signals})  # IMPACT's kl/target
        algo_state, algo_metrics = self.algorithm.update_state(state.algo_state, signals, hparams)
        metrics = {
            **algo_metrics,
            "kl/update": update_kl,
            **train_metrics,
            **lag_and_tv,
            **diagnostics.episode_metrics(rollout),
            "explained_variance": diagnostics.explained_variance(values, batch.value_targets),
            **reuse_metrics,
        }
        adaptive = self.algorithm.update_state is not keep_state
        metrics = diagnostics.select(metrics, config.diagnostics, adaptive, self.algorithm.lean_metrics)
        new_state = state.replace(
            params=params,
            opt_state=opt_state,
            obs_norm=obs_norm,
            lag_buffer=lag_buffer,
            algo_state=algo_state,
            iteration=iteration + 1,
            reuse_buffer=reuse_buffer,
            target_actor=self.refreshed_target(state.target_actor, params.actor, iteration + 1, hparams),
        )
        return new_state, metrics

    def join_reused(self, state: TrainState, rollout: Transitions) -> Transitions:
        """Sample reuse: this batch and the stored ones joined along E (:func:`vaco_jax.numerics.reuse.join`), the
        stored ones scored under pi_T, the snapshot this batch's learner log-probs came from."""
        learner = ActorSnapshot(state.params.actor, state.obs_norm)
        return reuse.join(state.reuse_buffer, rollout, lambda batch: self.score_under(learner, batch))

    def score_under(self, snapshot: ActorSnapshot, batch: Transitions) -> Transitions:
        """``batch`` with its learner fields (``learner_log_probs``, discrete ``learner_logits``) scored under
        ``snapshot``: pi_T for stored batches, or the algorithm's own target network."""
        dist_params = self.networks.policy(snapshot, batch.observations)
        logits = dist_params if self.dist.discrete else None
        return batch.replace(learner_log_probs=self.dist.log_prob(dist_params, batch.actions), learner_logits=logits)

    def refreshed_target(self, target: PyTree, actor: PyTree, updates_done: jax.Array, hparams: Config) -> PyTree:
        """The algorithm's own target network after ``updates_done`` updates (None where it has none)."""
        rule = self.algorithm.target_network
        if target is None or rule is None:
            return target
        return refresh_target(target, actor, updates_done, rule.every, rule.tau(hparams))

    def reuse_diagnostics(
        self,
        buffer: reuse.ReuseBuffer,
        reused: Transitions,
        snapshot: ActorSnapshot,
        lags: jax.Array,
        iteration: jax.Array,
    ) -> Metrics:
        """Sample reuse's metrics: ``reuse/batches`` (the batches this update trained on), ``reuse/data_lag`` (their
        data's mean lag, :func:`vaco_jax.numerics.reuse.data_lag`) and ``reuse/tv_forward``, TV(pi_{T+1}, pi_T) over all
        of them with their weights (GePPO's step size watches it: exact per state for discrete actions, the
        importance-weighted estimate otherwise)."""
        next_params = self.networks.policy(snapshot, reused.observations)
        if self.dist.discrete:
            contributions = tv.state_tv(next_params, reused.learner_logits)
        else:
            next_log_probs = self.dist.log_prob(next_params, reused.actions)
            contributions = tv.sample_tv(next_log_probs, reused.learner_log_probs, reused.behaviour_log_probs)
        return {
            "reuse/batches": 1.0 + jnp.sum(reuse.filled(buffer)).astype(jnp.float32),
            "reuse/data_lag": reuse.data_lag(buffer, lags, iteration),
            "reuse/tv_forward": losses.sample_average(contributions, reused.sample_weights),
        }

    def estimate_advantages(
        self, state: TrainState, rollout: Transitions, hparams: Config
    ) -> tuple[Transitions, jax.Array]:
        """The estimating and learning stages of the record: scaled rewards and the critic's values V_T(s_t),
        V_T(s'_t), the algorithm's advantages and value targets, then the batch the gradient steps read
        (:meth:`~vaco_jax.core.types.Transitions.for_gradient_steps`). Returns it and V_T(s_t)."""
        critic = lambda obs: self.networks.value(state.params.critic, state.obs_norm, obs)  # noqa: E731
        values, next_values = critic(rollout.observations), critic(rollout.next_observations)
        estimating = rollout.replace(
            rewards=rollout.rewards * hparams.env.reward_scale, values=values, next_values=next_values
        )
        advantages, targets = self.algorithm.advantage_fn(estimating, hparams)
        return estimating.for_gradient_steps(self.algorithm.ratio_ref, advantages, targets), values

    # ------------------------------------------------------------------ helpers

    def _check_hparams(self, hparams: Config | None) -> Config:
        if hparams is None:
            return self.config
        hparams = resolve_defaults(hparams)
        if jax.tree.structure(hparams) != jax.tree.structure(self.config):
            raise ConfigError(
                "hparams must be a Config with the same static fields (shapes, names, loop "
                "lengths) as the one given to make_train; only traced fields may differ"
            )
        return hparams


def make_train(config: Config) -> TrainProgram:
    """Validate ``config`` and return the pure training function ``train(key, hparams=None)``.

    Example:
      >>> import jax
      >>> from vaco_jax import Config, make_train
      >>> train = make_train(Config(num_iterations=2))
      >>> state, metrics = jax.jit(train)(jax.random.key(0))  # doctest: +SKIP
    """
    return TrainProgram(config)
