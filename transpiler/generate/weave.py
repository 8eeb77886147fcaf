"""Weave an inference adapter into an existing (converted) training script.

The adapter classes of `npu-port generate vllm-infer` go after the script's imports (missing imports
are added, present ones reused), and a `run_pipeline(*args, **kwargs)` entry is added before the
`if __name__ == "__main__":` block: it sets up the adapter, calls the script's own training entry
with the same arguments and hands new weights to the adapter. Calls of the entry in the main block
(or bare module-level calls) are pointed at `run_pipeline`. Nothing else is touched, and a script
that already carries the marker or the adapter classes comes back unchanged.

With `agent` (`weave --agent-loop`) the script must train through VERL's `run_ppo`: its config argument
is wrapped in `with_agent_loop(...)`, which puts the agent into VERL's rollouts (the tool agent loop with
the agent's tools and reward) at run time, and `run_pipeline` hands the newest checkpoint to the agent's
vLLM engine and evaluates the same agent loop afterwards. The agent code is the `generate pipeline`
templates' (skeletons/pipeline/_agent_loop.py.j2): one template, two users.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional, TypeVar, Union

import libcst as cst

from npu_port.transpiler.analysis.imports import bindings_of
from npu_port.transpiler.analysis.literals import is_main_guard
from npu_port.transpiler.core.files import too_deep_for_this_process
from npu_port.transpiler.core.python_source import parse_module, syntax_error_message
from npu_port.transpiler.generate import handoff_checks
from npu_port.transpiler.generate.contexts import version_set, weight_handoff
from npu_port.transpiler.generate.render import python_literal, render_partial, schemas
from npu_port.transpiler.generate.schema import is_identifier

# A statement of a module's or a block's body (what `Module.body` holds): both kinds carry leading_lines.
_Stmt = Union[cst.SimpleStatementLine, cst.BaseCompoundStatement]
_StmtT = TypeVar("_StmtT", cst.SimpleStatementLine, cst.BaseCompoundStatement, _Stmt)

ADAPTERS = {"vllm": "vllm-infer"}
MARKER = "# npu-port: woven vllm adapter"
ENTRY_CANDIDATES = ("main", "train", "run", "fit")
PIPELINE_ENTRY = "run_pipeline"
RUN_PPO = "verl.trainer.main_ppo.run_ppo"
TASK_RUNNER_V1 = "TaskRunnerV1"  # verl.trainer.main_ppo.TaskRunnerV1 (verl 0.9)
AGENT_WRAPPER = "with_agent_loop"
# The sample tools and reward written next to the woven script when the user names none of their own.
SAMPLE_TOOLS = "agent_tools.py"
SAMPLE_REWARD = "agent_reward.py"
# The agent settings `generate pipeline` has too: validated by its schema's options.
AGENT_SCHEMA_OPTIONS = ("agent_max_turns", "weight_handoff", "eval_max_samples")


class WeaveError(ValueError):
    pass


@dataclass(frozen=True)
class AgentOptions:
    """`weave --agent-loop`: the agent's tools and reward (None: the samples, written next to the script;
    paths as the woven script reads them, relative to its folder), and the pipeline's agent settings."""

    tools: Optional[str] = None
    reward: Optional[str] = None
    reward_name: str = "compute_score"
    agent_max_turns: int = 4
    weight_handoff: str = "reload"
    eval_files: Optional[str] = None  # None: the training config's data.val_files
    eval_max_samples: int = 64

    def problems(self) -> list[str]:
        found = []
        options = schemas()["pipeline"].options
        for name in AGENT_SCHEMA_OPTIONS:
            try:
                options[name].coerce(getattr(self, name))
            except ValueError as exc:
                found.append(str(exc))
        if not is_identifier(self.reward_name):
            found.append(f"--reward: {self.reward_name!r} is not a Python function name")
        for flag, value in (("--tools", self.tools), ("--reward", self.reward), ("--eval-files", self.eval_files)):
            if value is not None and (not value or "${" in value or "\x00" in value):
                found.append(f"{flag}: {value!r} is not a usable path")
        return found


@dataclass
class WeaveResult:
    source: str
    changed: bool
    entry: Optional[str] = None
    added_imports: list[str] = field(default_factory=list)
    rewired_calls: int = 0
    note: str = ""
    # File name -> text to write next to the woven script (the sample tools and reward of --agent-loop).
    companions: dict[str, str] = field(default_factory=dict)
    agent_calls: int = 0  # run_ppo calls whose config now goes through with_agent_loop()


def weave_source(source: str, adapter: str = "vllm", *, options: Optional[Mapping[str, Any]] = None,
                 entry: Optional[str] = None, handoff_dir: Optional[str] = None,
                 agent: Optional[AgentOptions] = None) -> str:
    """The script with the adapter woven in (unchanged if it already has it); raises WeaveError."""
    return weave(source, adapter, options=options, entry=entry, handoff_dir=handoff_dir, agent=agent).source


def weave(source: str, adapter: str = "vllm", *, options: Optional[Mapping[str, Any]] = None,
          entry: Optional[str] = None, handoff_dir: Optional[str] = None,
          agent: Optional[AgentOptions] = None) -> WeaveResult:
    if adapter not in ADAPTERS:
        raise WeaveError(f"unknown adapter {adapter!r} (known: {', '.join(ADAPTERS)})")
    if agent is not None:
        _check_agent_request(agent, options, handoff_dir)
    if too_deep_for_this_process(source.encode("utf-8")):  # LibCST's parser would crash this process
        raise WeaveError("the script is nested too deeply for the parser (Python itself cannot compile it)")
    try:
        module = parse_module(source)
    except cst.ParserSyntaxError as exc:
        raise WeaveError(f"the script does not parse: {syntax_error_message(source, exc)}") from None
    except RecursionError:
        raise WeaveError("the script is nested too deeply for the parser (RecursionError)") from None
    try:
        return _weave_module(module, source, adapter, options, entry, handoff_dir, agent)
    except RecursionError:  # a statement deep enough to parse but not to walk
        raise WeaveError("the script is nested too deeply to weave (RecursionError)") from None


def _weave_module(module: cst.Module, source: str, adapter: str, options: Optional[Mapping[str, Any]],
                  entry: Optional[str], handoff_dir: Optional[str], agent: Optional[AgentOptions]) -> WeaveResult:
    if MARKER in source or _defines(module, {"BaseAgentAdapter", "VLLMAdapter"}):
        if agent is not None and not _defines(module, {AGENT_WRAPPER}):
            raise WeaveError("the script is already woven without --agent-loop (the adapter alone); weave the "
                             "script it was woven from with --agent-loop")
        return WeaveResult(source, False, note="already woven: the marker or the adapter classes are present")

    kind = ADAPTERS[adapter]
    values = schemas()[kind].validate(dict(options or {}))
    imports_src = render_partial("vllm_infer/_adapter_imports.py.j2", kind, values)
    classes_src = render_partial("vllm_infer/_adapter_classes.py.j2", kind, values)
    entry_name = _find_entry(module, entry)
    existing = _module_bindings(module)
    agent_calls = 0
    companions: dict[str, str] = {}
    if agent is not None:
        module, agent_calls, runner_added = _wrap_run_ppo_configs(module, version_set(values).trainer == "v1")
        agent_values = {**values, **_agent_context(agent, entry_name), "import_task_runner_v1": runner_added,
                        "weight_handoff": weight_handoff({**values, "weight_handoff": agent.weight_handoff})}
        imports_src += render_partial("pipeline/_agent_imports.py.j2", kind, agent_values)
        pipeline_stmts = _parse_statements(render_partial("pipeline/_woven_agent.py.j2", kind, agent_values))
        pipeline_stmts = [_spaced(pipeline_stmts[0]), *pipeline_stmts[1:]]
        companions = {name: render_partial(f"pipeline/{name}.j2", kind, agent_values)
                      for name, given in ((SAMPLE_TOOLS, agent.tools), (SAMPLE_REWARD, agent.reward)) if given is None}
    else:
        pipeline_stmts = _pipeline_entry(entry_name, handoff_dir)

    adapter_imports = _merged_imports(_parse_statements(imports_src))
    adapter_body = _parse_statements(classes_src)
    clashes = sorted((_defined_names(adapter_body) | _defined_names(pipeline_stmts) | {PIPELINE_ENTRY}) & existing.keys())
    if clashes:
        raise WeaveError(f"the script already defines {', '.join(clashes)}; rename them or weave by hand")
    new_imports, added = _missing_imports(adapter_imports, existing)
    adapter_body[0] = _spaced(adapter_body[0], 1)

    header = version_set(values).header_lines()
    body = list(module.body)
    insert_at = _after_imports(body)
    guard_at = next((i for i, st in enumerate(body) if is_main_guard(st)), None)

    if guard_at is None:
        # No main block: the entry goes before the first top-level call of the training entry (so the
        # rewired call can see it), else last, where it sees every definition of the script.
        guard_at = next((i for i, st in enumerate(body)
                         if isinstance(st, cst.SimpleStatementLine) and _rewire(st, entry_name)[1]), None)
    rewired = 0
    new_body: list[_Stmt] = []
    for i, stmt in enumerate(body):
        if i == insert_at:
            new_body.extend(_with_marker(new_imports + adapter_body, header))
            stmt = _spaced(stmt)
        if i == guard_at:
            new_body.extend(pipeline_stmts)
            stmt = _spaced(stmt)
        if i >= (guard_at if guard_at is not None else len(body)) and not isinstance(
                stmt, (cst.FunctionDef, cst.ClassDef)):
            stmt, n = _rewire(stmt, entry_name)
            rewired += n
        new_body.append(stmt)
    if insert_at == len(body):
        new_body.extend(_with_marker(new_imports + adapter_body, header))
    if guard_at is None:
        new_body.extend(pipeline_stmts)
    out = module.with_changes(body=new_body).code
    note = "" if rewired else (f"no call of {entry_name}() in a main block to point at {PIPELINE_ENTRY}(); "
                               f"call {PIPELINE_ENTRY}() yourself")
    return WeaveResult(out, True, entry_name, added, rewired, note, companions, agent_calls)


# --- the agent loop (--agent-loop) ----------------------------------------------------------------------

def _check_agent_request(agent: AgentOptions, options: Optional[Mapping[str, Any]], handoff_dir: Optional[str]) -> None:
    """What --agent-loop cannot take: settings the training config decides, and invalid agent settings."""
    problems = agent.problems()
    if handoff_dir is not None:
        problems.append("--handoff-dir: with --agent-loop the weights come from VERL's newest checkpoint "
                        "(trainer.default_local_dir)")
    if options:
        problems += handoff_checks.problems({"weight_handoff": agent.weight_handoff, **options})
    if options and options.get("model_path") is not None:
        problems.append("--model-path: with --agent-loop the agent's engine serves the model VERL trains "
                        "(actor_rollout_ref.model.path), whose checkpoints replace its weights")
    if problems:
        raise WeaveError("; ".join(problems))


def _agent_context(agent: AgentOptions, entry: str) -> dict[str, Any]:
    return {"entry": entry, "agent_max_turns": agent.agent_max_turns, "weight_handoff": agent.weight_handoff,
            "eval_files": agent.eval_files, "eval_max_samples": agent.eval_max_samples,
            "tools_path": agent.tools or SAMPLE_TOOLS, "reward_path": agent.reward or SAMPLE_REWARD,
            "reward_name": agent.reward_name}


def _wrap_run_ppo_configs(module: cst.Module, v1: bool = False) -> tuple[cst.Module, int, bool]:
    """Every call of VERL's run_ppo gets `with_agent_loop(config)` for its config; a script without one
    trains some other way, where weave cannot put the agent into the rollouts. With `v1` (a set whose
    run_ppo is `run_ppo(config, task_runner_class)`, verl 0.9.1), a call that passes no task runner gets
    `task_runner_class=TaskRunnerV1`, what verl's own main() passes (trainer.use_v1 is VERL's default):
    `run_ppo(config)` is a TypeError there. The third value says whether TaskRunnerV1 must be imported."""
    names, modules = set(), set()
    for stmt in module.body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                for local, binding in bindings_of(small):
                    if binding.target == RUN_PPO:
                        names.add(local)
                    elif binding.target == RUN_PPO.rsplit(".", 1)[0]:
                        modules.add(local)

    problems: list[str] = []

    class Wrap(cst.CSTTransformer):
        count = 0
        runner_added = False

        def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
            func = updated.func
            if not ((isinstance(func, cst.Name) and func.value in names) or (
                    isinstance(func, cst.Attribute) and func.attr.value == "run_ppo"
                    and isinstance(func.value, cst.Name) and func.value.value in modules)):
                return updated
            args = list(updated.args)
            at = next((i for i, a in enumerate(args) if a.keyword is not None and a.keyword.value == "config"),
                      0 if args and args[0].keyword is None and not args[0].star else None)
            if at is None:
                problems.append("a run_ppo(...) call passes no config weave can see (give it as the first "
                                "argument or config=...)")
                return updated
            wrapped = cst.Call(func=cst.Name(AGENT_WRAPPER), args=[cst.Arg(args[at].value)])
            args[at] = args[at].with_changes(value=wrapped)
            self.count += 1
            if v1 and _passes_no_task_runner(args):
                args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
                args.append(cst.Arg(keyword=cst.Name("task_runner_class"), value=cst.Name(TASK_RUNNER_V1),
                                    equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                                          whitespace_after=cst.SimpleWhitespace(""))))
                self.runner_added = True
            return updated.with_changes(args=args)

    transformer = Wrap()
    new = module.visit(transformer)
    if problems:
        raise WeaveError(problems[0])
    if not transformer.count:
        raise WeaveError("--agent-loop puts the agent into VERL's rollouts, and the script calls no "
                         "verl.trainer.main_ppo.run_ppo(config): weave it without --agent-loop (the adapter "
                         "alone, INFERENCE_ADAPTER), or start from `npu-port generate pipeline`")
    return new, transformer.count, transformer.runner_added


def _passes_no_task_runner(args: list[cst.Arg]) -> bool:
    """A run_ppo call with its config alone: one positional argument, no task_runner_class=, no *args/**kw."""
    positional = [a for a in args if a.keyword is None and not a.star]
    return (len(positional) <= 1 and not any(a.star for a in args)
            and not any(a.keyword is not None and a.keyword.value == "task_runner_class" for a in args))


# --- finding things ---------------------------------------------------------------------------------------

def _defines(module: cst.Module, names: set[str]) -> bool:
    return bool(_defined_names(module.body) & names)


def _defined_names(body: Sequence[cst.CSTNode]) -> set[str]:
    names = set()
    for stmt in body:
        if isinstance(stmt, (cst.ClassDef, cst.FunctionDef)):
            names.add(stmt.name.value)
        elif isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                targets = []
                if isinstance(small, cst.Assign):
                    targets = [t.target for t in small.targets]
                elif isinstance(small, cst.AnnAssign):
                    targets = [small.target]
                names.update(t.value for t in targets if isinstance(t, cst.Name))
    return names


def _module_bindings(module: cst.Module) -> dict[str, str]:
    """Module-level names -> what they are bound to ("import:<target>" for imports, "def" otherwise)."""
    bound = {name: "def" for name in _defined_names(module.body)}
    for stmt in module.body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                for local, target in bindings_of(small):
                    bound[local] = f"import:{target}"
    return bound


def _find_entry(module: cst.Module, entry: Optional[str]) -> str:
    functions = {s.name.value for s in module.body if isinstance(s, cst.FunctionDef)}
    if entry is not None:
        if not is_identifier(entry):
            raise WeaveError(f"--entry {entry!r} is not a Python identifier")
        if entry not in functions:
            raise WeaveError(f"the script has no module-level function {entry}()")
        return entry
    for stmt in module.body:
        if is_main_guard(stmt):
            for node in _calls_in(stmt):
                if isinstance(node.func, cst.Name) and node.func.value in functions:
                    return node.func.value
    for name in ENTRY_CANDIDATES:
        if name in functions:
            return name
    raise WeaveError("no training entry found (no function called from the main block and none named "
                     f"{', '.join(ENTRY_CANDIDATES)}); pass --entry NAME")


def _calls_in(node: cst.CSTNode) -> list[cst.Call]:
    found: list[cst.Call] = []

    class Collector(cst.CSTVisitor):
        def visit_Call(self, n: cst.Call) -> None:
            found.append(n)

        def visit_FunctionDef(self, n: cst.FunctionDef) -> bool:
            return False

        def visit_ClassDef(self, n: cst.ClassDef) -> bool:
            return False

    node.visit(Collector())
    return found


def _after_imports(body: Sequence[cst.BaseStatement]) -> int:
    """Index after the last top-level import that comes before the first def, class or main block."""
    last = -1
    for i, stmt in enumerate(body):
        if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)) or is_main_guard(stmt):
            break
        if isinstance(stmt, cst.SimpleStatementLine) and any(
                isinstance(s, (cst.Import, cst.ImportFrom)) for s in stmt.body):
            last = i
        elif isinstance(stmt, cst.If | cst.Try) and _contains_import(stmt):
            last = i  # `try: import x except ImportError: ...` belongs to the import block
    if last >= 0:
        return last + 1
    # No imports: after a leading docstring, if any.
    if body and isinstance(body[0], cst.SimpleStatementLine) and isinstance(body[0].body[0], cst.Expr) \
            and isinstance(body[0].body[0].value, (cst.SimpleString, cst.ConcatenatedString)):
        return 1
    return 0


def _contains_import(stmt: cst.CSTNode) -> bool:
    found: list[Union[cst.Import, cst.ImportFrom]] = []

    class Finder(cst.CSTVisitor):
        def visit_Import(self, n: cst.Import) -> None:
            found.append(n)

        def visit_ImportFrom(self, n: cst.ImportFrom) -> None:
            found.append(n)

    stmt.visit(Finder())
    return bool(found)


def _missing_imports(statements: list[_Stmt], existing: Mapping[str, str]) -> tuple[list[_Stmt], list[str]]:
    """The adapter's import statements minus what the script already imports; a clash is an error."""
    out: list[_Stmt] = []
    added: list[str] = []
    module = cst.Module(body=[])
    for stmt in statements:
        assert isinstance(stmt, cst.SimpleStatementLine)
        small = stmt.body[0]
        bindings = bindings_of(small)
        needed = []
        for (local, target), alias in zip(bindings, _aliases(small)):
            have = existing.get(local)
            if have == f"import:{target}":
                continue
            if have is not None:
                raise WeaveError(f"the script binds {local!r} to something else than {target}; "
                                 "the adapter needs that name")
            needed.append(alias)
        if not needed:
            continue
        if isinstance(small, cst.ImportFrom):
            needed[-1] = needed[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
            small = small.with_changes(names=needed)
        stmt = stmt.with_changes(body=[small])
        out.append(stmt)
        added.append(module.code_for_node(stmt).strip())
    return out, added


def _merged_imports(statements: list[_Stmt]) -> list[_Stmt]:
    """The adapter's and the agent's import lines as one list: a module imported twice once, and the names
    of two `from M import ...` of the same module in the first of them."""
    out: list[_Stmt] = []
    seen: set[str] = set()
    from_at: dict[str, int] = {}
    module = cst.Module(body=[])
    for stmt in statements:
        assert isinstance(stmt, cst.SimpleStatementLine)
        small = stmt.body[0]
        if isinstance(small, cst.ImportFrom) and small.module is not None and not isinstance(small.names, cst.ImportStar):
            name = module.code_for_node(small.module)
            if name in from_at:
                first = out[from_at[name]]
                assert isinstance(first, cst.SimpleStatementLine)
                head = first.body[0]
                assert isinstance(head, cst.ImportFrom) and not isinstance(head.names, cst.ImportStar)
                have = {module.code_for_node(a.name) for a in head.names}
                extra = [a for a in small.names if module.code_for_node(a.name) not in have]
                names = sorted([*head.names, *extra], key=lambda a: module.code_for_node(a.name))
                names = [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in names]
                out[from_at[name]] = first.with_changes(body=[head.with_changes(names=names)])
                continue
            from_at[name] = len(out)
        else:
            key = module.code_for_node(small).strip()
            if key in seen:
                continue
            seen.add(key)
        out.append(stmt)
    return out


def _aliases(small: cst.BaseSmallStatement) -> list[cst.ImportAlias]:
    names = getattr(small, "names", ())
    return list(names) if not isinstance(names, cst.ImportStar) else []


# --- building -------------------------------------------------------------------------------------------

def _parse_statements(code: str) -> list[_Stmt]:
    # A leading `pass` keeps the snippet's first comments on its first statement instead of the module header.
    return list(cst.parse_module("pass\n" + code).body[1:])


def _spaced(stmt: _StmtT, blank: int = 2) -> _StmtT:
    """PEP 8 spacing before a statement that now follows inserted code (only blank lines are added)."""
    lines = list(stmt.leading_lines)
    leading_blank = next((i for i, line in enumerate(lines) if line.comment is not None), len(lines))
    if leading_blank >= blank:
        return stmt
    return stmt.with_changes(leading_lines=[cst.EmptyLine()] * (blank - leading_blank) + lines)

def _with_marker(statements: list[_Stmt], header: Sequence[str] = ()) -> list[_Stmt]:
    if not statements:
        return statements
    first = statements[0]
    lines = [cst.EmptyLine(), cst.EmptyLine(comment=cst.Comment(
        f"{MARKER} (npu-port weave): inference adapter for the training loop below"))]
    # The version set the woven code was checked against, as every generated file names it.
    lines += [cst.EmptyLine(comment=cst.Comment(f"# {line}")) for line in header]
    body_lines = [line for line in first.leading_lines if line.comment is not None or line.indent]
    return [first.with_changes(leading_lines=lines + body_lines), *statements[1:]]


def _pipeline_entry(entry: str, handoff_dir: Optional[str]) -> list[_Stmt]:
    probe = schemas()["pipeline"].options["probe_prompt"].default
    code = f'''# Set by {PIPELINE_ENTRY}(); training code can use it to query the policy while it trains.
INFERENCE_ADAPTER: Optional[BaseAgentAdapter] = None
# Where training leaves Hugging Face weights for the adapter (None: it serves ADAPTER_MODEL_PATH).
ADAPTER_HANDOFF_DIR = {python_literal(handoff_dir)}
# Asked of the adapter once training is done: its answer shows the weights it serves work.
ADAPTER_PROBE_PROMPT = {python_literal(probe)}


def {PIPELINE_ENTRY}(*args: Any, **kwargs: Any) -> Any:
    """Pipeline entry added by npu-port weave: set up the inference adapter (INFERENCE_ADAPTER), run {entry}()
    with the same arguments, then hand the trained weights to the adapter (the Hugging Face folder
    ADAPTER_HANDOFF_DIR; an error when training left none there) and ask it ADAPTER_PROBE_PROMPT. In a
    distributed run only rank 0 serves. vLLM starts on first use, so training keeps the NPUs until then."""
    global INFERENCE_ADAPTER
    INFERENCE_ADAPTER = VLLMAdapter()
    try:
        result = {entry}(*args, **kwargs)
        if int(os.environ.get("RANK", "0")) != 0:
            return result
        if ADAPTER_HANDOFF_DIR:
            how = INFERENCE_ADAPTER.hand_off_weights(ADAPTER_HANDOFF_DIR)
            print(f"serving {{ADAPTER_HANDOFF_DIR}} ({{how}})")
        else:
            print(f"serving {{INFERENCE_ADAPTER.model}} (no hand-off folder: the model it started with)")
        print(INFERENCE_ADAPTER.generate(ADAPTER_PROBE_PROMPT))
        return result
    finally:
        INFERENCE_ADAPTER.close()
'''
    stmts = _parse_statements(code)
    return [_spaced(stmts[0]), *stmts[1:]]


def _rewire(stmt: _StmtT, entry: str) -> tuple[_StmtT, int]:
    """Point calls of `entry` (outside nested defs) at run_pipeline."""

    class Rewire(cst.CSTTransformer):
        count: int = 0

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return False

        def visit_ClassDef(self, node: cst.ClassDef) -> bool:
            return False

        def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
            if isinstance(updated.func, cst.Name) and updated.func.value == entry:
                self.count += 1
                return updated.with_changes(func=cst.Name(PIPELINE_ENTRY))
            return updated

    transformer = Rewire()
    # Only calls change: the statement stays a statement of its own kind.
    new = cst.ensure_type(stmt.visit(transformer), type(stmt))
    return new, transformer.count
