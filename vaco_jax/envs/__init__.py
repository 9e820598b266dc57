"""Environment backends behind one batched protocol, routed by name through one registry.

``make(name, ...)`` returns an :class:`~vaco_jax.envs.base.Env`. Names are routed by
prefix: ``brax/<name>`` (``brax/ant``) goes to the brax adapter, ``playground/<Name>``
(``playground/CartpoleBalance``) to MuJoCo Playground's through the same adapter, ``gymnax/<id>``
and a bare gymnax id (``CartPole-v1``) to the gymnax adapter. A new backend adds one entry
to :data:`BACKENDS`; the trainer does not change.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import functools
import sys
from collections.abc import Callable
from dataclasses import dataclass

from vaco_jax.core.config import ConfigError, EnvConfig
from vaco_jax.envs.base import (
    ActionSpec,
    Env,
    TimeStep,
    TruncationAsTermination,
    init_episode_stats,
    random_policy_return,
    update_episode_stats,
)

__all__ = [
    "ActionSpec",
    "Env",
    "TimeStep",
    "TruncationAsTermination",
    "BACKENDS",
    "EnvOptions",
    "make",
    "from_config",
    "known_env_names",
    "is_known",
    "describe_env_names",
    "unknown_env_message",
    "backend_of",
    "default_normalization",
    "is_brax",
    "register",
    "init_episode_stats",
    "update_episode_stats",
    "random_policy_return",
]


@dataclass(frozen=True)
class EnvOptions:
    """The options every backend's constructor is given (:class:`~vaco_jax.core.config.EnvConfig`'s fields of these
    names); a backend refuses, naming the field, any it does not take."""

    episode_length: int = 0
    action_repeat: int = 1
    backend: str = ""
    start_pool: int | None = 0
    start_states: str = "fresh"


@dataclass(frozen=True)
class Backend:
    """One environment library: its ids (without prefix), its constructor and how to install it."""

    prefix: str
    env_names: Callable[[], list[str]]
    build: Callable[[str, EnvOptions], Env]  # (name without prefix, options) -> Env
    install: str
    normalize_observations: bool  # the default of env.normalize_observations, chosen by measurement
    note: str = ""  # said after its ids where they are listed (what of the library is not taken)


def _gymnax_names() -> list[str]:
    from vaco_jax.envs.gymnax import gymnax_env_names

    return gymnax_env_names()


def _build_gymnax(name: str, options: EnvOptions) -> Env:
    from vaco_jax.envs.gymnax import GymnaxEnv

    if options.start_pool:
        raise ConfigError(
            f"env.start_pool={options.start_pool} is a brax option; leave it unset for the gymnax env {name!r}"
        )
    if options.start_states != "fresh":
        raise ConfigError(
            f"env.start_states={options.start_states} is a brax and Playground option (gymnax envs restart fresh): "
            f"leave it unset for the gymnax env {name!r}"
        )
    if options.action_repeat != 1:
        raise ConfigError(
            f"env.action_repeat={options.action_repeat} is a brax option; gymnax envs take env.action_repeat=1"
        )
    if options.backend:
        raise ConfigError(
            f"env.backend={options.backend!r} is a brax option; leave it empty for the gymnax env {name!r}"
        )
    return GymnaxEnv(name, episode_length=options.episode_length)


def _brax_names() -> list[str]:
    from vaco_jax.envs.brax import brax_env_names  # brax itself is imported only when an env is built

    return brax_env_names()


def _build_brax(name: str, options: EnvOptions) -> Env:
    try:
        # mujoco's mjx prints "Failed to import warp" on stdout as brax imports it: keep stdout the command's own
        # (--print-config > FILE), the line goes to stderr
        with contextlib.redirect_stdout(sys.stderr):
            import brax  # noqa: F401
    except ImportError:
        raise ConfigError(
            f"env.name='brax/{name}' needs brax, which is not installed: pip install -e '.[brax]'"
        ) from None
    from vaco_jax.envs.brax import BraxEnv

    return BraxEnv(name, **dataclasses.asdict(options))


def _playground_names() -> list[str]:
    from vaco_jax.envs.playground import playground_env_names  # mujoco_playground is imported only where installed

    return playground_env_names()


def _build_playground(name: str, options: EnvOptions) -> Env:
    from vaco_jax.envs.playground import make_playground_env

    return make_playground_env(name, **dataclasses.asdict(options))


_CUSTOM: dict[str, Callable[[], Env]] = {}


def register(name: str, factory: Callable[[], Env], *, overwrite: bool = False) -> None:
    """Make a user environment available by ``name`` to ``make``, the trainer, the CLI's Python API and sweeps.

    ``factory()`` must return a batched :class:`~vaco_jax.envs.base.Env` (see ``vaco_jax/envs/base.py``; a
    gymnax environment can be wrapped as in ``vaco_jax/envs/gymnax.py``). Registered ids use the ``custom/``
    prefix: ``register("custom/two-armed-bandit", factory)``. Registering a known id again raises unless
    ``overwrite=True``.
    """
    if not name.startswith("custom/") or len(name) <= len("custom/"):
        raise ConfigError(f"custom env ids start with 'custom/' (e.g. 'custom/{name}'); got {name!r}")
    if name in _CUSTOM and not overwrite:
        raise ConfigError(f"env id {name!r} is already registered; pass overwrite=True to replace it")
    _CUSTOM[name] = factory
    make.cache_clear()


def _build_custom(name: str, options: EnvOptions) -> Env:
    if dataclasses.replace(options, start_pool=options.start_pool or 0) != EnvOptions():
        raise ConfigError(
            f"custom/{name} is built by its registered factory: leave env.episode_length=0, env.action_repeat=1, "
            "env.backend='', env.start_pool and env.start_states unset (set such options inside the factory)"
        )
    return _CUSTOM[f"custom/{name}"]()


BACKENDS: dict[str, Backend] = {
    # Observation normalisation defaults, from benchmarks/results/normalization (PPO, 8 seeds per task): on gymnax
    # classic control it slows learning (CartPole AUC 154 vs 240, P(on > off) = 0.00); on brax it is needed
    # (inverted_pendulum 328 vs 91, hopper 337 vs 302; pooled P(on > off) = 0.92 [0.80, 1.00]).
    "gymnax": Backend("gymnax", _gymnax_names, _build_gymnax, "installed with vaco_jax", False),
    "brax": Backend("brax", _brax_names, _build_brax, "pip install -e '.[brax]'", True),
    # MuJoCo Playground's PPO configs normalise observations on every DM Control Suite task, as brax's do
    "playground": Backend(
        "playground",
        _playground_names,
        _build_playground,
        "pip install -e '.[playground]'",
        True,
        "its DM Control Suite; its locomotion and manipulation envs are not supported (most observe a dict for an "
        "asymmetric critic and train with domain randomisation)",
    ),
    "custom": Backend(
        "custom", lambda: [n.removeprefix("custom/") for n in _CUSTOM], _build_custom, "envs.register", False
    ),
}
DEFAULT_BACKEND = "gymnax"  # ids without a prefix


def backend_of(name: str) -> tuple[str, str]:
    """(backend, id within it) of an env name: ``"brax/ant"`` -> ``("brax", "ant")``."""
    prefix, sep, rest = name.partition("/")
    if sep and prefix in BACKENDS:
        return prefix, rest
    return DEFAULT_BACKEND, name


def known_env_names() -> list[str]:
    """Every environment id ``make`` accepts: bare gymnax ids, then ``brax/<name>`` for each brax env, and so on
    for every backend (a library that is not installed has none)."""
    names = []
    for key, backend in BACKENDS.items():
        prefix = "" if key == DEFAULT_BACKEND else f"{backend.prefix}/"
        names += [prefix + n for n in backend.env_names()]
    return names


def describe_env_names() -> str:
    """The known ids of every backend, for error messages."""
    parts = []
    for key, backend in BACKENDS.items():
        prefix = "" if key == DEFAULT_BACKEND else f"{backend.prefix}/"
        none = "none registered" if key == "custom" else "not installed"
        ids = ", ".join(prefix + n for n in backend.env_names()) or none
        parts.append(f"{key} ({backend.install}): {ids}" + (f" ({backend.note})" if backend.note else ""))
    return "known ids by backend: " + "; ".join(parts)


def is_known(name: str) -> bool:
    """Whether ``make`` knows ``name``: asks only the backend its prefix names (a bare id: gymnax), so a gymnax or
    brax run never imports MuJoCo Playground to list its names."""
    key, env_id = backend_of(name)
    return env_id in BACKENDS[key].env_names()


def unknown_env_message(name: str) -> str:
    """The error for an unknown ``env.name``: the closest known id, if one is close, then every known id (or, for a
    library's prefix whose library is not installed, how to install it)."""
    key, _ = backend_of(name)
    if key not in (DEFAULT_BACKEND, "custom") and not BACKENDS[key].env_names():
        return f"env.name={name!r} needs {key}, which is not installed: {BACKENDS[key].install}"
    if key == "playground":  # a real Playground env of a family not taken: said first, with no near-miss suggested
        from vaco_jax.envs.playground import unsupported_family

        if family := unsupported_family(backend_of(name)[1]):
            return (
                f"env.name={name!r} is one of MuJoCo Playground's {family} envs, which are not supported (most observe "
                "a dict for an asymmetric critic, train with domain randomisation and load MuJoCo Menagerie's models); "
                f"its DM Control Suite's are: playground/{', playground/'.join(BACKENDS[key].env_names())}"
            )
    known = known_env_names()
    by_lower = {n.lower(): n for n in known}
    # an exact name under a prefix first ("reacher" -> "brax/reacher", not gymnax's "Reacher-misc"), then spelling
    close = [n for n in by_lower if n.split("/")[-1] == name.lower()]
    close = close or difflib.get_close_matches(name.lower(), list(by_lower), n=1, cutoff=0.6)
    hint = f"did you mean {by_lower[close[0]]!r}? " if close else ""
    return f"env.name={name!r} is unknown; {hint}{describe_env_names()}"


@functools.cache
def make(
    name: str,
    *,
    episode_length: int = 0,
    action_repeat: int = 1,
    backend: str = "",
    start_pool: int | None = 0,
    start_states: str = "fresh",
) -> Env:
    """The batched environment called ``name`` with the given options (see :class:`vaco_jax.core.config.EnvConfig`).

    Raises :class:`~vaco_jax.core.config.ConfigError` naming the known ids of every backend if ``name`` is
    unknown, and naming the field if an option does not apply to the backend.
    """
    if not is_known(name):
        raise ConfigError(unknown_env_message(name))
    key, env_id = backend_of(name)
    options = EnvOptions(episode_length, action_repeat, backend, start_pool, start_states)
    return BACKENDS[key].build(env_id, options)


def is_brax(name: str) -> bool:
    """Whether ``name`` runs through the brax adapter: a ``brax/`` task, or a registered env that wraps one
    (:class:`~vaco_jax.envs.brax.BraxEnv` with ``environment=``)."""
    key, _ = backend_of(name)
    if key != "custom":
        return key == "brax"
    from vaco_jax.envs.brax import BraxEnv  # the adapter's class only: brax itself is not imported here

    return isinstance(make(name), BraxEnv)


def default_normalization(name: str) -> bool:
    """Whether observations are normalised when ``env.normalize_observations`` is None: the backend's default (a
    registered env that wraps a brax one takes brax's)."""
    return BACKENDS["brax" if is_brax(name) else backend_of(name)[0]].normalize_observations


def from_config(env: EnvConfig) -> Env:
    """The environment an :class:`~vaco_jax.core.config.EnvConfig` describes (name and options)."""
    made = make(
        env.name,
        episode_length=env.episode_length,
        action_repeat=env.action_repeat,
        backend=env.backend,
        start_pool=env.start_pool,
        start_states=env.start_states,
    )
    return made if env.bootstrap_on_truncation else TruncationAsTermination(made)
