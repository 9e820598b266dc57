"""The paired statistics of runs that share seeds (vaco_jax.numerics.stats): against their definitions, enumerated
or written out, and the interval's coverage computed exactly."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats as scipy_stats

from vaco_jax.numerics import stats


def test_paired_probability_of_improvement():
    pi = stats.paired_probability_of_improvement
    x, y = np.array([3.0, 1.0, 2.0, 5.0]), np.array([2.0, 1.0, 4.0, 0.0])
    assert pi(x, y) == pytest.approx((1 + 0.5 + 0 + 1) / 4)  # seed by seed: win, tie, loss, win
    assert pi(y, x) == pytest.approx(1 - pi(x, y))
    assert stats.probability_of_improvement(x, y) != pytest.approx(pi(x, y))  # unpaired: another number
    assert pi(np.array([np.nan, 1.0]), np.array([0.0, np.nan])) == 0.5  # a diverged run loses its pair
    low, high = stats.paired_improvement_interval(x, y)
    assert 0.0 <= low <= pi(x, y) <= high <= 1.0


def _interval_of_count(k: float, n: int) -> tuple[float, float]:
    return stats.paired_improvement_interval(np.r_[np.ones(int(k)), np.zeros(n - int(k))], np.full(n, 0.5))


def _percentile_bootstrap_of_count(k: int, n: int) -> tuple[float, float]:
    """The old interval, exactly: resampling n pairs of which k are wins draws Binomial(n, k/n) wins."""
    return scipy_stats.binom.ppf(0.025, n, k / n) / n, scipy_stats.binom.ppf(0.975, n, k / n) / n


def _coverage(interval, p: float, n: int) -> float:
    """The exact probability that ``interval(k, n)`` covers p when k ~ Binomial(n, p) (untied pairs)."""
    return sum(scipy_stats.binom.pmf(k, n, p) for k in range(n + 1) if interval(k, n)[0] <= p <= interval(k, n)[1])


def test_the_paired_interval_covers_at_16_seeds_where_the_percentile_bootstrap_does_not():
    """Coverage computed exactly over the binomial count of won pairs, at every P on a grid: the exact interval
    holds 95% everywhere; the percentile bootstrap it replaces falls to about 80% at P = 0.9 and 55% at 0.95."""
    grid = np.linspace(0.01, 0.99, 99)
    assert min(_coverage(_interval_of_count, p, 16) for p in grid) >= 0.95
    assert _coverage(_percentile_bootstrap_of_count, 0.9, 16) < 0.85
    assert _coverage(_percentile_bootstrap_of_count, 0.95, 16) < 0.6
    assert _interval_of_count(16, 16) == pytest.approx((0.7941, 1.0), abs=1e-4)  # Clopper-Pearson, 16 of 16


def test_the_paired_interval_with_ties_split_still_covers():
    """Scores with ties (a tie counts half to each side, as P does): simulated coverage at several true P."""
    rng = np.random.default_rng(0)
    for win, tie in ((0.45, 0.1), (0.8, 0.15), (0.9, 0.1), (0.2, 0.3)):
        truth, covered = win + tie / 2, 0
        for _ in range(2000):
            u = rng.random(16)
            x = np.where(u < win, 1.0, np.where(u < win + tie, 0.5, 0.0))
            low, high = stats.paired_improvement_interval(x, np.full(16, 0.5))
            covered += low <= truth <= high
        assert covered / 2000 >= 0.94, (win, tie, covered / 2000)


def _signed_rank_p_by_enumeration(d: np.ndarray, alternative: str = "two-sided") -> float:
    """The signed-rank p-value from its definition: drop zeros, rank |d| with tied values sharing their mean rank,
    and count the 2^n sign assignments whose positive-rank sum is as extreme as the observed one."""
    d = d[d != 0]
    magnitudes = np.abs(d)
    ranks = np.array([np.mean(np.flatnonzero(np.sort(magnitudes) == m) + 1.0) for m in magnitudes])
    observed, centre = ranks[d > 0].sum(), ranks.sum() / 2
    sums = [
        sum(r for r, s in zip(ranks, signs, strict=True) if s) for signs in itertools.product([0, 1], repeat=d.size)
    ]
    if alternative == "greater":
        return float(np.mean([t >= observed - 1e-9 for t in sums]))
    if alternative == "less":
        return float(np.mean([t <= observed + 1e-9 for t in sums]))
    return float(np.mean([abs(t - centre) >= abs(observed - centre) - 1e-9 for t in sums]))


@pytest.mark.parametrize("alternative", ["two-sided", "greater", "less"])
def test_the_signed_rank_test_is_the_exact_sign_flip_test_of_its_definition(alternative):
    """With and without tied |differences| and zeros (where scipy's normal approximation is not exact)."""
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=9), rng.normal(size=9) + 0.6
    samples = [(x, y)] + [(rng.integers(0, 6, size=11) * 1.0, rng.integers(1, 7, size=11) * 1.0) for _ in range(5)]
    for a, b in samples:
        d = stats.paired_differences(a, b)
        assert stats.signed_rank_p(d, alternative) == pytest.approx(_signed_rank_p_by_enumeration(d, alternative))


def test_the_smallest_p_and_the_fewest_seeds_one_way_that_can_be_marked():
    base, wins = np.arange(16.0), 1.0 + 0.01 * np.arange(16)  # 16 seeds, every one won, by distinct margins
    assert stats.signed_rank_p(stats.paired_differences(base + wins, base)) == pytest.approx(2 / 2**16)
    tied_wins = np.where(np.arange(16) < 8, 1.0, 2.0)  # ... by two margins only: still the smallest (scipy: 4.4e-4)
    assert stats.signed_rank_p(stats.paired_differences(base + tied_wins, base)) == pytest.approx(2 / 2**16)
    diverged = np.where(np.arange(16) == 3, np.nan, base + wins)  # a run without a score loses its pair
    assert stats.signed_rank_p(stats.paired_differences(diverged, base)) > 2 / 2**16
    assert stats.smallest_signed_rank_p(8) == pytest.approx(0.0078125)
    assert stats.fewest_one_way_to_reject(8, 0.05 / 224) is None  # 8 seeds can never be marked in such a family
    k = stats.fewest_one_way_to_reject(16, 0.05 / 224)
    best = np.r_[-np.arange(1.0, 16 - k + 1), np.arange(16 - k + 1.0, 17)]
    worse = np.r_[-np.arange(1.0, 16 - k + 2), np.arange(16 - k + 2.0, 17)]
    assert stats.signed_rank_p(best) < 0.05 / 224 <= stats.signed_rank_p(worse)


def test_the_direction_of_a_mark_is_the_signed_rank_statistics_not_the_share_of_seeds():
    """Ten small wins and six large losses: P = 0.62 leans to X, the signed ranks lean against it."""
    d = np.r_[np.full(10, 0.1) + 0.001 * np.arange(10), -np.full(6, 5.0) - 0.01 * np.arange(6)]
    assert stats.paired_probability_of_improvement(d, np.zeros(16)) > 0.5
    assert stats.signed_rank_direction(d) == -1 and stats.signed_rank_direction(-d) == 1
    assert stats.signed_rank_direction(np.zeros(4)) == 0


def test_equivalence_is_two_one_sided_signed_rank_tests_against_the_margin():
    rng = np.random.default_rng(1)
    close = rng.uniform(-0.2, 0.2, size=16)  # every difference well inside a margin of 1
    assert stats.equivalence_p(close, 1.0) == pytest.approx(
        max(_signed_rank_p_by_enumeration(close + 1.0, "greater"), _signed_rank_p_by_enumeration(close - 1.0, "less"))
    )
    assert stats.equivalence_p(close, 1.0) == pytest.approx(1 / 2**16)  # all 16 inside on both sides
    assert stats.equivalence_p(close + 1.0, 1.0) > 0.05  # centred on the margin's edge: not shown equivalent
    assert stats.equivalence_p(rng.normal(scale=3.0, size=16), 1.0) > 0.05  # too spread: undecided
    with pytest.raises(ValueError, match="margin=0 must be > 0"):
        stats.equivalence_p(close, 0)


def test_holm_adjustment_by_its_definition():
    p = [0.01, 0.04, 0.03, 0.005]  # sorted: 0.005 (x4), 0.01 (x3), 0.03 (x2), 0.04 (x1), each at least the last
    assert stats.holm_adjusted(p) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert stats.holm_adjusted([0.5, 0.9]) == pytest.approx([1.0, 1.0])


def _sweep(per_seed: list[float]):
    from vaco_jax import Config, SweepResult

    returns = np.asarray(per_seed, np.float64).reshape(1, -1, 1)  # [lag.k, seed, iteration]: the AUC is the value
    return SweepResult(Config(), {"lag.k": [4]}, list(range(returns.shape[1])), {"episode/return": returns})


def test_a_demos_variants_are_marked_against_the_first_only_where_the_holm_corrected_test_holds():
    from vaco_jax.runs.paired import markable_note, paired_comparisons

    reference = np.arange(1.0, 9.0) * 10
    alternating = reference + np.where(np.arange(8) % 2 == 0, 1.0, -1.0) * np.arange(1, 9)
    results = {"ppo": _sweep(list(reference)), "up": _sweep(list(reference + 5)), "mixed": _sweep(list(alternating))}
    up, mixed = paired_comparisons(results, "ppo")
    assert (up["variant"], up["lag.k"], up["p"], up["wilcoxon_p"]) == ("up", 4, 1.0, 2 / 2**8)
    assert up["ci_low"] == pytest.approx(0.025 ** (1 / 8)) and up["ci_high"] == 1.0  # Clopper-Pearson at 8 of 8
    assert up["holm_p"] == pytest.approx(2 * 2 / 2**8) and up["verdict"] == "ahead"
    assert mixed["verdict"] == "undecided" and mixed["holm_p"] > 0.05
    # 8 seeds, 2 comparisons (first threshold 0.025): 7 one way gives p = 4/256, 6 one way 10/256
    assert markable_note([up, mixed]).startswith("a mark needs at least 7 of 8 seeds going one way")
    four = paired_comparisons({name: _sweep(list(r.run_scores()[1].ravel()[:4])) for name, r in results.items()}, "ppo")
    assert markable_note(four).startswith("4 seeds can mark nothing here: even all 4 one way gives p = 0.125")
    assert markable_note(four).endswith("from --num-seeds 7, all seeds going one way could be marked")  # 2/2^7 < 0.025
    with pytest.raises(ValueError, match="do not pair by seed"):
        paired_comparisons({"ppo": results["ppo"], "short": _sweep([1.0, 2.0])}, "ppo")


def test_with_a_margin_a_comparison_is_equivalent_only_where_the_holm_corrected_equivalence_test_holds():
    from vaco_jax.runs.paired import comparison_cells, markable_note, paired_comparisons

    reference = np.arange(1.0, 9.0) * 10
    alternating = reference + np.where(np.arange(8) % 2 == 0, 1.0, -1.0) * np.arange(1, 9)
    results = {"ppo": _sweep(list(reference)), "up": _sweep(list(reference + 5)), "mixed": _sweep(list(alternating))}
    # margin 10: every difference inside it, both one-sided tests at 1/2^8, Holm over the two equivalence tests
    up, mixed = paired_comparisons(results, "ppo", margin=10.0)
    assert up["equivalence_p"] == 0.5**8 and up["equivalence_holm_p"] == pytest.approx(2 * 0.5**8)
    assert (up["verdict"], mixed["verdict"]) == ("ahead, within the margin", "equivalent")
    # margin 3: +5 on every seed is outside it (the upper one-sided test cannot reject); -8..+7 straddle it
    up, mixed = paired_comparisons(results, "ppo", margin=3.0)
    assert up["equivalence_p"] == 1.0 and (up["verdict"], mixed["verdict"]) == ("ahead", "undecided")
    assert mixed["equivalence_holm_p"] > 0.05
    header, lines = comparison_cells([up, mixed], ["lag.k"])
    assert header[-2:] == ["equivalence Holm p (margin 3)", "verdict"] and lines[0][-2:] == ["1", "ahead"]
    assert "can show no equivalence" not in markable_note([up, mixed])  # 1/2^8 < 0.025
    four = {name: _sweep(list(r.run_scores()[1].ravel()[:4])) for name, r in results.items()}
    assert markable_note(paired_comparisons(four, "ppo", margin=10.0)).endswith(
        "4 seeds can show no equivalence: even every difference inside the margin gives p = 0.0625 "
        "(from --num-seeds 6, it could)"
    )  # 1/2^6 < 0.025 <= 1/2^5
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="give a positive equivalence margin"):
            paired_comparisons(results, "ppo", margin=bad)


def test_the_pooled_paired_interval_covers_the_mean_over_blocks_that_differ():
    """The aggregate over tasks pools every (block, seed) pair into one exact interval: where the blocks' own P
    differ, the pooled count is a sum of binomials, and the interval covers their mean at least 95% of the time
    (computed exactly: the count's law is the convolution of the blocks' binomials)."""

    def coverage(block_p: list[float], seeds: int = 16) -> float:
        law = np.array([1.0])
        for p in block_p:
            law = np.convolve(law, scipy_stats.binom.pmf(np.arange(seeds + 1), seeds, p))
        n, mean = seeds * len(block_p), float(np.mean(block_p))
        covered = 0.0
        for count, chance in enumerate(law):
            wins = np.arange(n) < count  # x ahead on `count` of the n pairs
            low, high = stats.paired_improvement_interval(wins.astype(float), np.zeros(n) + 0.5)
            covered += chance * (low <= mean <= high)
        return covered

    for block_p in ([1.0, 1.0, 1.0, 0.9], [0.0, 0.0, 1.0, 1.0], [0.95] * 6, [0.5, 0.55], [0.2, 0.9, 0.6, 0.99, 0.4]):
        assert coverage(block_p) >= 0.95, block_p
    x, y = np.array([[3.0, 1.0], [2.0, 2.0], [1.0, 5.0]]), np.array([[1.0, 2.0], [2.0, 1.0], [0.0, 4.0]])
    pooled = stats.paired_probability_of_improvement(x.ravel(), y.ravel())  # 4 wins, 1 tie, 1 loss of 6 pairs
    per_block = [stats.paired_probability_of_improvement(x[:, b], y[:, b]) for b in range(2)]
    assert pooled == 4.5 / 6 == np.mean(per_block)


def test_the_hodges_lehmann_interval_is_the_shifts_the_exact_signed_rank_test_keeps():
    """The estimate is the median of the Walsh averages, written out; the interval inverts the exact test: a shift
    just inside it leaves p >= 5%, one just outside gives p < 5% (16 continuous differences, no ties)."""
    rng = np.random.default_rng(3)
    d = rng.normal(2.0, 3.0, size=16)
    estimate, low, high = stats.hodges_lehmann(d)
    walsh = [(d[i] + d[j]) / 2 for i in range(16) for j in range(i, 16)]
    assert estimate == pytest.approx(np.median(walsh)) and low < estimate < high
    step = 1e-6
    assert stats.signed_rank_p(d - (low + step)) >= 0.05 and stats.signed_rank_p(d - (high - step)) >= 0.05
    assert stats.signed_rank_p(d - (low - step)) < 0.05 and stats.signed_rank_p(d - (high + step)) < 0.05
    # at 90% it is the equivalence test's interval: inside the margin exactly where both one-sided tests reject
    _, low90, high90 = stats.hodges_lehmann(d, confidence=0.90)
    for margin in (max(abs(low90), abs(high90)) + step, max(abs(low90), abs(high90)) - step):
        inside = -margin < low90 and high90 < margin
        assert (stats.equivalence_p(d, margin) < 0.05) == inside, margin
    assert stats.hodges_lehmann(d[:5])[1:] == (-np.inf, np.inf)  # 5 pairs: 1/32 > 2.5% on either side
    # the textbook interval (Hollander and Wolfe) on 10 continuous pairs, its critical count enumerated here
    ten = d[:10]
    walsh = np.sort([(ten[i] + ten[j]) / 2 for i in range(10) for j in range(i, 10)])
    t_plus = [
        sum(r for r, s in zip(range(1, 11), signs, strict=True) if s) for signs in itertools.product((0, 1), repeat=10)
    ]
    k = max(c for c in range(1, 56) if np.mean(np.array(t_plus) <= c - 1) <= 0.025)
    assert stats.hodges_lehmann(ten)[1:] == pytest.approx((walsh[k - 1], walsh[55 - k]))
    with pytest.raises(ValueError, match="takes finite differences"):
        stats.hodges_lehmann(np.array([1.0, np.nan, 2.0]))


def test_a_comparison_with_a_diverged_run_has_no_effect_size_in_the_metrics_units():
    from vaco_jax.runs.paired import comparison_cells, paired_comparisons

    reference = list(np.arange(1.0, 9.0) * 10)
    (row,) = paired_comparisons(
        {"ppo": _sweep(reference), "x": _sweep([np.nan, *(np.array(reference[1:]) + 5)])}, "ppo"
    )
    assert np.isnan(row["shift"]) and comparison_cells([row], [])[1][0][2] == "n/a (a run diverged)"
    assert np.isnan(row["iqm_difference"]) and comparison_cells([row], [])[1][0][1] == "n/a (a run diverged)"
    assert row["wilcoxon_p"] < 1  # the test still ranks the diverged run below every other


def test_the_iqm_difference_keeps_each_seeds_pair_and_its_bootstrap_covers_at_16_seeds():
    """IQM(x) - IQM(y) as rliable reports it, with an interval from resampling seeds with their pairs whole: a
    constant shift on widely spread seeds is measured exactly (an unpaired resample would spread it), and on
    simulated normal scores sharing a seed effect the 95% interval covers the true difference about 95% of the time
    (400 draws, each with its own resampling seed)."""
    rng = np.random.default_rng(5)
    y = rng.normal(0.0, 100.0, size=16)
    assert stats.paired_iqm_difference(y + 3.0, y) == pytest.approx((3.0, 3.0, 3.0))
    x = rng.normal(1.0, 1.0, size=16)
    estimate, low, high = stats.paired_iqm_difference(x, y, confidence=0.9)
    assert estimate == pytest.approx(stats.iqm(x) - stats.iqm(y)) and low < estimate < high
    covered = 0
    for draw in range(400):
        seed_effect = rng.normal(0.0, 3.0, size=16)
        x, y = seed_effect + rng.normal(1.0, 1.0, size=16), seed_effect + rng.normal(0.0, 1.0, size=16)
        _, low, high = stats.paired_iqm_difference(x, y, num_resamples=1000, seed=draw)
        covered += low <= 1.0 <= high  # both IQMs are their means: symmetric laws
    assert 0.91 <= covered / 400 <= 0.99, covered
    with pytest.raises(ValueError, match="finite scores on the same seeds"):
        stats.paired_iqm_difference(np.array([1.0, np.nan]), np.array([1.0, 2.0]))
    with pytest.raises(ValueError, match="finite scores on the same seeds"):
        stats.paired_iqm_difference(np.ones(3), np.ones(4))


def test_a_one_sided_comparison_at_a_chosen_alpha_marks_its_own_side_only():
    from vaco_jax.runs.paired import comparison_cells, markable_note, paired_comparisons

    reference = np.arange(1.0, 9.0) * 10
    alternating = reference + np.where(np.arange(8) % 2 == 0, 1.0, -1.0) * np.arange(1, 9)
    results = {"ppo": _sweep(list(reference)), "up": _sweep(list(reference + 5)), "mixed": _sweep(list(alternating))}
    up, mixed = paired_comparisons(results, "ppo", alternative="greater")
    assert up["wilcoxon_p"] == 1 / 2**8 and up["holm_p"] == pytest.approx(2 / 2**8) and up["verdict"] == "ahead"
    # 8 seeds, threshold 0.025 one-sided: 6 ahead gives 5/256, 5 ahead 14/256 (two-sided it takes 7)
    assert markable_note([up, mixed]).startswith(
        "a mark needs at least 6 of 8 seeds ahead (2 comparisons, Holm at 0.05"
    )
    (down,) = paired_comparisons({"ppo": results["ppo"], "up": results["up"]}, "ppo", alternative="less")
    assert down["wilcoxon_p"] == 1.0 and down["verdict"] == "undecided"  # ahead on every seed: not what it asks
    (strict,) = paired_comparisons({"ppo": results["ppo"], "up": results["up"]}, "ppo", alpha=0.001)
    assert strict["holm_p"] == 2 / 2**8 and strict["verdict"] == "undecided"  # 0.0078 > 0.001
    assert strict["ci_low"] == pytest.approx(0.0005 ** (1 / 8))  # Clopper-Pearson at 99.9%, 8 of 8
    four = {name: _sweep(list(r.run_scores()[1].ravel()[:4])) for name, r in results.items()}
    four_rows = paired_comparisons(four, "ppo", alternative="greater")
    assert markable_note(four_rows).endswith("from --num-seeds 6, all seeds ahead could be marked")  # 1/2^6 < 0.025
    # 4 seeds: the IQM difference (the middle two of 4) without a bootstrap interval, which would cover too little
    assert comparison_cells(four_rows, [])[1][0][1] == "30 vs 25: +5 [no interval below 8 seeds]"
    header, lines = comparison_cells([up, mixed], ["lag.k"])
    # IQMs over 8 seeds drop 2 at each end: 35..65 around 50 against 30..60 around 45, every pair 5 apart
    assert header[2] == "AUC IQM vs ppo: difference [90% CI, paired bootstrap]" and header[6] == "Holm p (one-sided)"
    assert lines[0][2] == "50 vs 45: +5 [5, 5]", lines[0]
    # a one-sided test's intervals are two-sided at 1 - 2 alpha: their lower end is the test's own bound, so an
    # "ahead" mark never sits beside an interval holding 0 (the reviewer's case: one-sided p 0.039 on 8 seeds)
    leaning = reference + np.array([-1.0, 2, 3, -4, 5, 6, 7, 8])
    (one_sided,) = paired_comparisons({"ppo": results["ppo"], "x": _sweep(list(leaning))}, "ppo", alternative="greater")
    assert one_sided["verdict"] == "ahead" and one_sided["confidence"] == pytest.approx(0.9)
    assert one_sided["shift_ci_low"] > 0 and one_sided["ci_low"] > 0, one_sided
    # fewer than half the seeds can carry a one-sided mark when they hold the largest differences (21 seeds: 10)
    wide = np.arange(1.0, 22.0)
    lean = {"ppo": _sweep(list(np.zeros(21))), "x": _sweep(list(np.where(wide > 11, wide, -wide)))}
    (ten,) = paired_comparisons(lean, "ppo", alternative="greater")
    assert ten["verdict"] == "ahead" and markable_note([ten]).startswith("a mark needs at least 10 of 21 seeds ahead")
    (labelled,) = paired_comparisons({"ppo": results["ppo"], "up": results["up"]}, "ppo", alpha=0.025)
    assert comparison_cells([labelled], [])[0][4] == "97.5% CI"  # not rounded to 98%
    for bad in ({"alpha": 0.5}, {"alpha": 0.0}, {"alternative": "bigger"}):
        with pytest.raises(ValueError, match="alpha=|alternative="):
            paired_comparisons(results, "ppo", **bad)
