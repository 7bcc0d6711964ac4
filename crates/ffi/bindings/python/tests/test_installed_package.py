"""The suite runs against the installed wheel, never the source tree.

test-wheel.sh installs the wheel into a fresh virtualenv and runs pytest from
a temporary directory with --import-mode=importlib, so nothing of the source
tree is on sys.path. The first test proves it from inside the run (with the
module or a copy of the package on PYTHONPATH instead, it fails); the others
check what the installed wheel holds and which library file it loaded.
"""

import hashlib
import os
import platform
import sys
import sysconfig
from importlib import metadata

import pytest

import plan_ffi
import plan_ffi.plan_ffi as generated_module

DISTRIBUTION = "plan-ffi"
HERE = os.path.dirname(os.path.abspath(__file__))


def package_dir():
    return os.path.dirname(os.path.realpath(plan_ffi.__file__))


def test_plan_ffi_is_imported_from_the_installed_distribution():
    site_dirs = {os.path.realpath(sysconfig.get_paths()[key]) for key in ("purelib", "platlib")}
    assert os.path.dirname(package_dir()) in site_dirs, plan_ffi.__file__
    # pip recorded the module as a file of the installed distribution.
    recorded = metadata.distribution(DISTRIBUTION).locate_file("plan_ffi/__init__.py")
    assert os.path.realpath(str(recorded)) == os.path.realpath(plan_ffi.__file__)
    assert os.path.dirname(os.path.realpath(generated_module.__file__)) == package_dir()


def test_the_wheel_ships_the_committed_generated_module():
    # generate.sh's output is committed and CI fails when it drifts; the wheel
    # must ship exactly that file, so reviewing the commit reviews the package.
    with open(generated_module.__file__, "rb") as installed:
        shipped = hashlib.sha256(installed.read()).hexdigest()
    with open(os.path.join(HERE, "..", "generated", "plan_ffi.py"), "rb") as committed:
        expected = hashlib.sha256(committed.read()).hexdigest()
    assert shipped == expected, "the wheel's plan_ffi.py is not generated/plan_ffi.py: run generate.sh"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/maps is Linux's")
def test_the_native_library_is_loaded_from_the_package_folder():
    # Call into the library so it is certainly loaded, then ask the kernel
    # which file of that name is mapped into this process.
    assert plan_ffi.error_code_wire_name(plan_ffi.ErrorCode.HOST_CLOSED) == "HOST_CLOSED"
    with open("/proc/self/maps") as maps:
        mapped = {line.split(None, 5)[5].strip() for line in maps if line.rstrip().endswith("/libplan_ffi.so")}
    assert mapped == {os.path.join(package_dir(), "libplan_ffi.so")}


@pytest.mark.skipif(
    not (sys.platform.startswith("linux") and platform.machine() == "x86_64"),
    reason="the only platform the wheel is built and tested on",
)
def test_the_wheel_is_tagged_manylinux_x86_64():
    wheel = metadata.distribution(DISTRIBUTION).read_text("WHEEL") or ""
    tags = [line.split(":", 1)[1].strip() for line in wheel.splitlines() if line.startswith("Tag:")]
    assert len(tags) == 1, wheel
    python_tag, abi_tag, platform_tag = tags[0].split("-")
    # UniFFI's Python code loads the library with ctypes: one wheel serves
    # every CPython 3 version.
    assert (python_tag, abi_tag) == ("py3", "none")
    assert platform_tag.startswith("manylinux_") and platform_tag.endswith("_x86_64"), platform_tag


def test_the_readme_example_runs_against_the_installed_package(tmp_path, capsys, monkeypatch):
    with open(os.path.join(HERE, "..", "..", "README.md"), encoding="utf-8") as readme:
        text = readme.read()
    section = text.split("## Installing from Python", 1)[1]
    example = section.split("```python\n", 1)[1].split("```", 1)[0]
    # As printed: run in an empty directory, touching nothing outside it.
    monkeypatch.chdir(tmp_path)
    exec(compile(example, "README.md (Installing from Python)", "exec"), {})
    assert capsys.readouterr().out == "ApprovalStatus.APPROVED\n"
    assert sorted(path.name for path in tmp_path.iterdir() if not path.name.startswith("plan.db-")) == [
        "plan.db",
        "project",
    ]
    # The plan was written where the example's project is.
    assert list((tmp_path / "project" / ".pi" / "plan").iterdir())
