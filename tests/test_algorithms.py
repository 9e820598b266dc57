"""Algorithm records: when advantages are estimated, and VACO's zero-lag equivalence with PPO."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from tests.conftest import rollout_with_lags, tiny_config
from vaco_jax import TrainProgram, run_sweep
from vaco_jax.algorithms import registry as algorithms
from vaco_jax.algorithms.builtin import BUILT_IN
from vaco_jax.core.types import ActorSnapshot
from vaco_jax.numerics import advantages, lag
from vaco_jax.training.update import Learner, make_optimizer, minibatch_loss, step_advantages


def collect_batch(program: TrainProgram, state, source_iterations) -> object:
    """The training batch of ``state``'s iteration, its G actor groups acting with the snapshots of the given
    iterations (the learner's is ``state.iteration``)."""
    rollout = rollout_with_lags(program, state, state.iteration - jnp.asarray(source_iterations, jnp.int32))
    batch, _ = program.estimate_advantages(state, rollout, program.config)
    return batch


def first_batch(program: TrainProgram):
    """The initial state and the training batch of iteration 0 (no lag is possible yet)."""
    state = program.init(jax.random.key(0))
    return state, collect_batch(program, state, (0, 0))


def _learner(program: TrainProgram) -> Learner:
    config = program.config
    return Learner(program.networks, program.dist, program.algorithm, make_optimizer(config, config), config)


def _gradient(program: TrainProgram, state, batch, hparams=None):
    """The gradient of the first minibatch step on ``batch`` (the whole batch as one minibatch), with the traced
    values of ``hparams`` (default: the program's config)."""
    learner, hparams = _learner(program), program.config if hparams is None else hparams
    loss = lambda p: minibatch_loss(p, batch, state.obs_norm, state.algo_state, learner, hparams)[0]  # noqa: E731
    return jax.grad(loss)(state.params)


def advantages_before_and_after_one_step(name: str):
    program = TrainProgram(tiny_config(algorithm=name))
    state, batch = first_batch(program)
    learner = _learner(program)

    def used(params):
        snapshot = ActorSnapshot(params.actor, state.obs_norm)
        log_probs = program.dist.log_prob(program.networks.policy(snapshot, batch.observations), batch.actions)
        return step_advantages(params, batch, log_probs, state.obs_norm, learner, program.config)[0]

    grads = jax.grad(lambda p: minibatch_loss(p, batch, state.obs_norm, state.algo_state, learner, program.config)[0])(
        state.params
    )
    updates, _ = learner.optimizer.update(grads, state.opt_state, state.params)
    moved = optax.apply_updates(state.params, updates)
    return np.asarray(used(state.params)), np.asarray(used(moved))


def test_impala_advantages_change_between_gradient_steps():
    before, after = advantages_before_and_after_one_step("impala")
    assert np.abs(before - after).max() > 1e-6


@pytest.mark.parametrize("name,from_batch", [("vaco", True), ("ppo", True), ("impala", False), ("impact", False)])
def test_advantages_come_from_the_batch_unless_re_estimated_every_step(name, from_batch):
    """VACO (and PPO) train every step of an iteration on the advantages estimated once at its start, held in the
    batch; IMPALA re-estimates them from the current parameters. Scrambling the batch's advantages must change
    the policy gradient of VACO and PPO and must leave IMPALA's untouched. (The gradient, not the loss: at the
    first step r = 1, and the loss of normalised advantages is 0 whatever they are.)"""
    program = TrainProgram(tiny_config(algorithm=name))
    state, batch = first_batch(program)
    learner = _learner(program)
    noise = jax.random.normal(jax.random.key(7), batch.advantages.shape)
    scrambled = batch.replace(advantages=batch.advantages + 3.0 * noise)

    def policy_gradient(b):
        def loss(params):
            return minibatch_loss(params, b, state.obs_norm, state.algo_state, learner, program.config)[1][
                "loss/policy"
            ]

        return np.concatenate([np.ravel(g) for g in jax.tree.leaves(jax.grad(loss)(state.params).actor)])

    changed = np.abs(policy_gradient(batch) - policy_gradient(scrambled)).max() > 1e-6
    assert changed == from_batch


def test_impacts_default_is_rllibs_appo_vtrace_q_form_for_the_target_with_the_live_critic():
    """IMPACT (impact.advantages=vtrace_every_step) re-estimates V-trace's q form at every gradient step, as RLlib's
    APPO loss does: for the target network pi_T (the batch's ratio reference), whatever pi_theta is, without lambda,
    and with the critic being trained (a moved critic moves them)."""
    program = TrainProgram(tiny_config(algorithm="impact"))
    assert program.config.ppo.minibatch == "segments"
    state, batch = first_batch(program)
    learner, config = _learner(program), program.config
    shift = jax.random.normal(jax.random.key(2), batch.ref_log_probs.shape) * 0.5
    batch = batch.replace(ref_log_probs=batch.behaviour_log_probs + shift)  # pi_T away from beta
    some_policy = batch.behaviour_log_probs - 0.3 * shift

    def used(params, log_probs):
        return np.asarray(step_advantages(params, batch, log_probs, state.obs_norm, learner, config)[0])

    got = used(state.params, some_policy)
    np.testing.assert_array_equal(got, used(state.params, batch.behaviour_log_probs))  # pi_theta plays no part
    critic = lambda obs: program.networks.value(state.params.critic, state.obs_norm, obs)  # noqa: E731
    want, _ = advantages.vtrace(
        batch.rewards,
        critic(batch.observations),
        critic(batch.next_observations),
        batch.terminations,
        batch.truncations,
        batch.ref_log_probs,
        batch.behaviour_log_probs,
        gamma=config.ppo.gamma,
        lambda_=1.0,  # RLlib's vtrace has no lambda: the traces are min(c_bar, pi_T/beta) alone
        advantage="q",
    )
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    moved = state.params.replace(critic=jax.tree.map(lambda x: x * 1.1, state.params.critic))
    assert np.abs(used(moved, some_policy) - got).max() > 1e-4


@pytest.mark.parametrize("adaptive", [False, True])
def test_impacts_kl_term_adds_its_coefficient_times_the_targets_kl(adaptive):
    """impact.kl_coef (RLlib's optional APPO term) adds kl_coef * KL(pi_T || pi_theta), exact from the logits here
    (CartPole's discrete actions), to the policy loss; 0, the default, adds nothing. Under impact.kl_adaptive the
    coefficient is the state's adapted one, not impact.kl_coef (its starting value)."""
    config = tiny_config(algorithm="impact")
    if adaptive:
        config = config.replace(impact=config.impact.replace(kl_adaptive=True, kl_coef=5.0))
    program = TrainProgram(config)
    state, batch = first_batch(program)
    noise = jax.random.normal(jax.random.key(3), batch.ref_logits.shape)
    batch = batch.replace(ref_logits=batch.ref_logits + noise)  # pi_T's logits away from pi_theta's
    learner, config = _learner(program), program.config

    def policy_loss(coef):
        hparams, algo_state = config.replace(impact=config.impact.replace(kl_coef=coef)), state.algo_state
        if adaptive:
            hparams, algo_state = config, {"kl_coef": jnp.float32(coef)}
        _, metrics = minibatch_loss(state.params, batch, state.obs_norm, algo_state, learner, hparams)
        return float(metrics["loss/policy"]), float(metrics["kl/target"])

    (plain, kl), (penalised, _) = policy_loss(0.0), policy_loss(0.7)
    assert kl > 1e-2
    assert penalised == pytest.approx(plain + 0.7 * kl, rel=1e-5)


def test_vaco_at_zero_lag_uses_exactly_ppo_advantages():
    _, ppo = first_batch(TrainProgram(tiny_config(algorithm="ppo")))
    _, vaco = first_batch(TrainProgram(tiny_config(algorithm="vaco")))
    np.testing.assert_allclose(vaco.advantages, ppo.advantages, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(vaco.value_targets, ppo.value_targets, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "name,advantage,ref,every_step",
    [
        ("ppo", "gae", "behaviour", False),
        ("ppo_decoupled", "gae", "learner", False),
        ("ppo_kl", "gae", "behaviour", False),
        ("spo", "gae", "behaviour", False),
        ("impala", "vtrace", "behaviour", True),
        ("vaco", "vtrace", "learner", False),
        ("vaco_align_only", "vtrace", "learner", False),
        ("vaco_filter_only", "gae", "learner", False),
        ("impact", "vtrace", "learner", True),
        ("m2po", "gae", "behaviour", False),
        ("geppo", "vtrace", "learner", False),
        ("cispo", "gae", "behaviour", False),
    ],
)
def test_registry_composes_the_spec_table(name, advantage, ref, every_step):
    algo = algorithms.build(tiny_config(algorithm=name))
    assert algo.name == name and algo.ratio_ref == ref and algo.advantages_every_step == every_step
    assert (algo.advantage_fn is algorithms.gae_advantages) == (advantage == "gae")


def test_vaco_options_reach_the_record():
    config = tiny_config(algorithm="vaco")
    no_align = config.replace(vaco=config.vaco.replace(align=False, filter_ref="behaviour"))
    algo = algorithms.build(no_align)
    assert algo.advantage_fn is algorithms.gae_advantages and algo.ratio_ref == "behaviour"


def _first_step_gradient(config):
    program = TrainProgram(config)
    return _gradient(program, *first_batch(program))


def test_decoupled_weight_changes_nothing_at_zero_lag_and_something_under_lag():
    """At zero lag pi_T = beta bit for bit: ppo_decoupled's gradient is PPO-clip's, VACO's is unweighted VACO's."""
    vaco = tiny_config(algorithm="vaco")
    weighted = vaco.replace(vaco=vaco.vaco.replace(is_weight="truncated"))
    pairs = [(tiny_config(algorithm="ppo"), tiny_config(algorithm="ppo_decoupled")), (vaco, weighted)]
    for plain, decoupled in pairs:
        jax.tree.map(
            np.testing.assert_array_equal,
            _first_step_gradient(plain),
            _first_step_gradient(decoupled),
        )
    # under lag the learner pi_T differs from beta and the weight (and trust-region centre) matter
    stale = _stale_state_gradient(vaco), _stale_state_gradient(weighted)
    differences = jax.tree.leaves(jax.tree.map(lambda a, b: float(np.abs(a - b).max()), *stale))
    assert max(differences) > 1e-6


def _stale_state_gradient(config, move=lambda x, key: x * 1.5, behaviour=None, hparams=None):
    """The first gradient of a batch collected by an actor one update behind the learner (``move`` makes the
    learner pi_T from the actor's parameters; ``behaviour``, if given, first makes the actor's from the initial
    ones). With a list of ``hparams``: one gradient per traced setting, on the same batch."""
    program = TrainProgram(config)
    state = program.init(jax.random.key(0))
    if behaviour is not None:
        leaves, treedef = jax.tree.flatten(state.params.actor)
        keys = jax.random.split(jax.random.key(2), len(leaves))
        actor = jax.tree.unflatten(treedef, [behaviour(x, k) for x, k in zip(leaves, keys, strict=True)])
        state = state.replace(
            params=state.params.replace(actor=actor),
            lag_buffer=lag.push(state.lag_buffer, ActorSnapshot(actor, state.obs_norm), 0),
        )
    leaves, treedef = jax.tree.flatten(state.params.actor)
    keys = jax.random.split(jax.random.key(1), len(leaves))
    moved = jax.tree.unflatten(treedef, [move(x, k) for x, k in zip(leaves, keys, strict=True)])  # pi_T
    state = state.replace(
        params=state.params.replace(actor=moved),
        lag_buffer=lag.push(state.lag_buffer, ActorSnapshot(moved, state.obs_norm), 1),
        iteration=state.iteration + 1,
    )
    batch = collect_batch(program, state, (0, 0))  # both groups act with snapshot 0; the learner is snapshot 1
    if hparams is None:
        return _gradient(program, state, batch)
    return [_gradient(program, state, batch, h) for h in hparams]


def test_vaco_sweep_grids_tv_threshold_and_lag_in_one_program():
    config = tiny_config(algorithm="vaco", num_iterations=4)
    result = run_sweep(config, {"vaco.tv_threshold": [0.002, math.inf], "lag.k": [0, 4]}, num_seeds=1)
    kept = result.metrics["filter/kept"]  # [threshold, lag, seed, iteration]
    assert kept.shape == (2, 2, 1, 4)
    assert np.all(kept[1] == 1.0)  # an infinite threshold keeps every sample (align only)
    assert kept[0].min() < 1.0  # a tight threshold filters
    assert np.all(result.metrics["tv/backward"][:, 0] == 0) and np.all(result.metrics["tv/backward"][:, 1, :, 1:] > 0)


def test_adaptive_ppo_kl_changes_its_coefficient():
    config = tiny_config(algorithm="ppo_kl", num_iterations=4)
    config = config.replace(ppo=config.ppo.replace(kl_adaptive=True, kl_target=1e-6))
    coef = run_sweep(config, num_seeds=1).metrics["kl/coef"][0]
    np.testing.assert_allclose(coef, [1.0, 2.0, 4.0, 8.0])  # KL far above target: doubled every iteration


def _baseline(name: str, **groups):
    """``tiny_config`` for a lag-robust baseline, with GAE advantages and no adaptive step (the zero-lag case)."""
    config = tiny_config(algorithm=name)
    config = config.replace(
        impact=config.impact.replace(advantages="gae"), geppo=config.geppo.replace(advantages="gae", adaptive_lr=False)
    )
    return config.replace(**{k: getattr(config, k).replace(**v) for k, v in groups.items()})


@pytest.mark.parametrize("name", ["impact", "m2po", "geppo", "ppo_decoupled"])
def test_trust_region_baselines_have_ppo_clips_gradient_at_zero_lag(name):
    """Through the whole pipeline (rollout, advantages, minibatch loss): pi_T = beta at iteration 0, so IMPACT's
    weight is 1, M2PO masks nothing, GePPO's clip is centred on 1, decoupled PPO's masked weight is 1."""
    config = _baseline(name, ppo={"w_mode": "mask"} if name == "ppo_decoupled" else {})
    jax.tree.map(
        lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-9),
        _first_step_gradient(tiny_config(algorithm="ppo")),
        _first_step_gradient(config),
    )


def _far(x, key):
    """A learner far from the actor: log-ratios of order 1, so that every weight, clip and mask is reached."""
    return x + 0.5 * jax.random.normal(key, x.shape)


@pytest.mark.parametrize("name", ["impact", "m2po", "geppo", "cispo"])
def test_under_lag_each_baseline_differs_from_ppo(name):
    """(IMPACT at its default rho_max = 2: its ratio is pi/pi_T, a trust region around the learner, not PPO's around
    beta. Its ``behaviour`` variant, pi/beta until truncation, would pass here only because of the truncation.
    M2PO with a budget of 1: at 0.04 it would hold every harmful sample this far from beta, as PPO's clip does.)"""
    config = _baseline(name, m2po={"tau": 1.0})
    stale = _stale_state_gradient(config, _far), _stale_state_gradient(tiny_config(algorithm="ppo"), _far)
    differences = jax.tree.leaves(jax.tree.map(lambda a, b: float(np.abs(a - b).max()), *stale))
    assert max(differences) > 1e-6


def test_every_baseline_trains_under_a_lagged_fleet_with_finite_metrics_each_documented():
    """...and every metric they log is in docs/algorithms.md's diagnostics table (m2po/kept, is/truncated_frac and
    kl/target were logged without a word there)."""
    import re
    from pathlib import Path

    page = (Path(__file__).resolve().parents[1] / "docs" / "algorithms.md").read_text()
    documented = set(re.findall(r"`([a-z0-9_]+/[a-z0-9_]+)`", page.split("## 5. Diagnostics")[1].split("## 6.")[0]))
    for name in ("impact", "m2po", "geppo", "cispo"):
        config = tiny_config(algorithm=name, num_iterations=4)
        config = config.replace(lag=config.lag.replace(kind="uniform", k=4))
        result = run_sweep(config, num_seeds=1)
        for metric in ("loss/total", "loss/policy", "grad_norm", "tv/forward", "is/weight_mean"):
            assert np.isfinite(result.metrics[metric]).all(), (name, metric)
        assert name != "m2po" or np.isfinite(result.metrics["m2po/kept"]).all()
        logged = {metric for metric in result.metrics if "/" in metric and not metric.startswith("loss/")}
        assert logged <= documented, (name, sorted(logged - documented))


def test_geppo_adapts_its_step_size_to_the_updates_tv():
    """A trust region far tighter than any update (eps = 1e-4): TV > eps/2 every iteration, so the step-size scale
    is divided by 1 + f each time; with f = 1e6 the policy then stops moving (the scale reaches the optimiser)."""
    config = tiny_config(algorithm="geppo", num_iterations=4).replace(
        env=tiny_config().env.replace(normalize_observations=False)
    )
    config = config.replace(ppo=config.ppo.replace(clip_eps=1e-4))
    scale = run_sweep(config, num_seeds=1).metrics["geppo/lr_scale"][0]
    np.testing.assert_allclose(scale, 1.03 ** -np.arange(4), rtol=1e-6)
    frozen = config.replace(geppo=config.geppo.replace(adapt_factor=1e6, adapt_min=0.0))  # never grows back
    tv = run_sweep(frozen, num_seeds=1).metrics["tv/forward"][0]
    assert tv[0] > 1e-3 and np.all(tv[1:] < 1e-4 * tv[0]), tv
    loose = config.replace(ppo=config.ppo.replace(clip_eps=10.0))  # the references' adapt_min = 0: never grows
    np.testing.assert_allclose(run_sweep(loose, num_seeds=1).metrics["geppo/lr_scale"][0], np.ones(4))
    growing = loose.replace(geppo=loose.geppo.replace(adapt_min=0.5))  # TV < adapt_min * eps / 2: the step grows
    np.testing.assert_allclose(run_sweep(growing, num_seeds=1).metrics["geppo/lr_scale"][0], 1.03 ** np.arange(4))


def test_geppo_adapts_to_the_exact_tv_for_discrete_actions():
    """GePPO's step size reads the exact per-state TV(pi_{T+1}, pi_T) where actions are discrete (tv/forward_exact),
    not the importance-weighted estimate: with the adapt threshold set between the two readings of the first
    iteration, the scale moves the way the exact one says."""
    config = tiny_config(algorithm="geppo", num_iterations=2)  # the scale logged at 1 is the one set after 0
    metrics = run_sweep(config, num_seeds=1).metrics
    exact, sampled = float(metrics["tv/forward_exact"][0][0]), float(metrics["tv/forward"][0][0])
    assert exact != sampled
    threshold = 0.5 * (exact + sampled) / (config.ppo.clip_eps / 2.0)  # between the two, in units of eps / 2
    at_threshold = config.replace(geppo=config.geppo.replace(adapt_min=threshold, adapt_max=threshold))
    scale = float(run_sweep(at_threshold, num_seeds=1).metrics["geppo/lr_scale"][0][1])
    assert scale == pytest.approx(1 / 1.03 if exact > sampled else 1.03, rel=1e-6), (exact, sampled, scale)


def test_spec_ppo_equivalence_through_the_pipeline_needs_the_sample_estimator():
    """Spec section 4 on real batches: VACO's filter with tv_scope=sample, filter_ref=behaviour, no align, no weight
    and the sample estimate has PPO-clip's gradient at eps = 2 delta, here under lag (pi_T != beta, so ratios
    leave the trust region), at deltas spread over the batch's |r - 1|. The exact per-state TV (the discrete
    default) gates on another quantity: its gradient differs."""
    deltas = (0.02, 0.035, 0.05, 0.07, 0.1, 0.15)
    ppo = tiny_config(algorithm="ppo")
    vaco = tiny_config(algorithm="vaco_filter_only")
    vaco_sample = vaco.replace(vaco=vaco.vaco.replace(tv_scope="sample", filter_ref="behaviour", tv_estimator="sample"))
    vaco_exact = vaco_sample.replace(vaco=vaco_sample.vaco.replace(tv_estimator="auto"))
    clip = [ppo.replace(ppo=ppo.ppo.replace(clip_eps=2 * d)) for d in deltas]
    threshold = [vaco_sample.replace(vaco=vaco_sample.vaco.replace(tv_threshold=d)) for d in deltas]
    # a behaviour policy far from uniform (where the sample estimate and the exact TV part) and a learner moved
    # from it at random: |r - 1| from about 0.03 to 0.35 on this batch
    stale = dict(
        behaviour=lambda x, key: x + jax.random.normal(key, x.shape),
        move=lambda x, key: x + 0.05 * jax.random.normal(key, x.shape),
    )
    expected = _stale_state_gradient(ppo, **stale, hparams=clip)
    same = _stale_state_gradient(vaco_sample, **stale, hparams=threshold)
    for want, got in zip(expected, same, strict=True):
        jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7), want.actor, got.actor)
    other = _stale_state_gradient(vaco_exact, **stale, hparams=threshold)
    differences = [
        max(float(np.abs(a - b).max()) for a, b in zip(jax.tree.leaves(w.actor), jax.tree.leaves(o.actor), strict=True))
        for w, o in zip(expected, other, strict=True)
    ]
    assert max(differences) > 1e-3 * max(float(np.abs(g).max()) for g in jax.tree.leaves(expected[0].actor))


def test_geppo_standardises_advantages_with_the_offpolicy_weight():
    """GePPO's advantages are centred and scaled with w = pi_T/beta (its released code): under lag the gradient
    differs from the unweighted standardisation's, at zero lag (w = 1) it is the same."""
    weighted = _baseline("geppo")
    plain = _baseline("geppo", geppo={"weighted_advantages": False})
    stale = _stale_state_gradient(weighted, _far), _stale_state_gradient(plain, _far)
    assert max(jax.tree.leaves(jax.tree.map(lambda a, b: float(np.abs(a - b).max()), *stale))) > 1e-6
    jax.tree.map(
        lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-9),
        _first_step_gradient(weighted),
        _first_step_gradient(plain),
    )


def test_geppo_advantages_are_its_codes_truncated_gae_not_vtraces_lambda_form():
    """GePPO's default advantage (jqueeney/geppo's gae_vtrace) carries no weight at the sample's own step; the
    earlier reading (geppo.own_step_weight) is V-trace's lambda form. Under lag the two differ, targets agree."""
    config = tiny_config(algorithm="geppo")
    _, batch = first_batch(TrainProgram(config))
    shift = jax.random.normal(jax.random.key(1), batch.behaviour_log_probs.shape) * 0.5
    # the estimating stage's record again (the learning stage drops next_values), pi_T moved away from beta
    stale = batch.replace(learner_log_probs=batch.behaviour_log_probs + shift, next_values=0.9 * batch.values)
    kwargs = dict(gamma=config.ppo.gamma, lambda_=config.ppo.gae_lambda, rho_bar=1.0, c_bar=1.0)
    inputs = (stale.rewards, stale.values, stale.next_values, stale.terminations, stale.truncations)
    inputs += (stale.learner_log_probs, stale.behaviour_log_probs)
    for own_step, form in ((False, "truncated_gae"), (True, "lambda")):
        algo = algorithms.build(config.replace(geppo=config.geppo.replace(own_step_weight=own_step)))
        got = algo.advantage_fn(stale, config)
        want = advantages.vtrace(*inputs, **kwargs, advantage=form)
        jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7), got, want)
    plain = algorithms.build(config).advantage_fn(stale, config)[0]
    legacy = algorithms.build(config.replace(geppo=config.geppo.replace(own_step_weight=True))).advantage_fn
    assert float(np.abs(plain - legacy(stale, config)[0]).max()) > 1e-3


def test_m2pos_decoupled_mask_variant_is_reachable():
    config = tiny_config(algorithm="m2po")
    variant = algorithms.build(config.replace(m2po=config.m2po.replace(form="decoupled_mask")))
    assert algorithms.build(config).ratio_ref == "behaviour" and variant.ratio_ref == "learner"


def test_topr_learns_per_trajectory_from_the_batchs_episode_ends():
    """cispo.truncation=topr (the paper's form) cuts its trajectories where the batch's episodes end (terminations
    and truncations alike); topr_per_step never reads them."""
    from vaco_jax.algorithms import lag_robust_losses as lrl
    from vaco_jax.core.types import Transitions

    rng = np.random.default_rng(0)
    shape = (16, 6)
    log_probs = jnp.asarray(np.log(rng.uniform(0.1, 1.0, shape)), jnp.float32)
    behaviour = log_probs + jnp.asarray(rng.normal(scale=0.3, size=shape), jnp.float32)
    advantages = jnp.asarray(rng.normal(size=shape), jnp.float32)
    terminations, truncations = rng.random(shape) < 0.1, rng.random(shape) < 0.1
    batch = Transitions(
        observations=None,
        actions=None,
        behaviour_log_probs=behaviour,
        terminations=jnp.asarray(terminations),
        truncations=jnp.asarray(truncations),
    )
    for truncation, ends in (("topr", terminations | truncations), ("topr_per_step", None)):
        config = tiny_config(algorithm="cispo")
        config = config.replace(cispo=config.cispo.replace(truncation=truncation))
        got = algorithms.build(config).policy_loss_fn(log_probs, None, batch, advantages, config, None)
        want = lrl.cispo_loss(log_probs, behaviour, advantages, eps_high=0.28, truncation=truncation, ends=ends)
        assert float(got[0]) == pytest.approx(float(want[0]), rel=1e-6), truncation
        assert {k: float(v) for k, v in got[1].items()} == pytest.approx({k: float(v) for k, v in want[1].items()})


@pytest.mark.parametrize(
    "algorithm, options",
    [
        *((spec.name, {}) for spec in BUILT_IN),
        ("m2po", {"m2po.form": "decoupled_mask"}),
        ("cispo", {"cispo.truncation": "topr"}),
    ],
)
def test_an_algorithm_says_whether_its_loss_reads_the_ppo_clip(algorithm, options):
    """Algorithm.reads_clip_eps is what its policy loss does: the loss's gradient changes with ppo.clip_eps exactly
    where it says so (the command line refuses a sweep axis of it, and warns of its flag, where it does not)."""
    from vaco_jax.core.config import with_overrides
    from vaco_jax.core.types import Transitions

    rng = np.random.default_rng(0)
    shape = (16, 4)
    reference = jnp.asarray(np.log(rng.uniform(0.2, 0.9, shape)), jnp.float32)
    log_probs = reference + jnp.asarray(rng.normal(scale=0.4, size=shape), jnp.float32)  # ratios far outside 0.05
    behaviour = reference + jnp.asarray(rng.normal(scale=0.4, size=shape), jnp.float32)
    advantages = jnp.asarray(rng.normal(size=shape), jnp.float32)
    batch = Transitions(
        observations=None,
        actions=None,
        ref_log_probs=reference,
        behaviour_log_probs=behaviour,
        terminations=jnp.asarray(rng.random(shape) < 0.1),
        truncations=jnp.zeros(shape, bool),
    )
    config = with_overrides(tiny_config(algorithm=algorithm), options)
    built = algorithms.build(config)
    gradients = []
    for eps in (0.05, 0.5):
        hparams = config.replace(ppo=config.ppo.replace(clip_eps=eps))
        state = built.init_state(hparams)

        def loss(lp, hparams=hparams, state=state):
            return built.policy_loss_fn(lp, None, batch, advantages, hparams, state)[0]

        gradients.append(np.asarray(jax.grad(loss)(log_probs)))
    assert built.reads_clip_eps == (not np.allclose(*gradients)), algorithm
