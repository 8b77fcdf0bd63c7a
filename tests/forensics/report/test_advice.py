"""Every reason class has plain words and a next step, filled with the suspect's own host and pid."""

from forensics.report.advice import advise, covered
from parsers.model import Suspect
from parsers.model.events import UNKNOWN_HOST
from parsers.model.findings import ReasonClass


def test_every_reason_class_has_words():
    assert covered() == set(ReasonClass), sorted(str(c) for c in set(ReasonClass) - covered())


def test_stopped_names_host_and_pid_in_the_action():
    s = Suspect(rank=3, host="node07", pid=686, reason_class=ReasonClass.STOPPED, reason="stopped", confidence=0.95)
    a = advise(s)
    assert "SIGSTOP" in a.meaning
    assert "on node07" in a.next_step and "kill -CONT 686" in a.next_step and "TracerPid" in a.next_step


def test_placeholder_host_is_said_in_words_never_as_a_name():
    s = Suspect(rank=1, host=UNKNOWN_HOST, pid=None, reason_class=ReasonClass.OUTSIDE, reason="x", confidence=0.8)
    a = advise(s)
    assert UNKNOWN_HOST not in a.next_step
    # wording is the behaviour: the advice's words for a host no evidence names
    assert "no evidence names it" in a.next_step and "timeout" in a.next_step


def test_a_class_given_by_name_gets_its_own_words():
    s = Suspect(rank=1, host="node02", pid=2, reason_class=ReasonClass.WAIT_CYCLE, reason="x", confidence=0.5)
    assert "different orders" in advise(s).meaning and "one order" in advise(s).next_step

