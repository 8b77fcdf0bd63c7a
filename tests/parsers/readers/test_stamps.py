"""Timestamps of several forms ordered as times (parsers.readers.stamps), on stamps real lines carry."""

from __future__ import annotations

from pathlib import Path

from parsers.readers import stamps
from forensics.report.words import analyze
from facts import observed, says


def test_forms_order_as_times_not_as_strings():
    glog_mar = "318 08:49:08.965796097"  # sglang #20855, c10d's [E318 ...]
    glog_dec = "1201 16:51:07.027530100"  # nccl_tee/sleep
    iso = "2026-12-01 16:52:12"  # NCCL's own stamp in the same console
    elastic = "2026-12-01_16:52:13"  # torchelastic's failure table
    assert glog_dec < glog_mar and stamps.key(glog_mar) < stamps.key(glog_dec)  # as strings: the other way round
    assert stamps.key(glog_dec) < stamps.key(iso) < stamps.key(elastic)
    assert "1201 16:53:00.0" < iso and stamps.key("1201 16:53:00.0") > stamps.key(iso)  # a later glog line
    assert stamps.key("02-22 08:52:08") == (2, 22, 8 * 3600 + 52 * 60 + 8)


def test_a_stamp_is_shown_as_month_day_time():
    assert stamps.shown("318 08:49:08.965796097") == "03-18 08:49:08.965"
    assert stamps.shown("2026-12-01_16:52:13") == "12-01 16:52:13"
    assert stamps.shown("not a stamp") == "not a stamp" and stamps.key("not a stamp") is None
    assert stamps.key("1399 10:00:00") is None  # no month 13


def test_the_first_error_of_a_real_console_is_said_with_a_readable_stamp():
    folder = Path(__file__).resolve().parents[2] / "fixtures" / "nccl_tee" / "diverge"
    verdict = analyze(folder).verdict
    assert says(observed(verdict, "first-error"), "watchdog-timeout", "rank 0", "(12-01 17:08:35.867)"), verdict.text
