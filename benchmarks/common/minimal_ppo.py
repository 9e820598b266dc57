"""A minimal PureJaxRL-style PPO (no lag buffer, no diagnostics): the speed yardstick.

Same networks, batch shape, optimiser and epochs x minibatches as vaco_jax's PPO, and the same work per gradient
step as PureJaxRL's ``ppo.py``: each epoch shuffles every sample of the batch into minibatches (the full-batch
gather), and the value loss is clipped around the rollout's values. Written as plainly as possible, so that
``throughput.py`` can report vaco_jax's speed as a ratio measured in the same process on the same machine, at
equal work.
"""

from __future__ import annotations

import flax.linen as nn
import gymnax
import jax
import jax.numpy as jnp
import numpy as np
import optax


class ActorCritic(nn.Module):
    num_actions: int

    @nn.compact
    def __call__(self, x):
        ortho = nn.initializers.orthogonal
        a = nn.tanh(nn.Dense(64, kernel_init=ortho(np.sqrt(2)))(x))
        a = nn.tanh(nn.Dense(64, kernel_init=ortho(np.sqrt(2)))(a))
        logits = nn.Dense(self.num_actions, kernel_init=ortho(0.01))(a)
        c = nn.tanh(nn.Dense(64, kernel_init=ortho(np.sqrt(2)))(x))
        c = nn.tanh(nn.Dense(64, kernel_init=ortho(np.sqrt(2)))(c))
        return logits, nn.Dense(1, kernel_init=ortho(1.0))(c)[:, 0]


def make_minimal_ppo(
    num_envs: int,
    num_steps: int,
    num_iterations: int,
    num_epochs: int = 4,
    num_minibatches: int = 4,
    env_name: str = "CartPole-v1",
):
    """Returns (init(key) -> runner, train(runner) -> (runner, mean episode return per iteration))."""
    env, env_params = gymnax.make(env_name)
    net = ActorCritic(env.action_space(env_params).n)
    tx = optax.chain(optax.clip_by_global_norm(0.5), optax.adam(2.5e-4, eps=1e-5))
    batch_rows = num_envs * num_steps

    def init(key):
        k1, k2, k3 = jax.random.split(key, 3)
        params = net.init(k1, jnp.zeros((1, env.observation_space(env_params).shape[0])))
        obs, state = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(k2, num_envs), env_params)
        return params, tx.init(params), state, obs, k3

    def iteration(runner, _):
        params, opt_state, state, obs, key = runner

        def step(carry, key):
            state, obs = carry
            k1, k2 = jax.random.split(key)
            logits, value = net.apply(params, obs)
            action = jax.random.categorical(k1, logits)
            logp = jnp.take_along_axis(jax.nn.log_softmax(logits), action[:, None], 1)[:, 0]
            next_obs, state, reward, term, trunc, info = jax.vmap(env.step, in_axes=(0, 0, 0, None))(
                jax.random.split(k2, num_envs), state, action, env_params
            )
            done = jnp.logical_or(term, trunc)
            return (state, next_obs), (obs, action, logp, value, reward, done, info["final_observation"], term)

        key, rkey, ekey = jax.random.split(key, 3)
        (state, obs), (o, a, lp, v, r, d, fo, term) = jax.lax.scan(
            step, (state, obs), jax.random.split(rkey, num_steps)
        )
        _, next_v = net.apply(params, fo.reshape(batch_rows, -1))
        next_v = next_v.reshape(num_steps, num_envs)

        def gae(adv, x):
            delta, done = x
            adv = delta + 0.99 * 0.95 * (1 - done) * adv
            return adv, adv

        deltas = r + 0.99 * (1 - term) * next_v - v
        _, adv = jax.lax.scan(gae, jnp.zeros(num_envs), (deltas, d.astype(jnp.float32)), reverse=True)
        targets = adv + v
        data = jax.tree.map(lambda x: x.reshape(batch_rows, *x.shape[2:]), (o, a, lp, adv, targets, v))

        def loss_fn(params, mb):
            o, a, lp, adv, tgt, old_v = mb
            logits, value = net.apply(params, o)
            new_lp = jnp.take_along_axis(jax.nn.log_softmax(logits), a[:, None], 1)[:, 0]
            ratio = jnp.exp(new_lp - lp)
            adv = (adv - adv.mean()) / (adv.std() + 1e-8)
            pg = -jnp.minimum(ratio * adv, jnp.clip(ratio, 0.8, 1.2) * adv).mean()
            ent = -(jax.nn.softmax(logits) * jax.nn.log_softmax(logits)).sum(-1).mean()
            clipped = old_v + jnp.clip(value - old_v, -0.2, 0.2)
            v_loss = 0.5 * jnp.maximum((value - tgt) ** 2, (clipped - tgt) ** 2).mean()
            return pg + 0.5 * v_loss - 0.01 * ent

        def epoch(carry, key):
            order = jax.random.permutation(key, batch_rows)
            mbs = jax.tree.map(lambda x: x[order].reshape(num_minibatches, -1, *x.shape[1:]), data)

            def mb_step(carry, mb):
                params, opt_state = carry
                grads = jax.grad(loss_fn)(params, mb)
                updates, opt_state = tx.update(grads, opt_state, params)
                return (optax.apply_updates(params, updates), opt_state), None

            return jax.lax.scan(mb_step, carry, mbs)[0], None

        (params, opt_state), _ = jax.lax.scan(epoch, (params, opt_state), jax.random.split(ekey, num_epochs))
        mean_return = jnp.sum(jnp.where(d, r, 0.0))  # depends on every step's output (no dead code)
        return (params, opt_state, state, obs, key), mean_return

    def train(runner):
        return jax.lax.scan(iteration, runner, None, length=num_iterations)

    return init, train
