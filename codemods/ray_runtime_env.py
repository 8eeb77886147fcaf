"""Ray (extras): merge the NPU runtime_env (HCCL settings, device-mask policy, the script's NPU
variables) into `ray.init(...)`."""

from __future__ import annotations

import json
from typing import Optional, cast

import libcst as cst

from npu_port.codemods._env_table import EnvVarTable
from npu_port.transpiler.analysis.env_positions import RAY_ENV_KEY, EnvName, EnvPositions
from npu_port.transpiler.analysis.imports import ImportTable
from npu_port.transpiler.analysis.literals import (
    append_arg,
    append_dict_elements,
    dict_element,
    dict_string_keys,
    element_keys,
    has_star_args,
    keyword,
    line_indent,
    quote_like,
    string_value,
)
from npu_port.transpiler.core.cst_walk import visit
from npu_port.transpiler.core.rules import PythonContext, PythonRule
from npu_port.transpiler.tables.runtime_env import load_profile

RAY_INIT = "ray.init"


class _ProcessEnvWrites(cst.CSTVisitor):
    """Every place the file sets a variable in its own environment (os.environ[K] = v, setdefault,
    update, putenv). A pre-pass: a write after `ray.init` in the source (an actor defined below main)
    still counts."""

    def __init__(self) -> None:
        super().__init__()
        self.imports = ImportTable()
        self.positions = EnvPositions(self.imports)
        self.writes: list[EnvName] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.imports.enter(node)
        return super().on_visit(node)

    def on_leave(self, original_node: cst.CSTNode) -> None:
        super().on_leave(original_node)
        self.imports.leave(original_node)

    def visit_Assign(self, node: cst.Assign) -> None:
        self.positions.track_assignment([t.target for t in node.targets], node.value)
        for t in node.targets:
            if isinstance(t.target, cst.Subscript):
                self._keep(self.positions.in_subscript(t.target, node.value))

    def visit_Call(self, node: cst.Call) -> None:
        self._keep(self.positions.in_call(node))

    def _keep(self, found: list[EnvName]) -> None:
        self.writes.extend(e for e in found if e.sets_process_env)


class RayRuntimeEnv(PythonRule):
    """Give Ray workers the NPU environment through `ray.init(runtime_env=...)` (extras).

    What it does:
        Merges into the `env_vars` of every `ray.init(...)`:
        - the profile's settings (HCCL_CONNECT_TIMEOUT, HCCL_EXEC_TIMEOUT, HCCL_HOST_SOCKET_PORT_RANGE,
          HCCL_NPU_SOCKET_PORT_RANGE by default, as VERL and MindSpeed-RL ship them);
        - RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES=1 when the script sets ASCEND_RT_VISIBLE_DEVICES
          (or CUDA_VISIBLE_DEVICES) itself;
        - the NPU variables the script sets through os.environ with a literal value (HCCL_*, PYTORCH_NPU_ALLOC_CONF,
          ...), so that workers on other nodes see them too.
        A missing `runtime_env=` or `"env_vars"` is added; keys already there are never overwritten, so a
        second run changes nothing. A `runtime_env=` or `env_vars` given as a variable, and `ray.init(**kwargs)`,
        are reported instead. The values come from codemods/data/<target>/runtime_env.yaml, or from the file
        given with `--runtime-env FILE.yaml`.

    Why:
        Variables exported in the driver's shell or set in the driver process reach only the local node's
        workers; on a multi-node NPU cluster HCCL then runs with default timeouts and ports, and Ray resets
        the device mask the script chose.

    Example:
        ray.init(runtime_env={"env_vars": {"NCCL_DEBUG": "WARN"}})
        ->
        ray.init(runtime_env={"env_vars": {
            "NCCL_DEBUG": "WARN",
            "HCCL_CONNECT_TIMEOUT": "1500",
            ...
        }})

    With --keep-cuda:
        The same entries: only the Ascend stack reads them (HCCL, torch_npu's allocator, Ray's NPU
        accelerator manager for RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES), so a GPU cluster runs
        as before. VERL's own runtime_env sets HCCL_HOST_SOCKET_PORT_RANGE / HCCL_NPU_SOCKET_PORT_RANGE
        for every device the same way (verl/trainer/constants_ppo.py).

    Fix safety:
        Review (an extra, off by default): the values are a profile, not derived from the program; check
        them against the cluster (ports, timeouts). With NOSET set, every worker sees all devices of its node
        and must select its own, as VERL and MindSpeed-RL workers do.
    """

    ID = "ray-runtime-env"
    NEEDS_TORCH_NPU = False
    SAFETY = "review"
    GROUP = "extras"
    TRIGGERS = ("ray",)

    @classmethod
    def scout(cls, facts, options) -> bool:
        # Everything it changes or reports starts at a call the imports resolve to ray.init (leave_Call;
        # the env writes are read only from there): such a call needs an import under ray, and spells
        # `ray` and `init` in the code (the import statement or the attribute chain). verl names ray in
        # most of its files and calls ray.init in few: with --extras, 92 of the 114 Python files parsed
        # for nothing were this rule's.
        return facts.imports_root("ray") and facts.may_name(RAY_INIT)

    def __init__(self, ctx: PythonContext):
        super().__init__(ctx)
        self.profile = load_profile(ctx.target, ctx.options.runtime_env_profile)
        self.env_table = EnvVarTable.for_options(ctx.options)
        self._wanted: Optional[list[tuple[str, cst.BaseExpression]]] = None

    def _wanted_env(self) -> list[tuple[str, cst.BaseExpression]]:
        """The env_vars every ray.init should carry, in order: profile, device policy, the script's own."""
        if self._wanted is not None:
            return self._wanted
        collector = _ProcessEnvWrites()
        visit(self.ctx.module, collector)
        wanted: dict[str, cst.BaseExpression] = {k: _literal(v) for k, v in self.profile.env_vars}
        writes = [(self.env_table.target_name(w.name), w) for w in collector.writes]
        if any(w.name in self.profile.device_variables or name in self.profile.device_variables
               for name, w in writes):
            wanted.update((k, _literal(v)) for k, v in self.profile.when_devices_managed)
        for name, write in writes:
            if not self.profile.forwards(name):
                continue
            value = write.value
            if value is None or string_value(value) is None:
                self.report(write.node, f"{name} is set to a computed value; add it to ray.init's runtime_env "
                                        "env_vars by hand if workers need it", severity="info")
                continue
            wanted[name] = value.deep_clone()
        self._wanted = list(wanted.items())
        return self._wanted

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        if self.ctx.resolve(original.func) != RAY_INIT:
            return updated
        runtime_env = keyword(updated, "runtime_env")
        if runtime_env is None:
            if has_star_args(updated):
                return self._refuse(original, updated, "ray.init(**kwargs) may carry a runtime_env")
            wanted = self._wanted_env()
            if not wanted:
                return updated
            last = original.args[-1] if original.args else original
            indent = line_indent(self.ctx.text, self.ctx.position(last).start.line)
            env = self._new_dict(wanted, indent)
            arg = cst.Arg(keyword=cst.Name("runtime_env"), value=cst.Dict([dict_element(RAY_ENV_KEY, env)]),
                          equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                                whitespace_after=cst.SimpleWhitespace("")))
            new = append_arg(updated, arg)
            return self.rewrite(original, updated, new, f"runtime_env added to ray.init: {_names_of(wanted)}",
                                portable=lambda: new)  # read by the Ascend stack only (With --keep-cuda)
        if not isinstance(runtime_env.value, cst.Dict):
            return self._refuse(original, updated, "runtime_env= is not a literal dict")
        original_env = cast(cst.Arg, keyword(original, "runtime_env")).value  # updated's came from it
        element = dict_string_keys(runtime_env.value).get(RAY_ENV_KEY)
        if element is None:
            wanted = self._wanted_env()
            if not wanted:
                return updated
            indent = line_indent(self.ctx.text, self.ctx.position(original_env).start.line)
            quote = quote_like(element_keys(runtime_env.value))
            new_env = append_dict_elements(runtime_env.value, [
                dict_element(RAY_ENV_KEY, self._new_dict(wanted, indent, quote), quote)], line_indent=indent)
            return self._replace_runtime_env(original, updated, runtime_env, new_env, wanted)
        if not isinstance(element.value, cst.Dict):
            return self._refuse(original, updated, "runtime_env[\"env_vars\"] is not a literal dict")
        present = {self.env_table.target_name(k) for k in dict_string_keys(element.value)}
        missing = [(k, v) for k, v in self._wanted_env() if k not in present]
        if not missing:
            return updated
        original_vars = dict_string_keys(cast(cst.Dict, original_env))[RAY_ENV_KEY].value
        indent = line_indent(self.ctx.text, self.ctx.position(original_vars).start.line)
        quote = quote_like(element_keys(element.value))
        merged = append_dict_elements(element.value, [dict_element(k, _requote(v, quote), quote) for k, v in missing],
                                      line_indent=indent, indent_unit=self.ctx.module.default_indent, explode=True)
        new_env = runtime_env.value.with_changes(elements=[
            el.with_changes(value=merged) if el is element else el for el in runtime_env.value.elements])
        return self._replace_runtime_env(original, updated, runtime_env, new_env, missing)

    def _replace_runtime_env(self, original, updated, arg, new_env, added):
        new = updated.with_changes(args=[a.with_changes(value=new_env) if a is arg else a for a in updated.args])
        return self.rewrite(original, updated, new, f"runtime_env env_vars of ray.init: added {_names_of(added)}",
                            portable=lambda: new)  # read by the Ascend stack only (With --keep-cuda)

    def _refuse(self, original: cst.Call, updated: cst.Call, why: str) -> cst.Call:
        names = _names_of(self._wanted_env())
        self.report(original, f"{why}: add the NPU env_vars to the runtime_env by hand",
                    hint=f"runtime_env={{\"env_vars\": {{...}}}} with {names}")
        return updated

    def _new_dict(self, items, indent: str, quote: str = '"') -> cst.Dict:
        return append_dict_elements(cst.Dict([]), [dict_element(k, _requote(v, quote), quote) for k, v in items],
                                    line_indent=indent, indent_unit=self.ctx.module.default_indent, explode=True)


def _literal(value: str, quote: str = '"') -> cst.SimpleString:
    if quote == "'" and not any(c in value for c in "'\"\\"):
        return cst.SimpleString(f"'{value}'")
    return cst.SimpleString(json.dumps(value))


def _requote(value: cst.BaseExpression, quote: str) -> cst.BaseExpression:
    """A plain string value in the quote style of the dict it joins."""
    if isinstance(value, cst.SimpleString) and value.quote != quote and value.prefix == "":
        text = string_value(value)
        if text is not None and value.value == json.dumps(text):
            return _literal(text, quote)
    return value


def _names_of(items) -> str:
    return ", ".join(k for k, _ in items)
