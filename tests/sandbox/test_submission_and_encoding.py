"""Taking a submission (only serving.py, as a regular file) and encoding call arguments."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from graders.errors import GraderError, SubmissionError
from graders.plugin.submission import MAX_SUBMISSION_BYTES, locate_submission, read_submission
from graders.sandbox.submission import ONLY_SERVING_PY, SUBMISSION_NAME, import_error_message
from graders.sandbox.wire import encode_argument
from reference.units import ureg

# --- import_error_message: only serving.py is graded -------------------------------------


@pytest.mark.parametrize("module", ["my_helpers", "my_utils.sub", "no_such_package_anywhere"])
def test_a_missing_module_outside_the_standard_library_says_only_serving_py_is_graded(
        module: str) -> None:
    error = f"serving.py could not be imported: ModuleNotFoundError: No module named " \
            f"{module!r} (serving.py line 3)"
    assert import_error_message(error) == f"{error}; {ONLY_SERVING_PY}"
    assert "\n" not in import_error_message(error)


@pytest.mark.parametrize("error", [
    "serving.py could not be imported: ModuleNotFoundError: No module named 'tkinter'",
    # an installed package: the worker's own message says only the standard library and
    # pint are there, and it is no module of the student's
    "serving.py could not be imported: ModuleNotFoundError: No module named 'numpy'",
    "serving.py could not be imported: SyntaxError: invalid syntax (serving.py, line 1)",
    "serving.py could not be imported: ImportError: cannot import name 'x' from 'math'",
])
def test_other_import_errors_are_left_as_they_are(error: str) -> None:
    assert import_error_message(error) == error


# --- locate_submission --------------------------------------------------------------------


def test_a_serving_py_file_is_located_as_itself(tmp_path: Path) -> None:
    serving = tmp_path / "serving.py"
    serving.write_text("x = 1\n", encoding="utf-8")
    assert locate_submission(serving) == serving
    assert locate_submission(str(serving)) == serving


def test_a_folder_is_located_as_the_serving_py_inside_it(tmp_path: Path) -> None:
    (tmp_path / "serving.py").write_text("x = 1\n", encoding="utf-8")
    (tmp_path / "other.py").write_text("y = 2\n", encoding="utf-8")
    assert SUBMISSION_NAME == "serving.py"
    assert locate_submission(tmp_path) == tmp_path / "serving.py"


def test_a_missing_path_is_a_submission_error_that_names_it(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "serving.py"
    with pytest.raises(SubmissionError, match="give a serving.py or a folder holding one") as info:
        locate_submission(missing)
    assert repr(str(missing)) in str(info.value)
    assert isinstance(info.value, GraderError)
    assert isinstance(info.value, ValueError)


def test_a_folder_without_serving_py_is_a_submission_error_that_names_the_folder(
        tmp_path: Path) -> None:
    (tmp_path / "Serving.py").write_text("x = 1\n", encoding="utf-8")
    with pytest.raises(SubmissionError, match="not found") as info:
        locate_submission(tmp_path)
    assert repr(str(tmp_path)) in str(info.value)


def test_a_serving_py_alone_in_a_subfolder_is_located(tmp_path: Path) -> None:
    (tmp_path / "lab" / "src").mkdir(parents=True)
    (tmp_path / "lab" / "src" / "serving.py").write_text("x = 1\n", encoding="utf-8")
    (tmp_path / "__MACOSX" / "lab").mkdir(parents=True)  # zip residue is never searched
    (tmp_path / "__MACOSX" / "lab" / "serving.py").write_text("junk\n", encoding="utf-8")
    assert locate_submission(tmp_path) == tmp_path / "lab" / "src" / "serving.py"


def test_the_top_level_serving_py_wins_over_nested_copies(tmp_path: Path) -> None:
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "serving.py").write_text("x = 0\n", encoding="utf-8")
    (tmp_path / "serving.py").write_text("x = 1\n", encoding="utf-8")
    assert locate_submission(tmp_path) == tmp_path / "serving.py"


def test_two_nested_serving_py_are_ambiguous(tmp_path: Path) -> None:
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "serving.py").write_text("x = 1\n", encoding="utf-8")
    with pytest.raises(SubmissionError, match=r"2 serving.py files in submission folder .* "
                                              r"\(a/serving.py, b/serving.py\); keep one"):
        locate_submission(tmp_path)


@pytest.mark.parametrize("name", ["serving (1).py", "serving_final.py"])
def test_one_py_file_named_serving_something_is_taken_for_serving_py(tmp_path: Path,
                                                                      name: str) -> None:
    (tmp_path / "lab").mkdir()
    (tmp_path / "lab" / name).write_text("x = 1\n", encoding="utf-8")
    (tmp_path / "notes.py").write_text("x = 2\n", encoding="utf-8")
    assert locate_submission(tmp_path) == tmp_path / "lab" / name


def test_two_near_misses_are_named_and_none_is_taken(tmp_path: Path) -> None:
    for name in ("serving (1).py", "serving (2).py"):
        (tmp_path / name).write_text("x = 1\n", encoding="utf-8")
    with pytest.raises(SubmissionError, match=r"found 2 \.py files named serving\.\.\.: "
                                              r"'serving \(1\)\.py', "
                                              r"'serving \(2\)\.py'; keep one"):
        locate_submission(tmp_path)


def test_a_folder_without_serving_py_names_the_py_files_it_holds(tmp_path: Path) -> None:
    for name in ("main.py", "lab.py", "readme.txt"):
        (tmp_path / name).write_text("x = 1\n", encoding="utf-8")
    with pytest.raises(SubmissionError, match=r"or its subfolders \(found 'lab\.py', 'main\.py'\); "
                                              r"submit one file named serving\.py"):
        locate_submission(tmp_path)


@pytest.mark.parametrize(("name", "content", "what"), [
    ("serving.ipynb", b'{"cells": [], "metadata": null}', "a Jupyter notebook"),
    ("submission.zip", b"PK\x03\x04\x00\x00", "an archive"),
    ("serving.txt", b"def serve(): pass\n", "not a .py file"),
])
def test_a_file_that_is_not_python_is_refused_as_a_folder_holding_it_is(
        tmp_path: Path, name: str, content: bytes, what: str) -> None:
    (tmp_path / "alone").mkdir()
    given = tmp_path / "alone" / name
    given.write_bytes(content)
    with pytest.raises(SubmissionError) as as_file:
        locate_submission(given)
    with pytest.raises(SubmissionError) as in_folder:
        locate_submission(tmp_path / "alone")
    for error in (as_file, in_folder):
        message = str(error.value)
        assert what in message
        assert repr(name) in message or repr(str(given)) in message
        assert message.endswith("submit one file named serving.py, or one .py file whose "
                                "name starts with 'serving'")
    # the same reason, whichever way the file was given
    assert str(as_file.value).split("; ")[-2:] == str(in_folder.value).split("; ")[-2:]


def test_a_dangling_symlink_is_located_so_that_reading_it_can_refuse_it(tmp_path: Path) -> None:
    link = tmp_path / "serving.py"
    link.symlink_to(tmp_path / "gone.py")
    assert locate_submission(tmp_path) == link
    with pytest.raises(SubmissionError, match="is a symbolic link"):
        read_submission(link)


def test_a_symlink_to_a_folder_is_not_followed_into(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (real / "serving.py").write_text("x = 1\n", encoding="utf-8")
    link = tmp_path / "linked"
    link.symlink_to(real, target_is_directory=True)
    located = locate_submission(link)
    with pytest.raises(SubmissionError):
        read_submission(located)


# --- read_submission ----------------------------------------------------------------------


def test_a_regular_file_is_read_as_its_bytes(tmp_path: Path) -> None:
    serving = tmp_path / "serving.py"
    serving.write_bytes(b"def serve():\n    return '\xc3\xa9'\n")
    assert read_submission(serving) == b"def serve():\n    return '\xc3\xa9'\n"


def test_a_file_exactly_at_the_size_limit_is_read(tmp_path: Path) -> None:
    serving = tmp_path / "serving.py"
    serving.write_bytes(b"#" * MAX_SUBMISSION_BYTES)
    assert len(read_submission(serving)) == MAX_SUBMISSION_BYTES


def test_an_oversized_file_is_refused_with_its_size_and_the_limit(tmp_path: Path) -> None:
    serving = tmp_path / "serving.py"
    serving.write_bytes(b"#" * (MAX_SUBMISSION_BYTES + 1))
    with pytest.raises(SubmissionError, match=f"is {MAX_SUBMISSION_BYTES + 1} bytes; the limit "
                                              f"is {MAX_SUBMISSION_BYTES} bytes"):
        read_submission(serving)


def test_a_symlink_to_a_real_file_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.py"
    target.write_text("x = 1\n", encoding="utf-8")
    link = tmp_path / "serving.py"
    link.symlink_to(target)
    with pytest.raises(SubmissionError, match="is a symbolic link; submit serving.py itself"):
        read_submission(link)


def test_a_symlink_to_a_secret_is_refused_without_reading_it(tmp_path: Path) -> None:
    link = tmp_path / "serving.py"
    link.symlink_to("/etc/passwd")
    with pytest.raises(SubmissionError, match="symbolic link") as info:
        read_submission(link)
    assert "root:" not in str(info.value)


def test_a_directory_is_refused_as_not_a_regular_file(tmp_path: Path) -> None:
    folder = tmp_path / "serving.py"
    folder.mkdir()
    with pytest.raises(SubmissionError, match="is not a regular file"):
        read_submission(folder)


def test_a_fifo_is_refused_without_blocking_on_it(tmp_path: Path) -> None:
    fifo = tmp_path / "serving.py"
    os.mkfifo(fifo)
    with pytest.raises(SubmissionError, match="is not a regular file"):
        read_submission(fifo)


def test_a_missing_file_is_refused_with_the_reason(tmp_path: Path) -> None:
    with pytest.raises(SubmissionError, match="cannot read submission .*: No such file"):
        read_submission(tmp_path / "serving.py")


# --- encode_argument ----------------------------------------------------------------------


@pytest.mark.parametrize("value", [None, True, False, 0, -3, 10**20, "KV cache", "", 2.5, -0.0,
                                   math.inf, -math.inf])
def test_plain_values_are_sent_as_they_are(value: Any) -> None:
    encoded = encode_argument(value)
    assert encoded == value
    assert type(encoded) is type(value)


def test_nan_is_never_sent_to_a_submission() -> None:
    with pytest.raises(ValueError, match="NaN is never sent to a submission"):
        encode_argument(math.nan)
    with pytest.raises(ValueError, match="NaN"):
        encode_argument({"x": [1.0, math.nan]})


def test_a_pint_quantity_is_sent_with_its_magnitude_and_units() -> None:
    assert encode_argument(ureg.Quantity(80, "GiB")) == {"$q": [80, "gibibyte"]}
    assert encode_argument(ureg.Quantity(7e10, "param")) == {"$q": [7e10, "param"]}
    assert encode_argument(ureg.Quantity(3.35, "TB/s")) == {"$q": [3.35, "terabyte / second"]}


def test_a_quantity_with_a_nan_magnitude_is_refused() -> None:
    with pytest.raises(ValueError, match="NaN"):
        encode_argument(ureg.Quantity(math.nan, "GB"))


def test_a_namespace_is_sent_as_its_attributes_recursively() -> None:
    model = SimpleNamespace(name="Llama-2-70B", parameters=ureg.Quantity(7e10, "param"),
                            layers=80, hidden_dim=None)
    assert encode_argument(model) == {"$ns": {"name": "Llama-2-70B",
                                              "parameters": {"$q": [7e10, "param"]},
                                              "layers": 80, "hidden_dim": None}}


def test_a_nested_namespace_keeps_its_nesting() -> None:
    hardware = SimpleNamespace(memory=SimpleNamespace(capacity=ureg.Quantity(80, "GiB")),
                               storage=None)
    assert encode_argument(hardware) == {
        "$ns": {"memory": {"$ns": {"capacity": {"$q": [80, "gibibyte"]}}}, "storage": None}}


def test_a_dataclass_is_sent_as_its_fields() -> None:
    @dataclass(frozen=True)
    class Profile:
        track_id: str
        memory_capacity_gb: float
        battery_wh: float | None

    assert encode_argument(Profile("iphone", 8.589934592, None)) == {
        "$ns": {"track_id": "iphone", "memory_capacity_gb": 8.589934592, "battery_wh": None}}


def test_a_slotted_dataclass_is_sent_as_its_fields() -> None:
    @dataclass(frozen=True, slots=True)
    class Point:
        x: float
        y: float

    assert encode_argument(Point(1.0, 2.0)) == {"$ns": {"x": 1.0, "y": 2.0}}


def test_the_reference_track_profile_is_sent_as_its_fields(cloud_profile: Any) -> None:
    encoded = encode_argument(cloud_profile)
    assert encoded["$ns"]["track_id"] == "cloud_fleet"
    assert encoded["$ns"]["validation_tests"] == {"$tuple": list(cloud_profile.validation_tests)}
    assert encoded["$ns"]["battery_wh"] is None


def test_a_mapping_is_sent_tagged_with_string_keys() -> None:
    assert encode_argument({"arrival_qps": 500.0, 3: "x"}) == {
        "$map": {"arrival_qps": 500.0, "3": "x"}}
    assert encode_argument({"$q": 1}) == {"$map": {"$q": 1}}  # a tag-looking key stays data


def test_a_tuple_and_a_list_are_told_apart() -> None:
    assert encode_argument((1, 2.5)) == {"$tuple": [1, 2.5]}
    assert encode_argument([1, 2.5]) == [1, 2.5]
    assert encode_argument([(1,), [2]]) == [{"$tuple": [1]}, [2]]


@pytest.mark.parametrize("value", [object(), {1, 2}, b"bytes", 1 + 2j, len],
                         ids=["object", "set", "bytes", "complex", "builtin"])
def test_an_object_the_worker_cannot_rebuild_is_a_type_error_naming_its_type(
        value: Any) -> None:
    with pytest.raises(TypeError, match=f"cannot send a {type(value).__name__} to the worker"):
        encode_argument(value)
