"""``records.record`` behaves as the ``dataclasses.dataclass`` it stands in for: the same class written
both ways is compared method by method, the standard library's being the reference."""

from __future__ import annotations

import copy
import dataclasses
import pickle

import pytest

from mi400plan.records import record


def _new_list() -> list[int]:
    return [1]


def _pair(decorator):
    """The same class body under ``decorator``."""

    class Point:
        """A point."""

        x: int
        y: float = 2.5
        tags: list[int] = dataclasses.field(default_factory=_new_list)
        note: str = dataclasses.field(default="n", repr=False, compare=False)

        def norm(self) -> float:
            return abs(self.x) + abs(self.y)

    return decorator(Point)


@record
class Stored:
    """A record pickle can find by name."""

    a: int
    b: tuple[int, ...] = ()


def test_a_record_pickles():
    assert pickle.loads(pickle.dumps(Stored(5, (1,)))) == Stored(5, (1,))


FROZEN = (_pair(dataclasses.dataclass(frozen=True)), _pair(record))
MUTABLE = (_pair(dataclasses.dataclass), _pair(record(frozen=False)))


@pytest.mark.parametrize("pair", [FROZEN, MUTABLE], ids=["frozen", "mutable"])
def test_construction_repr_equality_and_fields_match_the_dataclass(pair):
    ref, rec = pair
    for args, kwargs in [((1,), {}), ((1, 3.0), {}), ((), {"x": 4, "note": "z"}), ((1,), {"tags": [7], "y": 0.5})]:
        a, b = ref(*args, **kwargs), rec(*args, **kwargs)
        assert repr(a).replace("Point", "P") == repr(b).replace("Point", "P")
        assert dataclasses.asdict(a) == dataclasses.asdict(b) and vars(a) == vars(b)
        assert list(vars(b)) == ["x", "y", "tags", "note"]  # set in field order, as the generated __init__ does
    assert [f.name for f in dataclasses.fields(rec)] == [f.name for f in dataclasses.fields(ref)]
    assert rec.__match_args__ == ref.__match_args__ and dataclasses.is_dataclass(rec)
    assert rec(1).tags is not rec(1).tags  # a new list from the factory each time
    assert rec(1, note="a") == rec(1, note="b") and rec(1) != rec(2) and rec(1) != ref(1)
    assert rec(1).__eq__(object()) is NotImplemented
    assert dataclasses.replace(rec(1, 3.0), y=4.0) == rec(1, 4.0)
    assert copy.deepcopy(rec(5)) == rec(5) and copy.copy(rec(5, 1.0)) == rec(5, 1.0)
    assert rec(1).norm() == 3.5


def test_a_frozen_record_hashes_as_the_dataclass_and_refuses_changes():
    ref, rec = FROZEN
    assert hash(rec(3, 1.5, (9,))) == hash(ref(3, 1.5, (9,))) == hash((3, 1.5, (9,)))  # note: compare=False
    point = rec(1)
    for change in (lambda: setattr(point, "x", 2), lambda: delattr(point, "y"), lambda: setattr(point, "new", 1)):
        with pytest.raises(dataclasses.FrozenInstanceError):
            change()
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'x'"):
        point.x = 2
    assert point.x == 1


def test_a_mutable_record_is_unhashable_and_assignable():
    ref, rec = MUTABLE
    assert rec.__hash__ is None and ref.__hash__ is None
    point = rec(1)
    point.x = 5
    assert point == rec(5)


@pytest.mark.parametrize("pair", [FROZEN, MUTABLE], ids=["frozen", "mutable"])
def test_wrong_arguments_are_type_errors_as_with_the_dataclass(pair):
    for args, kwargs, says in [((), {}, "missing required argument: 'x'"),
                               ((1, 2, [3], "n", 5), {}, "takes 5 positional arguments but 6 were given"),
                               ((1,), {"x": 2}, "got multiple values for argument 'x'"),
                               ((1,), {"z": 2}, "got an unexpected keyword argument 'z'")]:
        for cls in pair:
            with pytest.raises(TypeError):
                cls(*args, **kwargs)
        with pytest.raises(TypeError, match=says):
            pair[1](*args, **kwargs)


def test_post_init_runs_and_may_set_fields_of_a_frozen_record():
    @record
    class Link:
        bw: float
        per_link: float = 0.0

        def __post_init__(self) -> None:
            if self.bw <= 0:
                raise ValueError("bw must be positive")
            if self.per_link <= 0:
                object.__setattr__(self, "per_link", self.bw / 2)

    assert Link(4.0).per_link == 2.0 and Link(4.0, 1.0).per_link == 1.0
    with pytest.raises(ValueError, match="bw must be positive"):
        Link(0.0)


def test_a_recursive_repr_does_not_recurse():
    @record(frozen=False)
    class Node:
        child: object = None

    node = Node()
    node.child = node
    assert repr(node) == "test_a_recursive_repr_does_not_recurse.<locals>.Node(child=...)"


def test_what_record_does_not_cover_is_refused_when_the_class_is_defined():
    with pytest.raises(TypeError, match="defines __eq__"):
        @record
        class OwnEq:
            x: int

            def __eq__(self, other: object) -> bool:
                return True

    with pytest.raises(TypeError, match="init=False"):
        @record
        class Hidden:
            x: int = dataclasses.field(default=0, init=False)

    with pytest.raises(TypeError, match="InitVar"):
        @record
        class WithInitVar:
            x: dataclasses.InitVar[int]
