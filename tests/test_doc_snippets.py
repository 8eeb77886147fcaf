"""Docs show what the tool does: every `<!-- run: -->` / `<!-- file: -->` snippet is current, and the
prose around them names only rules, options, pages and anchors that exist."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest

from npu_port.transpiler.cli import cli
from npu_port.transpiler.core.registry import all_rules
from tools import doc_snippets

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted((ROOT / "docs").glob("*.md"))
README = ROOT / "README.md"
PAGES = [*DOCS, README]
FRAMEWORK_GUIDES = ["pytorch.md", "verl.md", "vllm.md", "ray.md", "mindspeed-rl.md"]
GUIDE_SECTIONS = ["What changes", "What stays, and why", "What is reported for a human", "Extras",
                  "NPU settings upstream recommends"]
_FENCE = re.compile(r"^```.*?^```$", re.S | re.M)
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_RULE_ID = re.compile(r"`([a-z0-9]+(?:-[a-z0-9]+)+)`")


def _prose(path: Path) -> str:
    """The page without its fenced blocks (outputs, code), where links and headings are not meant."""
    return _FENCE.sub("", path.read_text(encoding="utf-8"))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for line in _prose(path).splitlines():
        m = re.match(r"^#{1,6}\s+(.*)$", line)
        if not m:
            continue
        base = slug(m.group(1))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def test_render_fills_run_and_file_blocks(tmp_path):
    (tmp_path / "a.txt").write_text("hello\n")
    doc = "<!-- file: a.txt -->\n```text\nold\n```\n<!-- run: echo hi -->\n```text\n```\n"
    out = doc_snippets.render(doc, cwd=tmp_path)
    assert "```text\nhello\n```" in out and "```text\nhi\n```" in out
    assert doc_snippets.render(out, cwd=tmp_path) == out


def test_render_marks_a_failing_command(tmp_path):
    out = doc_snippets.render("<!-- run: false -->\n```text\n```\n", cwd=tmp_path)
    assert "[exit code 1]" in out


def test_scratch_files_go_to_a_private_folder_and_read_as_the_docs_name_them(tmp_path):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    doc = ("<!-- run: touch /tmp/npu-port-docs/made -->\n```text\n```\n"
           "<!-- run: ls /tmp/npu-port-docs -->\n```text\n```\n"
           "<!-- run: echo /tmp/npu-port-docs/made -->\n```text\n```\n")
    out = doc_snippets.render(doc, cwd=tmp_path, scratch=str(scratch))
    assert (scratch / "made").is_file()
    assert "```text\nmade\n```" in out and "```text\n/tmp/npu-port-docs/made\n```" in out
    assert str(scratch) not in out


@pytest.mark.slow  # each command also runs as a subprocess
@pytest.mark.parametrize("command", [
    "npu-port convert fixtures/examples/torch_amp.input.py --diff",
    "npu-port generate verl-train --help",  # the help's width
    "npu-port check --no-such-option",  # a usage error: its words and exit code
])
def test_a_command_run_in_process_prints_what_the_console_script_prints(command, monkeypatch):
    in_process = doc_snippets.run_command(command)
    monkeypatch.setattr(doc_snippets, "_in_process", lambda args, cwd: None)
    assert in_process == doc_snippets.run_command(command)


@pytest.mark.slow  # every command of every page
def test_docs_and_readme_are_current():
    # The `npu-port` commands run in this process, one at a time; one scratch folder for the run, as
    # one page may read what an earlier command wrote.
    rendered = doc_snippets.render_pages(PAGES)
    stale = [str(p.relative_to(ROOT)) for p, text in rendered.items() if text != p.read_text(encoding="utf-8")]
    assert not stale, f"stale snippets in {stale}: run `python -m tools.doc_snippets --update docs README.md`"
    for path, text in rendered.items():
        for bad in ("Traceback (most recent call last)", "No such option", "Got unexpected extra argument",
                    "No such file or directory"):
            assert bad not in text, f"{path.name}: a snippet's command failed ({bad!r}); fix the command"


def test_readme_links_every_doc_page():
    linked = {Path(t).name for t in _LINK.findall(_prose(README)) if t.startswith("docs/")}
    missing = [p.name for p in DOCS if p.name not in linked]
    assert not missing, f"README's Documentation section does not link {missing}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_relative_links_and_anchors_resolve(page):
    for target in _LINK.findall(_prose(page)):
        if re.match(r"^[a-z]+:", target):
            continue
        file_part, _, anchor = target.partition("#")
        dest = (page.parent / file_part).resolve() if file_part else page
        assert dest.exists(), f"{page.name}: link to missing {target}"
        if anchor and dest.suffix == ".md":
            assert anchor in anchors(dest), f"{page.name}: no heading for #{anchor} in {dest.name}"


def test_rule_ids_named_in_doc_tables_exist():
    """In tables, the `rule` and `npu-port` columns name rules: each must be one `npu-port rules` lists."""
    known = set(all_rules())
    checked = 0
    for page in DOCS:
        header: list[str] = []
        for line in _prose(page).splitlines():
            if not line.startswith("|"):
                header = []
                continue
            cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
            if not header:
                header = cells
                continue
            for name, cell in zip(header, cells):
                if name in ("rule", "npu-port"):
                    for rule_id in _RULE_ID.findall(cell):
                        checked += 1
                        assert rule_id in known, f"{page.name}: unknown rule `{rule_id}` in: {line}"
    assert checked > 50  # the guides' tables were found


@pytest.mark.parametrize("guide", FRAMEWORK_GUIDES)
def test_framework_guides_have_the_same_sections(guide):
    headings = [m.group(1) for m in re.finditer(r"^## (.*)$", _prose(ROOT / "docs" / guide), re.M)]
    found = [next((h for h in headings if h.startswith(s)), None) for s in GUIDE_SECTIONS]
    assert None not in found, f"{guide} lacks {[s for s, h in zip(GUIDE_SECTIONS, found) if h is None]}"
    assert [headings.index(h) for h in found] == sorted(headings.index(h) for h in found), f"{guide}: order"
    assert "run: npu-port" in (ROOT / "docs" / guide).read_text(encoding="utf-8"), "show real output"


def _commands(command: click.Command, path: tuple[str, ...] = ()):
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            yield from _commands(sub, (*path, name))
    else:
        yield path, command


def test_every_command_and_option_is_documented():
    text = "\n".join(p.read_text(encoding="utf-8") for p in PAGES)
    missing = []
    for path, command in _commands(cli):
        if f"npu-port {' '.join(path)}" not in text:
            missing.append(f"npu-port {' '.join(path)}")
        for param in command.params:
            longs = [o for o in (*param.opts, *getattr(param, "secondary_opts", ())) if o.startswith("--")]
            if isinstance(param, click.Option) and longs and "--help" not in longs \
                    and not any(o in text for o in longs):
                missing.append(f"npu-port {' '.join(path)} {longs[0]}")
    assert not missing, f"not in docs/ or README.md: {missing}"


def test_slug_matches_github():
    assert slug("4. Check it in CI") == "4-check-it-in-ci"
    assert slug("Extras: the NPU runtime_env") == "extras-the-npu-runtime_env"
    assert slug("Errors, and what to do about each") == "errors-and-what-to-do-about-each"
    assert slug("MindSpeed-RL: `msrl-train`") == "mindspeed-rl-msrl-train"
