"""The fingerprint of a batch of runs' compiled programs: did the code change?

A run's numbers are a function of its programs: the batched init and the chunk of update steps, lowered to
StableHLO for its exact shapes. Their text (without source locations), with jax's and jaxlib's versions, is hashed:
a refactor that leaves the programs alone leaves the fingerprint alone, and any change that can change a number (a
loss, an estimator, a default) changes it. Nothing is compiled or run; lowering costs a trace of each program.

A checkpoint records the fingerprint of the programs that wrote it, so that a resume under other programs (the
code changed between the stop and the resume) is noticed and refused by default (:mod:`vaco_jax.runs.session`); the
benchmarks' study cells record it (with their chunk lengths and reductions) to tell current results from stale
ones (``benchmarks/common/provenance.py``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from importlib import metadata

import jax

from vaco_jax.training.driver import Driver
from vaco_jax.training.memory import abstract_batch
from vaco_jax.training.seeds import seed_keys
from vaco_jax.training.trainer import TrainProgram


def stablehlo(lowered) -> str:
    """A lowered program's StableHLO text without source locations (what the fingerprint hashes)."""
    return lowered.compiler_ir("stablehlo").operation.get_asm(enable_debug_info=False)


def program_texts(program: TrainProgram, num_runs: int, chunk_lengths: Iterable[int]) -> list[str]:
    """The StableHLO of ``num_runs`` runs' init program, then of their chunk program for each of ``chunk_lengths``
    (iterations per chunk), lowered for abstract inputs (nothing allocated, compiled or run)."""
    states, hparams = abstract_batch(program, num_runs)
    keys = jax.eval_shape(lambda: seed_keys(0, num_runs))
    driver = Driver(program)
    texts = [stablehlo(jax.jit(program.init_batched).lower(keys, hparams))]
    texts += [stablehlo(driver.lower_chunk(states, hparams, length)) for length in chunk_lengths]
    return texts


def versions_prefix() -> str:
    """jax's and jaxlib's versions, as the fingerprints hash them first."""
    return "".join(f"{package}=={metadata.version(package)};" for package in ("jax", "jaxlib"))


def run_fingerprint(program: TrainProgram, num_runs: int) -> str:
    """The fingerprint of ``num_runs`` runs of ``program`` (its init and a one-iteration chunk: every longer chunk
    repeats the same step), 16 hex digits."""
    digest = hashlib.sha256(versions_prefix().encode())
    for text in program_texts(program, num_runs, [1]):
        digest.update(text.encode())
    return digest.hexdigest()[:16]


__all__ = ["program_texts", "run_fingerprint", "stablehlo", "versions_prefix"]
