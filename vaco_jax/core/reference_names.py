"""PureJaxRL's, CleanRL's and brax's PPO hyperparameter names, and RLlib's APPO and IMPALA ones, mapped onto this
package's flags.

What a user of either reference script types first (``--total-timesteps``, ``--clip-coef``, ``--update-epochs``) is
not a flag here. This table is the one place that says what is: the command line's hint for an unknown flag reads it
(:func:`reference_hint`; closeness of spelling alone sends ``--clip-coef`` to ``--ppo.kl-coef``), and the getting
started page's table is :func:`reference_name_table` (a test keeps the two equal and parses every flag named).
"""

from __future__ import annotations

from typing import NamedTuple

CONFIG_COMMANDS = ("train", "sweep", "demo", "calibrate", "tune")
"""The commands that take a config (every ``--env.*``, ``--ppo.*``, ``--network.*`` flag, ``--seed``, ...)."""
RUN_COMMANDS = ("train", "sweep", "demo")
"""The commands with the run's output options (``--quiet``, ``--tensorboard``, ``--wandb``)."""


class ReferenceName(NamedTuple):
    """One hyperparameter: its key in PureJaxRL's config dicts (``ppo.py``'s, or where the note says another script's),
    its field in CleanRL's ``ppo.py`` ``Args``, its argument of brax's ``ppo.train`` (or of its PPO networks, or a key
    of MuJoCo Playground's env config) and its attribute of RLlib's ``APPOConfig`` / ``IMPALAConfig`` ("" where one
    has none), the flag that sets it here ("" where nothing does) and the commands that have it, and what differs."""

    purejaxrl: str
    cleanrl: str
    flag: str
    note: str = ""
    commands: tuple[str, ...] = CONFIG_COMMANDS
    brax: str = ""
    rllib: str = ""


_BRAX_BATCH = (
    "brax's update takes num_minibatches x batch_size unrolls of unroll_length steps; here one rollout of num_envs x "
    "num_steps feeds it: num_steps = batch_size x num_minibatches x unroll_length / num_envs (the brax-<env> presets)"
)
_BRAX_UNROLLS = (
    f"{_BRAX_BATCH}; its estimation inside unrolls of N = unroll_length steps: --ppo.advantage-horizon N "
    "--ppo.minibatch unrolls --ppo.advantages-every-step --ppo.advantage-form q"
)


def _brax(flag: str, note: str, name: str) -> ReferenceName:
    """A row of brax's (or MuJoCo Playground's) alone."""
    return ReferenceName("", "", flag, note, brax=name)


def _rllib(flag: str, note: str, name: str) -> ReferenceName:
    """A row of RLlib's alone."""
    return ReferenceName("", "", flag, note, rllib=name)


REFERENCE_NAMES: tuple[ReferenceName, ...] = (
    ReferenceName("ENV_NAME", "env_id", "--env.name"),
    ReferenceName("NUM_ENVS", "num_envs", "--env.num-envs", brax="num_envs"),
    ReferenceName("NUM_STEPS", "num_steps", "--env.num-steps", rllib="rollout_fragment_length"),
    _rllib(
        "--env.num-envs",
        "one update's batch is num_envs x num_steps samples: num_envs = train_batch_size / rollout_fragment_length",
        "train_batch_size",
    ),
    ReferenceName("", "", "--env.num-steps", _BRAX_UNROLLS, brax="unroll_length"),
    ReferenceName("", "", "--env.num-steps", _BRAX_BATCH, brax="batch_size"),
    ReferenceName(
        "TOTAL_TIMESTEPS",
        "total_timesteps",
        "--total-env-steps",
        "per run; sets --num-iterations to TOTAL // (num_envs x num_steps): whole iterations, rounded down as "
        "PureJaxRL and CleanRL do. It counts agent steps: brax's num_timesteps counts brax steps, so with "
        "--env.action-repeat R give num_timesteps / R",
        ("train", "sweep"),
        brax="num_timesteps",
    ),
    ReferenceName(
        "UPDATE_EPOCHS", "update_epochs", "--ppo.num-epochs", brax="num_updates_per_batch", rllib="num_epochs"
    ),
    ReferenceName("NUM_MINIBATCHES", "num_minibatches", "--ppo.num-minibatches", brax="num_minibatches"),
    _rllib(
        "--ppo.num-minibatches",
        "a count here, not a size: num_minibatches = num_envs x num_steps / minibatch_size",
        "minibatch_size",
    ),
    ReferenceName(
        "LR",
        "learning_rate",
        "--ppo.learning-rate",
        "annealed to 0 by default here (brax's and RLlib's are constant: --ppo.no-anneal-lr; the brax-<env> presets "
        "set it)",
        brax="learning_rate",
        rllib="lr",
    ),
    ReferenceName(
        "ANNEAL_LR",
        "anneal_lr",
        "--ppo.anneal-lr",
        "off: --ppo.no-anneal-lr; annealed here at every gradient step by default, by both scripts once per update "
        "(--ppo.anneal-every update)",
    ),
    ReferenceName("GAMMA", "gamma", "--ppo.gamma", brax="discounting", rllib="gamma"),
    ReferenceName(
        "GAE_LAMBDA",
        "gae_lambda",
        "--ppo.gae-lambda",
        "also V-trace's lambda for impala, vaco and geppo; impact's default V-trace reads none (RLlib's APPO scales "
        "its discounts by lambda_, 1.0 by default: the same there)",
        brax="gae_lambda",
        rllib="lambda_",
    ),
    ReferenceName(
        "CLIP_EPS",
        "clip_coef",
        "--ppo.clip-eps",
        "the value loss's clip has its own range, --ppo.vf-clip-eps, 0.2 by default; PureJaxRL's and CleanRL's "
        "follows the policy's; RLlib's APPO defaults to 0.4, this package to 0.2",
        brax="clipping_epsilon",
        rllib="clip_param",
    ),
    _brax(
        "--ppo.vf-clip-eps",
        "brax clips its value loss only where this is set; here --ppo.clip-value-loss switches it",
        "clipping_epsilon_value",
    ),
    ReferenceName("", "clip_vloss", "--ppo.clip-value-loss", "off: --ppo.no-clip-value-loss"),
    ReferenceName(
        "", "norm_adv", "--ppo.normalize-advantages", "off: --ppo.no-normalize-advantages", brax="normalize_advantage"
    ),
    ReferenceName("ENT_COEF", "ent_coef", "--ppo.ent-coef", brax="entropy_cost", rllib="entropy_coeff"),
    ReferenceName("VF_COEF", "vf_coef", "--ppo.vf-coef", brax="vf_loss_coefficient", rllib="vf_loss_coeff"),
    ReferenceName(
        "MAX_GRAD_NORM",
        "max_grad_norm",
        "--ppo.max-grad-norm",
        "by the global norm; none: --ppo.max-grad-norm inf (RLlib's default is 40, this package's 0.5)",
        brax="max_grad_norm",
        rllib="grad_clip",
    ),
    _rllib(
        "--vtrace.rho-bar",
        "V-trace's rho-bar; its traces' c-bar is --vtrace.c-bar (RLlib fixes it at 1); the policy gradient's rho "
        "clip is rho-bar too (RLlib's vtrace_clip_pg_rho_threshold has no flag of its own)",
        "vtrace_clip_rho_threshold",
    ),
    _rllib(
        "--impact.rho-max",
        "APPO's target-worker clip, clip(beta/pi_T, 0, rho_max), 2 in both",
        "target_worker_clipping",
    ),
    _rllib(
        "--impact.kl-coef",
        "APPO's KL term: 0 is RLlib's use_kl_loss=False (use_kl_loss=True: a positive --impact.kl-coef with "
        "--impact.kl-adaptive, adapted by RLlib's rule once per iteration, on its mean KL; without it, fixed); "
        "RLlib's PPO's kl_coeff is --ppo.kl-coef with --algorithm ppo_kl",
        "kl_coeff",
    ),
    _rllib(
        "--impact.kl-target",
        "read with --impact.kl-adaptive: x1.5 above twice it, x0.5 below half of it, as RLlib's APPO (0.01 in both)",
        "kl_target",
    ),
    _rllib(
        "--impact.target-update-every",
        "with --impact.target-network separate, in iterations: RLlib's f counts f x N x K train batches (its "
        "circular buffer's batches and uses, 4 and 2 by default), an iteration here num_epochs x reuse.num_batches: "
        "f x 8 / (num_epochs x num_batches), e.g. RLlib's 2 is 4 at this package's 4 epochs, 16 at 1; by default pi_T "
        "is the learner at the start of each update",
        "target_network_update_freq",
    ),
    _rllib("--impact.tau", "with --impact.target-network separate; 1 (RLlib's default) copies the learner", "tau"),
    _rllib(
        "--reuse.num-batches",
        "each update trains on the last M batches (IMPACT's circular buffer, every batch used M times); RLlib's "
        "circular_buffer_iterations_per_batch has no flag of its own",
        "circular_buffer_num_batches",
    ),
    _rllib(
        "--lag.num-actors",
        "simulated actor groups inside one program, each acting with a snapshot --lag.kind makes stale (a measured "
        "histogram: --lag.kind empirical --lag.weights); real threads: --async",
        "num_env_runners",
    ),
    ReferenceName("", "target_kl", "", "no early stop on KL; a KL-penalised PPO is --algorithm ppo_kl"),
    _brax("", "no KL-driven learning rate; a KL-penalised PPO: --algorithm ppo_kl --ppo.kl-adaptive", "desired_kl"),
    ReferenceName("ACTIVATION", "", "--network.activation", "widths: --network.actor-hidden, --network.critic-hidden"),
    _brax(
        "--network.actor-hidden",
        "an argument of brax's network_factory, ppo_networks.make_ppo_networks, as MuJoCo Playground's configs set it",
        "policy_hidden_layer_sizes",
    ),
    ReferenceName("", "", "--network.critic-hidden", "the critic's widths", brax="value_hidden_layer_sizes"),
    _brax(
        "--network.distribution",
        "brax's tanh_normal (its default): tanh_gaussian; its normal: gaussian, here clipped to the action bounds",
        "distribution_type",
    ),
    _brax(
        "--network.std",
        "brax reads it for normal only (a raw or exp head there, not here); tanh_normal's deviation is always "
        "state-dependent, softplus + 0.001: --network.std state_dependent; normal's default: state_independent",
        "state_dependent_std",
    ),
    _brax(
        "",
        "the built-in MLPs only, no network of your own: widths --network.actor-hidden and --network.critic-hidden, "
        "activation --network.activation, policy --network.distribution and --network.std, kernels --network.init "
        "(brax's lecun_uniform: --network.init lecun_uniform)",
        "network_factory",
    ),
    _brax(
        "--env.backend",
        "MuJoCo Playground's env config key, not ppo.train's: MJX's jax or warp for a playground/ task; jax by default "
        "here, warp in Playground 0.2, which needs an NVIDIA GPU",
        "impl",
    ),
    ReferenceName(
        "NORMALIZE_ENV",
        "",
        "--env.normalize-observations",
        "PureJaxRL's ppo_continuous_action.py; observations only: rewards are scaled by --env.reward-scale, not "
        "normalised; brax's form (unclipped): --env.normalizer-form brax",
        brax="normalize_observations",
    ),
    ReferenceName("", "", "--env.reward-scale", brax="reward_scaling"),
    ReferenceName("", "", "--env.episode-length", "in brax steps, as brax counts it", brax="episode_length"),
    _brax(
        "--env.action-repeat",
        "brax steps per agent step: an episode is episode_length / R agent steps, and env_steps count agent steps",
        "action_repeat",
    ),
    _brax(
        "--env.bootstrap-on-truncation",
        "on by default here: a time limit's truncation is bootstrapped with V(s'); brax's default, and PureJaxRL's and "
        "CleanRL's ppo.py, end the return there: --env.no-bootstrap-on-truncation",
        "bootstrap_on_timeout",
    ),
    _brax(
        "--eval.every",
        "iterations between evaluations, the inverse of a count: num_iterations // num_evals (the brax-<env> presets "
        "set it so), each on fresh environments",
        "num_evals",
    ),
    ReferenceName("", "", "--eval.episodes", "episodes per evaluation", brax="num_eval_envs"),
    _brax(
        "--env.reset-every",
        "iterations between resets of every env (0, the default: an env resets only where its episode ends); brax "
        "resets after each of its num_resets_per_eval epochs between two evaluations. MuJoCo Playground's DM Control "
        "Suite config sets 10: a reset after every update at 6e7 env steps (--env.reset-every 1), every second one "
        "at 1e8 (the playground-<env> presets count brax's updates with it but do not reset)",
        "num_resets_per_eval",
    ),
    _brax(
        "",
        "both: eval/return_deterministic and eval/return_stochastic (brax's default, False, samples: its "
        "eval/episode_reward is eval/return_stochastic)",
        "deterministic_eval",
    ),
    ReferenceName(
        "SEED",
        "seed",
        "--seed",
        "the first seed (PureJaxRL's dqn.py; its ppo.py fixes PRNGKey(30)): --num-seeds N trains SEED..SEED+N-1",
        brax="seed",
        rllib="seed",
    ),
    ReferenceName(
        "NUM_SEEDS", "", "--num-seeds", "PureJaxRL's dqn.py; every seed in one compiled program, as PureJaxRL's vmap"
    ),
    ReferenceName(
        "DEBUG",
        "",
        "--quiet",
        "progress is printed by default, once per chunk; --quiet silences it",
        ("train", "sweep", "demo", "tune"),
    ),
    ReferenceName(
        "",
        "exp_name",
        "--out-dir",
        "config, metrics, summary, plots and checkpoints go there",
        brax="save_checkpoint_path",
    ),
    ReferenceName(
        "",
        "",
        "--init-from",
        "a new run from a saved run's learner (its networks and observation statistics; --init-seed, --init-point "
        "choose which run); --resume continues the same run instead",
        ("train", "sweep"),
        brax="restore_checkpoint_path",
    ),
    ReferenceName(
        "", "track", "--wandb", "project and entity: --wandb-project, --wandb-entity; --tensorboard too", RUN_COMMANDS
    ),
    ReferenceName("", "wandb_project_name", "--wandb-project", "", RUN_COMMANDS),
    ReferenceName("", "wandb_entity", "--wandb-entity", "", RUN_COMMANDS),
    ReferenceName("", "capture_video", "", "a saved run's episode as a GIF: vaco-jax render RUN_DIR", ()),
)
"""The rows of the getting-started page's table, in its order."""

ALIASES = {
    "lr": "learning_rate",
    "clip_eps": "clip_coef",
    "env_name": "env_id",
    "epochs": "update_epochs",
    "lambda": "lambda_",
    "num_sgd_iter": "num_epochs",  # RLlib's old name
    "target_update_frequency": "target_network_update_freq",  # RLlib's old name
    "num_rollout_workers": "num_env_runners",  # RLlib's old name
    "use_kl_loss": "kl_coeff",
    "vtrace_clip_pg_rho_threshold": "vtrace_clip_rho_threshold",
}
"""Other spellings users reach for, as the reference name they mean (lowercase)."""


def _split(name: str) -> tuple[str, str]:
    """A flag or a reference name as (its group, its name), compared: no dashes before it, lowercase, ``_`` for
    ``-``, an alias as the name it means (``--ppo.lr`` -> ``("ppo", "learning_rate")``, ``--lr`` -> ``("", ...)``)."""
    group, _, name = name.split("=", 1)[0].lstrip("-").lower().replace("-", "_").rpartition(".")
    return group, ALIASES.get(name, name)


_BY_NAME = {
    _split(name)[1]: row
    for row in REFERENCE_NAMES
    for name in (row.purejaxrl, row.cleanrl, row.brax, row.rllib)
    if name
}


def reference_name(flag: str) -> ReferenceName | None:
    """The row of the reference name ``flag`` spells (``--clip-coef``, ``--ppo.clip_coef``, ``--TOTAL_TIMESTEPS=5e5``,
    ``--lr``), or None where it spells none. A group in ``flag`` must be the group of the row's flag:
    ``--eval.num-steps`` is not the references' ``num_steps``, which is ``--env.num-steps``. A flag of this package's
    own is never asked."""
    group, name = _split(flag)
    row = _BY_NAME.get(name)
    if row is None or (group and group != _split(row.flag)[0]):
        return None
    return row


def reference_hint(flag: str, command: str | None = None) -> str | None:
    """What to type instead of ``flag``, a reference script's name, in words (in ``vaco-jax command``: a row whose
    flag that command lacks says so); None where it is no reference's name."""
    row = reference_name(flag)
    if row is None:
        return None
    scripts = (("PureJaxRL", row.purejaxrl), ("CleanRL", row.cleanrl), ("brax", row.brax), ("RLlib", row.rllib))
    named = ", ".join(f"{script}'s {name}" for script, name in scripts if name)
    note = f" ({row.note})" if row.note else ""
    if row.flag and command is not None and command not in row.commands:
        listed = " and ".join([", ".join(row.commands[:-1]), row.commands[-1]] if row.commands[:-1] else row.commands)
        where = f"vaco-jax {listed} ha{'ve' if len(row.commands) > 1 else 's'} it"
        return f"{named}: {row.flag}, which vaco-jax {command} does not take ({where})"
    return f"{named}: {row.flag or 'no flag'} here{note}"


def reference_name_table() -> list[str]:
    """:data:`REFERENCE_NAMES` as a Markdown table (the getting-started page's)."""
    dash = lambda text, code=True: (f"`{text}`" if code else text) if text else "-"  # noqa: E731
    rows = [
        "| PureJaxRL config key | CleanRL `ppo.py` | brax `ppo.train` / Playground | RLlib APPO / IMPALA "
        "| vaco-jax flag | note |",
        "|---|---|---|---|---|---|",
    ]
    rows += [
        f"| {dash(r.purejaxrl)} | {dash(r.cleanrl)} | {dash(r.brax)} | {dash(r.rllib)} | {dash(r.flag)} | "
        f"{dash(r.note, code=False)} |"
        for r in REFERENCE_NAMES
    ]
    return rows


__all__ = [
    "ALIASES",
    "CONFIG_COMMANDS",
    "RUN_COMMANDS",
    "REFERENCE_NAMES",
    "ReferenceName",
    "reference_hint",
    "reference_name",
    "reference_name_table",
]
