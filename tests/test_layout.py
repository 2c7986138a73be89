"""The tests mirror the source tree (docs/layout.md): every product module
`PACKAGE/.../NAME.py` (and `train.py`, `evaluate.py`) has a test file of
its own, `tests/PACKAGE/.../test_NAME.py` (`test_main.py` for a
`__main__.py`), which tests that module's behaviour directly. A package's
`__init__.py` is tested through the modules and tests that import it.
Tests across modules (the docs, the floors, the results, end-to-end runs)
stand beside these."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Modules allowed without a test file of their own, each for a stated
# reason and until then only: the test fails once one has a test file, so
# the list only shrinks.
WITHOUT_TEST_FILE = set()


def product_modules(root=ROOT):
    """Every module of the repository's packages (folders with an
    `__init__.py` at the top level, the tests aside) but the `__init__.py`
    files, and the top-level scripts but conftest.py, as paths relative to
    `root`."""
    packages = [top for top in root.iterdir() if top.name != "tests" and (top / "__init__.py").is_file()]
    modules = {path.relative_to(root).as_posix() for package in packages for path in package.rglob("*.py")
               if path.name != "__init__.py"}
    return modules | {path.name for path in root.glob("*.py") if path.name != "conftest.py"}


def mirrored_test(module):
    """The mirrored test file of a module path ("search/__main__.py" ->
    "tests/search/test_main.py")."""
    path = Path(module)
    name = "main" if path.stem == "__main__" else path.stem
    return (Path("tests") / path.parent / f"test_{name}.py").as_posix()


def test_the_mirror_of_a_module_path():
    assert mirrored_test("train.py") == "tests/test_train.py"
    assert mirrored_test("models/fisher_vectors/cca.py") == "tests/models/fisher_vectors/test_cca.py"
    assert mirrored_test("search/__main__.py") == "tests/search/test_main.py"


def test_the_modules_are_found_where_they_are(tmp_path):
    for name in ["pkg/__init__.py", "pkg/a.py", "pkg/sub/__init__.py", "pkg/sub/__main__.py", "pkg/sub/b.py",
                 "tests/__init__.py", "tests/test_x.py", "notes/c.py", "train.py", "conftest.py"]:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    assert product_modules(tmp_path) == {"pkg/a.py", "pkg/sub/__main__.py", "pkg/sub/b.py", "train.py"}


def test_every_product_module_has_a_test_file_of_its_own():
    modules = product_modules()
    assert {"train.py", "evaluate.py", "common/files.py", "search/__main__.py", "models/fisher_vectors/cca.py"} <= modules
    missing = sorted(module for module in modules - WITHOUT_TEST_FILE if not (ROOT / mirrored_test(module)).is_file())
    assert not missing, "modules without a test file of their own:\n" + "\n".join(
        f"{module}: write {mirrored_test(module)}" for module in missing)


def test_the_modules_allowed_without_a_test_file_still_lack_one():
    tested = sorted(module for module in WITHOUT_TEST_FILE if (ROOT / mirrored_test(module)).is_file())
    assert not tested, f"{tested} now have test files: take them off WITHOUT_TEST_FILE"
    gone = sorted(WITHOUT_TEST_FILE - product_modules())
    assert not gone, f"{gone} are no modules: take them off WITHOUT_TEST_FILE"


def test_every_test_folder_is_a_package():
    # Mirrored names repeat across folders (tests/search/test_model.py,
    # tests/models/fisher_vectors/test_model.py); pytest imports two such
    # files as two modules only when their folders are packages. Without an
    # `__init__.py` the second one fails to import whenever the same worker
    # collects both.
    folders = {path.parent for path in (ROOT / "tests").rglob("test_*.py")}
    missing = sorted(folder.relative_to(ROOT).as_posix() for folder in folders
                     if not (folder / "__init__.py").is_file())
    assert not missing, f"test folders without an __init__.py: {missing}"
