"""The invariant tests' inputs: a fixed generator, the same for every install and run."""

from __future__ import annotations

import json
import subprocess
import sys

from graders.grading import examples as st

SPACES = (st.integers(1, 64), st.floats(0.5, 200.0), st.sampled_from(["a", "b", "c"]),
          st.one_of(st.sampled_from([1.0, 1.5]), st.floats(0.0, 1.3)))


def test_the_first_examples_are_the_bounds() -> None:
    examples = st.draw("test_x", 5, SPACES)
    assert examples[0] == (1, 0.5, "a", 1.0)
    assert examples[1] == (64, 200.0, "c", 1.3)


def test_every_draw_lies_in_its_space() -> None:
    for n, service, letter, load in st.draw("test_y", 200, SPACES):
        assert 1 <= n <= 64
        assert isinstance(n, int)
        assert 0.5 <= service <= 200.0
        assert letter in "abc"
        assert load in (1.0, 1.5) or 0.0 <= load <= 1.3


def test_the_same_name_gives_the_same_examples_and_another_name_others() -> None:
    assert st.draw("test_z", 30, SPACES) == st.draw("test_z", 30, SPACES)
    assert st.draw("test_z", 30, SPACES) != st.draw("test_w", 30, SPACES)
    assert st.draw("test_z", 30, SPACES)[:10] == st.draw("test_z", 10, SPACES)


def test_the_examples_do_not_depend_on_the_process() -> None:
    code = ("import json; from graders.grading import examples as st; "
            "print(json.dumps(st.draw('test_z', 30, [st.integers(1, 64), st.floats(0.5, 200.0)])))")
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True, env={"PYTHONHASHSEED": seed, "PATH": "/usr/bin:/bin"},
                           cwd="/").stdout for seed in ("1", "2")]
    assert runs[0] == runs[1]
    assert [list(e) for e in st.draw("test_z", 30, [st.integers(1, 64),
                                                    st.floats(0.5, 200.0)])] \
        == json.loads(runs[0])
