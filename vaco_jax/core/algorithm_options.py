"""The option groups of the built-in algorithm families, each with its own checks.

Each family's options are one config group (``Config.vaco``, ``Config.impact``, ...): static fields change a code
path, the others are traced leaves that a sweep vmaps over. Which algorithm reads which group is said by its record
(:class:`vaco_jax.algorithms.registry.AlgorithmSpec`'s ``option_group``): ``vaco`` is read by VACO and its ablations
only, ``impact``, ``m2po``, ``geppo`` and ``cispo`` by their baseline only, ``vtrace`` by every V-trace estimator. Each
group's ``check()`` refuses a wrong value with an error that names the field
(:func:`vaco_jax.core.validation.validate` calls the ``check()`` of every group a config holds).

The built-in groups are declared on :class:`vaco_jax.core.config.Config`; an algorithm registered from outside the
package brings its group in its record instead, and the config gains it as a field
(:func:`vaco_jax.core.config.add_option_group`).
"""

from __future__ import annotations

import math
from typing import Literal

from flax import struct

from vaco_jax.core.config_fields import check, check_choice, check_number, static, values

TV_SCOPES = ("minibatch", "trajectory", "sample")
FILTER_REFS = ("learner", "behaviour")
VTRACE_ADVANTAGES = ("lambda", "q")
IS_WEIGHTS = ("none", "truncated")
TV_ESTIMATORS = ("auto", "sample", "exact")
SURROGATES = ("ratio", "logprob")
BASELINE_ADVANTAGES = ("vtrace", "gae")
IMPACT_ADVANTAGES = ("vtrace_every_step", "vtrace", "gae")
GEPPO_EPS_SCALES = ("reuse", "none")
CISPO_TRUNCATIONS = ("cispo", "topr", "topr_per_step")
IMPACT_RATIO_FORMS = ("target", "behaviour")
IMPACT_TARGET_NETWORKS = ("learner", "separate")
M2PO_FORMS = ("published", "decoupled_mask")


@struct.dataclass
class VACOConfig:
    """VACO's align and filter (docs/algorithms.md section 4)."""

    tv_threshold: float = 0.2
    """delta: the filter's trust-region radius in total variation (inf disables the filter)."""
    tv_scope: Literal["minibatch", "trajectory", "sample"] = static("minibatch")
    """Scope of the TV estimate: minibatch, trajectory (per env rollout segment) or sample."""
    filter_ref: Literal["learner", "behaviour"] = static("learner")
    """The filter's reference policy: learner (pi_T, bounds forward lag) or behaviour (beta, total lag)."""
    align: bool = static(True)
    """Re-estimate advantages with V-trace for pi_T once per iteration (false: GAE, no correction)."""
    is_weight: Literal["none", "truncated"] = static("none")
    """Off-policy weight of the surrogate: none (w = 1) or truncated (w = min(ref/beta, w_max))."""
    w_max: float = 100.0
    """Truncation of the off-policy weight when is_weight=truncated."""
    tv_estimator: Literal["auto", "sample", "exact"] = static("auto")
    """Filter's TV estimate: auto (exact for discrete actions, sample for continuous ones), sample
    (importance-weighted over beta's actions: unbiased, but its typical value falls to about half the TV when
    beta rarely samples the actions where the policies differ) or exact (per-state, discrete actions only)."""
    surrogate: Literal["ratio", "logprob"] = static("ratio")
    """ratio (r * A) or logprob (stopgrad(min(r, surrogate_cap)) * A * log pi_theta; same gradient at cap=inf)."""
    surrogate_cap: float = math.inf
    """C: upper truncation of the stop-gradient ratio of the logprob surrogate (inf: none)."""

    def check(self) -> None:
        off = " (inf disables the filter)"
        check_number("vaco.tv_threshold", self.tv_threshold, low=0, low_open=True, allow_inf=True, hint=off)
        check_choice("vaco.tv_scope", self.tv_scope, TV_SCOPES)
        check_choice("vaco.filter_ref", self.filter_ref, FILTER_REFS)
        check_choice("vaco.is_weight", self.is_weight, IS_WEIGHTS)
        check_choice("vaco.tv_estimator", self.tv_estimator, TV_ESTIMATORS)
        check_choice("vaco.surrogate", self.surrogate, SURROGATES)
        check_number("vaco.w_max", self.w_max, low=0, low_open=True, allow_inf=True, hint=" (inf: no truncation)")
        check_number(
            "vaco.surrogate_cap", self.surrogate_cap, low=0, low_open=True, allow_inf=True, hint=" (inf: no truncation)"
        )


@struct.dataclass
class VtraceConfig:
    """V-trace(lambda) truncation levels and advantage form (lambda = ppo.gae_lambda)."""

    rho_bar: float = 1.0
    """rho-bar: truncation of the importance weights in the TD errors (inf: none)."""
    c_bar: float = 1.0
    """c-bar: truncation of the traces (inf: none)."""
    advantage: Literal["lambda", "q"] = static("lambda")
    """lambda (A = v_t - V(s_t); equals GAE at zero lag) or q (IMPALA's form)."""

    def check(self) -> None:
        check_choice("vtrace.advantage", self.advantage, VTRACE_ADVANTAGES)
        check_number("vtrace.rho_bar", self.rho_bar, low=0, low_open=True, allow_inf=True, hint=" (inf: no truncation)")
        check_number("vtrace.c_bar", self.c_bar, low=0, low_open=True, allow_inf=True, hint=" (inf: no truncation)")


@struct.dataclass
class ImpactConfig:
    """IMPACT / APPO (Luo et al. 2020): PPO's clip on the target-network ratio, with truncated worker weighting."""

    rho_max: float = 2.0
    """Truncation of the target-worker weight (2 in IMPACT and RLlib's APPO): clip(beta/pi_T, 0, rho_max)."""
    ratio_form: Literal["target", "behaviour"] = static("target")
    """target (RLlib's APPO: q = clip(beta/pi_T, 0, rho_max) * pi_theta/beta, i.e. pi_theta/pi_T until truncation)
    or behaviour (a variant: q = clip(pi_T/beta, 0, rho_max) * pi_theta/pi_T, i.e. pi_theta/beta until truncation:
    PPO-clip around the behaviour policy; this project's IMPACT before 2026-12)."""
    advantages: Literal["vtrace_every_step", "vtrace", "gae"] = static("vtrace_every_step")
    """vtrace_every_step (RLlib's APPO): V-trace's q form for the target network pi_T, re-estimated at every
    gradient step with the live critic along each rollout segment (whole-segment minibatches), without lambda
    (traces min(c_bar, pi_T/beta), as RLlib's vtrace: ppo.gae_lambda is not read); vtrace (this
    project's IMPACT before 2026-12): V-trace(lambda) for pi_T once per iteration with the iteration's critic V_T;
    gae. Both V-trace forms use vtrace.rho_bar and vtrace.c_bar."""
    kl_coef: float = 0.0
    """Weight of RLlib's optional KL term, kl_coef * KL(pi_T || pi_theta), added to the policy loss (0: none, RLlib's
    use_kl_loss=False; RLlib's use_kl_loss=True, which always adapts it, is a positive kl_coef with kl_adaptive;
    without kl_adaptive it stays fixed): exact per state for discrete actions, the importance-weighted estimate
    (pi_T/beta) * k3 for continuous ones."""
    kl_adaptive: bool = static(False)
    """Adapt the KL term's coefficient once per iteration by RLlib's APPO rule: x1.5 when the iteration's mean
    KL(pi_T || pi_theta) over its gradient steps exceeds 2 kl_target, x0.5 below kl_target / 2, starting at kl_coef
    (give kl_coef > 0: 0 never grows). RLlib applies the rule after every learner update, to that update's last
    KL; here once per iteration, to the mean over its epochs and minibatches."""
    kl_target: float = 0.01
    """The KL the adaptive coefficient steers toward (RLlib's kl_target, 0.01); read with kl_adaptive only."""
    target_network: Literal["learner", "separate"] = static("learner")
    """learner (the default): the ratio reference pi_T is the learner at the start of each iteration (a target
    refreshed whole after every update); separate: a target network of its own, refreshed after every
    target_update_every-th update as tau * learner + (1 - tau) * target (RLlib's target network)."""
    target_update_every: int = static(1)
    """Iterations between the separate target network's refreshes. RLlib's target_network_update_freq f counts
    f * N * K train batches (N, K: its circular_buffer_num_batches and _iterations_per_batch; 16 at its defaults);
    an iteration here trains on ppo.num_epochs * reuse.num_batches batches, so f * N * K / (that) iterations."""
    tau: float = 1.0
    """The learner's weight in each refresh of the separate target network (RLlib's tau: 1 copies it whole)."""

    def check(self) -> None:
        check_choice("impact.advantages", self.advantages, IMPACT_ADVANTAGES)
        check_number("impact.kl_coef", self.kl_coef, low=0)
        check_number("impact.kl_target", self.kl_target, low=0, low_open=True)
        check_choice("impact.ratio_form", self.ratio_form, IMPACT_RATIO_FORMS)
        check_number("impact.rho_max", self.rho_max, low=0, low_open=True, allow_inf=True)
        check_choice("impact.target_network", self.target_network, IMPACT_TARGET_NETWORKS)
        check_number("impact.target_update_every", self.target_update_every, low=1, integer=True)
        check_number("impact.tau", self.tau, low=0, high=1, low_open=True)
        learner = self.target_network == "learner"
        check(
            not learner or (self.target_update_every == 1 and all(float(tau) == 1.0 for tau in values(self.tau))),
            "impact.target_update_every and impact.tau shape a target network of its own: add "
            "--impact.target-network separate (the default, learner, is the learner at each iteration's start)",
        )
        check(
            self.kl_adaptive or all(float(target) == 0.01 for target in values(self.kl_target)),
            "impact.kl_target is the KL an adaptive coefficient steers toward: add --impact.kl-adaptive (RLlib's "
            "use_kl_loss=True adapts kl_coeff; without it the coefficient stays fixed and kl_target is not read)",
        )
        check(
            not self.kl_adaptive or all(float(coef) > 0 for coef in values(self.kl_coef)),
            "impact.kl_adaptive scales impact.kl_coef, which starts at 0 and so never moves: give --impact.kl-coef "
            "a positive start (RLlib's kl_coeff is 1.0 by default)",
        )


@struct.dataclass
class M2POConfig:
    """M2PO (arXiv 2510.01161): a trust region on the second moment of the log importance ratio."""

    tau: float = 0.04
    """The second-moment budget (0.04 in the paper): published, of the harmful samples' log(pi_theta/beta) on each
    minibatch; decoupled_mask, of every sample's log(pi_T/beta) once per iteration."""
    form: Literal["published", "decoupled_mask"] = static("published")
    """published (the authors' released code: ratio pi_theta/beta, the harmful samples beyond the budget's cap held
    without gradient on each minibatch, no eps clip, mean over all samples) or decoupled_mask (a variant, this
    project's M2PO before 2026-12: mask any sample by log(pi_T/beta) once per iteration, then decoupled PPO with
    ppo.clip_eps and ppo.w_max averaged over the kept samples)."""

    def check(self) -> None:
        check_number("m2po.tau", self.tau, low=0, allow_inf=True, hint=" (inf: no bound)")
        check_choice("m2po.form", self.form, M2PO_FORMS)


@struct.dataclass
class GePPOConfig:
    """GePPO (Queeney et al. 2021): PPO's clip centred on the off-policy weight pi_T/beta, TV-adaptive step size."""

    advantages: Literal["vtrace", "gae"] = static("vtrace")
    """V-trace for pi_T (the paper's truncated-importance-sampling GAE, with vtrace.c_bar; value targets V-trace's
    v_t with vtrace.rho_bar, c_bar) or GAE."""
    own_step_weight: bool = static(False)
    """With advantages=vtrace: weight each sample's advantage by its own rho_t = min(rho_bar, pi_T/beta) (V-trace's
    lambda form, this project's GePPO before 2026-12). false (the paper's code, its gae_vtrace): traces from the next
    step on only, A_t = delta_t + gamma * lambda * c_{t+1} * A_{t+1}, since the loss's ratio pi/beta already weights
    the sample (true weights samples with pi_T/beta < 1 twice)."""
    adaptive_lr: bool = static(True)
    """Adapt the actor's step size (not the critic's, as in the paper's code) once per iteration from the update's
    TV(pi_{T+1}, pi_T) = 0.5 E|r - w| (tv/forward)."""
    weighted_advantages: bool = static(True)
    """Standardise each minibatch's advantages with the off-policy weight w = pi_T/beta, as the paper's code does:
    centre mean(w A) / mean(w), scale std(w A) (with ppo.normalize_advantages; false: the unweighted standardisation
    of every other algorithm)."""
    adapt_factor: float = 0.03
    """Step-size factor: divided by (1 + adapt_factor) when TV > adapt_max * eps/2, multiplied when TV < adapt_min *
    eps/2."""
    adapt_min: float = 0.0
    """Lower TV threshold, as a multiple of the trust region's eps/2 (0, both reference repositories' default: the
    step size only shrinks; this project's default was 0.5 before 2026-12)."""
    adapt_max: float = 1.0
    """Upper TV threshold, as a multiple of the trust region's eps/2."""
    clip_eps_scale: Literal["reuse", "none"] = static("reuse")
    """reuse: GePPO's eps is ppo.clip_eps x 2 / (M + 1) with M = reuse.num_batches (the paper's code, uniform policy
    weights: the trust region of one update shrinks so that M updates' worth of reused data stays within PPO's);
    none: ppo.clip_eps as it is. Without reuse (M = 1) both are ppo.clip_eps."""

    def check(self) -> None:
        check_choice("geppo.advantages", self.advantages, BASELINE_ADVANTAGES)
        check_choice("geppo.clip_eps_scale", self.clip_eps_scale, GEPPO_EPS_SCALES)
        check_number("geppo.adapt_factor", self.adapt_factor, low=0)
        check_number("geppo.adapt_min", self.adapt_min, low=0)
        check_number("geppo.adapt_max", self.adapt_max, low=0, low_open=True)


@struct.dataclass
class CISPOConfig:
    """CISPO (MiniMax-M1) and TOPR: a policy gradient weighted by a stop-gradient truncated importance ratio."""

    eps_high: float = 0.28
    """The weight is min(pi_theta/beta, 1 + eps_high) (no lower bound, as in MiniMax-M1)."""
    truncation: Literal["cispo", "topr", "topr_per_step"] = static("cispo")
    """cispo (min(r, 1 + eps_high)); topr, Tapered Off-Policy REINFORCE as published: per trajectory (an episode's
    stretch in the segment), weight 1 if its advantages sum to >= 0, else clip(product of its ratios, 0, 1);
    topr_per_step, a variant: each step's own sign and ratio (1 for A >= 0, clip(r, 0, 1) for A < 0)."""

    def check(self) -> None:
        check_choice("cispo.truncation", self.truncation, CISPO_TRUNCATIONS)
        check_number("cispo.eps_high", self.eps_high, low=0, allow_inf=True, hint=" (inf: no truncation)")


__all__ = [
    "BASELINE_ADVANTAGES",
    "IMPACT_ADVANTAGES",
    "CISPO_TRUNCATIONS",
    "FILTER_REFS",
    "IMPACT_RATIO_FORMS",
    "IS_WEIGHTS",
    "M2PO_FORMS",
    "SURROGATES",
    "TV_ESTIMATORS",
    "TV_SCOPES",
    "VTRACE_ADVANTAGES",
    "CISPOConfig",
    "GePPOConfig",
    "ImpactConfig",
    "M2POConfig",
    "VACOConfig",
    "VtraceConfig",
]
