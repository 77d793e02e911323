"""A submission with each mistake of the grader's catalogue: a corpus folder, or a mutant of
``corpus/correct/serving.py`` made by one text edit. Shared by the tests that grade them
(their hints, and their names on the class page), as ``helpers.py`` is: not a test module.
"""

from __future__ import annotations

from pathlib import Path

from helpers import CORPUS

#: The exact M/M/c quantile of the whole latency, written with care (no exponential
#: overflows near saturation, as the catalogue's own sojourn_quantile): the mistake alone.
EXACT_TAIL = '''    def tail(q):
        mu_ms, r_ms = 1 / service_ms, rate / 1000

        def survival(t):
            served, waited = math.exp(-mu_ms * t), math.exp(-r_ms * t)
            if abs(r_ms - mu_ms) * t < 1e-12:
                return served + wait * mu_ms * t * served
            return served + wait * mu_ms * (served - waited) / (r_ms - mu_ms)

        low, high = 0.0, 1.0
        while survival(high) > 1 - q:
            high *= 2
        for _ in range(200):
            middle = (low + high) / 2
            if survival(middle) > 1 - q:
                low = middle
            else:
                high = middle
        return (low + high) / 2
'''
LAB_TAIL = '''    def tail(q):
        if wait <= 0 or q <= 1 - wait:
            return service_ms
        return service_ms + v * (-math.log((1 - q) / wait) / rate * 1000)
'''
#: The correct solution's percentiles, from the lab's tail to the result that holds them.
PERCENTILES = LAB_TAIL + """
    p99 = tail(0.99)
    return QueueingResult(
        arrival_qps, service_ms, c, utilization, True,
        service_ms + wait / rate * 1000 * v,
        tail(0.50), tail(0.95), p99, tail(0.999),
"""


def exact_only(percentile: str) -> tuple[str, str]:
    """An edit that takes one percentile (``tail(0.95)``) exactly, the others by the lab's
    formula: the mistake in that field alone."""
    exact = EXACT_TAIL.replace("def tail(q):", "def exact(q):")
    return PERCENTILES, LAB_TAIL + exact + PERCENTILES[len(LAB_TAIL):].replace(
        f"{percentile},", f"{percentile.replace('tail', 'exact')},")


#: A submission with each catalogued mistake: a corpus folder, or one text edit (old, new)
#: of the correct solution. Entries that share a submission share their hint.
MUTANTS: dict[str, str | tuple[str, str]] = {
    "natural-log": "batching_natural_log",
    "formation-no-half": "formation_delay_no_half",
    "gib-for-gb": "gib_for_gb",
    "battery-zero": "battery_zero_not_none",
    "kv-no-factor-2": "kv_state_no_factor_2",
    "kv-no-factor-2-in-cache": "kv_state_no_factor_2",
    "mb-over-1000": "mb_over_1000",
    "max-concurrent-ceil": "cache_ceil",
    "no-variability-factor": ("return service_ms + v * (-math.log",
                              "return service_ms + (-math.log"),
    "no-variability-factor-p999": ("return service_ms + v * (-math.log",
                                   "return service_ms + (-math.log"),
    # (1 + cv) / 2 in the percentiles alone (the corpus's variability_linear_cv has it in
    # the mean too, and is named by variability-linear-cv-mean)
    "variability-linear-cv": ("return service_ms + v * (-math.log",
                              "return service_ms + max(0.1, (1 + service_cv) / 2) * (-math.log"),
    "variability-linear-cv-p999": ("return service_ms + v * (-math.log",
                                   "return service_ms + max(0.1, (1 + service_cv) / 2) * "
                                   "(-math.log"),
    "erlang-c-textbook": "erlang_c_textbook",
    "erlang-c-overload-zero": "erlang_c_overload_zero",
    "warm-pool-ignored": "warm_pool_ignored",
    "warm-pool-not-applied": ("exposed = profile.service_ms + cold * (1 - protected)",
                              "exposed = profile.service_ms + cold"),
    "passes-floor": "passes_floor",
    "quantity-zero-on-failure": "quantity_zero_on_failure",
    "passes-floor-values": "passes_floor",
    "variability-linear-cv-mean": "variability_linear_cv",
    "no-variability-factor-mean": ("v = max(0.1, (1 + service_cv**2) / 2)", "v = 1.0"),
    "p99-at-q095": "p99_at_q095",
    "p99-at-q0999": ("p99 = tail(0.99)", "p99 = tail(0.999)"),
    "slo-ok-from-mean": "slo_ok_uses_mean",
    "unstable-only-above-one": "unstable_only_above_one",
    "cold-start-max-bandwidth": "cold_start_max_bandwidth",
    "batched-service-compounding": (
        "batched = service_ms * (1 + 0.08 * math.log2(b)) / max(1.0, efficiency_gain)",
        "batched = b * service_ms / max(1.0, efficiency_gain)"),
    # every percentile exact: the others then read as following from p99
    "exact-tail-p99": (LAB_TAIL, EXACT_TAIL),
    "exact-tail-p95": exact_only("tail(0.95)"),
    "exact-tail-p999": exact_only("tail(0.999)"),
    "exact-tail-p50": exact_only("tail(0.50)"),
}
#: Catalogued mistakes that only ever show as a knock-on of another function's.
KNOCK_ON_ONLY = {"kv-no-factor-2-in-cache": "transformer_state_gb"}


def submission_name(source: str | tuple[str, str]) -> str:
    if isinstance(source, str):
        return source
    ids = sorted(i for i, s in MUTANTS.items() if s == source)
    return f"mutant-{ids[0]}"


def write_mutant(folder: Path, edit: tuple[str, str]) -> Path:
    text = (CORPUS / "correct" / "serving.py").read_text(encoding="utf-8")
    old, new = edit
    assert text.count(old) == 1, old
    path = folder / "serving.py"
    path.write_text(text.replace(old, new), encoding="utf-8")
    return path
