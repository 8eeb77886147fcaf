"""Where a project calls and configures its own VERL (a checkout, a fork, a submodule), check does not judge it
against a VERL release (verl-call-signature, unknown-verl-key-sh/-yaml): project_modules.in_checkout_of."""

from __future__ import annotations

from npu_port.transpiler.analysis.project_modules import in_checkout_of


def test_a_checkout_of_the_package_and_what_lies_beside_it(tmp_path):
    (tmp_path / "verl" / "trainer").mkdir(parents=True)
    (tmp_path / "verl" / "__init__.py").write_text("")
    (tmp_path / "examples").mkdir()
    assert in_checkout_of(str(tmp_path / "verl" / "trainer" / "main_ppo.py"), "verl")
    assert in_checkout_of(str(tmp_path / "examples" / "run.sh"), "verl")
    assert not in_checkout_of(str(tmp_path / "examples" / "run.sh"), "vllm")


def test_a_project_that_carries_it_as_a_submodule(tmp_path):
    # RAGEN: .gitmodules pins verl at path `verl`; a snapshot may hold that folder empty.
    project = tmp_path / "ragen_like"
    (project / "config").mkdir(parents=True)
    (project / ".gitmodules").write_text('[submodule "verl"]\n\tpath = verl\n\turl = https://github.com/volcengine/verl.git\n'
                                         '[submodule "external/webshop"]\n\tpath = external/webshop\n')
    assert in_checkout_of(str(project / "config" / "base.yaml"), "verl")
    other = tmp_path / "plain"
    other.mkdir()
    (other / ".gitmodules").write_text('[submodule "x"]\n\tpath = third_party/verl_tools\n')
    assert not in_checkout_of(str(other / "run.sh"), "verl")
    assert not in_checkout_of("<stdin>", "verl")
