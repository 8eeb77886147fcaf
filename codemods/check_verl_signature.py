"""`verl-call-signature`: calls of VERL functions that the targeted VERL release's signature refuses."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from npu_port.transpiler.analysis.project_modules import in_checkout_of
from npu_port.transpiler.core.rules import PythonRule
from npu_port.transpiler.tables import api_facts, verl_keys

_VAR = ("var_positional", "var_keyword")


def release_facts(version: Optional[str]) -> tuple[str, Optional[api_facts.ApiSnapshot]]:
    """(the release checked, its API snapshot with the signatures) for a project on VERL `version`."""
    checked = verl_keys.release(version.split("@", 1)[0] if version else None).version
    try:
        return checked, api_facts.load(f"verl-{checked}", verl_keys.RELEASES_DIR)
    except api_facts.UnknownPackage:
        main = api_facts.load("verl")
        return checked, main if main.version == checked else None


def call_problems(params: list[dict], call: cst.Call) -> list[str]:
    """What a call passes that `params` (a recorded signature, as a caller passes it) refuses: a required
    parameter missing, a keyword it has not, more positional arguments than it takes. A call that spreads
    `*args` or `**kwargs` is not judged."""
    if any(a.star for a in call.args):
        return []
    positional = [a for a in call.args if a.keyword is None]
    keywords = [a.keyword.value for a in call.args if a.keyword is not None]
    by_position = [p for p in params if p["kind"] in ("positional_only", "positional_or_keyword")]
    problems = []
    if len(positional) > len(by_position) and not any(p["kind"] == "var_positional" for p in params):
        problems.append(f"takes {len(by_position)} positional argument{'s' if len(by_position) != 1 else ''}, "
                        f"the call passes {len(positional)}")
    named = {p["name"] for p in params if p["kind"] in ("positional_or_keyword", "keyword_only")}
    if not any(p["kind"] == "var_keyword" for p in params):
        problems += [f"has no parameter `{k}`" for k in keywords if k not in named]
    given = {p["name"] for p in by_position[:len(positional)]} | set(keywords)
    missing = [p["name"] for p in params if p["default"] is None and p["kind"] not in _VAR and p["name"] not in given]
    if missing:
        problems.append("requires " + ", ".join(f"`{m}`" for m in missing) + ", which the call does not pass")
    return problems


def shown_signature(name: str, params: list[dict]) -> str:
    def one(p: dict) -> str:
        star = {"var_positional": "*", "var_keyword": "**"}.get(p["kind"], "")
        return star + p["name"] + ("" if p["default"] is None or star else f"={p['default']}")
    return f"{name.rsplit('.', 1)[-1]}({', '.join(one(p) for p in params)})"


class VerlCallSignature(PythonRule):
    """Reports calls of VERL functions that the VERL release the project targets would refuse.

    What it does:
        For each call that resolves (through the file's imports) to a VERL function or class whose
        signature the API snapshot of the targeted release records (`verl.trainer.main_ppo.run_ppo`,
        `RayPPOTrainer`, `ResourcePoolManager`, `verl.utils.device.*`, ...), checks the arguments
        against it: a required parameter not passed, a keyword it has not, too many positional
        arguments. The release is the one `check` finds for the project, as for `unknown-verl-key-sh`
        (`--verl-version`, `verl_version` in `[tool.npu-port]`, the project's `verl` pin), else the
        newest snapshotted. A call that spreads `*args` or `**kwargs` is not judged, nor is code in a
        checkout of VERL itself or of a fork (the `verl` package, and its tests, examples and recipes
        beside it), which calls that checkout's own functions.

    Why:
        VERL changes its entry points between releases: `run_ppo(config)` is how verl 0.8 launchers
        start training, and verl 0.9.1's `run_ppo(config, task_runner_class)` raises
        "missing 1 required positional argument" on it, after the whole config was composed.

    Example:
            run_ppo(config)                                        # error on verl 0.9.1
        should read:
            run_ppo(config, task_runner_class=TaskRunnerV1)        # what verl.trainer.main_ppo.main passes

    Fix safety:
        Report-only: which task runner (or other argument) the call needs is the launcher's choice.
    """

    ID = "verl-call-signature"
    SAFETY = "report-only"
    GROUP = "check"
    TRIGGERS = ("verl",)

    _facts: Optional[tuple[str, Optional[api_facts.ApiSnapshot]]] = None

    @classmethod
    def scout(cls, facts, options) -> bool:
        # Code that calls VERL: it imports verl. A file of a VERL checkout itself (VERL, a fork: its package,
        # tests, examples and recipes) calls its own functions with its own signatures, whatever release it
        # is closest to: not judged (and never parsed for it, which on verl's own tree cost check as much as
        # all the other rules together).
        if not facts.has_word("verl"):
            return False
        return not in_checkout_of(facts.path, "verl") if facts.path else True

    def _release(self) -> tuple[str, Optional[api_facts.ApiSnapshot]]:
        if self._facts is None:
            self._facts = release_facts(getattr(self.ctx.options, "verl_version", None))
        return self._facts

    def visit_Call(self, node: cst.Call) -> None:
        name = self.ctx.resolve(node.func)
        if name is None or not name.startswith("verl."):
            return
        version, facts = self._release()
        params = facts.signature(name) if facts is not None else None
        if params is None:
            return
        problems = call_problems(params, node)
        if problems:
            short = name.rsplit(".", 1)[-1]
            self.report(node, f"`{short}(...)` {'; '.join(problems)}: verl {version}'s "
                        f"{shown_signature(name, params)} raises TypeError on this call", severity="error",
                        hint=_hint(name, version))


def _hint(name: str, version: str) -> str:
    if name.endswith("main_ppo.run_ppo"):
        return ("pass task_runner_class=TaskRunnerV1 (from verl.trainer.main_ppo, what its main() passes), or "
                "check against the release the launcher is for (--verl-version)")
    return f"see verl {version}'s signature; or check against the release the code is for (--verl-version)"
