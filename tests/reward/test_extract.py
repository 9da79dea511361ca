"""Kernel extraction from model responses: fenced blocks, several blocks, the one with the entry point."""

from nkieval.reward.extract import code_blocks, extract_kernel

KERNEL = "import nki\n\n@nki.jit\ndef vector_add(a, b):\n    return a\n"


def test_single_fenced_block():
    ex = extract_kernel(f"Sure.\n```python\n{KERNEL}```\nbye", "vector_add")
    assert ex.found and ex.source == KERNEL and ex.blocks == 1


def test_picks_the_last_block_that_defines_the_entry_point():
    draft = KERNEL.replace("return a", "return b")
    text = (f"Draft:\n```python\n{draft}```\nA test:\n```python\nprint(vector_add(x, y))\n```\n"
            f"Final:\n```py\n{KERNEL}```\n```bash\nnkieval review vector_add k.py\n```\n")
    ex = extract_kernel(text, "vector_add")
    assert ex.source == KERNEL
    assert "last of 2" in ex.reason and ex.blocks == 3  # the bash block is not Python


def test_block_without_the_entry_point_is_no_kernel():
    ex = extract_kernel("```python\ndef helper(x):\n    return x\n```", "vector_add")
    assert not ex.found and "no kernel found" in ex.reason and "vector_add" in ex.reason


def test_no_code_at_all_is_no_kernel():
    ex = extract_kernel("I think the answer is to tile by 128.", "vector_add")
    assert not ex.found and ex.source is None


def test_unclosed_final_block_counts():
    ex = extract_kernel(f"Here:\n```python\n{KERNEL}", "vector_add")
    assert ex.found and "def vector_add" in ex.source


def test_bare_source_without_fences_is_taken_whole():
    ex = extract_kernel(KERNEL, "vector_add")
    assert ex.found and ex.source == KERNEL


def test_think_section_is_ignored():
    text = f"<think>\n```python\n{KERNEL.replace('return a', 'return b')}```\n</think>\n```python\n{KERNEL}```"
    ex = extract_kernel(text, "vector_add")
    assert ex.source == KERNEL and ex.blocks == 1


def test_syntax_error_block_is_still_the_candidate():
    bad = "@nki.jit\ndef vector_add(a, b:\n    return a\n"
    ex = extract_kernel(f"```python\n{bad}```", "vector_add")
    assert ex.found and ex.source == bad


def test_tilde_fences_and_longer_fences():
    assert code_blocks("~~~python\nx = 1\n~~~\n````\ny = 2\n```\nz\n````") == [("python", "x = 1\n"),
                                                                              ("", "y = 2\n```\nz\n")]


def test_non_text_response_is_no_kernel():
    ex = extract_kernel(None, "vector_add")  # type: ignore[arg-type]
    assert not ex.found


def test_pathological_nesting_is_not_an_exception():
    deep = "x = " + "(" * 5000 + ")" * 5000 + "\n"
    ex = extract_kernel(f"```python\n{deep}def vector_add(a, b):\n    return a\n```", "vector_add")
    assert ex.found  # judged by the text; the review reports the parser's error
    assert not extract_kernel(deep, "vector_add").found
