"""Static API conformance: do the calls and config keys in a file exist in the real packages?

Checked against the committed snapshot of the real releases (transpiler/tables/api_facts.py), never by
importing them. For Python, every call into verl, vllm, ray, transformers or mindspeed_rl is resolved
through the file's imports, through annotated or constructor-assigned variables (`llm = LLM(...)`,
`engine: LLM`), and through `self.x` attributes typed by an annotation or a property's return type.
The called name must exist, every keyword must be accepted (following `**kwargs` forwarding such as
LLM -> EngineArgs), positional arguments must fit and required parameters must be supplied. Keys of
a module-level `*OVERRIDES` dict and of VERL / MindSpeed-RL YAML configs must exist in the packaged
config (VERL ppo_trainer, through the schema the rules use: transpiler/tables/verl_keys.py) or the
config classes (MindSpeed-RL).

Outcomes: `error` (the real package lacks it) and `unverified` (the snapshot does not record that
module or signature, so nothing can be said). Callers decide whether unverified is acceptable.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import yaml

from npu_port.transpiler.generate.versions import SNAPSHOTTED_PACKAGES, VersionSet
from npu_port.transpiler.tables import api_facts
from npu_port.transpiler.tables.verl_keys import (
    _OPEN_TYPES,
    _is_pass_through,
    key_type,
    looks_like_verl_config,
    unknown_key,
)

CHECKED_PACKAGES = ("verl", "vllm", "ray", "transformers", "mindspeed_rl")
# BaseConfig.update() treats `model` as a selector of the model section rather than an attribute.
MSRL_SELECTOR_KEYS = frozenset({"model"})


@dataclass(frozen=True, order=True)
class Issue:
    line: int
    col: int
    severity: str  # "error" | "unverified"
    subject: str  # the qualified name or config key concerned
    message: str

    def __str__(self) -> str:
        return f"{self.line}:{self.col}: {self.severity}: {self.message}"


Facts = Callable[[str], api_facts.ApiSnapshot]

# Snapshots of the releases a version set names that the main snapshot (the newest releases) does not
# hold: written by `python -m tools.release_snapshots`, named <package>-<version>.json.
RELEASES_DIR = api_facts.SNAPSHOT_DIR / "releases"


def facts_for_set(version_set: VersionSet) -> Facts:
    """The snapshot of each package at the release `version_set` targets."""
    def facts(package: str) -> api_facts.ApiSnapshot:
        main = api_facts.load(package)
        wanted = version_set.versions.get(package) if package in SNAPSHOTTED_PACKAGES else None
        if wanted is None:
            return main
        if (RELEASES_DIR / f"{package}-{wanted}.json").is_file():  # the release, with what the skeletons use
            return api_facts.load(f"{package}-{wanted}", RELEASES_DIR)
        if main.version == wanted:
            return main
        raise api_facts.UnknownPackage(f"no snapshot of {package} {wanted}: run python -m tools.release_snapshots")
    return facts


def _package_of(qualname: str) -> Optional[str]:
    top = qualname.split(".", 1)[0]
    return top if top in CHECKED_PACKAGES else None


# --- Python ----------------------------------------------------------------------------------------------

def check_python(source: str, facts: Facts = api_facts.load) -> list[Issue]:
    tree = ast.parse(source)
    return sorted(set(_PythonChecker(tree, facts).run()))


class _PythonChecker:
    def __init__(self, tree: ast.Module, facts: Facts):
        self.tree = tree
        self.facts = facts
        self.imports = _import_table(tree)
        self.class_attrs = _class_attribute_types(tree, self._resolve_annotation)
        self.issues: list[Issue] = []

    def run(self) -> list[Issue]:
        self._check_imports()
        self._walk(self.tree.body, locals_={}, class_name=None)
        self._check_override_dicts()
        return self.issues

    def _issue(self, node: ast.AST, severity: str, subject: str, message: str) -> None:
        self.issues.append(Issue(getattr(node, "lineno", 0), getattr(node, "col_offset", -1) + 1,
                                 severity, subject, message))

    # imports
    def _check_imports(self) -> None:
        for node in ast.walk(self.tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                if not _package_of(node.module):
                    continue
                for alias in node.names:
                    if alias.name != "*":
                        self._check_name(node, f"{node.module}.{alias.name}")
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if _package_of(alias.name) and "." in alias.name:
                        self._check_name(node, alias.name)

    # scopes: a function body sees its parameters' annotations and its own assignments
    def _walk(self, body: list[ast.stmt], locals_: dict[str, str], class_name: Optional[str]) -> None:
        for stmt in body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for deco in stmt.decorator_list:
                    self._visit_expr(deco, locals_, class_name)
                scope = dict(locals_)
                for arg in stmt.args.posonlyargs + stmt.args.args + stmt.args.kwonlyargs:
                    typ = self._resolve_annotation(arg.annotation)
                    if typ:
                        scope[arg.arg] = typ
                for default in stmt.args.defaults + [d for d in stmt.args.kw_defaults if d is not None]:
                    self._visit_expr(default, locals_, class_name)
                self._walk(stmt.body, scope, class_name)
            elif isinstance(stmt, ast.ClassDef):
                for deco in stmt.decorator_list:
                    self._visit_expr(deco, locals_, class_name)
                self._walk(stmt.body, dict(locals_), stmt.name)
            else:
                self._note_assignment(stmt, locals_, class_name)
                for child in ast.iter_child_nodes(stmt):
                    if isinstance(child, ast.stmt):
                        self._walk([child], locals_, class_name)
                    elif isinstance(child, ast.expr):
                        self._visit_expr(child, locals_, class_name)
                    else:  # handlers, match cases, comprehension helpers
                        for sub in ast.iter_child_nodes(child):
                            if isinstance(sub, ast.stmt):
                                self._walk([sub], locals_, class_name)
                            elif isinstance(sub, ast.expr):
                                self._visit_expr(sub, locals_, class_name)

    def _note_assignment(self, stmt: ast.stmt, locals_: dict[str, str], class_name: Optional[str]) -> None:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            typ = self._resolve_annotation(stmt.annotation)
            if typ:
                locals_[stmt.target.id] = typ
        elif isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call):
            typ = self._resolve_callee(stmt.value.func, locals_, class_name)
            for target in stmt.targets:
                if isinstance(target, ast.Name):
                    if typ and _package_of(typ) and _looks_like_class(typ):
                        locals_[target.id] = typ
                    else:
                        locals_.pop(target.id, None)

    def _visit_expr(self, expr: ast.expr, locals_: dict[str, str], class_name: Optional[str]) -> None:
        for node in ast.walk(expr):
            if isinstance(node, ast.Call):
                qual = self._resolve_callee(node.func, locals_, class_name)
                if qual and _package_of(qual):
                    self._check_call(node, qual)

    # resolution
    def _resolve_callee(self, func: ast.expr, locals_: dict[str, str], class_name: Optional[str]) -> Optional[str]:
        parts = _dotted(func)
        if not parts:
            return None
        head, rest = parts[0], parts[1:]
        if head == "self" and class_name and rest:
            typ = self.class_attrs.get((class_name, rest[0]))
            return ".".join([typ, *rest[1:]]) if typ else None
        if head in locals_:
            return ".".join([locals_[head], *rest])
        if head in self.imports:
            return ".".join([self.imports[head], *rest])
        return None

    def _resolve_annotation(self, node: Optional[ast.expr]) -> Optional[str]:
        if node is None:
            return None
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            try:
                return self._resolve_annotation(ast.parse(node.value, mode="eval").body)
            except SyntaxError:
                return None
        if isinstance(node, ast.Subscript) and _dotted(node.value) in (["Optional"], ["typing", "Optional"]):
            return self._resolve_annotation(node.slice)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            sides = [self._resolve_annotation(s) for s in (node.left, node.right)]
            known = [s for s in sides if s]
            return known[0] if len(known) == 1 else None
        parts = _dotted(node)
        if parts and parts[0] in self.imports:
            qual = ".".join([self.imports[parts[0]], *parts[1:]])
            return qual if _package_of(qual) else None
        return None

    # checks
    def _check_name(self, node: ast.AST, qual: str) -> bool:
        """True when the name is known to exist; records an issue otherwise."""
        pkg = _package_of(qual)
        try:
            snap = self.facts(pkg)
        except api_facts.UnknownPackage:
            self._issue(node, "unverified", qual, f"{qual}: no API snapshot for {pkg}")
            return False
        # The path as written (a re-export such as mindspeed_rl.RayGRPOTrainer) and the canonical one.
        verdicts = [_lookup(snap, q) for q in dict.fromkeys((qual, snap.canonical(qual)))]
        if any(v is None for v in verdicts):
            return True
        severity, message = next((v for v in verdicts if v[0] == "error"), verdicts[0])
        self._issue(node, severity, qual, message)
        return False

    def _check_call(self, call: ast.Call, qual: str) -> None:
        if not self._check_name(call, qual):
            return
        snap = self.facts(_package_of(qual))
        params = snap.signature(qual)
        if params is None:
            if call.args or call.keywords:
                self._issue(call, "unverified", qual, f"{qual}(): no signature in the snapshot; arguments unchecked")
            return
        given = set()
        for kw in call.keywords:
            if kw.arg is None:
                continue
            given.add(kw.arg)
            if not snap.accepts_keyword(qual, kw.arg):
                self._issue(kw.value, "error", qual, f"{qual}() has no parameter {kw.arg!r}")
        starred = any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords)
        positional = [p for p in params if p["kind"] in ("positional_only", "positional_or_keyword")]
        if not starred and not any(p["kind"] == "var_positional" for p in params) and len(call.args) > len(positional):
            self._issue(call, "error", qual, f"{qual}() takes at most {len(positional)} positional arguments, "
                        f"{len(call.args)} given")
        given.update(p["name"] for p in positional[:len(call.args)])
        if not starred:
            # Keyword-only entries without a default are how the snapshot records option sets (ray.remote),
            # so only positional parameters count as required.
            required = {p["name"] for p in positional}
            missing = [n for n in snap.required_params(qual) if n in required and n not in given]
            if missing:
                self._issue(call, "error", qual, f"{qual}() is missing required argument(s): {', '.join(missing)}")

    def _check_override_dicts(self) -> None:
        for stmt in self.tree.body:
            if not (isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Dict)):
                continue
            if not any(isinstance(t, ast.Name) and t.id.endswith("OVERRIDES") for t in stmt.targets):
                continue
            for key, value in zip(stmt.value.keys, stmt.value.values):
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    literal = _literal(value)
                    for issue in check_verl_keys([(key.value, literal)], line=key.lineno, facts=self.facts):
                        self.issues.append(issue)


def _lookup(snap: api_facts.ApiSnapshot, qual: str) -> Optional[tuple[str, str]]:
    """None when `qual` exists in the snapshot, else (severity, message)."""
    parts = qual.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        module = ".".join(parts[:cut])
        if not snap.knows_module(module):
            continue
        name = parts[cut]
        if not (snap.has(module, name) or snap.knows_module(f"{module}.{name}")):
            return "error", f"{module} has no attribute {name!r} ({snap.package} {snap.version or snap.commit})"
        if cut + 1 < len(parts):
            # An attribute of a recorded class (vllm.LLM.generate) needs the class recorded as a module.
            owner = f"{module}.{name}"
            if not snap.knows_module(owner):
                return "unverified", f"{qual}: members of {owner} are not in the snapshot"
            if not snap.has(owner, parts[cut + 1]):
                return "error", f"{owner} has no attribute {parts[cut + 1]!r}"
        return None
    return "unverified", f"{qual}: module not in the {parts[0]} snapshot"


def _literal(node: ast.expr) -> Any:
    try:
        return ast.literal_eval(node)
    except ValueError:
        return _UNKNOWN


_UNKNOWN = object()


def _dotted(node: ast.expr) -> Optional[list[str]]:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return parts[::-1]


def _looks_like_class(qual: str) -> bool:
    return qual.rsplit(".", 1)[-1][:1].isupper()


def _import_table(tree: ast.Module) -> dict[str, str]:
    """Local name -> qualified name for every absolute import in the file (all scopes)."""
    table: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    table[alias.asname] = alias.name
                else:
                    top = alias.name.split(".", 1)[0]
                    table[top] = top
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                if alias.name != "*":
                    table[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return table


def _class_attribute_types(tree: ast.Module, resolve) -> dict[tuple[str, str], str]:
    """(class, attribute) -> qualified type, from properties' return annotations and `self.x: T` annotations."""
    types: dict[tuple[str, str], str] = {}
    for cls in ast.walk(tree):
        if not isinstance(cls, ast.ClassDef):
            continue
        for item in cls.body:
            if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                typ = resolve(item.annotation)
                if typ:
                    types[(cls.name, item.target.id)] = typ
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if any(_dotted(d) == ["property"] for d in item.decorator_list):
                    typ = resolve(item.returns)
                    if typ:
                        types[(cls.name, item.name)] = typ
                for node in ast.walk(item):
                    if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Attribute)
                            and _dotted(node.target.value) == ["self"]):
                        typ = resolve(node.annotation)
                        if typ:
                            types[(cls.name, node.target.attr)] = typ
    return types


# --- configs ---------------------------------------------------------------------------------------------

# A `str` default is often an interpolation (`${oc.select:...}`) standing for another type, so any
# scalar may replace it; the other types must keep their shape.
_COMPATIBLE = {
    "bool": (bool,),
    "int": (int, float),
    "float": (int, float),
    "str": (str, bool, int, float),
    "list": (list, tuple),
    "dict": (dict,),
}


def check_verl_keys(pairs: Iterable[tuple[str, Any]], line: int = 0, config: str = "ppo_trainer",
                    facts: Facts = api_facts.load) -> list[Issue]:
    """Each dotted key must exist in VERL's packaged config (what is free-form there, such as Ray's
    runtime_env, is not looked into: transpiler/tables/verl_keys.py), with a value of a compatible type."""
    snap = facts("verl")
    version = snap.version
    if version == api_facts.load("verl").version:
        known: Callable[[str], bool] = lambda key: unknown_key(key, config, invented_ok=False) is None  # noqa: E731
        typed: Callable[[str], Optional[str]] = lambda key: key_type(key, config)  # noqa: E731
    else:  # an older release: its own packaged keys
        keys = snap.config_keys(config)
        known = lambda key: _known_in(keys, key)  # noqa: E731
        typed = keys.get
    issues = []
    for key, value in pairs:
        if not known(key):
            issues.append(Issue(line, 1, "error", key, f"{key} is not a key of VERL's {config}.yaml "
                                f"(verl {version})"))
            continue
        kind = typed(key)
        expected = _COMPATIBLE.get(kind) if kind else None
        if expected and value is not _UNKNOWN and value is not None and (
                not isinstance(value, expected) or (kind in ("int", "float") and isinstance(value, bool))):
            issues.append(Issue(line, 1, "error", key, f"{key} holds a {kind} in VERL's {config}.yaml, "
                                f"not a {type(value).__name__} ({value!r})"))
    return issues


def _known_in(keys: dict[str, str], dotted: str) -> bool:
    """Whether `dotted` is a key of `keys` or lies in a free-form part (as verl_keys.unknown_key judges)."""
    parts = dotted.split(".")
    for i in range(len(parts)):
        prefix = ".".join(parts[: i + 1])
        kind = keys.get(prefix)
        if kind is None:
            return False
        has_children = any(k.startswith(prefix + ".") for k in keys)
        if kind in _OPEN_TYPES or (kind == "dict" and (not has_children or _is_pass_through(prefix))):
            return True
    return True


def _flatten(mapping: dict, prefix: str = "") -> Iterator[tuple[str, Any]]:
    for key, value in mapping.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            yield from _flatten(value, dotted + ".")
        else:
            yield dotted, value


def check_verl_yaml(text: str, facts: Facts = api_facts.load) -> list[Issue]:
    data = yaml.safe_load(text) or {}
    body = {k: v for k, v in data.items() if k not in ("defaults", "hydra")}
    return check_verl_keys(_flatten(body), facts=facts)


def check_mindspeed_yaml(text: str, facts: Facts = api_facts.load) -> list[Issue]:
    """Sections and keys of a MindSpeed-RL config against its config classes (BaseConfig rejects others)."""
    snap = facts("mindspeed_rl")
    data = yaml.safe_load(text) or {}
    known_sections = set(snap.sections())
    issues = []
    for section, body in data.items():
        if section == "defaults":
            continue
        if section not in known_sections:
            issues.append(Issue(0, 1, "error", section, f"{section} is not a MindSpeed-RL config section "
                                f"(known: {', '.join(sorted(known_sections))})"))
            continue
        allowed = set(snap.section_keys(section)) | MSRL_SELECTOR_KEYS
        for key, value in (body or {}).items():
            if key not in allowed:
                issues.append(Issue(0, 1, "error", f"{section}.{key}",
                                    f"{section}.{key} is not an attribute of its MindSpeed-RL config class"))
            elif isinstance(value, dict):
                for sub in value:
                    if f"{key}.{sub}" not in allowed:
                        issues.append(Issue(0, 1, "error", f"{section}.{key}.{sub}",
                                            f"{section}.{key}.{sub} is not a key MindSpeed-RL reads"))
    return issues


def config_framework(text: str) -> Optional[str]:
    """'verl' or 'mindspeed_rl' for a YAML config of either, else None."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return None
    if not isinstance(data, dict):
        return None
    if {"megatron_training", "rl_config", "generate_config", "actor_config"} & set(data):
        return "mindspeed_rl"
    if looks_like_verl_config(set(data), min_sections=1):  # an override file may hold one section
        return "verl"
    return None


def check_file(path: Path, facts: Facts = api_facts.load) -> list[Issue]:
    text = path.read_text(encoding="utf-8")
    if path.suffix in (".py", ".pyi"):
        return check_python(text, facts)
    if path.suffix in (".yaml", ".yml"):
        framework = config_framework(text)
        if framework == "verl":
            return check_verl_yaml(text, facts)
        if framework == "mindspeed_rl":
            return check_mindspeed_yaml(text, facts)
    return []
