"""The tests' one wait: a truthy answer ends it, a falsy one or an exception means not yet."""

from __future__ import annotations

import pytest

from streamapp_testbed.waiting import NotYet, wait_for

pytestmark = pytest.mark.unit


def answers(*values):
    it = iter(values)

    def check():
        value = next(it)
        if isinstance(value, Exception):
            raise value
        return value

    return check


def test_the_first_truthy_answer_is_returned_a_string_included():
    assert wait_for("x", answers(None, False, [], NotYet("warming up"), RuntimeError("no pod"), "pod-1"), every=0) == "pod-1"


def test_a_timeout_names_what_and_the_last_reason():
    with pytest.raises(TimeoutError, match=r"waiting for 2 executors; last saw: NotYet\('1 executor'\)"):
        wait_for("2 executors", lambda: NotYet("1 executor"), timeout=0.05, every=0.01)


def test_an_exception_returned_is_not_an_answer():
    with pytest.raises(TimeoutError, match="ValueError"):
        wait_for("x", lambda: ValueError("bad"), timeout=0.05, every=0.01)
