"""Environment variables in Python: CUDA/NCCL names become the names the target reads."""

from __future__ import annotations

import re
from typing import cast

import libcst as cst

from npu_port.codemods._env_name_sets import EnvNameWalk, NameSet, file_name_sets, with_additions
from npu_port.codemods._env_table import EnvVarTable, env_triggers
from npu_port.transpiler.analysis.env_positions import EnvName, EnvPositions, single_index
from npu_port.transpiler.analysis.imports import dotted_name
from npu_port.transpiler.analysis.literals import string_value, with_string_value
from npu_port.transpiler.core.rules import PythonContext, PythonRule

# The callee of a message: print, a logger's or logging's methods, warnings.warn.
_MESSAGE = re.compile(r"^(?:print|warnings\.warn|\w*log\w*\.\w+|\w+\.(?:debug|info|warning|warn|error|exception|critical))$")


class EnvVarNames(EnvNameWalk, PythonRule):
    """Rename CUDA/NCCL environment variables where Python code reads or sets them.

    What it does:
        In env-var name positions only -- `os.environ[...]` (read, write, del), `os.environ.get/setdefault/
        pop`, `os.getenv/putenv/unsetenv`, `os.environ.update({...})` and `update(KEY=...)`, `"KEY" in
        os.environ`, copies of the environment (`dict(os.environ, KEY=...)`, `{**os.environ, ...}`, a
        variable assigned `os.environ.copy()`), `env=` of subprocess calls, Ray `runtime_env={"env_vars":
        {...}}`, and dicts that are environments by their role (passed as `env=`/`environment=` to any
        launcher, assigned to `env`/`worker_env`, returned from `def _prepare_env(...)`, every key an
        environment-style name and no value one) -- renames CUDA_VISIBLE_DEVICES -> ASCEND_RT_VISIBLE_DEVICES, PYTORCH_CUDA_ALLOC_CONF ->
        PYTORCH_NPU_ALLOC_CONF and NCCL_SOCKET_IFNAME -> HCCL_SOCKET_IFNAME. `from os import environ,
        getenv` and `import os as _os` are resolved through the imports.
        A CUDA name set in a file that sets the target name too (`os.environ["ASCEND_RT_VISIBLE_DEVICES"] = ids`
        beside the CUDA one: written for both platforms) stays (info); one read there is renamed.
        Variables Ascend still reads (CUDA_DEVICE_MAX_CONNECTIONS, NCCL_DEBUG, CUDA_HOME) stay; NCCL tuning
        with no HCCL equivalent (NCCL_IB_*, NCCL_P2P_DISABLE, ...) stays and is reported with a hint.
        A set, list or tuple of variable names used as a set of environment names (stripped from or copied
        out of the environment: `k not in NAMES` while looping over `os.environ.items()`, `for n in NAMES:
        os.environ.get(n)`) gains the renamed name beside the CUDA one, which stays (a registry of names must
        match the renamed reads); one that is also indexed, passed on or rebound, or whose loop turns each
        name into another key (`f"_{key.lower()}"`), is left and reported, and so are the file's reads and
        writes of its names (codemods/_env_name_sets.py). A command line built in a string that sets a
        renamed variable for the process it starts (`f"CUDA_VISIBLE_DEVICES={ranks} ./run.sh"`) is reported
        (warning), not rewritten; docstrings and the text of messages (print, logging) are not read.

    Why:
        torch_npu, Ray and vllm-ascend read the Ascend names; the CUDA names are silently ignored, so a
        device mask or allocator setting would simply stop applying.

    Example:
        os.environ["CUDA_VISIBLE_DEVICES"] = "0,1"    ->  os.environ["ASCEND_RT_VISIBLE_DEVICES"] = "0,1"
        logger.info("CUDA_VISIBLE_DEVICES=%s", ids)   ->  unchanged (a log message, not a position)
        EXCLUDED = {"CUDA_VISIBLE_DEVICES"}           ->  {"CUDA_VISIBLE_DEVICES", "ASCEND_RT_VISIBLE_DEVICES"}
            (when `{k: v for k, v in os.environ.items() if k not in EXCLUDED}` uses it)

    With --keep-cuda:
        os.environ["CUDA_VISIBLE_DEVICES"] = "0,1"
        ->  os.environ["CUDA_VISIBLE_DEVICES"] = os.environ["ASCEND_RT_VISIBLE_DEVICES"] = "0,1"
        (set under both names; a read of a CUDA name is kept for CUDA, with a warning)

    Fix safety:
        Safe: only literal names in positions that key an environment change, and the table is the
        renames upstream NPU scripts make. Names built at run time (f-strings) are left alone.
    """

    ID = "env-var-names"
    NEEDS_TORCH_NPU = False
    SAFETY = "safe"
    TRIGGERS = env_triggers()

    @classmethod
    def scout(cls, facts, options) -> bool:
        # A name position holds the name in a string literal or a keyword (`env.update(NAME=...)`); a
        # docstring is no position (trl's show usage lines such as `CUDA_VISIBLE_DEVICES=0 trl ...`).
        tokens = EnvVarTable.for_options(options).trigger_tokens()
        return (any(w.startswith(tokens) for w in facts.words)
                or facts.any_code_string(lambda s: any(t in s for t in tokens)))

    def __init__(self, ctx: PythonContext):
        super().__init__(ctx)
        self.table = EnvVarTable.for_options(ctx.options)
        self.positions = EnvPositions(ctx.imports)
        self._renames: dict[cst.CSTNode, tuple[str, str]] = {}
        self._seen: set[cst.CSTNode] = set()
        self._both: dict[cst.CSTNode, cst.Assign] = {}  # --keep-cuda: name node -> its assignment
        self._npu_set: dict[str, bool] = {}  # whether the file sets each NPU name (_set_in_file)
        self._writes: set[cst.CSTNode] = set()  # name positions that set the variable (a value given)
        self._name_sets: dict[cst.CSTNode, NameSet] = {}
        # CUDA names of the sets left as they are: their reads and writes in the file stay with them.
        self._held: dict[str, NameSet] = {}
        # Command lines that set a renamed variable (`"CUDA_VISIBLE_DEVICES=0 python ..."`), outside docstrings
        # and the text of messages (print, logging, warnings).
        renamed = sorted(r.cuda for r in self.table.rows if r.status == "rename" and not r.cuda.endswith("*"))
        self._assignment = re.compile(rf"(?<![\w$])({'|'.join(map(re.escape, renamed))})=") if renamed else re.compile("(?!)")
        self._prose: set[int] = set()
        self._message_calls: set[int] = set()
        self._messages = 0

    def visit_Module(self, node: cst.Module) -> None:
        complete, left = file_name_sets(self.ctx, self.table)
        self._name_sets = {names.node: names for names in complete}
        for names in left:
            listed = ", ".join(f"{new} beside {old}" for _, old, new in names.additions)
            self.report(names.node, "a set of environment-variable names that is also used otherwise (indexed, "
                        "passed on, rebound, or turned into other keys); left as is with the file's reads and "
                        f"writes of its names, though the NPU process needs {listed}",
                        severity="warning", hint=f"add {listed} where the names are stripped, copied or stored")
            self._held.update((old, names) for _, old, _ in names.additions)

    def _completed(self, original: cst.BaseExpression, updated: cst.BaseExpression) -> cst.BaseExpression:
        names = self._name_sets.get(original)
        if names is None or not isinstance(updated, (cst.Set, cst.List, cst.Tuple)):
            return updated
        listed = ", ".join(f"{new} beside {old}" for _, old, new in names.additions)
        new = with_additions(updated, names.additions)
        return self.rewrite(original, updated, new, f"environment-variable name set: {listed} (the reads are renamed)",
                            portable=lambda: new)

    def leave_Set(self, original: cst.Set, updated: cst.Set) -> cst.BaseExpression:
        return self._completed(original, updated)

    def leave_List(self, original: cst.List, updated: cst.List) -> cst.BaseExpression:
        return self._completed(original, updated)

    def leave_Tuple(self, original: cst.Tuple, updated: cst.Tuple) -> cst.BaseExpression:
        return self._completed(original, updated)

    def _take(self, found: list[EnvName]) -> None:
        for env in found:
            if env.node in self._seen:
                continue
            self._seen.add(env.node)
            row = self.table.lookup(env.name)
            if row is None or row.status == "keep":
                continue
            if row.status == "rename" and env.name in self._held:
                line = self.ctx.position(self._held[env.name].node).start.line
                self.report(env.node, f"{env.name} left as is: the set of variable names at line {line}, left as "
                            "is, holds it (the set and its reads and writes are one decision)", severity="info")
            elif row.status == "rename":
                self._renames[env.node] = (env.name, cast(str, row.npu))  # a rename row names it
                if env.value is not None:
                    self._writes.add(env.node)
            else:
                self.report(env.node, row.left(env.name, self.ctx.target),
                            severity="warning", hint=row.hint)

    # The name positions are found on the way down (EnvNameWalk), rewritten on the way up.
    def visit_Assign(self, node: cst.Assign) -> None:
        found = self._found_in_assign(node)
        self._take(found)
        if found and self.ctx.options.keep_cuda and len(node.targets) == 1 \
                and isinstance(node.targets[0].target, cst.Subscript):
            self._both[found[0].node] = node  # set under both names (--keep-cuda)
        if len(node.targets) > 1:  # `E[CUDA name] = E[NPU name] = v`: set under both names already
            keys = [single_index(t.target) for t in node.targets if isinstance(t.target, cst.Subscript)]
            named = {string_value(k) for k in keys if k is not None}
            for key in keys:
                if key is None:
                    continue
                rename = self._renames.get(key)
                if rename is not None and rename[1] in named:
                    del self._renames[key]

    def leave_Assign(self, original: cst.Assign, updated: cst.Assign):
        """--keep-cuda: `os.environ["CUDA_VISIBLE_DEVICES"] = v` sets the NPU name too, in one statement
        (`os.environ["CUDA_VISIBLE_DEVICES"] = os.environ["ASCEND_RT_VISIBLE_DEVICES"] = v`): the process
        reads whichever its device needs, and code that reads the CUDA name keeps working."""
        names = [n for n, assign in self._both.items() if assign is original and n in self._renames]
        if not names:
            return updated
        old, new = self._renames[names[0]]
        target = updated.targets[0]
        assert isinstance(target.target, cst.Subscript)
        key = single_index(target.target)
        if key is None or not isinstance(key, cst.SimpleString):
            return updated
        second = target.with_changes(target=target.target.with_changes(
            slice=[cst.SubscriptElement(cst.Index(with_string_value(key, new)))]))
        both = updated.with_changes(targets=[target, second])
        return self.rewrite(names[0], updated, updated, f"environment variable {old} -> also {new}",
                            portable=lambda: both)

    def visit_Expr(self, node: cst.Expr) -> None:
        if isinstance(node.value, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
            self._prose.add(id(node.value))  # a docstring or a bare string: no command

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        self._messages -= id(original) in self._message_calls
        return updated

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        self._command_assignment(node, node.raw_value)

    def visit_FormattedString(self, node: cst.FormattedString) -> None:
        text = "".join(p.value for p in node.parts if isinstance(p, cst.FormattedStringText))
        self._command_assignment(node, text)

    def _command_assignment(self, node: cst.CSTNode, text: str) -> None:
        """`f"CUDA_VISIBLE_DEVICES={ranks} ./run_train.sh"`: a command line that sets a variable for the
        process it starts. Built at run time, it is no position this rule renames: reported."""
        if self._messages or id(node) in self._prose or "=" not in text or node in self._renames:
            return
        found = self._assignment.search(text)
        if found is None:
            return
        row = self.table.lookup(found.group(1))
        if row is not None and row.status == "rename" and row.npu and not row.values:
            self.report(node, f"`{found.group(1)}=` in a command line built here: the process it starts on the NPU "
                              f"reads {row.npu}", severity="warning",
                        hint=f"set {row.npu} in the command (with the same value), or pass env= with it")

    def visit_Call(self, node: cst.Call) -> None:
        if _MESSAGE.search(dotted_name(node.func) or ""):
            self._message_calls.add(id(node))
            self._messages += 1
        self._take(self.positions.in_call(node))

    def visit_Dict(self, node: cst.Dict) -> None:
        self._take(self.positions.in_dict(node))

    def _renamed(self, original: cst.BaseExpression, updated: cst.BaseExpression, new_node_for) -> cst.BaseExpression:
        rename = self._renames.get(original)
        if rename is None:
            return updated
        old, new = rename
        if original in self._both:
            return updated  # set under both names by leave_Assign
        if original in self._writes and self._set_in_file(new):
            self.report(original, f"{old} left as is: the file sets {new} too (it sets both, for either platform); "
                                  "renamed, it would set it twice", severity="info")
            return updated
        return self.rewrite(original, updated, new_node_for(new), f"environment variable {old} -> {new}")

    def _set_in_file(self, name: str) -> bool:
        """Whether the file's code sets `name` (`E["ASCEND_RT_VISIBLE_DEVICES"] = ...`, a dict key, a keyword): a
        file written for both platforms, where a CUDA name set beside it stays. (A CUDA name read where the NPU's
        is set is a half port: renamed.)"""
        found = self._npu_set.get(name)
        if found is None:
            quoted = rf"""["']{re.escape(name)}["']"""
            found = self._npu_set[name] = re.search(rf"{quoted}\s*\]\s*=(?!=)|{quoted}\s*:|\b{re.escape(name)}\s*=(?!=)",
                                                    self.ctx.text) is not None
        return found

    def leave_SimpleString(self, original: cst.SimpleString, updated: cst.SimpleString) -> cst.BaseExpression:
        return self._renamed(original, updated, lambda new: with_string_value(updated, new))

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
        return self._renamed(original, updated, lambda new: updated.with_changes(value=new))
