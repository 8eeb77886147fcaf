"""analysis/project_pins.py: the lowest torch a project accepts, from every kind of dependency file (read as
text or parsed, never run), and the torch a pinned vLLM or VERL release implies (device_agnostic.yaml)."""

from __future__ import annotations

from npu_port.transpiler.analysis.project_pins import lower_bound, lowest_pin, lowest_torch
from npu_port.transpiler.core.engine import Engine
from npu_port.transpiler.core.settings import Settings
from npu_port.transpiler.tables.device_agnostic import facts

IMPLIED = facts("ascend")["implied_torch"]


def _pin(tmp_path, name, text):
    (tmp_path / ".git").mkdir(exist_ok=True)
    (tmp_path / name).write_text(text, encoding="utf-8")
    pin = lowest_torch([tmp_path / "x.py"], IMPLIED)
    return (pin.version, pin.where) if pin else None


def test_lower_bounds():
    assert lower_bound(">=2.1,<2.8") == "2.1" and lower_bound("==2.6.*") == "2.6" and lower_bound("~=2.4.0") == "2.4.0"
    assert lower_bound("^2.1") == "2.1" and lower_bound("2.3.1") == "2.3.1"
    assert lower_bound("<2.8") is None and lower_bound("") is None and lower_bound("*") is None


def test_setup_py_is_parsed_not_run(tmp_path):
    setup = ('import sys\nsys.exit("must not run")\nBASE = ["numpy"]\nEXTRAS = {"gpu": ["torch>=2.4"],\n'
             '          "old": ["torch==2.3.1"]}\nsetup(install_requires=BASE, extras_require=EXTRAS)\n')
    assert _pin(tmp_path, "setup.py", setup) == ("2.3.1", "setup.py:5")


def test_setup_cfg_pyproject_poetry_and_conda(tmp_path):
    assert _pin(tmp_path, "setup.cfg", "[options]\ninstall_requires =\n    torch>=2.5\n") == ("2.5", "setup.cfg:3")
    (tmp_path / "setup.cfg").unlink()
    poetry = '[tool.poetry.dependencies]\npython = "^3.10"\ntorch = {version = "^2.4", source = "pytorch"}\n'
    assert _pin(tmp_path, "pyproject.toml", poetry) == ("2.4", "pyproject.toml:3")
    (tmp_path / "pyproject.toml").unlink()
    assert _pin(tmp_path, "environment.yml", "dependencies:\n  - python=3.10\n  - pytorch=2.1.2\n") \
        == ("2.1.2", "environment.yml:3")


def test_lock_files(tmp_path):
    uv = '[[package]]\nname = "numpy"\nversion = "1.26.4"\n\n[[package]]\nname = "torch"\nversion = "2.6.0+cu124"\n'
    assert _pin(tmp_path, "uv.lock", uv) == ("2.6.0", "uv.lock:6")
    (tmp_path / "uv.lock").unlink()
    lock = '{"default": {"torch": {"version": "==2.4.1"}}, "develop": {}}'
    assert _pin(tmp_path, "Pipfile.lock", lock)[0] == "2.4.1"


def test_a_commented_or_unbounded_requirement_pins_nothing(tmp_path):
    assert _pin(tmp_path, "requirements.txt", "# torch==2.1.0\ntorch<2.8\ntorchvision==0.20.0\n-r other.txt\n") is None


def test_a_pinned_vllm_or_verl_implies_its_torch(tmp_path):
    assert _pin(tmp_path, "requirements.txt", "vllm>=0.7.3,<0.9\n") == \
        ("2.5", "requirements.txt:1 accepts vllm 0.7.3, which requires torch 2.5")
    # A release between two rows takes the lower row; one before the first row, or a VERL that pins no
    # torch (0.2 - 0.4), implies nothing.
    assert _pin(tmp_path, "requirements.txt", "vllm==0.10.1\n")[0] == "2.7"
    assert _pin(tmp_path, "requirements.txt", "vllm==0.3.3\n") is None
    assert _pin(tmp_path, "requirements.txt", "verl==0.4.1\n") is None
    assert _pin(tmp_path, "requirements.txt", "verl==0.9.1\ntorch>=2.7\n")[0] == "2.7"
    assert lowest_pin([tmp_path / "x.py"], ("verl",)).version == "0.9.1"


def test_the_implied_table_only_rises():
    for package, rows in IMPLIED.items():
        torches = [tuple(int(x) for x in t.split(".")) for _, t in rows if t is not None]
        assert torches == sorted(torches), package


def test_vllm_ascends_own_tree_gets_the_setting_unguarded(tmp_path):
    """vllm-spawn-env --keep-cuda: `find_spec("vllm_ascend")` written into vllm-ascend's own examples is a test
    of the tree itself; there the setting goes in as in the default mode."""
    (tmp_path / "vllm_ascend").mkdir()
    (tmp_path / "vllm_ascend" / "__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "setup.py").write_text("", encoding="utf-8")
    (tmp_path / "examples").mkdir()
    source = b"from vllm import LLM\n\nllm = LLM('m')\n"
    engine = Engine(Settings(select=("vllm-spawn-env",), extras=True, keep_cuda=True))
    inside = engine.convert(source, str(tmp_path / "examples" / "offline.py")).output.decode()
    assert 'os.environ.setdefault("VLLM_WORKER_MULTIPROC_METHOD", "spawn")' in inside and "find_spec" not in inside
    elsewhere = tmp_path / "other"
    elsewhere.mkdir()
    (elsewhere / ".git").mkdir()
    outside = engine.convert(source, str(elsewhere / "offline.py")).output.decode()
    assert 'importlib.util.find_spec("vllm_ascend")' in outside
