"""The command line's front door: sub-commands load lazily, and the table's help matches each command."""

import subprocess
import sys

import click
import pytest

from nkieval.cli import COMMANDS, main


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_lazy_command_loads_and_its_help_matches(name):
    cmd = main.get_command(click.Context(main), name)
    assert isinstance(cmd, click.Command), f"{COMMANDS[name][0]} is not a click command"
    assert cmd.name == name
    table = COMMANDS[name][1].rstrip(".")
    assert (cmd.help or "").startswith(table), f"nkieval --help says {table!r}; the command says {cmd.help!r}"


def test_help_imports_neither_numpy_nor_the_subcommands():
    code = ("import sys\nfrom nkieval.cli import main\n"
            "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "bad = [m for m in ('numpy', 'nkieval.sim', 'nkieval.review', 'nkieval.reward', 'fastapi') "
            "if m in sys.modules]\nprint('LOADED', bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60).stdout
    assert "LOADED []" in out, out[-500:]
    assert "serve" in out and "review" in out
