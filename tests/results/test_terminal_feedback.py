"""The terminal's feedback section says each thing once (issue 31): the pure functions of
:mod:`graders.results.terminal`, which group a test function's tracks and share a budget
of lines among the blocks."""

from __future__ import annotations

from graders.grading.checks import hang_message
from graders.grading.feedback_layout import CaseCounts, FailedCase, FeedbackParts, cause_of
from graders.results.terminal import (
    Block,
    by_cause,
    cases_shown,
    group_key,
    grouped_block,
    plain_block,
)

TOLERANCE = "rel 1e-06, abs 1e-09"
NAME = "queueing_latency matches the reference"
VARIABILITY = "    hint: check the variability factor max(0.1, (1+cv^2)/2)"
PERCENTILE = "    hint: each percentile uses its own q (0.95 here)"


def wrong(case_id: str, track: str, *fields: tuple[str, float, str]) -> FailedCase:
    """A failed case of queueing_latency with these (field, value, hint) wrong."""
    texts = [(name, "outside tolerance", f"  {name}: expected 1, got {value} - outside "
                                         f"tolerance\n{hint}") for name, value, hint in fields]
    return FailedCase(f"case {case_id!r}: queueing_latency(<{track}>)", "",
                      tuple(text for _, _, text in texts),
                      cause_of("queueing_latency", "", texts))


def parts(*cases: FailedCase, total: int = 13, notes: tuple[str, ...] = ()) -> FeedbackParts:
    return FeedbackParts(CaseCounts(len(cases), total), TOLERANCE, notes, cases)


def variability(case_id: str, track: str, value: float) -> FailedCase:
    return wrong(case_id, track, ("mean_latency_ms", value, VARIABILITY),
                 ("p95_latency_ms", value, PERCENTILE))


def test_the_same_failure_on_several_tracks_is_shown_once_with_the_tracks_named() -> None:
    tests = [(track, parts(variability("defaults", track, 30.0 + index),
                           variability("load 50%", track, 60.0 + index)))
             for index, track in enumerate(("iphone", "oura_ring", "robotaxi"))]
    block = grouped_block(NAME, tests)
    lines = block.body(cases_shown([block])[0])
    assert lines[0] == (f"{NAME} [iphone, oura_ring, robotaxi]: 6 of 39 cases failed, on 3 "
                        f"tracks together (tolerance {TOLERANCE})")
    assert lines[1] == ("case 'defaults': queueing_latency(<iphone>) on iphone; cases on "
                        "oura_ring, robotaxi fail the same way")
    assert lines[2:] == ["  mean_latency_ms: expected 1, got 30.0 - outside tolerance",
                         VARIABILITY,
                         "  p95_latency_ms: expected 1, got 30.0 - outside tolerance",
                         PERCENTILE,
                         "... and 5 more failed cases, each failing as one shown above"]


def test_each_cause_is_shown_once_with_only_the_tracks_where_it_happens() -> None:
    low_load = wrong("load 5%", "iphone", ("mean_latency_ms", 31.4, VARIABILITY))
    tests = [("cloud_fleet", parts(variability("cv 0.5", "cloud_fleet", 30.3))),
             ("iphone", parts(variability("defaults", "iphone", 38.5), low_load))]
    assert [(track, others) for track, _, others in
            by_cause([(track, case) for track, test in tests for case in test.cases])] == \
        [("cloud_fleet", ["iphone"]), ("iphone", [])]
    block = grouped_block(NAME, tests)
    assert cases_shown([block]) == [2]
    headings = [line for line in block.body(2) if line.startswith("case ")]
    assert headings == ["case 'cv 0.5': queueing_latency(<cloud_fleet>) on cloud_fleet; "
                        "cases on iphone fail the same way",
                        "case 'load 5%': queueing_latency(<iphone>) on iphone"]
    assert block.body(2)[-1] == "... and 1 more failed cases, each failing as one shown above"
    assert block.body(1)[-1] == ("... and 2 more failed cases, another kind of failure among "
                                 "them")


def test_one_track_reads_as_its_own_test_did() -> None:
    block = grouped_block(NAME, [("iphone", parts(variability("defaults", "iphone", 38.5),
                                                  notes=("a note said first",)))])
    assert block.body(1)[:3] == [
        f"{NAME} [iphone]: 1 of 13 cases failed, on this track (tolerance {TOLERANCE})",
        "a note said first", "case 'defaults': queueing_latency(<iphone>)"]
    untracked = grouped_block("serve matches", [(None, parts(variability("n=1", "-", 1.0)))])
    assert untracked.lines[0] == f"serve matches: 1 of 13 cases failed (tolerance {TOLERANCE})"


def test_notes_are_said_once_and_identical_failures_in_one_line() -> None:
    error = FailedCase("case 'n=1 B=2': serve(1, 2)", "raised ZeroDivisionError: x", (),
                       cause_of("serve", "raised ZeroDivisionError: x", ()))
    note = "your batching_tax uses your queueing_latency: fix queueing_latency first"
    block = grouped_block("serve", [("iphone", parts(error, error, notes=(note,))),
                                    ("robotaxi", parts(error, notes=(note,)))])
    assert block.body(0) == [
        f"serve [iphone, robotaxi]: 3 of 26 cases failed, on 2 tracks together (tolerance "
        f"{TOLERANCE})", note,
        "every failed case: raised ZeroDivisionError: x"]


def test_tests_group_by_function_tolerance_and_notes_not_by_track() -> None:
    plain, noted = parts(), parts(notes=("fix erlang_c first",))
    assert group_key("suite.py::test_q[iphone]", plain) == \
        group_key("suite.py::test_q[robotaxi]", plain)
    assert group_key("suite.py::test_q[iphone]", plain) != \
        group_key("suite.py::test_q[robotaxi]", noted)
    assert group_key("suite.py::test_q[iphone]", plain) != \
        group_key("suite.py::test_b[iphone]", plain)


def test_every_block_shows_its_first_case_and_more_only_within_the_budget() -> None:
    def block(cases: int, lines: int) -> Block:
        return Block(None, ["header"], [[f"case {i}"] * lines for i in range(cases)],
                     failed=cases, causes=cases)

    tall = [block(3, 10), block(3, 10)]
    assert cases_shown(tall, budget=5) == [1, 1]  # over the budget: one each still
    assert [b.height(n) for b, n in zip(tall, [2, 3], strict=True)] == [
        1 + 20 + 1 + 1,  # header, two cases, "... and 1 more", blank line
        1 + 30 + 0 + 1]  # every case shown: no count of the rest
    assert cases_shown(tall, budget=35) == [1, 1]
    assert cases_shown(tall, budget=36) == [2, 1]  # in turns: the first block's second case
    assert cases_shown(tall, budget=55) == [3, 2]
    assert cases_shown(tall, budget=1000) == [3, 3]
    assert cases_shown([Block("title", ["a", "b"])]) == [0]


def test_a_failure_without_parts_is_said_as_it_is() -> None:
    assert plain_block("serve makes passes", "failed", "AssertionError: 39").title == \
        "serve makes passes: failed"
    said = plain_block("serve makes passes", "failed", "serve makes passes: 3 of 4\nwhy")
    assert said.title is None
    assert said.body(0) == ["serve makes passes: 3 of 4", "why"]


def test_hangs_are_one_cause_said_once_whether_stopped_or_no_longer_called() -> None:
    stopped, refused = (hang_message("timeout", "timed out after 3 s"),
                        hang_message("abandoned", "cache_capacity() is not called again: it "
                                                  "exceeded the per-call deadline 2 times"))
    assert stopped == "hangs: stopped at the per-call deadline, after 3 s"
    assert refused == "hangs: not called again, after 2 calls stopped at the per-call deadline"
    assert hang_message("raised", "timed out after 3 s") is None  # the code's own error
    assert hang_message("abandoned", "not called: the submission used up the 60 s budget "
                                     "for hanging calls and worker restarts") is None
    cases = [FailedCase(f"case {name!r}: cache_capacity(<iphone>)", message, (),
                        cause_of("cache_capacity", message, ()))
             for name, message in (("a", stopped), ("b", refused), ("c", refused))]
    block = grouped_block("cache_capacity", [("iphone", parts(*cases, total=3))])
    lines = block.body(cases_shown([block])[0])
    assert sum(line.strip().startswith("hangs: ") for line in lines) == 1
    assert lines[1:] == ["case 'a': cache_capacity(<iphone>)", f"  {stopped}",
                         "... and 2 more failed cases, each failing as one shown above"]
