"""Actor and critic MLPs (flax linen) with PPO's orthogonal initialisation.

Parameters are initialised *outside* any vmapped program (platform trap 1:
batched LAPACK QR under ``jit(vmap(...))`` can deadlock on the CPU), one key at a
time with ``jax.lax.map``; see :func:`init_agent_params`.
"""

from __future__ import annotations

from collections.abc import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from vaco_jax.core.config import Config
from vaco_jax.core.types import ActorSnapshot, AgentParams, NormalizerState
from vaco_jax.envs.base import ActionSpec
from vaco_jax.numerics import normalization
from vaco_jax.numerics.distributions import DistParams

_ACTIVATIONS = {"tanh": nn.tanh, "relu": nn.relu, "gelu": nn.gelu, "silu": nn.silu}


class MLP(nn.Module):
    """Dense layers with zero biases and, by default (``init_scheme="orthogonal"``, PureJaxRL's and CleanRL's),
    orthogonal kernels of gain sqrt(2) and a final layer of gain ``out_scale``; ``init_scheme="lecun_uniform"``
    (brax's) draws every kernel, the final one's too, uniformly with variance 1 / fan-in."""

    hidden: Sequence[int]
    out_size: int
    out_scale: float
    activation: str = "tanh"
    init_scheme: str = "orthogonal"

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        act = _ACTIVATIONS[self.activation]
        lecun = nn.initializers.lecun_uniform() if self.init_scheme == "lecun_uniform" else None
        for width in self.hidden:
            kernel = lecun or nn.initializers.orthogonal(np.sqrt(2))
            x = act(nn.Dense(width, kernel_init=kernel, bias_init=nn.initializers.zeros)(x))
        kernel = lecun or nn.initializers.orthogonal(self.out_scale)
        return nn.Dense(self.out_size, kernel_init=kernel, bias_init=nn.initializers.zeros)(x)


MIN_STD = 0.001
"""The least deviation of a state-dependent one, ``softplus(x) + MIN_STD``: brax's ``NormalTanhDistribution``'s."""


class Actor(nn.Module):
    """Policy network: categorical logits, or a Gaussian's mean and log-deviation.

    The deviation is a learned state-independent one (``std="state_independent"``, PureJaxRL's and CleanRL's:
    one log-std parameter per action dimension, 0 at init), or a second head of the MLP (``"state_dependent"``,
    brax's: ``softplus(x) + MIN_STD``, about 0.69 at init)."""

    action_spec: ActionSpec
    hidden: Sequence[int]
    activation: str = "tanh"
    std: str = "state_independent"
    init_scheme: str = "orthogonal"

    @nn.compact
    def __call__(self, x: jax.Array) -> DistParams:
        size = self.action_spec.size
        if self.action_spec.discrete or self.std == "state_independent":
            out = MLP(self.hidden, size, 0.01, self.activation, self.init_scheme)(x)
            if self.action_spec.discrete:
                return out
            log_std = self.param("log_std", nn.initializers.zeros, (size,))
            return out, jnp.broadcast_to(log_std, out.shape)
        out = MLP(self.hidden, 2 * size, 0.01, self.activation, self.init_scheme)(x)
        mean, scale = out[..., :size], out[..., size:]
        return mean, jnp.log(jax.nn.softplus(scale) + MIN_STD)


class Critic(nn.Module):
    """State-value network V(s)."""

    hidden: Sequence[int]
    activation: str = "tanh"
    init_scheme: str = "orthogonal"

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        return MLP(self.hidden, 1, 1.0, self.activation, self.init_scheme)(x)[..., 0]


class Networks:
    """The actor and critic modules of one configuration, with apply helpers on raw observations.

    The helpers flatten leading axes to one batch axis before the MLP: a rank-2
    matmul is about twice as fast on the CPU as the same work with extra axes.
    """

    def __init__(
        self,
        action_spec: ActionSpec,
        observation_size: int,
        actor_hidden: Sequence[int],
        critic_hidden: Sequence[int],
        activation: str,
        normalize_observations: bool,
        std: str = "state_independent",
        init_scheme: str = "orthogonal",
        normalizer_form: str = "clipped",
    ):
        self.actor = Actor(action_spec, tuple(actor_hidden), activation, std, init_scheme)
        self.critic = Critic(tuple(critic_hidden), activation, init_scheme)
        self.observation_size = observation_size
        self.normalize_observations = normalize_observations
        self.normalizer_form = normalizer_form

    @classmethod
    def for_config(cls, config: Config, action_spec: ActionSpec, observation_size: int) -> Networks:
        """The networks ``config`` (resolved: ``env.normalize_observations`` a bool) names, for an env's actions and
        observations."""
        net, env = config.network, config.env
        return cls(
            action_spec,
            observation_size,
            net.actor_hidden,
            net.critic_hidden,
            net.activation,
            env.normalize_observations,
            net.std,
            net.init,
            env.normalizer_form,
        )

    def _prepare(self, obs_norm: NormalizerState, observations: jax.Array) -> jax.Array:
        if self.normalize_observations:
            return normalization.normalize(obs_norm, observations, self.normalizer_form)
        return observations

    def policy(self, snapshot: ActorSnapshot, observations: jax.Array) -> DistParams:
        """Distribution parameters of the snapshot's policy on raw observations [..., D]."""
        flat = self._prepare(snapshot.obs_norm, observations.reshape(-1, observations.shape[-1]))
        out = self.actor.apply(snapshot.policy_params, flat)
        return jax.tree.map(lambda x: x.reshape(*observations.shape[:-1], *x.shape[1:]), out)

    def value(self, critic_params, obs_norm: NormalizerState, observations: jax.Array) -> jax.Array:
        """V(s) [...] on raw observations [..., D]."""
        flat = self._prepare(obs_norm, observations.reshape(-1, observations.shape[-1]))
        return self.critic.apply(critic_params, flat).reshape(observations.shape[:-1])

    def init(self, key: jax.Array) -> AgentParams:
        """Parameters for one run (call unbatched, or through :func:`init_agent_params`)."""
        actor_key, critic_key = jax.random.split(key)
        dummy = jnp.zeros((1, self.observation_size), jnp.float32)
        return AgentParams(actor=self.actor.init(actor_key, dummy), critic=self.critic.init(critic_key, dummy))


def init_agent_params(networks: Networks, keys: jax.Array) -> AgentParams:
    """Initialise one parameter set per key [S], sequentially (no batched QR: platform trap 1)."""
    return jax.lax.map(networks.init, keys)
