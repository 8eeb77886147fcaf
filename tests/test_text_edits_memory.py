"""A file's parse goes with its context: the shared per-text parse cache (text_edits.ParsedTexts) keeps
nothing alive once the file's rules are done, so a worker's memory does not grow with the tree."""

from __future__ import annotations

import gc
import weakref

from npu_port.transpiler.core.engine import Engine
from npu_port.transpiler.core.rules import FileContext, RunOptions
from npu_port.transpiler.core.settings import Settings
from npu_port.transpiler.text.shell import parse_script
from npu_port.transpiler.text.yaml_edit import parse_yaml


def test_a_parsed_text_is_freed_with_its_file_context():
    for parse, text in ((parse_yaml, "trainer:\n  device: cuda  # npu-port: ignore\n"),
                        (parse_script, "export CUDA_VISIBLE_DEVICES=0\n")):
        ctx = FileContext("f", text, RunOptions())
        parsed, positions = parse(ctx, text)
        assert parse(ctx, text)[0] is parsed  # shared by the file's rules
        gone = weakref.ref(ctx)
        del ctx, parsed, positions
        gc.collect()
        assert gone() is None


def test_converting_many_files_keeps_no_context_alive():
    engine = Engine(Settings())
    gc.collect()
    before = sum(1 for o in gc.get_objects() if isinstance(o, FileContext))
    for i in range(30):
        engine.convert(f"trainer:\n  device: cuda\n  n{i}: 1\n".encode(), f"c{i}.yaml", "yaml")
        engine.convert(f"export CUDA_VISIBLE_DEVICES={i}\n".encode(), f"r{i}.sh", "shell")
    gc.collect()
    assert sum(1 for o in gc.get_objects() if isinstance(o, FileContext)) == before
