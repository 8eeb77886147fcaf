"""Snapshot the exact releases the generated skeletons target (skeletons/version_sets.yaml), and the
config keys of the VERL releases `check` knows.

    python -m tools.release_snapshots --download-dir /work/wheels [--no-download]

The rules check code against the newest releases (codemods/data/api/<package>.json, written by
`python -m tools.api_snapshot`). A generated script instead targets one installable version set, so its
names and config keys are checked against the releases of that set: for every verl, vllm, ray and
transformers version a set names that the main snapshot does not already hold, this writes
codemods/data/api/releases/<package>-<version>.json with the same extractor (tools/api_snapshot.py),
from the wheel `pip download --no-deps` fetches. tools/conformance.py reads them (facts_for_set).

`check` (unknown-verl-key-sh / -yaml, transpiler/tables/verl_keys.py) checks a project's VERL keys against
the release the project uses, so VERL_KEY_RELEASES (the newest patch of each recent minor release) are
snapshotted too; a release no version set names gets its config keys only. For every VERL release the
record holds the keys of every packaged Hydra config (the top-level YAML files of verl/trainer/config:
ppo_trainer, ppo_megatron_trainer, sft_trainer, ...) and `entry_configs`, the config each entry point's
`@hydra.main(config_path="config", config_name=...)` composes, read from the wheel's sources (not imported)
by transpiler/tables/verl_configs.py, which `check` also uses on a VERL checkout.
"""

from __future__ import annotations

import argparse
import contextlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from npu_port.transpiler.generate.versions import SNAPSHOTTED_PACKAGES, version_sets
from npu_port.transpiler.tables import api_facts, verl_configs
from tools import api_snapshot

RELEASES_DIR = api_snapshot.DEFAULT_OUT / "releases"
# distribution name on PyPI per snapshot stem
DISTRIBUTIONS = {"verl": "verl", "vllm": "vllm", "ray": "ray", "transformers": "transformers"}
# Modules the generated agent project uses beyond what the main snapshot records (its tools file imports
# verl's function_tool decorator; the pipeline reads the tool schemas from verl's registry).
EXTRA_MODULES = {"verl": ["verl.tools.function_tool", "verl.experimental.agent_loop"]}
EXTRA_SIGNATURES = {"verl": [("verl.tools.function_tool", "function_tool"),
                             ("verl.tools.function_tool", "get_function_tool")]}


# The VERL releases whose config keys `check` knows: the newest patch of each of the last minor releases
# on PyPI (`pip index versions verl`), oldest first.
VERL_KEY_RELEASES = ("0.6.1", "0.7.1", "0.8.0", "0.9.1")


def wanted_releases() -> list[tuple[str, str]]:
    """(stem, version) of every release a version set names that the main snapshot lacks, of every
    release of a package the generated files use more modules of (EXTRA_MODULES), and of every VERL
    release whose config keys `check` knows (VERL_KEY_RELEASES)."""
    wanted = {("verl", version) for version in VERL_KEY_RELEASES}
    for release in version_sets().values():
        for stem in SNAPSHOTTED_PACKAGES:
            version = release.versions[stem]
            if api_facts.load(stem).version != version or stem in EXTRA_MODULES:
                wanted.add((stem, version))
    return sorted(wanted)


def set_releases() -> set[tuple[str, str]]:
    """(stem, version) of the releases a version set names: those get the whole API record."""
    return {(stem, release.versions[stem]) for release in version_sets().values() for stem in SNAPSHOTTED_PACKAGES}


def verl_key_record(wheel: Path) -> dict:
    """A release no version set names: its config keys, nothing else."""
    tree = api_snapshot.WheelTree(wheel)
    record = api_snapshot.base_record("verl", tree.dist_version(), wheel.name)
    record.update(verl_configs.packaged(tree.paths(), tree.read_text))
    record["notes"] = ["config keys only (unknown-verl-key-*): config_keys maps config name -> dotted key -> type "
                       "of its packaged default (dict keys are listed too); Hydra `defaults` lists are not keys."]
    return record


def release_wheel(stem: str, version: str, download_dir: Path, download: bool) -> Path:
    distribution = DISTRIBUTIONS[stem]
    if download:
        download_dir.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--quiet",
                        *api_snapshot.PIP_PLATFORM_ARGS, "-d", str(download_dir), f"{distribution}=={version}"],
                       check=True)
    found = [p for p in download_dir.glob(f"{stem}-{version}-*.whl")]
    if not found:
        raise api_snapshot.SnapshotError(f"no {distribution} {version} wheel in {download_dir}")
    return found[0]


@contextlib.contextmanager
def _older_release(absent: list[str]) -> Iterator[None]:
    """The extractor asks for the modules of the newest release; an older release may lack some
    (verl 0.8.0 has no verl.trainer.ppo.v1). Those are left out and listed, not made up."""
    original = api_snapshot.modules_table

    def modules_table(tree, modules, *args, **kwargs):
        present = [m for m in modules if tree.module_ast(m) is not None]
        absent.extend(m for m in modules if m not in present)
        return original(tree, present, *args, **kwargs)

    api_snapshot.modules_table = modules_table  # type: ignore[assignment]
    try:
        yield
    finally:
        api_snapshot.modules_table = original  # type: ignore[assignment]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.release_snapshots", description=__doc__.split("\n\n")[0])
    parser.add_argument("--download-dir", type=Path, required=True, help="where wheels go (outside the repo)")
    parser.add_argument("--out", type=Path, default=RELEASES_DIR, help="release snapshot directory")
    parser.add_argument("--no-download", action="store_true", help="use the wheels already in --download-dir")
    parser.add_argument("--only", nargs="*", choices=list(DISTRIBUTIONS), help="snapshot only these packages")
    args = parser.parse_args(argv)
    for stem, version in wanted_releases():
        if args.only and stem not in args.only:
            continue
        wheel = release_wheel(stem, version, args.download_dir, not args.no_download)
        if stem == "verl" and (stem, version) not in set_releases():
            record = verl_key_record(wheel)
            record["generated_by"] = "python -m tools.release_snapshots"
            size = api_snapshot.write_json(record, args.out / f"{stem}-{version}.json")
            print(f"{stem:13} {version:12} {size:>8} bytes  from {wheel.name} (config keys)")
            continue
        absent: list[str] = []
        with _older_release(absent):
            record = api_snapshot.snapshot_wheel(stem, wheel)
        if stem == "verl":
            tree = api_snapshot.WheelTree(wheel)
            record.update(verl_configs.packaged(tree.paths(), tree.read_text))
        if stem in EXTRA_MODULES:
            tree = api_snapshot.WheelTree(wheel)
            record["modules"].update(api_snapshot.modules_table(tree, EXTRA_MODULES[stem]))
            for module, name in EXTRA_SIGNATURES.get(stem, []):
                record["signatures"][f"{module}.{name}"] = api_snapshot.function_signature(tree, module, name)
            record["signatures"] = dict(sorted(record["signatures"].items()))
        record["generated_by"] = "python -m tools.release_snapshots"
        if absent:
            record["absent_modules"] = sorted(set(absent))
        size = api_snapshot.write_json(record, args.out / f"{stem}-{version}.json")
        print(f"{stem:13} {version:12} {size:>8} bytes  from {wheel.name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
