"""shell-sglang-server: SGLang servers started for CUDA (`--device cuda`, NVIDIA attention backends)."""

from __future__ import annotations

from npu_port.codemods import _verl_overrides
from npu_port.transpiler.tables.mapping import load_table
from npu_port.transpiler.text.shell import (
    Script,
    ShellRule,
    option_value,
    option_values,
    probed_value,
    python_launch,
    token_span,
)


class ShellSglangServer(ShellRule):
    """Points SGLang servers and VERL's SGLang rollout at the NPU.

    What it does:
        In `python -m sglang.launch_server ...`: `--device cuda` becomes `--device npu`, and an attention
        backend with no Ascend kernels (`--attention-backend` / `--prefill-attention-backend` /
        `--decode-attention-backend` set to `fa3`, `flashinfer`, `triton`, `flashmla`, ...) becomes
        `ascend`. In a VERL launcher (`python -m verl.trainer.main_ppo`), the same backends given as
        `actor_rollout_ref.rollout.engine_kwargs.sglang.attention_backend=...` (and its prefill / decode
        keys) become `ascend`. `torch_native` and `flex_attention` stay. The options, modules and
        backends are data (codemods/data/ascend/sglang.yaml, with their source).

    Why:
        SGLang takes `npu` as a device, and `ascend` is its only attention backend on an NPU (it forces
        it there in recent releases, and fails on older ones with a CUDA backend named): the explicit
        CUDA values read wrong and, on older releases, stop the server. verl's own Ascend SGLang
        launchers write `attention_backend="ascend"`.

    Example:
        python -m sglang.launch_server --model-path Qwen/Qwen3-8B --device cuda --attention-backend fa3
        ->  python -m sglang.launch_server --model-path Qwen/Qwen3-8B --device npu --attention-backend ascend

    With --keep-cuda:
        `--device` reads the launcher's device probe (`--device "$DEVICE"`); the attention backend has no
        form for both devices and is kept for CUDA, with a warning (recent SGLang picks `ascend` on an
        NPU by itself).

    Fix safety:
        Review: which backend serves best is the user's choice; `ascend` is the one SGLang has on NPU.
    """

    ID = "shell-sglang-server"
    SAFETY = "review"
    TRIGGERS = ("sglang",)

    def check(self, script: Script) -> None:
        table = load_table(self.ctx.target, "sglang")
        verl = load_table(self.ctx.target, "shell")["verl_entrypoints"]
        backend, cuda_backends = table["ascend_attention_backend"], set(table["cuda_attention_backends"])
        for cmd in script.commands:
            launch = python_launch(cmd)
            if launch is None or not launch.is_module:
                continue
            if launch.target in table["server_modules"]:
                for opt, value_word, start, end in option_values(launch.args, table["device_options"]):
                    value = option_value(opt, value_word)
                    if value == "cuda" and (span := token_span(script, start, end, "cuda")):
                        self._device(cmd, value_word or opt, span)
                for opt, value_word, start, end in option_values(launch.args, table["attention_options"]):
                    value = option_value(opt, value_word)
                    name = (opt.value or opt.text).partition("=")[0]
                    if value and value in cuda_backends and (span := token_span(script, start, end, value)):
                        self.change(*span, backend, f"sglang {name} {value} -> {backend}: no {value} kernels on Ascend",
                                    quote=cmd.quote, scope=(cmd.start, cmd.end))
            elif launch.target in verl:
                for word in launch.args:
                    key, value = _verl_overrides.override(word) or ("", "")
                    value = value.strip("'\"")
                    if key in table["verl_attention_keys"] and value in cuda_backends \
                            and (span := token_span(script, word.start, word.end, value)):
                        self.change(*span, backend, f"{key}={value} -> {backend}: no {value} kernels on Ascend",
                                    quote=cmd.quote, scope=(cmd.start, cmd.end))

    def _device(self, cmd, word, span: tuple[int, int]) -> None:
        self.change(*span, "npu", "sglang --device cuda -> npu", quote=cmd.quote, scope=(cmd.start, cmd.end),
                    portable=lambda: probed_value(self, cmd, word, span[0]))
