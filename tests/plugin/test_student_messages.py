"""What a student reads under plain ``pytest``: the feedback section, tested with ``pytester``."""

from __future__ import annotations

import json
import re
import shutil
from typing import Any

import pytest
from helpers import CORPUS, REPO

CORRECT = CORPUS / "correct" / "serving.py"
TEMPLATE = REPO / "student_template" / "serving.py"
FUNCTIONS = ("serve", "erlang_c", "queueing_latency", "batching_tax", "transformer_state_gb",
             "cache_capacity", "cold_start_latency", "quantity_to_float",
             "serving_track_profile")


def edited(pytester: pytest.Pytester, old: str, new: str) -> None:
    """The correct submission as ``serving.py``, with one edit."""
    source = CORRECT.read_text(encoding="utf-8")
    assert source.count(old) == 1, old
    (pytester.path / "serving.py").write_text(source.replace(old, new), encoding="utf-8")


def results(pytester: pytest.Pytester) -> Any:
    return json.loads((pytester.path / "results.json").read_text(encoding="utf-8"))


def feedback_section(stdout: str) -> str:
    return stdout.split("serving-lab feedback", 1)[1].split("serving-lab score", 1)[0]


def test_the_untouched_template_says_once_per_function_that_it_is_not_implemented(
        pytester: pytest.Pytester) -> None:
    shutil.copy(TEMPLATE, pytester.path / "serving.py")
    result = pytester.runpytest("--student", "serving.py", "--tb=no")
    lines = [line for line in feedback_section(result.stdout.str()).splitlines()
             if line.strip() and not line.strip().startswith("=")]
    start, *lines = lines  # where to start, said first, then one line per function
    assert start == ("Start with serve: the first function of serving.py still to write, "
                     "it needs none of the others.")
    assert [line.split(" ", 1)[0] for line in lines] == list(FUNCTIONS)
    for line in lines:
        assert " is not implemented yet (NotImplementedError: " in line
        assert line.endswith("until it is written")
    assert "wrong" not in result.stdout.str()
    result.stdout.fnmatch_lines(["queueing_latency is not implemented yet (*); its 1? tests "
                                 "fail until it is written"])


def test_the_start_is_the_first_function_still_to_write_and_said_once(
        pytester: pytest.Pytester) -> None:
    source = CORRECT.read_text(encoding="utf-8")
    for name in ("erlang_c", "cache_capacity"):  # serve written, these two not yet
        head = source.index(f"def {name}(")
        body = source.index("\n", source.index("):\n", head)) + 1
        source = f"{source[:body]}    raise NotImplementedError\n{source[body:]}"
    (pytester.path / "serving.py").write_text(source, encoding="utf-8")
    result = pytester.runpytest("--student", "serving.py", "--tb=no",
                                "-k", "test_serve or erlang or cache_capacity")
    section = feedback_section(result.stdout.str())
    assert section.count("Start with") == 1
    assert "Start with erlang_c: the first function of serving.py still to write" in section
    assert section.index("Start with") < section.index("erlang_c is not implemented yet") \
        < section.index("cache_capacity is not implemented yet")


def test_a_selection_that_leaves_out_the_functions_above_says_no_start(
        pytester: pytest.Pytester) -> None:
    """-k queueing on the template: serve and erlang_c did not run, so nothing shows
    which function comes first; queueing_latency is not where to start."""
    shutil.copy(TEMPLATE, pytester.path / "serving.py")
    result = pytester.runpytest("--student", "serving.py", "--tb=no", "-k", "queueing")
    section = feedback_section(result.stdout.str())
    assert "queueing_latency is not implemented yet" in section
    assert "Start with" not in section


def test_no_start_line_when_a_written_function_fails_first(pytester: pytest.Pytester) -> None:
    edited(pytester, "def erlang_c(arrival_qps, service_ms, replicas):\n",
           "def erlang_c(arrival_qps, service_ms, replicas):\n    raise NotImplementedError\n")
    source = (pytester.path / "serving.py").read_text(encoding="utf-8")
    assert source.count("passes = math.ceil(n_requests / batch_size)") == 1
    (pytester.path / "serving.py").write_text(source.replace(
        "passes = math.ceil(n_requests / batch_size)", "passes = n_requests // batch_size"),
        encoding="utf-8")
    result = pytester.runpytest("--student", "serving.py", "--tb=no", "-k", "serve or erlang")
    section = feedback_section(result.stdout.str())
    assert "erlang_c is not implemented yet" in section
    assert "Start with" not in section  # serve, written but wrong, comes first


def test_a_function_using_an_unwritten_one_is_sent_to_write_it_first(
        pytester: pytest.Pytester) -> None:
    edited(pytester, "def erlang_c(arrival_qps, service_ms, replicas):\n",
           "def erlang_c(arrival_qps, service_ms, replicas):\n    raise NotImplementedError\n")
    result = pytester.runpytest("--student", "serving.py", "--tb=no", "-k", "queueing",
                                "--grader-results", "results.json")
    outputs = [test["output"] for test in results(pytester)["tests"]
               if test["name"].startswith("queueing_latency") and test["status"] == "failed"]
    assert outputs
    for output in outputs:
        assert output.splitlines()[1] == ("your queueing_latency uses your erlang_c, which is "
                                          "not implemented yet: write erlang_c first")
    assert "wrong for these inputs" not in result.stdout.str()


def test_right_answers_held_back_are_not_called_failed_and_the_case_to_fix_is_named(
        pytester: pytest.Pytester) -> None:
    shutil.copy(CORPUS / "kv_state_no_factor_2" / "serving.py", pytester.path / "serving.py")
    result = pytester.runpytest("--student", "serving.py", "--tb=no",
                                "-k", "test_transformer_state_gb")
    result.assert_outcomes(failed=4)
    # their models have no layers (None): the three tracks say the same, said once
    result.stdout.fnmatch_lines([
        "transformer_state_gb matches * [[]iphone, oura_ring, robotaxi[]]: 30 of 30 cases "
        "right but not counted yet, on 3 tracks together (tolerance *)",
        "transformer_state_gb must first be right on a case that needs a real "
        "computation, such as case '256 tokens at 1 bytes' [[]cloud_fleet[]]: value "
        "expected 0.33554, got 0.16777; until then *"])
    feedback = result.stdout.str().split("serving-lab feedback", 1)[1].split(
        "serving-lab score", 1)[0]  # pytest's own short summary repeats each test's reason
    assert feedback.count("transformer_state_gb must first be right") == 1
    result.stdout.fnmatch_lines(["transformer_state_gb matches * [[]cloud_fleet[]]: 10 of 10 "
                                 "cases failed, on this track (tolerance *)"])
    result.stdout.no_fnmatch_line("*iphone*: * cases failed*")


def printing(pytester: pytest.Pytester) -> None:
    """The correct submission with p99 at q = 0.95 (a bug) and a debugging print."""
    edited(pytester, "def queueing_latency(*, arrival_qps, service_ms, replicas=1, "
                     "service_cv=1.0, slo_ms=100.0):\n",
           "def queueing_latency(*, arrival_qps, service_ms, replicas=1, service_cv=1.0, "
           "slo_ms=100.0):\n    print('debug: arrival', arrival_qps)\n")
    source = (pytester.path / "serving.py").read_text(encoding="utf-8")
    assert source.count("p99 = tail(0.99)") == 1
    (pytester.path / "serving.py").write_text(
        source.replace("p99 = tail(0.99)", "p99 = tail(0.95)"), encoding="utf-8")


def test_a_failed_test_shows_what_the_code_printed_during_it(
        pytester: pytest.Pytester) -> None:
    printing(pytester)
    result = pytester.runpytest("--student", "serving.py", "--tb=no",
                                "-k", "test_queueing_latency or test_serve")
    result.assert_outcomes(passed=1, failed=5)  # 4 tracks and the hidden large fleet
    result.stdout.fnmatch_lines([  # the four tracks' failures, in one block
        "queueing_latency matches * [[]cloud_fleet, iphone, oura_ring, robotaxi[]]: * cases "
        "failed, on 4 tracks together *",
        "*- what serving.py printed while the queueing_latency tests ran -*",
        "| debug: arrival 8.0"])  # iphone's default load, asked with the first test's cases
    section = feedback_section(result.stdout.str())
    assert section.count("what serving.py printed") == 1  # once: not for serve (passed)
    assert section.count("| debug: arrival 8.0\n") == 1


def test_under_s_the_code_s_prints_show_live_and_not_again(pytester: pytest.Pytester) -> None:
    printing(pytester)
    result = pytester.runpytest("--student", "serving.py", "--tb=no", "-s",
                                "-k", "test_queueing_latency")
    before, after = result.stdout.str().split("serving-lab feedback", 1)
    assert "debug: arrival 16.0" in before
    assert "what serving.py printed" not in after


def test_results_say_how_much_was_printed_in_kilobytes(pytester: pytest.Pytester) -> None:
    source = CORRECT.read_text(encoding="utf-8")
    (pytester.path / "serving.py").write_text(source + "\nprint('x' * 4189)\n",
                                              encoding="utf-8")
    pytester.runpytest("--student", "serving.py", "-k", "test_serve",
                       "--grader-results", "results.json")
    assert "Your code printed 4.19 kB; they follow." in results(pytester)["output"]


def test_importing_an_installed_package_says_only_the_standard_library_and_pint_are_there(
        pytester: pytest.Pytester) -> None:
    edited(pytester, "import math\n", "import math\nimport numpy as np\n")
    result = pytester.runpytest("--student", "serving.py", "--tb=no", "-k", "test_serve")
    result.stdout.fnmatch_lines([
        "serving.py could not be imported: ModuleNotFoundError: No module named 'numpy' "
        "(serving.py line *); serving.py may import only Python's standard library and "
        "pint: numpy is not available to it, even where it is installed"])


def test_a_syntax_error_shows_its_source_line_and_a_caret(pytester: pytest.Pytester) -> None:
    source = CORRECT.read_text(encoding="utf-8") + "\n\ndef broken(:\n    pass\n"
    (pytester.path / "serving.py").write_text(source, encoding="utf-8")
    result = pytester.runpytest("--student", "serving.py", "--tb=no", "-k", "test_serve")
    result.stdout.fnmatch_lines(["serving.py could not be imported: SyntaxError: *",
                                 "    def broken(:",
                                 "    " + " " * len("def broken(") + "^"])  # under the ':'


def test_invariant_names_are_whole_and_the_page_cuts_nothing(
        pytester: pytest.Pytester) -> None:
    shutil.copy(CORPUS / "p99_at_q095" / "serving.py", pytester.path / "serving.py")
    pytester.runpytest("--student", "serving.py", "--tb=no", "-k",
                       "test_queueing_latency or test_throughput_never_falls_with_batch_size",
                       "--grader-results", "results.json", "--grader-html", "page.html")
    tests = results(pytester)["tests"]
    assert "Throughput never falls as the batch grows while overhead > 0, and rises when " \
           "it saves passes" in [test["name"] for test in tests]
    iphone = next(test for test in tests if test["name"].endswith("[iphone]"))
    assert "... and 7 more failed cases" in iphone["output"]  # results.json is capped
    page = (pytester.path / "page.html").read_text(encoding="utf-8")
    assert "more failed cases" not in page
    assert "[cut: " not in page
    assert page.count("case &#x27;load 50% of capacity&#x27;") >= 4  # every track's


def test_the_terminal_and_the_page_say_whose_cases_a_count_counts(
        pytester: pytest.Pytester) -> None:
    printing(pytester)
    result = pytester.runpytest("--student", "serving.py", "--tb=no", "-k",
                                "test_queueing_latency", "--grader-results", "results.json")
    outputs = {test["name"]: test["output"] for test in results(pytester)["tests"]
               if test["name"].startswith("queueing_latency matches")}
    per_track = [re.match(r".*\[(\w+)\]: (\d+) of (\d+) cases failed, on this track \(",
                          output) for output in outputs.values()]
    assert len(per_track) == 4, outputs  # the page shows these
    assert all(per_track), outputs
    failed = sum(int(match[2]) for match in per_track if match)
    total = sum(int(match[3]) for match in per_track if match)
    result.stdout.fnmatch_lines([f"queueing_latency matches * [[]cloud_fleet, iphone, "
                                 f"oura_ring, robotaxi[]]: {failed} of {total} cases failed, "
                                 "on 4 tracks together (tolerance *)"])


def test_no_output_names_the_graders_own_exception_classes(pytester: pytest.Pytester) -> None:
    """An invariant whose calls all failed says why, not which class of the grader's
    carried the reason (results.json's outputs are what the page shows)."""
    shutil.copy(TEMPLATE, pytester.path / "serving.py")
    pytester.runpytest("--student", "serving.py", "--tb=no", "--grader-results",
                       "results.json")
    outputs = [test["output"] for test in results(pytester)["tests"]]
    assert any("answered none of its cases" in output for output in outputs)
    assert not [output for output in outputs if "graders.grading." in output]
