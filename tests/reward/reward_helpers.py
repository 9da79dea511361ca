"""Built-in candidates wrapped as model responses (shared by the reward tests)."""

from pathlib import Path

from nkieval.tasks import BUILTIN_ROOT

ROOT = Path(__file__).resolve().parents[2]
VECTOR_ADD = BUILTIN_ROOT / "vector_add"
HOSTILE = ROOT / "tests" / "adversarial" / "candidates" / "output_cheat" / "return_input_vector_add.py"
SEED = 7


def as_response(path: Path, *, prose: str = "Here is the kernel.") -> str:
    """A candidate file as a model would answer: prose, a fenced block, a closing remark."""
    return f"{prose}\n\n```python\n{path.read_text()}```\n\nIt handles the ragged tail.\n"
