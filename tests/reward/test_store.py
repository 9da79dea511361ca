"""The service's SQLite store: one row per request id, harness errors re-queued on retry, WAL on disk."""

import sqlite3

from nkieval.reward.serve.service import request_id
from nkieval.reward.serve.store import Store


def test_one_row_per_id_and_unfinished_survive_reopen(tmp_path):
    db = tmp_path / "s.sqlite3"
    st = Store(db)
    (row, new), = st.add_many([("a", {"task": "vector_add"})])
    assert new and row.state == "queued"
    assert st.add("a", {"task": "other"}) == (st.get("a"), False)  # the first job is kept
    st.add("b", {"task": "vector_add"})
    st.running("b")
    st.add("c", {"task": "vector_add"})
    st.finish("c", {"status": "scored", "reward": 1.0})
    st.close()
    st2 = Store(db)  # a restart
    assert [r.id for r in st2.unfinished()] == ["a", "b"]
    assert st2.get("b").attempts == 1 and st2.get("c").result == {"status": "scored", "reward": 1.0}
    assert st2.counts() == {"queued": 1, "running": 1, "done": 1}
    with sqlite3.connect(db) as con:
        assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_harness_error_is_queued_again_on_retry(tmp_path):
    st = Store(tmp_path / "s.sqlite3")
    st.add("x", {"task": "vector_add"})
    st.finish("x", {"status": "harness-error", "reward": None})
    row, new = st.add("x", {"task": "vector_add"})
    assert new and row.state == "queued" and row.result is None
    st.finish("x", {"status": "scored", "reward": 0.25})
    row, new = st.add("x", {"task": "vector_add"})
    assert not new and row.result["reward"] == 0.25


def test_request_id_is_the_content_hash_unless_given():
    a = {"task": "vector_add", "response": "r", "seed": 1}
    assert request_id(a) == request_id(dict(a)) != request_id({**a, "seed": 2})
    assert request_id({**a, "request_id": "mine"}) == "mine"


def test_a_brief_request_has_its_own_id_and_a_request_with_feedback_keeps_the_old_one():
    a = {"task": "vector_add", "response": "x", "seed": 1}
    # (the id before the feedback field existed: the content hash of these keys alone)
    assert request_id({**a, "feedback": True}) == request_id(a)
    assert request_id({**a, "feedback": False}) != request_id(a)
