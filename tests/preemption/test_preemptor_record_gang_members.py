"""The preemptor's record (``cellfit.io/preemptor-hold``) names the members on other nodes of the
gangs a decision took whole (``elsewhere``), which a restarted replica deletes if the one that
answered did not live to (scheduler/cluster/gang_recovery.py). Compatible both ways where it can
be: a record without them (an older replica's) reads as naming none, and a decision that took
no gang spread over nodes is written exactly as before."""

from __future__ import annotations

import pytest

from scheduler.errors import InvalidAnnotation
from scheduler.preemption import records


def test_a_record_without_gang_members_elsewhere_reads_as_naming_none() -> None:
    record = records.decode('{"node":"gpu-a","victims":["uid-be-0"]}')
    assert record is not None
    assert (record.node, record.victims, record.elsewhere) == ("gpu-a", ("uid-be-0",), ())


def test_a_decision_without_gang_members_elsewhere_is_written_as_before() -> None:
    assert records.encode(node="gpu-a", victims=("uid-be-0",)) == '{"node":"gpu-a","victims":["uid-be-0"]}'


def test_the_gang_members_elsewhere_are_written_and_read_back() -> None:
    text = records.encode(node="gpu-a", victims=("uid-be-0",), elsewhere=("uid-be-1", "uid-be-2"))
    assert text == '{"node":"gpu-a","victims":["uid-be-0"],"elsewhere":["uid-be-1","uid-be-2"]}'
    record = records.decode(text)
    assert record is not None and record.elsewhere == ("uid-be-1", "uid-be-2")


def test_a_gang_member_named_by_an_empty_uid_is_refused_naming_the_annotation() -> None:
    with pytest.raises(InvalidAnnotation, match="elsewhere by an empty UID") as raised:
        records.decode('{"node":"gpu-a","victims":["uid-be-0"],"elsewhere":[""]}')
    assert "cellfit.io/preemptor-hold" in str(raised.value)
