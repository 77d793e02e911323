"""Values worked out once per object, kept by identity."""

from __future__ import annotations

from graders.identity import IdentityMemo


def test_a_value_is_worked_out_once_per_object_and_extra_key() -> None:
    memo: IdentityMemo[int] = IdentityMemo(8)
    calls: list[str] = []
    first, twin = [1], [1]  # equal, yet other objects

    def compute(label: str, value: int) -> int:
        calls.append(label)
        return value

    assert memo.get(first, lambda: compute("first", 10)) == 10
    assert memo.get(first, lambda: compute("again", 99)) == 10
    assert memo.get(twin, lambda: compute("twin", 20)) == 20
    assert memo.get(first, lambda: compute("deeper", 30), extra=1) == 30
    assert calls == ["first", "twin", "deeper"]


def test_a_full_memo_starts_over() -> None:
    memo: IdentityMemo[int] = IdentityMemo(2)
    kept = [object() for _ in range(3)]
    for index, obj in enumerate(kept):
        memo.get(obj, lambda index=index: index)  # type: ignore[misc]
    assert memo.get(kept[0], lambda: -1) == -1  # dropped when the third came in
    assert memo.get(kept[2], lambda: -2) == 2
