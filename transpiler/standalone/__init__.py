"""`npu-port standalone`: inline what a script uses from project packages so it runs on its own.

resolver.py finds module sources on disk, graph.py records each module's statements, bindings and reads,
symbols.py resolves names across modules, closure.py picks the statements needed and their run order,
quiet.py tells code without effects, lazy.py which modules run later than the top (a function's import)
and must stay lazy, inliner.py renames and assembles the script, verify.py checks the result.
"""

from npu_port.transpiler.standalone.errors import Problem, StandaloneError
from npu_port.transpiler.standalone.inliner import StandaloneResult, make_standalone

__all__ = ["Problem", "StandaloneError", "StandaloneResult", "make_standalone"]
