"""pyproject.toml: `pip install -e .` takes every package of the repository
and the two command-line modules, with requirements.txt's pins."""

import fnmatch
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _packages():
    """Every package of the repository (dotted names), the tests aside."""
    names = set()
    for top in ROOT.iterdir():
        if top.name != "tests" and (top / "__init__.py").is_file():
            names.update(".".join(init.parent.relative_to(ROOT).parts) for init in top.rglob("__init__.py"))
    return names


def test_the_install_takes_every_package_and_the_command_line_modules():
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    include = setuptools["packages"]["find"]["include"]
    packages = _packages()
    assert {"common", "data", "layers", "models", "models.fisher_vectors", "engine", "search", "tools"} <= packages
    assert {name for name in packages if not any(fnmatch.fnmatch(name, pattern) for pattern in include)} == set()
    scripts = {path.stem for path in ROOT.glob("*.py")} - {"conftest"}
    assert sorted(setuptools["py-modules"]) == sorted(scripts) == ["evaluate", "train"]


def test_the_dependencies_are_the_requirements():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "dependencies" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["dependencies"] == {"file": ["requirements.txt"]}
