"""tools/index_pins.py picks the file pip would install for a pin on linux x86_64 / aarch64, CPython 3.11
(offline: the file lists are written here as the index lists them)."""

from __future__ import annotations

import pytest

from tools.index_pins import IndexFile, pick_file


def _files(*names: str, yanked: tuple[str, ...] = ()) -> list[IndexFile]:
    return [IndexFile(n, f"https://files.example/{n}", None, n in yanked) for n in names]


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_a_stable_abi_wheel_for_an_older_cpython_installs_on_311(machine):
    # vLLM publishes cp38-abi3 wheels only: CPython 3.11 installs them.
    files = _files("vllm-0.23.0-cp38-abi3-manylinux_2_28_x86_64.whl", "vllm-0.23.0-cp38-abi3-manylinux_2_28_aarch64.whl",
                   "vllm-0.23.0.tar.gz")
    chosen, why = pick_file(files, "vllm", "0.23.0", machine)
    assert why == "wheel" and chosen is not None and chosen.filename.endswith(f"{machine}.whl")


def test_a_stable_abi_wheel_for_a_newer_cpython_does_not():
    chosen, why = pick_file(_files("pkg-1.0-cp312-abi3-manylinux_2_28_x86_64.whl"), "pkg", "1.0", "x86_64")
    assert chosen is None and "no wheel" in why


@pytest.mark.parametrize("name", ["pkg-1.0-cp310-cp310-manylinux_2_28_x86_64.whl",
                                  "pkg-1.0-cp312-cp312-manylinux_2_28_x86_64.whl",
                                  "pkg-1.0-cp311-cp311-manylinux_2_28_aarch64.whl",
                                  "pkg-1.0-cp311-cp311-macosx_11_0_x86_64.whl",
                                  "pkg-1.0-py2-none-any.whl"])
def test_a_wheel_for_another_python_or_platform_is_not_a_release_for_311_linux_x86_64(name):
    chosen, why = pick_file(_files(name), "pkg", "1.0", "x86_64")
    assert chosen is None and "no wheel" in why


@pytest.mark.parametrize("name", ["pkg-1.0-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
                                  "pkg-1.0-py3-none-any.whl", "pkg-1.0-py2.py3-none-any.whl",
                                  "pkg-1.0-cp311-abi3-manylinux2014_x86_64.whl"])
def test_wheels_that_install_on_311_linux_x86_64(name):
    chosen, why = pick_file(_files(name), "pkg", "1.0", "x86_64")
    assert why == "wheel" and chosen is not None and chosen.filename == name


def test_a_yanked_release_and_a_missing_one_are_wrong():
    assert pick_file(_files("pkg-1.0-py3-none-any.whl", yanked=("pkg-1.0-py3-none-any.whl",)), "pkg", "1.0",
                     "x86_64") == (None, "yanked")
    assert pick_file(_files("pkg-1.1-py3-none-any.whl"), "pkg", "1.0", "x86_64") == (None, "no such release on the index")


def test_an_sdist_counts_only_for_a_release_without_wheels():
    chosen, why = pick_file(_files("pkg-1.0.tar.gz"), "pkg", "1.0", "aarch64")
    assert chosen is not None and why.startswith("sdist")
    chosen, why = pick_file(_files("pkg-1.0.tar.gz", "pkg-1.0-cp311-cp311-manylinux_2_28_x86_64.whl"), "pkg", "1.0",
                            "aarch64")
    assert chosen is None and "publishes wheels" in why
