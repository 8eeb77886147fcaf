"""Jinja2 templates and option schemas for `npu-port generate` and `npu-port weave`.

One folder per kind (verl_train, msrl_train, vllm_infer, pipeline), each with a `schema.yaml` and its
templates; the engine that loads them is transpiler/skeletons_engine/.
"""
