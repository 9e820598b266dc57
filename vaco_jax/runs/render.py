"""``vaco-jax render``: one episode of a saved run's learned policy, as an animation.

The policy is the learner's (its parameters and observation normaliser) at a checkpoint of the run in ``run_dir``:
the newest, or the one after ``step`` iterations; of one grid point and seed. It acts by its mode (deterministic,
as the learner is scored) or by sampling, on a fresh environment, until the episode ends or ``max_steps``. gymnax
tasks are drawn by gymnax's own visualiser (a GIF, or any format matplotlib writes: MP4 needs ffmpeg; classic
control needs pygame, the ``render`` extra), brax tasks by brax's own HTML viewer (a page that plays the episode
in 3D in a browser), MuJoCo Playground tasks by Playground's own ``env.render`` (MuJoCo's OpenGL renderer; a GIF, or
an MP4 with ffmpeg).
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import math
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from vaco_jax import envs
from vaco_jax.core.config import Config, ConfigError
from vaco_jax.core.types import ActorSnapshot, TrainState
from vaco_jax.runs.run_directory import RunDirectory
from vaco_jax.runs.saved import load_run, parse_point, recorded_run
from vaco_jax.training.trainer import TrainProgram

GYMNAX_FORMATS = (".gif", ".mp4")
BRAX_FORMATS = (".html",)
PLAYGROUND_FORMATS = (".gif", ".mp4")
PLAYGROUND_FRAME_RATE = 25  # frames per second at most: every n-th control step is drawn (a GIF's 10 ms frames play
# slower in most viewers, and a frame per step of a 1000-step episode makes a file ten times the size)
PLAYGROUND_FRAME_SIZE = (240, 320)  # height, width: Playground's env.render default


@dataclasses.dataclass
class Episode:
    """One rendered episode: the env's own states in order (a pytree with a leading step axis), its rewards,
    whether it ended within the step budget, and whether that end was its time limit (a truncation)."""

    states: Any
    rewards: np.ndarray
    ended: bool
    truncated: bool = False

    @property
    def length(self) -> int:
        return int(self.rewards.shape[0])

    @property
    def total(self) -> float:
        return float(self.rewards.sum())


def play_episode(
    program: TrainProgram, state: TrainState, key: jax.Array, *, deterministic: bool, max_steps: int
) -> Episode:
    """One episode of ``state``'s learner on a fresh environment: the env state before each step, the reward of
    each step, up to and including the step that ends it (at most ``max_steps``)."""
    env, actor = program.env, ActorSnapshot(state.params.actor, state.obs_norm)
    reset_key, run_key = jax.random.split(key)

    @jax.jit
    def run(reset_key: jax.Array, run_key: jax.Array):
        env_state, obs = env.reset(reset_key[None])

        def step(carry, t):
            env_state, obs, ended = carry
            act_key, env_key = jax.random.split(jax.random.fold_in(run_key, t))
            params = program.networks.policy(actor, obs)
            action = program.dist.mode(params) if deterministic else program.dist.sample(act_key, params)
            next_state, ts = env.step(env_state, program.dist.env_action(env.action_spec, action), env_key)
            done = (ts.terminated | ts.truncated)[0]
            return (next_state, ts.observation, ended | done), (env_state, ts.reward[0], ended, done, ts.truncated[0])

        carry = (env_state, obs, jnp.zeros((), bool))
        _, (states, rewards, before, done, truncated) = jax.lax.scan(step, carry, jnp.arange(max_steps))
        return states, rewards, before, done, truncated

    states, rewards, before, done, truncated = jax.device_get(run(reset_key, run_key))
    live = int(np.sum(~np.asarray(before)))  # steps taken before the episode ended (the ending one included)
    # the batch axis of the one environment dropped (a leaf without one, e.g. a brax start pool's count, kept)
    # (indexed as it is: a PRNG key, in a Playground state's info, has no NumPy form)
    states = jax.tree.map(lambda x: x[:live, 0] if np.ndim(x) > 1 and np.shape(x)[1] == 1 else x[:live], states)
    ended = bool(np.asarray(done)[:live].any())
    return Episode(states, np.asarray(rewards)[:live], ended, ended and bool(np.asarray(truncated)[live - 1]))


def output_file(env_name: str, out: str | Path | None, default_dir: Path | None = None) -> Path:
    """The file a render writes: ``out``, checked against what ``env_name`` renders to (.gif or .mp4 for gymnax and
    Playground, .html for brax), or ``default_dir/policy.gif`` (brax: ``policy.html``) where ``out`` is None."""
    formats = _formats(env_name)
    out = Path(out) if out is not None else Path(default_dir or ".") / f"policy{formats[0]}"
    if out.suffix.lower() not in formats:
        raise ConfigError(f"{out}: {env_name} renders to {' or '.join(formats)} (told by the suffix)")
    if out.suffix.lower() == ".mp4" and shutil.which("ffmpeg") is None:  # found out before the episode is drawn
        raise ConfigError(f"{out}: an MP4 is written by ffmpeg, not found on PATH: install it, or write a .gif")
    return out


def _steps(tree: Any, length: int) -> list[Any]:
    """A pytree with a leading step axis as the list of its steps."""
    return [jax.tree.map(lambda x, i=i: x[i], tree) for i in range(length)]


def render_policy(
    program: TrainProgram | Config,
    state: TrainState,
    out: str | Path,
    *,
    deterministic: bool = True,
    max_steps: int = 0,
    key: jax.Array | None = None,
) -> Episode:
    """Play one episode of ``state``'s learner (one run's state, e.g. ``make_train(config)(key)``'s) and write its
    animation to ``out`` (.gif or .mp4 for gymnax and Playground, .html for brax); the notebooks' way to see a
    policy."""
    program = program if isinstance(program, TrainProgram) else TrainProgram(program)
    out = output_file(program.config.env.name, out)
    if max_steps < 0:
        raise ConfigError(f"max_steps={max_steps} must be >= 0 (0: the env's time limit)")
    episode = play_episode(
        program,
        state,
        jax.random.key(0) if key is None else key,
        deterministic=deterministic,
        max_steps=max_steps or int(program.env.max_episode_steps),
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    if envs.backend_of(program.config.env.name)[0] == "playground":
        render_playground(program.env, episode, out)
    else:
        (render_brax if out.suffix.lower() in BRAX_FORMATS else render_gymnax)(program.env, episode, out)
    return episode


def render_saved_run(
    run_dir: str | Path,
    out: str | Path | None = None,
    *,
    step: int | None = None,
    point: tuple[str, ...] = (),
    seed: int | None = None,
    deterministic: bool = True,
    max_steps: int = 0,
    episode_seed: int = 0,
    overwrite: bool = False,
) -> tuple[Path, Episode]:
    """Render one episode of the run in ``run_dir`` (module docstring) into ``out`` (default: ``RUN_DIR/policy.gif``
    for gymnax, ``policy.html`` for brax; an existing file only with ``overwrite``); ``point`` as ``("lag.k=4",)``.
    Returns the file and the episode."""
    run_dir = Path(run_dir)
    record = recorded_run(run_dir, step)
    config = record.config
    out = output_file(config.env.name, out, run_dir)
    if out.exists() and not overwrite:
        raise ConfigError(f"{out} exists: pass --overwrite to replace it, or --out FILE to write elsewhere")
    if max_steps < 0:
        raise ConfigError(f"--max-steps {max_steps} must be >= 0 (0: the env's time limit)")
    loaded = load_run(run_dir, step=step, point=parse_point(config, point), seed=seed)
    directory = RunDirectory(run_dir)
    if out.parent.absolute() == directory.path.absolute() and directory.is_marked():
        directory.record([out.name])  # before it is written: a later --overwrite of the run may remove it
    key = jax.random.key(episode_seed)
    episode = render_policy(
        loaded.program, loaded.state, out, deterministic=deterministic, max_steps=max_steps, key=key
    )
    return out, episode


def render_gymnax(env: Any, episode: Episode, out: Path) -> None:
    """gymnax's visualiser over the episode's states (matplotlib; classic control draws with gymnasium's pygame
    renderer, the ``render`` extra)."""
    import os

    os.environ.setdefault("SDL_AUDIODRIVER", "dummy")  # pygame draws only: no sound device is opened
    # ...and off screen: no window, and no "XDG_RUNTIME_DIR is invalid" line per frame on a headless machine
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
    from gymnax.visualize import Visualizer

    inner, params = env.native
    try:
        Visualizer(inner, params, _steps(episode.states, episode.length), np.cumsum(episode.rewards)).animate(str(out))
    except ModuleNotFoundError as error:  # pygame, for classic control
        raise ConfigError(
            f"drawing {inner.name} needs {error.name}: pip install 'vaco_jax[render]' (or pip install {error.name})"
        ) from None


def render_brax(env: Any, episode: Episode, out: Path) -> None:
    """brax's HTML viewer over the episode's physics states."""
    from brax.io import html

    core = episode.states.core  # the adapter's state: brax's own State per step
    pipeline = _steps(core.pipeline_state, episode.length)
    brax_env = env.native
    timestep = brax_env.dt * getattr(env, "action_repeat", 1)  # a state per agent step: action_repeat brax steps
    out.write_text(html.render(brax_env.sys.tree_replace({"opt.timestep": timestep}), pipeline))


def _formats(env_name: str) -> tuple[str, ...]:
    """The file suffixes ``env_name`` renders to, the default first."""
    if envs.backend_of(env_name)[0] == "playground":
        return PLAYGROUND_FORMATS
    return BRAX_FORMATS if envs.is_brax(env_name) else GYMNAX_FORMATS


def offscreen_gl_by_default() -> None:
    """MuJoCo draws with EGL (off screen; Mesa's on a machine without a GPU) where nothing chose its OpenGL backend
    and Linux has no display: MuJoCo reads ``MUJOCO_GL`` once, at its import, and its default (GLFW) needs a window.
    A no-op where MuJoCo is imported already (set ``MUJOCO_GL=egl`` before Python starts then)."""
    headless = sys.platform.startswith("linux") and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
    if headless and "mujoco" not in sys.modules:
        os.environ.setdefault("MUJOCO_GL", "egl")


def check_opengl(env_name: str) -> None:
    """Refuse, saying what to set, where MuJoCo's OpenGL renderer cannot draw here (no GL library or context)."""
    import mujoco

    try:
        with mujoco.Renderer(mujoco.MjModel.from_xml_string("<mujoco/>"), 8, 8):
            return
    except (RuntimeError, ImportError, OSError, AttributeError, mujoco.FatalError) as error:
        chosen = os.environ.get("MUJOCO_GL")
        raise ConfigError(
            f"drawing {env_name} needs MuJoCo's OpenGL renderer, which failed here ({type(error).__name__}: {error}; "
            f"MUJOCO_GL={chosen or 'unset'}): on a machine without a display set MUJOCO_GL to egl (or osmesa) before "
            "Python starts, e.g. MUJOCO_GL=egl vaco-jax render RUN_DIR, with that library installed"
        ) from None


def render_playground(env: Any, episode: Episode, out: Path) -> None:
    """Playground's own ``env.render`` (MuJoCo's renderer) over the episode's states, every n-th agent step (at
    most :data:`PLAYGROUND_FRAME_RATE` frames per second; an agent step is ``action_repeat`` control steps), as a GIF
    (Pillow) or an MP4 (mediapy's ffmpeg)."""
    playground_env = env.native
    seconds_per_step = playground_env.dt * env.action_repeat
    every = max(1, math.ceil(1 / (seconds_per_step * PLAYGROUND_FRAME_RATE)))
    drawn = jax.tree.map(lambda x: x[::every], episode.states.core)
    check_opengl(env.name)
    height, width = PLAYGROUND_FRAME_SIZE
    states = _steps(drawn, len(range(0, episode.length, every)))
    with contextlib.redirect_stderr(io.StringIO()):  # Playground's progress bar, a line per frame in a log
        frames = [np.asarray(frame) for frame in playground_env.render(states, height=height, width=width)]
    milliseconds = 1000 * seconds_per_step * every
    if out.suffix.lower() == ".gif":
        from PIL import Image

        images = [Image.fromarray(frame) for frame in frames]
        images[0].save(out, save_all=True, append_images=images[1:], duration=round(milliseconds), loop=0)
        return
    import mediapy

    mediapy.write_video(out, frames, fps=1000 / milliseconds)
