"""``nkieval.sim.fpstate``'s error modes set what ``np.errstate`` with the same keywords sets, inside any enclosing
error state, and restore the enclosing state on exit (also when the block raises, and when modes nest)."""

import threading

import numpy as np
import pytest

from nkieval.sim import fpstate

_MODES = [{"all": "ignore"}, {"invalid": "ignore"}, {"over": "ignore"}, {"over": "ignore", "invalid": "ignore"},
          {"divide": "raise", "under": "warn"}]
_ENCLOSING = [{}, {"all": "raise"}, {"over": "warn", "invalid": "raise"}, {"divide": "print", "under": "ignore"}]


@pytest.mark.parametrize("enclosing", _ENCLOSING)
@pytest.mark.parametrize("kwargs", _MODES)
def test_a_mode_sets_what_errstate_sets_and_restores_the_enclosing_state(enclosing, kwargs):
    mode = fpstate.Errors(**kwargs)
    with np.errstate(**enclosing):
        outside = np.geterr()
        with np.errstate(**kwargs):
            expected = np.geterr()
        for _ in range(2):  # (the second time from the memo)
            with mode():
                assert np.geterr() == expected
                with mode():  # nested: its own token
                    assert np.geterr() == expected
                assert np.geterr() == expected
            assert np.geterr() == outside


def test_the_mode_is_derived_from_the_enclosing_state_each_time():
    """The same mode inside two different enclosing states sets the fields it does not name from each."""
    mode = fpstate.Errors(over="ignore")
    with np.errstate(all="raise"), mode():
        assert np.geterr() == {"divide": "raise", "over": "ignore", "under": "raise", "invalid": "raise"}
    with np.errstate(all="warn"), mode():
        assert np.geterr() == {"divide": "warn", "over": "ignore", "under": "warn", "invalid": "warn"}


def test_a_raising_block_restores_the_state_and_ignored_errors_do_not_raise():
    before = np.geterr()
    with np.errstate(all="raise"):
        with fpstate.IGNORE_ALL():
            assert np.isinf(np.float32(1e38) * np.float32(10))  # no FloatingPointError
        with pytest.raises(FloatingPointError):
            np.float32(1e38) * np.float32(10)
        with pytest.raises(KeyError), fpstate.IGNORE_ALL():
            raise KeyError("x")
        assert np.geterr()["over"] == "raise"
    assert np.geterr() == before


def test_threads_keep_their_own_state():
    seen = {}
    inside = threading.Event()
    release = threading.Event()

    def worker():
        with fpstate.IGNORE_OVER():
            inside.set()
            release.wait(5)
            seen["worker"] = np.geterr()["over"]

    with np.errstate(over="raise"):
        th = threading.Thread(target=worker)
        th.start()
        inside.wait(5)
        seen["main"] = np.geterr()["over"]
        release.set()
        th.join()
    assert seen == {"worker": "ignore", "main": "raise"}
