"""Mistake clusters from results.json documents: signatures, counts, labels, privacy."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import pytest

from graders.grading.mistakes import load_catalogue
from graders.regrade.classpage import build_class_page
from graders.regrade.classview import (
    anonymous_label,
    cluster_rows,
    label_key,
    student_rows,
    with_classes,
)
from graders.regrade.clusters import cluster, signature
from graders.regrade.report import GradedSubmission, class_report, markdown
from graders.regrade.roster import Submitter

BATCHES = (2, 4, 8, 32)


def batched_ms(batch: int, log: Any = math.log2) -> float:
    return float(25.0 * (1 + 0.08 * log(batch)) / 6.4)


def batching_test(track: str, log: Any, noise: float = 0.0) -> dict[str, Any]:
    """A failed batching_tax test as the grader writes it, its answers computed with
    ``log`` (times ``1 + noise``)."""
    kept = [{"case": f"batch {b}", "inputs": {"batch_size": b, "service_ms": 25.0},
             "fields": {"batched_service_ms": [batched_ms(b),
                                               batched_ms(b, log) * (1 + noise)]}}
            for b in BATCHES]
    return {"name": f"batching_tax matches [{track}]", "score": 0.5, "max_score": 2.5,
            "status": "failed", "tags": ["batching_tax", track], "visibility": "visible",
            "output": "batching_tax: 4 of 9 cases failed\ncase 'batch 2': ...\n"
                      "  batched_service_ms: expected 4.2, got 4.1\n"
                      "    hint: 8 % more per doubling of the batch",
            "extra_data": {"nodeid": f"suite::test_batching_tax[{track}]",
                           "failed_cases": kept}}


def passed(function: str, track: str = "") -> dict[str, Any]:
    return {"name": f"{function} [{track}]", "score": 1.0, "max_score": 1.0,
            "status": "passed", "tags": [function, *([track] if track else [])],
            "extra_data": {"nodeid": f"suite::test_{function}[{track}]"}}


def hidden_error(error: str) -> dict[str, Any]:
    return {"name": "erlang_c stays accurate on large fleets", "score": 0.0,
            "max_score": 1.0, "status": "failed", "tags": ["erlang_c"],
            "visibility": "after_due_date",
            "output": "erlang_c: 15 of 15 cases failed; the cases of this test are hidden.",
            "extra_data": {"nodeid": "suite::test_erlang_c_large_fleet",
                           "failed_cases": [{"case": "hidden", "error": error}]}}


def submission(ident: str, *tests: dict[str, Any]) -> GradedSubmission:
    score = sum(test["score"] for test in tests)
    return GradedSubmission(ident, (Submitter(ident.title()),), "graded", "",
                            {"score": score, "tests": list(tests),
                             "extra_data": {"max_score": float(len(tests) * 2.5)}})


def natural(ident: str, noise: float = 0.0) -> GradedSubmission:
    return submission(ident, batching_test("iphone", math.log, noise),
                      batching_test("robotaxi", math.log, noise), passed("erlang_c"))


CLASS = [
    natural("ann"), natural("ben", 3e-15), natural("cat", -2e-16),
    submission("dan", batching_test("iphone", math.log10), passed("batching_tax", "robotaxi"),
               passed("erlang_c")),
    submission("eve", passed("batching_tax", "iphone"), passed("batching_tax", "robotaxi"),
               hidden_error("OverflowError")),
    submission("fay", passed("batching_tax", "iphone"), passed("batching_tax", "robotaxi"),
               passed("erlang_c")),
    GradedSubmission("gus", (), "grader_failed", "the grader failed", {}),
]


def test_equal_mistakes_form_one_cluster_whatever_the_floating_point_noise() -> None:
    found = cluster(CLASS, load_catalogue())
    assert [(c.function, c.members, c.mistake) for c in found] == [
        ("batching_tax", ["ann", "ben", "cat"], "natural-log"),
        ("batching_tax", ["dan"], ""),
        ("erlang_c", ["eve"], "erlang-c-textbook"),
    ]
    first = found[0]
    assert first.tracks == ["iphone", "robotaxi"]
    assert first.hint == "8 % more per doubling of the batch"
    assert first.first_case.startswith("batching_tax matches [iphone], case 'batch 2': "
                                       "batched_service_ms expected 4.")
    assert found[2].first_case.endswith("case 'hidden': raised OverflowError")


def test_the_order_of_the_class_does_not_change_the_clusters() -> None:
    forward = {(c.function, tuple(sorted(c.members))) for c in cluster(CLASS)}
    backward = {(c.function, tuple(sorted(c.members))) for c in cluster(CLASS[::-1])}
    assert forward == backward


def test_a_different_ratio_or_a_different_failing_test_is_another_signature() -> None:
    shape, ratios = signature(natural("ann").tests)
    other_shape, other_ratios = signature(natural("ann", 1e-3).tests)
    assert shape == other_shape
    assert ratios != pytest.approx(other_ratios, rel=1e-4)
    assert len(cluster([natural("ann"), natural("bob", 1e-3)])) == 2
    one_track = submission("cy", batching_test("iphone", math.log), passed("erlang_c"))
    assert signature(one_track.tests)[0] != shape


def test_a_cluster_is_labelled_only_when_every_kept_case_agrees_with_the_entry() -> None:
    mixed = batching_test("iphone", math.log)
    mixed["extra_data"]["failed_cases"][0]["fields"]["batched_service_ms"][1] *= 1.01
    [found] = cluster([submission("ida", mixed)], load_catalogue())
    assert (found.mistake, found.label) == ("", "")


def test_a_function_not_implemented_is_labelled_so() -> None:
    test = hidden_error("NotImplementedError")
    [found] = cluster([submission("jo", test)], load_catalogue())
    assert found.label == "not implemented yet"


def test_report_json_holds_the_clusters_without_names_unless_asked(tmp_path: Path) -> None:
    key = label_key(tmp_path)
    assert label_key(tmp_path) == key  # kept: labels are stable from one run to the next
    assert (tmp_path / ".anonymous-labels.key").stat().st_mode & 0o077 == 0
    found = cluster(CLASS, load_catalogue())
    anonymous = cluster_rows(found, 6, key=key, names=False, pages={"ann"})
    assert anonymous[0] == {
        "function": "batching_tax", "submissions": 3, "share": 0.5,
        "tracks": ["iphone", "robotaxi"],
        "tests": ["batching_tax matches [iphone]", "batching_tax matches [robotaxi]"],
        "first_case": found[0].first_case, "hint": "8 % more per doubling of the batch",
        "mistake": "natural-log", "label": found[0].label, "mistakes": ["natural-log"],
        "labels": [found[0].label], "breaks": [],
        "representative": anonymous_label(key, "ann")}
    text = json.dumps(anonymous)
    assert all(f'"{name}"' not in text for name in ("ann", "ben", "cat", "dan", "eve"))
    named = cluster_rows(found, 6, key=key, names=True, pages={"ann"})
    assert named[0]["members"] == ["ann", "ben", "cat"]
    assert named[0]["representative_page"] == "submissions/ann/feedback.html"


def test_the_class_page_shows_names_only_with_names(tmp_path: Path) -> None:
    key = label_key(tmp_path)
    found = cluster(CLASS, load_catalogue())
    report = class_report(CLASS)
    anonymous = build_class_page(
        with_classes(report, cluster_rows(found, 6, key=key, names=False, pages=set()), None),
        names=False)
    for name in ("ann", "ben", "Ann", "gus"):
        assert name not in anonymous
    assert anonymous_label(key, "ann") in anonymous
    assert "<script" not in anonymous
    assert "http://" not in anonymous.replace(
        "http://www.w3.org/2000/svg", "")
    assert 'data-kind="grader_failed" data-count="1"' in anonymous
    students = [{"submission": "ann", "names": "Ann", "status": "graded", "score": 5.0,
                 "page": "submissions/ann/feedback.html"}]
    named = build_class_page(
        with_classes(report, cluster_rows(found, 6, key=key, names=True, pages={"ann"}),
                     students), names=True)
    assert '<a href="submissions/ann/feedback.html">ann (Ann)</a>' in named
    assert '<a href="submissions/ann/feedback.html">feedback</a>' in named


def test_with_names_the_class_page_names_every_submission_it_shows_and_its_lateness(
        tmp_path: Path) -> None:
    key = label_key(tmp_path)
    due = "2024-03-01 23:59:00 -08:00"
    times = {"ann": "2024-03-01 20:00:00 -08:00", "ben": "2024-03-03 09:00:00 -08:00"}
    entries = [dataclasses.replace(entry, created_at=times.get(entry.id, ""),
                                   due=due if entry.id in times else "")
               for entry in CLASS]
    found = cluster(entries, load_catalogue())
    report = with_classes(class_report(entries),
                          cluster_rows(found, 6, key=key, names=True, pages=set()),
                          student_rows(entries, set()))
    report["changes"] = {"compared_with": {"folder": "out", "finished_at": "then"},
                         "settings": [], "moves": [
        {"submission": "dan", "status_before": "graded", "status_after": "graded",
         "score_before": 1.0, "score_after": 2.0, "change": 1.0, "tests_flipped": [],
         "tests_points": [], "why": []}]}
    page = build_class_page(report, names=True)
    assert "Representative: ann (Ann)" in page  # the clusters, as grades.csv names them
    assert "ann (Ann), ben (Ben), cat (Cat)" in page
    assert "<td>dan (Dan)</td>" in page  # what changed, as changes.csv names them
    late = [cell.split("<")[0] for cell in page.split('<td class="late">')[1:]]
    assert late == [
        "on time", "2 days late", *["\u2013"] * 5]  # ann, ben, then times unknown
    assert "<th>late</th>" in page


def test_submission_text_on_the_class_page_is_inert(tmp_path: Path) -> None:
    hostile = natural("<script>alert(1)</script>")
    found = cluster([hostile])
    page = build_class_page(with_classes(
        class_report([hostile]), cluster_rows(found, 1, key=b"k", names=True, pages=set()),
        [{"submission": hostile.id, "names": "<b>x</b>", "status": "graded", "score": 1.0}]),
        names=True)
    assert "<script>" not in page
    assert "<b>x</b>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_the_heat_map_and_the_distribution_keep_ungraded_submissions_apart() -> None:
    report = class_report(CLASS)
    assert report["histogram"]["apart"] == {"grader_failed": 1}
    assert sum(report["histogram"]["counts"]) == 6
    rates = report["heatmap"]["pass_rate"]
    assert rates["batching_tax"]["iphone"] == pytest.approx(2 / 6)
    assert rates["batching_tax"]["robotaxi"] == pytest.approx(3 / 6)
    assert rates["erlang_c"][""] == pytest.approx(5 / 6)
    assert report["heatmap"]["tracks"] == ["", "iphone", "robotaxi"]
    text = markdown(report)
    assert "| not graded: grader failed | 1 |" in text


def test_report_md_escapes_only_what_markdown_needs() -> None:
    entry = submission("kim", {**passed("queueing_latency"), "status": "failed",
                               "score": 0.0,
                               "output": "t: 1 of 1 cases failed\ncase 'a': f()\n"
                                         "  total_p99_ms: expected 2.0, got 3.0 - outside "
                                         "tolerance\n    hint: p99 <b>[x](y)</b> *z*"})
    text = markdown(class_report([entry]))
    assert "| 1 | total_p99_ms: expected #, got # - outside tolerance | " \
           "p99 \\<b\\>\\[x\\](y)\\</b\\> \\*z\\* |" in text


def test_a_finite_answer_where_the_reference_is_infinite_is_compared_with_a_tolerance(
        ) -> None:
    def unstable(ident: str, noise: float) -> GradedSubmission:
        test = batching_test("iphone", math.log)
        test["extra_data"]["failed_cases"] = [
            {"case": "load 100%", "fields": {"p99_latency_ms": ["inf", 25.0 * (1 + noise)],
                                             "stable": [False, True]}}]
        return submission(ident, test)

    found = cluster([unstable("a", 0.0), unstable("b", 1e-13), unstable("c", 0.5)])
    assert sorted(c.members for c in found) == [["a", "b"], ["c"]]


def test_report_md_lists_the_clusters_largest_first() -> None:
    found = cluster(CLASS, load_catalogue())
    report = with_classes(class_report(CLASS),
                          cluster_rows(found, 6, key=b"k", names=False, pages=set()), None)
    text = markdown(report)
    assert "## Mistake clusters" in text
    assert f"| 3 | 50% | batching_tax | {found[0].label} | 8 % more per doubling of the " \
           f"batch | {anonymous_label(b'k', 'ann')} |" in text


def test_a_grader_failure_has_no_score_on_the_class_page() -> None:
    rows = student_rows(CLASS, set())
    assert rows[-1] == {"submission": "gus", "names": "", "status": "grader_failed",
                        "score": None, "late": "", "days_late": ""}
    page = build_class_page(with_classes(class_report(CLASS), [], rows), names=True)
    assert "<td>gus</td><td></td><td>grader_failed</td><td>no score</td>" in page


def test_a_knock_on_cluster_names_the_function_to_fix_first() -> None:
    test = batching_test("iphone", math.log10)
    test["output"] += ("\nyour batching_tax uses your queueing_latency, which is wrong for "
                       "these inputs: fix queueing_latency first")
    [found] = cluster([submission("kay", test)], load_catalogue())
    assert (found.mistake, found.label) == (
        "", "knock-on of a wrong queueing_latency: fix it first")
    queueing = hidden_error("OverflowError")
    queueing["tags"] = ["queueing_latency"]
    [found] = cluster([submission("lou", queueing)], load_catalogue())
    assert found.label == ("knock-on of textbook Erlang C (factorials and a ** c), which "
                           "overflows on large fleets (in erlang_c)")


def found_test(track: str, factor: float, label: str | None) -> dict[str, Any]:
    """A failed batching_tax test whose batched service is ``factor`` times the lab's, each
    kept case with the diagnosis's finding (``label``) or none."""
    test = batching_test(track, math.log2)
    for case in test["extra_data"]["failed_cases"]:
        want = case["fields"]["batched_service_ms"][0]
        case["fields"]["batched_service_ms"] = [want, want * factor]
        if label is not None:
            case["findings"] = {"batched_service_ms": label}
    return test


UNITS = "your batched_service_ms values are 1000× too small: as if in seconds"


def test_a_cause_the_catalogue_does_not_name_is_named_by_the_diagnosis_s_finding() -> None:
    # two submissions with one uncatalogued bug, their wrong values in other ratios (the
    # signature alone would split them), and one the diagnosis found nothing for
    found = [submission(name, found_test("iphone", factor, UNITS), passed("erlang_c"))
             for name, factor in (("ann", 0.001), ("ben", 0.001 * (1 + 1e-3)))]
    unnamed = submission("cat", found_test("iphone", 1.37, None), passed("erlang_c"))
    clusters = cluster([*found, unnamed], load_catalogue())
    by_members = {tuple(c.members): c for c in clusters}
    assert by_members[("ann", "ben")].label == UNITS
    assert by_members[("cat",)].label == ""


def unimportable(ident: str, error: str) -> GradedSubmission:
    line = f"serving.py could not be imported: {error} (serving.py line 1)"
    tests = [{"name": f"{function} [iphone]", "score": 0.0, "max_score": 2.5,
              "status": "failed", "tags": [function, "iphone"], "visibility": "visible",
              "output": f"{function}: 9 of 9 cases failed\nevery failed case: {line}; "
                        "serving.py may import only Python's standard library and pint",
              "extra_data": {"nodeid": f"suite::test_{function}[iphone]",
                             "failed_cases": [{"case": "c", "inputs": {},
                                               "error": "unimportable"}]}}
             for function in ("serve", "erlang_c", "queueing_latency", "batching_tax")]
    return submission(ident, *tests)


def test_a_submission_that_does_not_import_is_one_cluster_per_error() -> None:
    clusters = cluster([unimportable("ann", "ModuleNotFoundError: No module named 'numpy'"),
                        unimportable("ben", "ModuleNotFoundError: No module named 'numpy'"),
                        unimportable("cat", "SyntaxError: invalid syntax")],
                       load_catalogue())
    assert sorted((c.members, c.label) for c in clusters) == [
        (["ann", "ben"], "does not import: serving.py could not be imported: "
                         "ModuleNotFoundError: No module named 'numpy' (serving.py line 1)"),
        (["cat"], "does not import: serving.py could not be imported: SyntaxError: invalid "
                  "syntax (serving.py line 1)")]


def test_the_class_page_shows_the_import_and_finding_clusters(tmp_path: Path) -> None:
    entries = [unimportable("ann", "SyntaxError: invalid syntax"),
               submission("ben", found_test("iphone", 0.001, UNITS), passed("erlang_c"))]
    rows = cluster_rows(cluster(entries, load_catalogue()), 6, key=label_key(tmp_path),
                        names=True, pages=set())
    page = build_class_page(with_classes(class_report(entries), rows, None), names=True)
    assert "does not import: serving.py could not be imported: SyntaxError" in page
    assert "1000× too small: as if in seconds" in page
