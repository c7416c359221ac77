"""The union-find that HiveD's membership changes and the watch cache's relist group with."""

from scheduler.core.groups import DisjointSets


def test_names_linked_through_any_union_end_in_one_group() -> None:
    sets = DisjointSets()
    sets.find("d")
    sets.union(["b", "e"])
    sets.union(["c", "a"])
    sets.union(["e", "a"])  # links {b, e} and {a, c}
    assert sets.groups() == [["a", "b", "c", "e"], ["d"]]
    assert sets.find("c") == sets.find("b") != sets.find("d")


def test_a_name_unioned_alone_or_found_is_its_own_group() -> None:
    sets = DisjointSets()
    sets.union(["x"])
    sets.union(["y", "y"])
    assert sets.groups() == [["x"], ["y"]]
