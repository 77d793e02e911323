"""The worker gives the same answer to the same call in every grading."""

from __future__ import annotations

from graders.sandbox.runner import StudentRunner

HASHING = b"def order(words):\n    return list({*words})\n\ndef h(text):\n    return hash(text)\n"


def test_string_hashing_and_set_order_are_the_same_in_every_worker() -> None:
    answers = []
    for _ in range(3):
        with StudentRunner(HASHING) as runner:
            answers.append((runner.call("h", ("abc",)).value,
                            runner.call("order", (["serve", "queue", "cache", "cold"],)).value))
    assert answers[0] == answers[1] == answers[2]
