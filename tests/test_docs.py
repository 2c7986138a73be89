"""README.md and docs/*.md: links resolve, the commands they show parse.

Links: every relative link (and image) resolves to a file or folder of the
repository, and every `#anchor`, on the same page or `page.md#anchor`,
names a heading of that page by GitHub's slug rules. External http(s)
links are not fetched.

Commands: every shell command of a ```bash / ```sh / ```shell block (or of
an unlabelled block whose lines start with `python `), `\\` continuations
joined, that runs `python train.py`, `python evaluate.py` or `python -m
MODULE` is parsed by that entry point's own `parse_args` (real argparse),
and every path argument naming something the repository holds (below
`data/`, `results/`, `docs/`, `tests/`, or a top-level file) must exist.
Paths under `runs/` and the files a command writes are made by earlier
commands and are not checked. A shell loop (`for NAME in WORDS; do ...;
done`) is its body once per word. Every other program the docs show has
a check of its own (OTHER_PROGRAMS, OTHER_MODULES): `pip install`'s
requirements parse and its files exist, a virtual environment a page
creates is the one it activates and is git-ignored, `python -c`'s snippet
compiles, `python -m pytest`'s markers and paths are the suite's,
TensorBoard's own parser takes its arguments and its log folder is one a
command of the page writes. A program without a check fails the test.
"""

import configparser
import contextlib
import glob
import importlib
import io
import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

# Options whose value is a file or folder a command writes (or a run directory).
OUTPUT_OPTIONS = {"--out", "--model-dir", "--json", "--record", "--projector", "--save-snapshot", "--plot"}
REPOSITORY_FOLDERS = ("data/", "results/", "docs/", "tests/")
TOP_LEVEL_FILE = re.compile(r"[\w.-]+\.(md|py|toml|ini|cfg)")  # not the user's data files (.txt, .json, ...)


def _rel(path):
    return path.relative_to(ROOT).as_posix()


# --- Markdown ------------------------------------------------------------------------------------


def _fenced_blocks(text):
    """(info string, [lines]) of every fenced code block, indentation removed."""
    blocks, current, info, indent = [], None, None, 0
    for line in text.splitlines():
        stripped = line.lstrip()
        if current is None:
            if stripped.startswith("```"):
                current, info, indent = [], stripped[3:].strip(), len(line) - len(stripped)
        elif stripped.startswith("```"):
            blocks.append((info, current))
            current = None
        else:
            current.append(line[indent:] if line[:indent].strip() == "" else line.lstrip())
    return blocks


def _prose(text):
    """The text outside fenced code blocks and inline code."""
    lines, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(re.sub(r"`[^`]*`", "", line))
    return "\n".join(lines)


def _headings(text):
    headings, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and (match := re.match(r"#{1,6} +(.*?)\s*#*\s*$", line)):
            headings.append(match.group(1))
    return headings


def slug(heading):
    """GitHub's anchor of a heading: link targets dropped, lowercase,
    punctuation removed except - and _, spaces to -."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading).lower()
    text = "".join(char for char in text if char.isalnum() or char in " -_")
    return text.replace(" ", "-")


def anchors(text):
    """Every heading's anchor; a repeated one gets -1, -2, ..."""
    seen, result = {}, set()
    for heading in _headings(text):
        base = slug(heading)
        count = seen.get(base, 0)
        result.add(base if count == 0 else f"{base}-{count}")
        seen[base] = count + 1
    return result


LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def links(text):
    return LINK.findall(_prose(text))


def test_slugs_follow_githubs_rules():
    assert slug("Training speed: packed GRU, mixed precision, XLA") == "training-speed-packed-gru-mixed-precision-xla"
    assert slug("m-CNN: Table 2 (Ma et al. 2015)") == "m-cnn-table-2-ma-et-al-2015"
    assert slug("The Recurrent Capsule Network (`rcn`)") == "the-recurrent-capsule-network-rcn"
    assert slug("Fisher vectors + CCA (`fv-mean`, `fv_x`)") == "fisher-vectors--cca-fv-mean-fv_x"
    assert anchors("# A\n## A\n```\n# not a heading\n```\n### A\n") == {"a", "a-1", "a-2"}
    assert links("[x](a.md#b) ![i](p.png) `[no](code.md)`\n```\n[no](block.md)\n```\n[y](https://e.org)") == [
        "a.md#b", "p.png", "https://e.org"]


@pytest.mark.parametrize("page", PAGES, ids=_rel)
def test_every_relative_link_and_anchor_resolves(page):
    text = page.read_text()
    broken = []
    for target in links(text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http(s), mailto: not fetched
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: {path} does not exist")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file.read_text()):
            broken.append(f"{target}: no heading of {_rel(file)} has the anchor #{anchor}")
    assert not broken, f"{_rel(page)}: " + "; ".join(broken)


@pytest.mark.parametrize("page", PAGES, ids=_rel)
def test_no_page_points_outside_the_repository_to_the_shared_folder(page):
    lines = [f"{number}: {line}" for number, line in enumerate(page.read_text().splitlines(), start=1)
             if "../shared" in line]
    assert not lines, f"{_rel(page)} refers to ../shared (not part of a clone):\n" + "\n".join(lines)


# --- Commands ------------------------------------------------------------------------------------


def shell_commands(text):
    """Every command of the page's shell blocks: `\\` continuations joined,
    comments dropped, split at `;`, `&&`, `||` and `|`, a loop's `do` and
    the environment assignments before a program (`NAME=value python ...`)
    removed."""
    commands = []
    for info, lines in _fenced_blocks(text):
        language = info.split()[0] if info else ""
        if language not in ("bash", "sh", "shell") and not (
                language == "" and lines and all(line.startswith("python ") for line in lines if line.strip())):
            continue
        joined = re.sub(r"\\\n", " ", "\n".join(lines) + "\n")
        for line in joined.splitlines():
            lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|")
            lexer.whitespace_split = True
            command = []
            for word in [*lexer, ";"]:
                if word in (";", "&&", "||", "|", "&"):
                    command = command[1:] if command[:1] == ["do"] else command
                    while command and re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", command[0]):
                        command = command[1:]
                    if command:
                        commands.append(command)
                    command = []
                else:
                    command.append(word)
    return expand_loops([command for command in commands if command])


def expand_loops(commands):
    """The commands with each `for NAME in WORDS` ... `done` replaced by the
    commands between, once per word, `$NAME` and `${NAME}` replaced by it
    (in any quotes: the docs' loops quote with double quotes)."""
    expanded, rest = [], iter(commands)
    for command in rest:
        assert command != ["done"], "`done` without `for`"
        if command[0] != "for":
            expanded.append(command)
            continue
        assert len(command) >= 4 and command[2] == "in", f"not `for NAME in WORDS`: {shlex.join(command)}"
        name, words, body = command[1], command[3:], []
        for inner in rest:
            if inner == ["done"]:
                break
            assert inner[0] != "for", "a loop in a loop"
            body.append(inner)
        else:
            raise AssertionError(f"`for {name}` without `done`")
        variable = re.compile(rf"\$(?:{name}\b|\{{{name}\}})")
        expanded += [[variable.sub(word, part) for part in inner] for word in words for inner in body]
    return expanded


def _parser_of(command):
    """(module, argv) of a repository entry point's command (`python
    train.py`, `python evaluate.py`, `python -m MODULE`); None for another
    program's."""
    program = command[0]
    if program != "python" or (command[1] == "-m" and command[2] in OTHER_MODULES) or command[1] == "-c":
        return None
    if command[1] in ("train.py", "evaluate.py"):
        return command[1].removesuffix(".py"), command[2:]
    assert command[1] == "-m", f"python {command[1]}: not train.py, evaluate.py, -m MODULE or -c"
    return command[2], command[3:]


# --- Other programs: each has a check of its own ---------------------------------------------------
# A check takes the command's arguments and the commands of its page, and
# asserts what must hold for the command to work as the page says.


def check_pip(argv, page_commands):
    """`pip install`: its requirement files exist and parse (every line a
    PEP 508 requirement or `-r FILE`), `-e PATH` is a project
    (pyproject.toml), every package named is a PEP 508 requirement."""
    from packaging.requirements import Requirement

    assert argv[:1] == ["install"] and argv[1:], f"pip {shlex.join(argv)}: only `pip install ...` is checked"
    words = iter(argv[1:])
    for word in words:
        if word in ("-r", "--requirement"):
            check_requirements_file(ROOT / next(words))
        elif word in ("-e", "--editable"):
            path = next(words)
            assert (ROOT / path / "pyproject.toml").is_file(), f"pip install -e {path}: no pyproject.toml there"
        else:
            assert not word.startswith("-"), f"pip install {word}: an option without a check here"
            Requirement(word)  # InvalidRequirement unless a requirement


def check_requirements_file(path):
    from packaging.requirements import Requirement

    assert path.is_file(), f"{_rel(path)} does not exist"
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line.startswith("-r "):
            check_requirements_file(path.parent / line[3:].strip())
        elif line:
            Requirement(line)


def _venvs(page_commands):
    """The virtual environments a page creates (`python3 -m venv DIR`)."""
    return {command[3] for command in page_commands
            if command[0] in ("python", "python3") and command[1:3] == ["-m", "venv"] and len(command) == 4}


def check_venv(argv, page_commands):
    """`python3 -m venv DIR`: DIR, made inside the checkout, is git-ignored
    (.gitignore's `/DIR/`), and the page activates it."""
    (folder,) = argv
    ignored = (ROOT / ".gitignore").read_text().split()
    assert f"/{folder}/" in ignored, f"{folder}/ is not in .gitignore: git would show the environment"
    activated = [command for command in page_commands if command == ["source", f"{folder}/bin/activate"]]
    assert activated, f"the page makes {folder} but never activates it (source {folder}/bin/activate)"


def check_source(argv, page_commands):
    """`source DIR/bin/activate`: DIR is an environment the page creates."""
    (script,) = argv
    folder = script.removesuffix("/bin/activate")
    assert script.endswith("/bin/activate") and folder in _venvs(page_commands), (
        f"source {script}: not the activation of an environment the page creates ({sorted(_venvs(page_commands))})")


def check_snippet(argv, page_commands):
    """`python -c CODE`: CODE compiles."""
    (code,) = argv
    compile(code, "python -c", "exec")


def check_pytest(argv, page_commands):
    """`python -m pytest [-m MARKERS] [PATHS]`: pytest.ini's testpaths
    exist, the markers of `-m` are declared in its `markers`, the paths are
    test files or folders of the suite."""
    ini = configparser.ConfigParser()
    ini.read(ROOT / "pytest.ini")
    testpaths = ini["pytest"]["testpaths"].split()
    assert testpaths and all((ROOT / path).is_dir() for path in testpaths), f"pytest.ini's testpaths {testpaths}"
    markers = {line.split(":", 1)[0].strip() for line in ini["pytest"]["markers"].splitlines() if line.strip()}
    words = iter(argv)
    for word in words:
        if word == "-m":
            named = set(re.findall(r"\w+", next(words))) - {"and", "or", "not"}
            assert named <= markers, f"-m: {sorted(named - markers)} not declared in pytest.ini ({sorted(markers)})"
        else:
            assert not word.startswith("-"), f"pytest {word}: an option without a check here"
            assert (ROOT / word).exists() and word.startswith(tuple(f"{path}/" for path in testpaths)), (
                f"pytest {word}: not a test file or folder of the suite")


def check_tensorboard(argv, page_commands):
    """`tensorboard --logdir DIR`: TensorBoard's own parser takes the
    arguments, and DIR is (in) a folder a command of the page writes."""
    from tensorboard import program

    stderr, board = io.StringIO(), program.TensorBoard()
    try:
        with contextlib.redirect_stderr(stderr):
            board.configure(argv=[None, *argv])
    except SystemExit:
        raise AssertionError(f"tensorboard refuses {shlex.join(argv)}: {stderr.getvalue().strip()}") from None
    written = [command[k + 1] for command in page_commands for k, word in enumerate(command[:-1])
               if word in OUTPUT_OPTIONS]
    logdir = Path(board.flags.logdir)
    assert any(logdir == Path(out) or Path(out) in logdir.parents for out in written), (
        f"--logdir {logdir}: no command of the page writes it ({written})")


# Programs, and modules run by `python -m`, that are not the repository's:
# their checks.
OTHER_PROGRAMS = {"pip": check_pip, "source": check_source, "tensorboard": check_tensorboard}
OTHER_MODULES = {"pytest": check_pytest, "venv": check_venv, "pip": check_pip}


def _other_check(command):
    """(check, argv) of a command that is not a repository entry point."""
    program = command[0]
    if program in ("python", "python3") and command[1] == "-m" and command[2] in OTHER_MODULES:
        return OTHER_MODULES[command[2]], command[3:]
    if program == "python" and command[1] == "-c":
        return check_snippet, command[2:]
    assert program in OTHER_PROGRAMS, f"unknown program {program!r}: give it a check in OTHER_PROGRAMS"
    return OTHER_PROGRAMS[program], command[1:]


def _repository_paths(argv):
    """The arguments of `argv` that name something the repository holds: a
    path below one of REPOSITORY_FOLDERS or a top-level file (README.md,
    train.py, ...); the values of OUTPUT_OPTIONS are left out, as are
    run directories and the user's own files."""
    paths, skip = [], False
    for word in argv:
        if skip:
            skip = False
            continue
        if word.startswith("-"):
            option, equals, value = word.partition("=")
            if option in OUTPUT_OPTIONS:
                skip = not equals
                continue
            word = value
        word = word.partition("=")[2] if re.match(r"[a-z_]+\.[a-z_]+=", word) else word  # --set section.key=PATH
        if word.startswith(REPOSITORY_FOLDERS) or TOP_LEVEL_FILE.fullmatch(word):
            paths.append(word)
    return paths


def _doc_commands():
    for page in PAGES:
        for command in shell_commands(page.read_text()):
            yield pytest.param(page, command, id=f"{_rel(page)}: {shlex.join(command)[:90]}")


def test_command_extraction():
    text = "```bash\npython train.py --model a \\\n    --set x.y=1  # comment\n" \
           "for v in a b; do python -m tools.bench --model $v; done\n```\n" \
           "```\npython evaluate.py --model-dir runs/x\n```\n```\n<root>/x\n```\n```python\nprint(1)\n```\n" \
           "  ```bash\n  pip install x && python -m pytest\n  ```\n" \
           "```bash\nONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2 python -m tools.bench\n```\n"
    assert shell_commands(text) == [
        ["python", "train.py", "--model", "a", "--set", "x.y=1"],
        ["python", "-m", "tools.bench", "--model", "a"], ["python", "-m", "tools.bench", "--model", "b"],
        ["python", "evaluate.py", "--model-dir", "runs/x"],
        ["pip", "install", "x"], ["python", "-m", "pytest"], ["python", "-m", "tools.bench"]]
    argv = ["--data", "data/x", "--out", "docs/new.png", "--images", "Flicker8k/",
            "--set", "model.word_vectors=data/v.txt", "--plot=docs/p.png", "README.md", "runs/", "glove.txt"]
    assert _repository_paths(argv) == ["data/x", "data/v.txt", "README.md"]


def test_loops_are_their_body_once_per_word():
    text = "```bash\nfor h in 64 128; do\n  python -c \"print($h, '${h}/x', $hx)\"\ndone\n```\n"
    assert shell_commands(text) == [["python", "-c", "print(64, '64/x', $hx)"], ["python", "-c", "print(128, '128/x', $hx)"]]
    for broken in ("for h in 1; do python -m x\n", "done\n", "for h; do python -m x; done\n",
                   "for a in 1; do for b in 2; do python -m x; done; done\n"):
        with pytest.raises(AssertionError):
            shell_commands(f"```bash\n{broken}```\n")


VENV_PAGE = [["python3", "-m", "venv", ".venv"], ["source", ".venv/bin/activate"]]
WRITER_PAGE = [["python", "evaluate.py", "--model-dir", "runs/a", "--projector", "runs/a/projector"]]


REFUSED = [
    (["pip", "install", "-r", "requirements-missing.txt"], []),
    (["pip", "install", "-e", "docs"], []),
    (["pip", "install", "not a package!"], []),
    (["pip", "install", "--user", "x"], []),
    (["pip", "uninstall", "x"], []),
    (["python3", "-m", "venv", "elsewhere"], [["source", "elsewhere/bin/activate"]]),
    (["python3", "-m", "venv", ".venv"], []),
    (["source", ".venv-other/bin/activate"], VENV_PAGE),
    (["python", "-c", "print(1"], []),
    (["python", "-m", "pytest", "-m", "quick"], []),
    (["python", "-m", "pytest", "tests/no_such_test.py"], []),
    (["python", "-m", "pytest", "docs"], []),
    (["tensorboard", "--logdir", "runs/b"], WRITER_PAGE),
    (["tensorboard", "--no-such-flag", "runs/a"], WRITER_PAGE),
    (["git", "clone", "x"], []),
]
TAKEN = [
    (["pip", "install", "-r", "requirements-beam.txt", "-e", ".", "pyarrow==1.0"], []),
    (VENV_PAGE[0], VENV_PAGE),
    (VENV_PAGE[1], VENV_PAGE),
    (["python", "-c", "import json"], []),
    (["python", "-m", "pytest", "-m", "not slow", "tests/test_docs.py"], []),
    (["tensorboard", "--logdir", "runs/a/projector"], WRITER_PAGE),
]


@pytest.mark.parametrize("command, page_commands", REFUSED, ids=[shlex.join(command) for command, _ in REFUSED])
def test_the_check_of_another_program_refuses_a_command_that_would_not_work(command, page_commands):
    assert _parser_of(command) is None
    # packaging's InvalidRequirement is a ValueError; compile's error a SyntaxError.
    with pytest.raises((AssertionError, ValueError, SyntaxError)):
        check, argv = _other_check(command)
        check(argv, page_commands)


@pytest.mark.parametrize("command, page_commands", TAKEN, ids=[shlex.join(command) for command, _ in TAKEN])
def test_the_check_of_another_program_takes_a_command_that_works(command, page_commands):
    check, argv = _other_check(command)
    check(argv, page_commands)


@pytest.mark.parametrize("page, command", list(_doc_commands()))
def test_every_documented_command_parses_and_names_existing_paths(page, command):
    where = f"{_rel(page)}: `{shlex.join(command)}`"
    target = _parser_of(command)
    if target is None:
        check, argv = _other_check(command)
        try:
            check(argv, shell_commands(page.read_text()))
        except Exception as error:
            raise AssertionError(f"{where}: {error}") from error
        return
    module_name, argv = target
    argv = [expanded for word in argv
            for expanded in (sorted(_rel(Path(p)) for p in glob.glob(str(ROOT / word))) if "*" in word else [word])
            or [word]]
    module = importlib.import_module(module_name)
    if hasattr(module, "__path__"):  # `python -m PACKAGE` runs PACKAGE/__main__.py
        module = importlib.import_module(f"{module_name}.__main__")
    assert hasattr(module, "parse_args"), f"{where}: {module_name} has no parse_args(argv)"
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
            module.parse_args(argv)
    except SystemExit as exit:
        assert exit.code in (0, None), f"{where}: argparse refuses it: {stderr.getvalue().strip()}"
    missing = [path for path in _repository_paths(argv) if not (ROOT / path).exists()]
    assert not missing, f"{where}: {', '.join(missing)} not in the repository"
