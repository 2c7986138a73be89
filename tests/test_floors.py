"""The repository's architecture: floors, enforced.

The packages are floors, each importing only the ones below it:
common <- data <- layers <- models <- engine <- search <- tools, with the thin CLIs
`train.py` and `evaluate.py` on search's floor (above the engine, below the
tools). `.importlinter` at the repository root states it as two
import-linter contracts (the floors, the CLIs on them through
`tests/import_contracts.py`; no model family in the engine, search or the
ground floor), checked here against the checkout and
against a copy broken on purpose, so a contract that could never fail
would be noticed. The shared floors also keep the families' names out of
their code (comments and docstrings may cite them).
"""

import ast
import io
import os
import re
import shutil
import subprocess
import sys
import tokenize
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("common", "data", "layers", "models", "engine", "search", "tools")
TOP_LEVEL_SCRIPTS = {"train.py", "evaluate.py", "conftest.py"}


def lint_imports(root):
    """Runs import-linter on `root`/.importlinter in a fresh interpreter
    (the one running the tests, so the venv's import-linter), with `root`
    as the working directory and first on the path: only the packages under
    `root` are analysed, wherever pytest was started. import-linter parses
    the code, it does not import it; no cache is written into `root`.
    Returns (exit code, report)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
    result = subprocess.run(
        [sys.executable, "-c", "from importlinter.cli import lint_imports_command; lint_imports_command()",
         "--config", str(root / ".importlinter"), "--no-cache", "--no-logo"],
        cwd=root, env=env, capture_output=True, text=True, timeout=120,
    )
    return result.returncode, result.stdout + result.stderr


def test_the_import_contracts_are_kept():
    code, report = lint_imports(REPO)
    assert code == 0, f"an import breaks the floors (.importlinter):\n{report}"
    assert "0 broken" in report and "KEPT" in report


def copy_of_the_packages(tmp_path):
    """The packages' .py files, the CLIs, .importlinter and its contract
    type, copied under tmp_path."""
    files = [source for package in PACKAGES for source in (REPO / package).rglob("*.py")]
    files += [REPO / "train.py", REPO / "evaluate.py", REPO / ".importlinter", REPO / "tests" / "import_contracts.py"]
    for source in files:
        target = tmp_path / source.relative_to(REPO)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
    return tmp_path


@pytest.mark.parametrize(
    "module, line, imported",
    [("common/metrics.py", "from engine import evaluation", "engine.evaluation"),
     ("engine/training.py", "from models import rcn", "models.rcn"),
     ("evaluate.py", "from tools import bench", "tools.bench")],
    ids=["upward import", "family import in the engine", "a CLI above train.py's floor"],
)
def test_a_broken_contract_is_reported_with_the_offending_import(tmp_path, module, line, imported):
    root = copy_of_the_packages(tmp_path)
    code, report = lint_imports(root)
    assert code == 0, f"the unmodified copy should keep the contracts:\n{report}"
    with open(root / module, "a") as f:
        f.write(f"\n{line}\n")
    code, report = lint_imports(root)
    importer = module.removesuffix(".py").replace("/", ".")
    assert code != 0 and "BROKEN" in report, report
    assert f"{importer} -> {imported} (l." in report, report
    assert not list(root.glob(".import_linter_cache*")), "import-linter wrote a cache"


# Whole-word-ish: at the start of a word (after a non-alphanumeric
# character, or a camel-case boundary as in isFisher), any ending.
FAMILY_NAME = re.compile(
    r"(?:(?<![A-Za-z0-9])|(?<=[a-z])(?=[A-Z]))"
    r"(?i:rcn|capsule|w2vv|mcnn|fisher|fv_|vse|fne|order_violation)"
)
SHARED_FLOORS = ("engine", "search", "common", "data")
# The kinds of image features a user names (`--image-features fc|fne`) are
# declared once, in the data floor: `fne`, the Full-Network Embedding's
# per-layer features, which any model may read, is spelled there alone.
DECLARED_KINDS = {'data/image_features.py: "fne"'}


def docstring_spans(tree):
    """(start, end) (row, col) positions of the module, class and function
    docstrings of an ast tree."""
    spans = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                spans.append(((first.lineno, first.col_offset), (first.end_lineno, first.end_col_offset)))
    return spans


def family_names_in_code(path):
    """(line, token) of each identifier or non-docstring string literal of
    `path` naming a model family; comments and docstrings are ignored."""
    source = path.read_text(encoding="utf-8")
    spans = docstring_spans(ast.parse(source, str(path)))
    string_types = {tokenize.STRING} | {getattr(tokenize, "FSTRING_MIDDLE", tokenize.STRING)}
    hits = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.NAME or token.type in string_types:
            if token.type != tokenize.NAME and any(start <= token.start and token.end <= end for start, end in spans):
                continue
            if FAMILY_NAME.search(token.string):
                hits.append((token.start[0], token.string))
    return hits


def test_the_family_name_pattern():
    for name in ("RCNModel", "capsule_masks", "W2VV", "mcnn", "isFisher", "fv_dim", "'models.vse'", "fne_stats",
                 "order_violation", "CapsuleGRU"):
        assert FAMILY_NAME.search(name), name
    for name in ("universe", "reverse", "inverse", "offne", "vfv_", "tokens"):
        assert not FAMILY_NAME.search(name), name


def test_shared_floors_do_not_name_a_family_outside_docstrings_and_comments():
    files = [p for floor in SHARED_FLOORS for p in sorted((REPO / floor).rglob("*.py"))]
    files += [REPO / "train.py", REPO / "evaluate.py"]
    hits = [f"{path.relative_to(REPO)}:{line}: {text}" for path in files for line, text in family_names_in_code(path)]
    declared = [hit for hit in hits if hit.split(":")[0] + ": " + hit.split(": ", 1)[1] in DECLARED_KINDS]
    assert len(declared) == 1, declared  # the one declaration, on one line
    hits = [hit for hit in hits if hit not in declared]
    assert not hits, "model-family names in the shared floors:\n" + "\n".join(hits)


def test_only_the_clis_and_conftest_at_the_top_level():
    assert {p.name for p in REPO.glob("*.py")} == TOP_LEVEL_SCRIPTS
