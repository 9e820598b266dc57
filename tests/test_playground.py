"""MuJoCo Playground's DM Control Suite through the brax adapter: it steps as Playground's own env, takes its time
limit, refuses what it cannot train, trains, checkpoints (an MJX state holds empty arrays) and restores.

Playground is an optional extra; these tests skip without it, except where ``VACO_JAX_REQUIRE_BRAX=1`` (CI), which
turns a missing Playground into a failure so that CI cannot pass without running them.
"""

from __future__ import annotations

import json
import os
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

if os.environ.get("VACO_JAX_REQUIRE_BRAX") == "1":
    import mujoco_playground  # noqa: F401  (fails loudly in CI)
else:
    pytest.importorskip(
        "mujoco_playground", reason="MuJoCo Playground is an optional extra: pip install -e '.[playground]'"
    )

from vaco_jax import envs  # noqa: E402
from vaco_jax.core.config import ConfigError  # noqa: E402
from vaco_jax.envs import playground  # noqa: E402

TASK = "PendulumSwingup"  # the suite's smallest model: its step compiles in seconds on a CPU


def test_the_adapter_steps_as_playgrounds_own_env_and_ends_episodes_at_its_time_limit_as_truncations():
    """Two envs, a 4-step limit, an action repeat of 2: each agent step is two of Playground's own steps from the
    same state (rewards summed, the observation the second's), the fourth ends every episode as a truncation (never
    a termination), and the next starts afresh."""
    env = envs.make(f"playground/{TASK}", episode_length=8, action_repeat=2, start_pool=None)
    native = playground.load(TASK)
    assert env.name == f"playground/{TASK}" and env.max_episode_steps == 4
    assert (env.observation_size, env.action_spec.size) == (3, 1) and not env.action_spec.discrete
    actions = jnp.asarray([[0.7], [-0.4]])

    @jax.jit
    def run(key):
        state, _ = env.reset(jax.random.split(key, 2))
        first = state.core

        def step(state, k):
            state, ts = env.step(state, actions, k)
            return state, ts

        _, ts = jax.lax.scan(step, state, jax.random.split(key, 5))
        with jax.numpy_rank_promotion("allow"):  # Playground relies on implicit rank promotion
            once = jax.vmap(native.step)(first, actions)
            twice = jax.vmap(native.step)(once, actions)
        return ts, twice.obs, once.reward + twice.reward

    ts, obs, reward = run(jax.random.key(0))
    np.testing.assert_allclose(np.asarray(ts.observation[0]), np.asarray(obs), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(ts.reward[0]), np.asarray(reward), rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(ts.truncated), [[False] * 2] * 3 + [[True] * 2] + [[False] * 2])
    assert not np.asarray(ts.terminated).any() and np.isfinite(np.asarray(ts.observation)).all()
    # the step after the limit starts from a fresh start state: its observation is not the final one continued
    assert not np.allclose(np.asarray(ts.observation[3]), np.asarray(ts.final_observation[3]))
    # the time limit Playground's config gives the env, where none is set (1000 for the DM Control Suite)
    assert envs.make(f"playground/{TASK}").max_episode_steps == playground.default_episode_length(TASK) == 1000


def test_names_implementations_and_envs_the_trainer_cannot_take_are_clear_errors():
    assert envs.is_known(f"playground/{TASK}") and not envs.is_known("playground/Pendulum")
    assert envs.default_normalization(f"playground/{TASK}")  # as Playground's PPO configs do
    with pytest.raises(ConfigError, match=r"'CartpoleBalance' is unknown; did you mean 'playground/CartpoleBalance'"):
        envs.make("CartpoleBalance")
    with pytest.raises(ConfigError, match=r"env.backend='spring' is not an MJX implementation .* jax or warp"):
        envs.make(f"playground/{TASK}", backend="spring")
    if jax.default_backend() != "gpu":  # it crashed inside MuJoCo Warp's compiled step
        with pytest.raises(ConfigError, match=r"'warp' \(MuJoCo Warp\) needs an NVIDIA GPU .*--env.backend jax"):
            envs.make(f"playground/{TASK}", backend="warp")
    # refused by name, before Playground would fetch MuJoCo Menagerie's models for it; the list names only the suite
    with pytest.raises(ConfigError, match=r"Go1JoystickFlatTerrain' is one of MuJoCo Playground's locomotion envs, wh"):
        envs.make("playground/Go1JoystickFlatTerrain")  # (it was "unknown; did you mean 'playground/WalkerRun'?")
    with pytest.raises(ConfigError, match=r"'playground/PandaPickCube' is one of MuJoCo Playground's manipulation"):
        envs.make("playground/PandaPickCube")
    assert "playground/WalkerWalk" in envs.describe_env_names() and "Go1" not in envs.describe_env_names()


def test_mujocos_warnings_while_loading_are_python_warnings_not_a_log_file_in_the_working_directory(
    tmp_path, monkeypatch
):
    """CheetahRun's model has a deprecated compiler attribute: MuJoCo's own handler printed the warning to stdout and
    wrote MUJOCO_LOG.TXT into the directory the user ran from. A tiny model with the same attribute stands in."""
    import mujoco

    monkeypatch.chdir(tmp_path)
    model = '<mujoco><compiler settotalmass="2"/><worldbody><body><geom size=".1"/><joint/></body></worldbody></mujoco>'
    with pytest.warns(UserWarning, match=r"MuJoCo, loading playground/X: compiler attribute 'settotalmass'"):
        with playground._mujoco_warnings_as_python("playground/X"):
            mujoco.MjModel.from_xml_string(model)
    assert not (tmp_path / "MUJOCO_LOG.TXT").exists() and mujoco.get_mju_user_warning() is None  # handler put back
    with warnings.catch_warnings():  # as an error (-W error): raised in Python, where it aborted inside MuJoCo's C++
        warnings.simplefilter("error")
        with pytest.raises(UserWarning, match="settotalmass"):
            with playground._mujoco_warnings_as_python("playground/X"):
                mujoco.MjModel.from_xml_string(model)
    assert mujoco.get_mju_user_warning() is None


def test_a_checkpoint_of_a_playground_batch_restores_it_exactly_empty_arrays_included(tmp_path):
    """An MJX state holds empty arrays (contacts of a model without any), which orbax refuses to save: a checkpoint
    leaves them out and a restore makes them again, every leaf as it was."""
    from vaco_jax import Config, EnvConfig, NetworkConfig
    from vaco_jax.runs import checkpoint
    from vaco_jax.training.driver import stack_hparams
    from vaco_jax.training.seeds import seed_keys
    from vaco_jax.training.trainer import TrainProgram

    env = EnvConfig(name=f"playground/{TASK}", num_envs=2, num_steps=4)
    config = Config(env=env, network=NetworkConfig(actor_hidden=(8,), critic_hidden=(8,)))
    program = TrainProgram(config)
    states = jax.jit(program.init_batched)(seed_keys(0, 2), stack_hparams([config] * 2))
    assert any(0 in np.shape(x) for x in jax.tree.leaves(states)), "the test needs a state with an empty array"
    saver = checkpoint.Checkpointer(tmp_path, {"config": {}}, every=0, total=1)
    saver.save(1, states)
    saver.finish()
    restored = checkpoint.restore(tmp_path, jax.eval_shape(lambda: states)).states
    saved_leaves, restored_leaves = jax.tree.leaves(states), jax.tree.leaves(restored)
    assert len(saved_leaves) == len(restored_leaves)
    for before, after in zip(saved_leaves, restored_leaves, strict=True):
        if jax.dtypes.issubdtype(before.dtype, jax.dtypes.prng_key):
            before, after = jax.random.key_data(before), jax.random.key_data(after)
        assert before.shape == after.shape and before.dtype == after.dtype
        np.testing.assert_array_equal(np.asarray(before), np.asarray(after))


def test_a_playground_run_trains_checkpoints_and_restores(tmp_path, capsys):
    """The CLI on a Playground task: it trains with finite losses, checkpoints, resumes and trains on (the restored
    states through the compiled chunk), and load_run reads each checkpoint's learner; render draws its policy with
    Playground's own renderer (it was refused); the preset's settings are Playground's."""
    from vaco_jax.cli import main
    from vaco_jax.core.presets import apply_presets
    from vaco_jax.runs.saved import load_run

    with jax.numpy_rank_promotion("allow"):
        start = jax.eval_shape(playground.load(TASK).reset, jax.random.key(0))
    empty = [x for x in jax.tree.leaves(start) if 0 in x.shape]
    assert empty, "the test needs an env state with an empty array"
    out = tmp_path / "run"
    argv = ["train", "--preset", f"playground-{TASK}-cpu", "--num-iterations", "2", "--num-seeds", "1"]
    argv += ["--env.num-envs", "4", "--env.num-steps", "8", "--eval.every", "0", "--env.action-repeat", "2"]
    argv += ["--out-dir", str(out)]
    assert main(argv) == 0
    assert "; MJX's jax implementation" in capsys.readouterr().out.splitlines()[0]  # the run's first line
    # resumed: the restored env states (their empty arrays made again) go through the compiled chunk
    assert main(["train", "--resume", str(out), "--num-iterations", "3"]) == 0
    record = json.loads((out / "metrics.json").read_text())
    assert len(record["metrics"]["loss/total"][0]) == 3
    assert np.isfinite(np.asarray(record["metrics"]["loss/total"], float)).all()
    loaded, before = load_run(out), load_run(out, step=2)
    assert loaded.iterations_done == 3 and loaded.program.config.env.name == f"playground/{TASK}"
    pairs = list(zip(jax.tree.leaves(loaded.state.params), jax.tree.leaves(before.state.params), strict=True))
    assert all(np.isfinite(np.asarray(after)).all() and after.shape == earlier.shape for after, earlier in pairs)
    assert any(not np.allclose(after, earlier) for after, earlier in pairs)  # the resumed iteration trained
    capsys.readouterr()  # drawn by Playground's env.render: 12 agent steps of 2 x 20 ms control steps, each drawn
    if _renders():
        assert main(["render", str(out), "--max-steps", "12"]) == 0
        assert "12 steps" in capsys.readouterr().out
        from PIL import Image

        with Image.open(out / "policy.gif") as gif:
            assert (gif.n_frames, gif.size, gif.info["duration"]) == (12, (320, 240), 40)
            assert np.asarray(gif.convert("RGB")).std() > 5  # a drawn scene, not a blank frame
    else:  # no OpenGL here: refused saying what to set
        assert main(["render", str(out), "--max-steps", "12"]) == 2
        assert "MUJOCO_GL=egl" in capsys.readouterr().err
    # Playground's DM Control Suite config, written out: 2048 envs, batch 1024 x 32 minibatches of 30-step unrolls
    # (480 steps per env), 16 epochs, discount 0.995 (BallInCup and FingerSpin 0.95), lr 1e-3, reward scaling 10,
    # 6e7 env steps (AcrobotSwingup, SwimmerSwimmer6 and WalkerRun 1e8), num_evals 10, num_resets_per_eval 10: brax
    # runs 9 x 10 epochs of ceil(6e7 / (9 x 983,040 x 10)) = 1 update (1e8: 2). Its PendulumSwingUp case (action
    # repeat 4) never matches PendulumSwingup
    gpu, ball, walker = (apply_presets([f"playground-{env}"]) for env in (TASK, "BallInCup", "WalkerRun"))
    assert (gpu.env.num_envs, gpu.env.num_steps, gpu.ppo.num_epochs, gpu.ppo.num_minibatches) == (2048, 480, 16, 32)
    assert (gpu.ppo.gamma, gpu.ppo.learning_rate, gpu.env.reward_scale, gpu.env.action_repeat) == (0.995, 1e-3, 10, 1)
    assert (gpu.num_iterations, gpu.eval.every, gpu.env.backend) == (90, 10, "") and ball.ppo.gamma == 0.95
    assert (walker.num_iterations, walker.eval.every) == (180, 20)


def test_the_as_brax_presets_add_brax_algorithm_and_its_resets_per_task():
    """playground-<Env>-as-brax: the preset with brax's estimation inside its 30-step unrolls, its policy and
    initialisation, its normalised observations and cached start states, and every env reset after each of brax's
    epochs (1 update at 6e7 env steps, 2 at 1e8, as
    computed above); the plain preset leaves them off."""
    from vaco_jax.core.presets import apply_presets

    plain, cartpole, walker = (
        apply_presets([name])
        for name in (f"playground-{TASK}", f"playground-{TASK}-as-brax", "playground-WalkerRun-as-brax")
    )
    assert (cartpole.env.reset_every, walker.env.reset_every, plain.env.reset_every) == (1, 2, 0)
    assert (cartpole.ppo.advantage_horizon, cartpole.ppo.minibatch, cartpole.ppo.advantage_form) == (30, "unrolls", "q")
    assert cartpole.ppo.advantages_every_step and not plain.ppo.advantages_every_step
    assert (cartpole.network.distribution, cartpole.network.std, cartpole.network.init) == (
        "tanh_gaussian",
        "state_dependent",
        "lecun_uniform",
    )
    # nothing else differs
    estimation = {"advantage_horizon": 0, "minibatch": plain.ppo.minibatch, "advantages_every_step": False}
    ppo = cartpole.ppo.replace(**estimation, advantage_form=plain.ppo.advantage_form)
    network = cartpole.network.replace(distribution="gaussian", std="state_independent", init="orthogonal")
    assert cartpole.env.normalizer_form == "brax" and plain.env.normalizer_form == "clipped"
    assert (cartpole.env.start_states, plain.env.start_states) == ("cached", "fresh")
    env = cartpole.env.replace(reset_every=0, normalizer_form="clipped", start_states="fresh")
    assert (network, ppo, env) == (plain.network, plain.ppo, plain.env)
    assert cartpole.replace(env=plain.env, ppo=plain.ppo, network=plain.network) == plain


def _renders() -> bool:
    """Whether MuJoCo's OpenGL renderer works here (EGL where there is no display: tests/conftest.py), as render asks
    it before drawing."""
    from vaco_jax.runs.render import check_opengl

    try:
        check_opengl(f"playground/{TASK}")
    except ConfigError:  # no OpenGL library or context: the render test then checks the refusal
        return False
    return True
