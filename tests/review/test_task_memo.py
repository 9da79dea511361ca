"""Tasks kept across reviews (``nkieval.review.cache.TaskMemo``): loaded once while the task's files are unchanged,
loaded again as soon as one changes, comes or goes; a task that does not load is never kept."""

from __future__ import annotations

import os
import shutil

import pytest

from nkieval.review.cache import TaskMemo
from nkieval.tasks import TaskError, load_task
from nkieval.tasks.loader import BUILTIN_ROOT


@pytest.fixture
def task_dir(tmp_path):
    d = tmp_path / "vector_add"
    shutil.copytree(BUILTIN_ROOT / "vector_add", d, ignore=shutil.ignore_patterns("__pycache__"))
    return d


@pytest.fixture
def counted(monkeypatch):
    """load_task, counting its calls."""
    import nkieval.tasks.loader as loader

    calls = []

    def counting(path):
        calls.append(path)
        return load_task(path)

    monkeypatch.setattr(loader, "load_task", counting)
    return calls


def _bump(path, text_change: str | None = None) -> None:
    """Change ``path``: its text (same size or not), or only its times."""
    if text_change is not None:
        path.write_text(path.read_text() + text_change)
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))


def test_an_unchanged_task_is_loaded_once(task_dir, counted):
    memo = TaskMemo()
    first = memo.load(task_dir)
    assert memo.load(task_dir) is first and memo.load(str(task_dir)) is first
    assert len(counted) == 1 and memo.hits == 2


@pytest.mark.parametrize("change", ["toml", "reference", "flawed", "times only", "new file", "removed file"])
def test_a_change_to_any_file_of_the_task_loads_it_again(task_dir, counted, change):
    memo = TaskMemo()
    (task_dir / "flawed" / "notes.txt").write_text("a file the task does not name")
    first = memo.load(task_dir)
    if change == "toml":
        toml = task_dir / "task.toml"
        toml.write_text(toml.read_text().replace('title = "', 'title = "Changed: ', 1))
    elif change == "reference":
        _bump(task_dir / "reference.py", "\n# a comment\n")
    elif change == "flawed":
        _bump(next((task_dir / "flawed").glob("*.py")), "\n")
    elif change == "times only":
        _bump(task_dir / "reference.py")
    elif change == "new file":
        (task_dir / "notes.md").write_text("notes")
    else:
        (task_dir / "flawed" / "notes.txt").unlink()
    second = memo.load(task_dir)
    assert second is not first and len(counted) == 2
    if change == "toml":
        assert second.title.startswith("Changed: ") and not first.title.startswith("Changed: ")
    assert memo.load(task_dir) is second and len(counted) == 2


def test_a_task_that_does_not_load_is_never_kept(task_dir, counted):
    memo = TaskMemo()
    (task_dir / "task.toml").write_text("this is not toml = = =")
    for _ in range(2):
        with pytest.raises(TaskError):
            memo.load(task_dir)
    assert len(counted) == 2
    shutil.copy(BUILTIN_ROOT / "vector_add" / "task.toml", task_dir / "task.toml")
    assert memo.load(task_dir).id == "vector_add"


def test_the_memo_is_bounded(tmp_path, counted):
    memo = TaskMemo(max_tasks=2)
    dirs = []
    for name in ("a", "b", "c"):
        d = tmp_path / name / "vector_add"
        shutil.copytree(BUILTIN_ROOT / "vector_add", d, ignore=shutil.ignore_patterns("__pycache__"))
        dirs.append(d)
        memo.load(d)
    memo.load(dirs[2])  # (kept)
    memo.load(dirs[0])  # (dropped as the least recently used: loaded again)
    assert len(counted) == 4


def test_a_review_serves_the_kept_task(monkeypatch, task_dir):
    """The pipeline's load stage goes through the process's memo: a second review of the same directory does not
    parse the task again."""
    import nkieval.tasks.loader as loader
    from nkieval.review import review
    from nkieval.review.cache import TASKS

    TASKS.clear()
    calls = []
    real = loader.load_task
    monkeypatch.setattr(loader, "load_task", lambda p: calls.append(p) or real(p))
    src = (task_dir / "solution_nki.py").read_text()
    a = review(task_dir, src, seed=3, shapes="public", compare_references=False)
    b = review(task_dir, src, seed=3, shapes="public", compare_references=False)
    assert len(calls) == 1 and a.verdict == b.verdict == "pass"
