"""The shell lexer: exact spans, what is and is not looked into, and edits that bash reads as intended."""

from __future__ import annotations

import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from npu_port.transpiler.core.engine import Engine
from npu_port.transpiler.core.settings import Settings
from npu_port.transpiler.text.shell import Script, ShellSyntaxError, embed, python_launch

TRICKY = r'''#!/bin/bash
# a comment with `backticks` and $(parens) and "quotes
set -euo pipefail
export A=1 B="two words" C='single $NOT' D=$'ansi\tquote'
X=$(echo "$(date +%s)" | tr -d '\n') Y=`echo hi` python3 run.py --flag "a b" \
    --next 'c d'  # trailing
arr=(one "two three" $(nproc)  # comment inside an array
  four)
case "$1" in
  cuda|gpu) echo picked ;;
  (*) nvidia-smi ;;
esac
for i in $(seq 1 "${N:-4}"); do echo "$i#not-a-comment" ${#arr[@]}; done
(( count += 1 ))
cat > out.yaml <<END
device: $DEVICE
  not: a command
END
cat > node.sh <<-'EOS'
	ray start --head
	EOS
bash -c "echo \"nested $A\" && python x.py" 2>&1 | tee log
'''


def _words(script: Script):
    return [w for c in script.commands for w in c.assignments + c.words]


def test_word_spans_are_exact_outside_double_quoted_strings():
    script = Script(TRICKY)
    assert script.commands
    for cmd in script.commands:
        for w in cmd.assignments + cmd.words:
            if '"' not in (cmd.quote or ""):
                assert script.text[w.start:w.end] == w.text
            else:  # the inner shell's view: one level of escapes removed
                assert script.text[w.start:w.end].replace('\\"', '"') == w.text


def test_commands_and_contexts():
    script = Script(TRICKY)
    programs = [(c.context, c.program()) for c in script.commands if c.words]
    assert ("top", "python3") in programs
    assert ("substitution", "date") in programs and ("substitution", "nproc") in programs
    assert ("heredoc", "ray") in programs  # written to a .sh file: shell code
    assert ("bash-c", "python") in programs
    # case patterns, comments and the YAML here-document body are not commands
    assert not any(p in ("cuda", "gpu", "not:", "device:", "a") for _, p in programs)
    nvidia = next(c for c in script.commands if c.program() == "nvidia-smi")
    assert nvidia.sep_after == ";;"
    tee = next(c for c in script.commands if c.program() == "tee")
    assert tee.sep_before == "|"


def test_values_are_literal_only_without_expansions():
    by_text = {w.text: w for w in _words(Script(TRICKY))}
    assert by_text['B="two words"'].value == "B=two words"
    assert by_text["C='single $NOT'"].value == "C=single $NOT"
    assert by_text['"$i#not-a-comment"'].value is None
    assert by_text["'c d'"].value == "c d"


def test_parameters_are_found_where_the_shell_expands_them():
    names = [p.name for p in Script(TRICKY).params]
    assert "DEVICE" in names  # unquoted here-document delimiter: expanded
    assert "N" in names and "arr" in names and "A" in names
    assert "NOT" not in names  # single quotes


def test_array_items():
    script = Script(TRICKY)
    arr = next(w for c in script.commands for w in c.assignments if w.text.startswith("arr="))
    assert [i.text for i in arr.array_items] == ["one", '"two three"', "$(nproc)", "four"]


def test_a_process_substitution_is_a_redirection_target():
    script = Script('while read -r f; do echo "$f"; done < <(git ls-files "*.sh")\ncat 2> >(tee err.log)\n')
    assert {"git", "tee"} <= {c.program() for c in script.commands}


@pytest.mark.parametrize("text,line", [
    ("echo 'open\n", 1),
    ('ok\necho "open\n', 2),
    ("x=$(echo\n", 1),
    ("echo ${x\n", 1),
    ("cat >\n", 1),
])
def test_syntax_errors_name_the_line(text, line):
    with pytest.raises(ShellSyntaxError, match=f"line {line}"):
        Script(text)


def test_a_bad_script_fails_alone_with_a_clear_error():
    result = Engine(Settings()).convert(b"export CUDA_VISIBLE_DEVICES='0\n", "bad.sh")
    assert result.outcome.status == "failed"
    assert "unterminated single quote" in result.outcome.error


def _printed(script_text: str) -> list[str]:
    proc = subprocess.run(["bash", "-c", script_text], capture_output=True, text=True, check=True)
    return proc.stdout.splitlines()


@pytest.mark.parametrize("quote", ["'", '"', "\"'", "'\""])
def test_embedded_text_reads_as_itself(quote):
    payload = """--resources='{"NPU": 8}' $HOME `x` \\ done"""
    text = embed(payload, quote)
    for q in reversed(quote):
        text = f"{q}{text}{q}"
    # one round of reading by the shell per quoting level
    for _ in quote:
        (text,) = _printed(f"printf '%s\\n' {text}")
    assert text == payload


def test_rewrites_inside_bash_c_and_ssh_strings_keep_their_meaning():
    src = ("ssh() { shift; bash -c \"$1\"; }\n"
           "ray() { printf '[%s]' \"$@\"; echo; }\n"
           "export -f ray\n"
           "N=3\n"
           "bash -c \"ray start --num-gpus=4\"\n"
           "bash -c 'ray start --num-gpus 5'\n"
           "ssh host \"bash -lc 'ray start --num-gpus=2'\"\n"
           "ray start --num-gpus \"$N\"\n")
    result = Engine(Settings(select=("shell-ray-start",))).convert(src.encode(), "r.sh")
    out = result.output.decode()
    assert "--num-gpus" not in out
    assert _printed(out) == ['[start][--resources={"NPU": 4}]', '[start][--resources={"NPU": 5}]',
                             '[start][--resources={"NPU": 2}]', '[start][--resources={"NPU": 3}]']


def test_findings_point_at_original_lines_after_insertions():
    src = b"#!/bin/bash\nexport VLLM_ATTENTION_BACKEND=FLASH_ATTN\nvllm serve m\n"
    plain = Engine(Settings()).convert(src, "s.sh")
    extras = Engine(Settings(extras=True)).convert(src, "s.sh")
    assert extras.output.count(b"\n") > src.count(b"\n")

    def positions(result):
        return [(f.line, f.col) for f in result.outcome.findings if f.rule == "shell-env-vars"]

    assert positions(plain) == positions(extras) == [(2, 8)]


def test_ignore_comment_on_the_last_line_of_a_continued_command():
    src = b"CUDA_VISIBLE_DEVICES=0 python x.py \\\n    --device cuda  # npu-port: ignore\n"
    assert Engine(Settings()).convert(src, "s.sh").output is None
    unignored = src.replace(b"  # npu-port: ignore", b"")
    assert b"ASCEND_RT_VISIBLE_DEVICES" in Engine(Settings()).convert(unignored, "s.sh").output


def test_python_launch_finds_the_users_script():
    script = Script("torchrun --nnodes 2 --nproc_per_node=8 train.py --device cuda\n"
                    "python -u -W ignore -m pkg.train --x 1\n"
                    "python -m torch.distributed.run --nproc_per_node 4 a.py --y\n"
                    "nohup env A=1 numactl -C 0-3 python3 b.py --z &\n")
    launches = [python_launch(c) for c in script.commands]
    assert [(x.target, x.launcher, [a.text for a in x.args]) for x in launches] == [
        ("train.py", "torchrun", ["--device", "cuda"]),
        ("pkg.train", "python", ["--x", "1"]),
        ("a.py", "torchrun", ["--y"]),
        ("b.py", "python", ["--z"]),
    ]


_PIECES = st.sampled_from([
    "export CUDA_VISIBLE_DEVICES=0,1", "echo \"$CUDA_VISIBLE_DEVICES\"", "ray start --num-gpus=8",
    "python x.py --device cuda", "nvidia-smi", "# comment", "a=(x y)", "f() { echo hi; }",
    "if true; then :; fi", "bash -c 'nvidia-smi >/dev/null'", "N=$(nvidia-smi -L | wc -l)", "echo `date`",
    "python3 -m verl.trainer.main_ppo trainer.device=cuda", "cat <<'E'\nCUDA_VISIBLE_DEVICES\nE",
    "x=${y:-$(echo z)}", "docker run --gpus all img", "vllm serve m", "torchrun --nnodes 2 t.py",
])


@settings(max_examples=40, deadline=None)
@given(st.lists(_PIECES, min_size=1, max_size=6), st.sampled_from(["\n", " && ", " | ", "; "]))
def test_converted_scripts_stay_valid_and_stable(pieces, joiner):
    if joiner != "\n":
        pieces = [p for p in pieces if "\n" not in p and not p.startswith("#")] or ["nvidia-smi"]
    src = (joiner.join(pieces) + "\n").encode()
    if subprocess.run(["bash", "-n"], input=src, capture_output=True).returncode:
        return
    engine = Engine(Settings(extras=True))
    result = engine.convert(src, "gen.sh")
    assert result.outcome.status != "failed", result.outcome.error
    out = result.output or src
    proc = subprocess.run(["bash", "-n"], input=out, capture_output=True)
    assert proc.returncode == 0, (src, out, proc.stderr)
    assert engine.convert(out, "gen.sh").output is None
