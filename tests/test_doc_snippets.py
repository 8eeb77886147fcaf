"""Docs show what the tool does: every `<!-- run: -->` / `<!-- file: -->` snippet is current."""

from __future__ import annotations

from transpiler import doc_snippets


def test_render_fills_run_and_file_blocks(tmp_path):
    (tmp_path / "a.txt").write_text("hello\n")
    doc = "<!-- file: a.txt -->\n```text\nold\n```\n<!-- run: echo hi -->\n```text\n```\n"
    out = doc_snippets.render(doc, cwd=tmp_path)
    assert "```text\nhello\n```" in out and "```text\nhi\n```" in out
    assert doc_snippets.render(out, cwd=tmp_path) == out


def test_docs_and_readme_are_current(capsys):
    assert doc_snippets.main(["--check"]) == 0, capsys.readouterr().out
