"""Shared by the bulk, safety and Ray tests: a generated tree of every odd kind of file, tree hashing,
and hazard rules that crash, hang or raise on a marker so isolation can be tested without relying
on a LibCST bug staying unfixed."""

from __future__ import annotations

import hashlib
import os
import signal
import stat
import time
from pathlib import Path

import libcst as cst

from npu_port.transpiler.core.rules import PythonRule


class HazardRule(PythonRule):
    """Test-only rule: kills its process, hangs or raises where a file names the marker."""

    ID = "test-hazard"
    SAFETY = "safe"
    TRIGGERS = ("CRASH_HERE", "HANG_HERE", "RAISE_HERE")

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == "CRASH_HERE":
            os.kill(os.getpid(), signal.SIGSEGV)
        elif node.value == "HANG_HERE":
            time.sleep(3600)
        elif node.value == "RAISE_HERE":
            raise ValueError("a rule bug")


CUDA_MODEL = """import torch


class Net(torch.nn.Module):
    def forward(self, x):
        return x * 2


def train(step_{i}):
    model = Net().cuda()
    batch = torch.randn(4, {i} + 1).cuda()
    if batch.is_cuda:
        return model(batch)
"""

PLAIN_MODULE = '''"""Helpers {i}: no accelerator code here."""


def helper_{i}(values):
    return [v * {i} for v in values if v]
'''


def build_tree(root: Path, copies: int = 40, hazards: bool = True) -> Path:
    """A repository-shaped tree with `copies` of each ordinary kind plus one of every odd kind."""
    src = root / "repo"
    (src / "pkg" / "sub").mkdir(parents=True)
    (src / "scripts").mkdir()
    (src / "configs").mkdir()
    (src / "assets").mkdir()
    for i in range(copies):
        (src / "pkg" / f"model_{i}.py").write_text(CUDA_MODEL.format(i=i))
        (src / "pkg" / "sub" / f"util_{i}.py").write_text(PLAIN_MODULE.format(i=i))
        script = src / "scripts" / f"run_{i}.sh"
        script.write_text(f"#!/bin/bash\nexport CUDA_VISIBLE_DEVICES=0,1\npython train.py --step {i}\n")
        script.chmod(0o755)
        (src / "configs" / f"cfg_{i}.yaml").write_text(f"trainer:\n  device: cuda\n  steps: {i}\n")
        (src / "assets" / f"blob_{i}.bin").write_bytes(bytes(range(256)) * (i + 1))
    # One large file, so that largest-first ordering has something to order.
    (src / "pkg" / "big.py").write_text("\n".join(CUDA_MODEL.format(i=i) for i in range(60)))
    (src / "README.md").write_text("Uses CUDA. cuda() everywhere.\n")
    (src / "launch").write_text("#!/usr/bin/env bash\nexport CUDA_VISIBLE_DEVICES=0\n")
    (src / "launch").chmod(0o750)
    (src / "empty.py").write_bytes(b"")
    (src / "crlf.py").write_bytes(b"import torch\r\nx = torch.ones(1).cuda()\r\n")
    (src / "bom.py").write_bytes(b"\xef\xbb\xbfimport torch\nx = torch.ones(1).cuda()\n")
    (src / "latin1.py").write_bytes(b"# -*- coding: latin-1 -*-\nimport torch\nname = '\xe9'\nx = torch.ones(1).cuda()\n")
    # Bad inputs: each must be a clear per-file error while everything else converts.
    (src / "binary.py").write_bytes(b"\x00\x01\x02cuda\xff")
    (src / "bad_utf8.py").write_bytes(b"import torch\nx = '\xff\xfe'\ny = torch.ones(1).cuda()\n")
    (src / "py2.py").write_text("import torch\nprint 'moving to', torch.ones(1).cuda()\n")
    (src / "broken.py").write_text("import torch\ndef f(:\n    return torch.ones(1).cuda()\n")
    (src / "deep.py").write_text("import torch\nx = " + "(" * 3000 + "1" + ")" * 3000 + "\ny = x.cuda()\n")
    (src / "chain.py").write_text("import torch\nx = torch.ones(1).cuda()\ny = " + " + ".join(["a"] * 1500) + "\n")
    (src / "toolarge.py").write_text("import torch\n" + "x = torch.ones(1).cuda()\n" * 30000)
    (src / "bad.sh").write_bytes(b"#!/bin/bash\nexport CUDA_VISIBLE_DEVICES=\xff\n")
    os.mkfifo(src / "pipe.py")
    if hazards:
        (src / "crash.py").write_text("import torch\nCRASH_HERE = torch.ones(1).cuda()\n")
        (src / "hang.py").write_text("import torch\nHANG_HERE = torch.ones(1).cuda()\n")
        (src / "raises.py").write_text("import torch\nRAISE_HERE = torch.ones(1).cuda()\n")
    # Links: inside the tree, out of it, dangling, and a loop.
    (src / "inner_link.py").symlink_to("pkg/model_0.py")
    outside = root / "outside.py"
    outside.write_text("import torch\nx = torch.ones(1).cuda()\n")
    (src / "outside_link.py").symlink_to(outside)
    (src / "outside_dir").symlink_to(root)
    (src / "dangling.py").symlink_to(root / "missing.py")
    (src / "pkg" / "loop").symlink_to("..")
    return src


EXPECTED_FAILURES = {
    "binary.py", "bad_utf8.py", "py2.py", "broken.py", "deep.py", "toolarge.py", "bad.sh", "pipe.py",
}
HAZARD_FAILURES = {"crash.py", "hang.py", "raises.py"}
SMALL_MAX_BYTES = 200_000  # toolarge.py is above it, big.py below


def tree_digest(root: Path) -> dict[str, str]:
    """Path -> what the file is (content hash and mode, link target, or kind), links not followed."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in sorted(dirnames + filenames):
            p = Path(dirpath) / name
            st = os.lstat(p)
            rel = str(p.relative_to(root))
            if stat.S_ISLNK(st.st_mode):
                out[rel] = "link:" + os.readlink(p)
            elif stat.S_ISREG(st.st_mode):
                out[rel] = f"{stat.S_IMODE(st.st_mode):o}:" + hashlib.sha256(p.read_bytes()).hexdigest()
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = "dir"
            else:
                out[rel] = "special"
    return out


class EditWhileConvertingRule(PythonRule):
    """Test-only rule: where a file names EDIT_HERE, saves a new version of it while it is being
    converted, as an editor would (the display path is the file's path in a tree run)."""

    ID = "test-edit-while-converting"
    SAFETY = "safe"
    TRIGGERS = ("EDIT_HERE",)

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == "EDIT_HERE":
            Path(self.ctx.path).write_text("# saved by the user meanwhile\n")
