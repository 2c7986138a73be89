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
commands and are not checked. Other programs are skipped by name
(OTHER_PROGRAMS).
"""

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

# Programs (and `python` invocations) the docs show that are not entry
# points of the repository: skipped, not parsed.
OTHER_PROGRAMS = {"pip", "python3", "source", "tensorboard", "git", "bash", "for", "done", "lint-imports"}
OTHER_PYTHON = {"-c"}  # `python -c "..."`: a snippet, no argument parser
OTHER_MODULES = {"pytest", "venv", "pip"}
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
    return [command for command in commands if command]


def _parser_of(command):
    """(module, argv) of a repository entry point's command; None for a
    program the docs may show without parsing it (an AssertionError for
    any other)."""
    program = command[0]
    if program != "python":
        assert program in OTHER_PROGRAMS, f"unknown program {program!r}: add it to OTHER_PROGRAMS if it is not ours"
        return None
    if command[1] in ("train.py", "evaluate.py"):
        return command[1].removesuffix(".py"), command[2:]
    if command[1] == "-m":
        if command[2] in OTHER_MODULES:
            return None
        return command[2], command[3:]
    assert command[1] in OTHER_PYTHON, f"python {command[1]}: not train.py, evaluate.py or -m MODULE"
    return None


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
        ["for", "v", "in", "a", "b"], ["python", "-m", "tools.bench", "--model", "$v"], ["done"],
        ["python", "evaluate.py", "--model-dir", "runs/x"],
        ["pip", "install", "x"], ["python", "-m", "pytest"], ["python", "-m", "tools.bench"]]
    argv = ["--data", "data/x", "--out", "docs/new.png", "--images", "Flicker8k/",
            "--set", "model.word_vectors=data/v.txt", "--plot=docs/p.png", "README.md", "runs/", "glove.txt"]
    assert _repository_paths(argv) == ["data/x", "data/v.txt", "README.md"]


@pytest.mark.parametrize("page, command", list(_doc_commands()))
def test_every_documented_command_parses_and_names_existing_paths(page, command):
    where = f"{_rel(page)}: `{shlex.join(command)}`"
    target = _parser_of(command)
    if target is None:
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
