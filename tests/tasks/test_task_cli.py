"""``nkieval task new/check`` and ``nkieval tasks list``."""

from click.testing import CliRunner

from nkieval.cli import main


def test_task_new_scaffold_passes_check(tmp_path):
    r = CliRunner().invoke(main, ["task", "new", "my_exp", "--dir", str(tmp_path)])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(main, ["task", "check", str(tmp_path / "my_exp")])
    assert r.exit_code == 0, r.output
    assert "OK" in r.output


def test_task_new_rejects_bad_name(tmp_path):
    r = CliRunner().invoke(main, ["task", "new", "Bad-Name", "--dir", str(tmp_path)])
    assert r.exit_code == 2


def test_task_check_reports_errors(tmp_path):
    d = tmp_path / "broken"
    d.mkdir()
    (d / "task.toml").write_text('id = "broken"\n')
    r = CliRunner().invoke(main, ["task", "check", str(d)])
    assert r.exit_code == 2  # a bad task, as `nkieval review` answers it
    assert "missing required key" in r.output


def test_task_check_of_a_missing_directory_is_exit_2():
    r = CliRunner().invoke(main, ["task", "check", "/nonexistent/task"])
    assert r.exit_code == 2 and "neither a task directory nor a built-in task id" in r.output


def test_tasks_list_shows_builtin():
    r = CliRunner().invoke(main, ["tasks", "list"])
    assert r.exit_code == 0
    assert "vector_add" in r.output
