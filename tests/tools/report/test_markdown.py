"""The report's blocks in markdown files (tools.report.markdown): each
block replaced wherever it is, the text around it byte for byte as it
was, and a block missing, repeated, unclosed or of no table refused
before any file is written."""

from tests.tools.report.helpers import fails
from tools import report
from tools.report.markdown import markdown_blocks, updated_markdown


def test_update_writes_each_block_in_whichever_file_holds_it(workspace, capsys):
    out = workspace["out"]
    front, page = out / "front.md", out / "page.md"
    front.write_text("front\n<!-- report:one -->\nold one\n<!-- /report:one -->\n")
    page.write_text("page\n<!-- report:two -->\nold two\n<!-- /report:two -->\n<!-- report:other-runs -->\n<!-- /report:other-runs -->\n")
    argv = ["--snapshot", str(workspace["snapshot"]), "--tables", str(workspace["tables"]), "--papers", str(workspace["papers"])]
    assert report.main([*argv, "--update", str(front), str(page)]) == 0
    printed = report.markdown_blocks(capsys.readouterr().out)
    assert report.markdown_blocks(front.read_text()) == {"one": printed["one"]}
    assert report.markdown_blocks(page.read_text()) == {"two": printed["two"], "other-runs": printed["other-runs"]}
    assert front.read_text().startswith("front\n") and page.read_text().startswith("page\n")


def test_blocks_over_several_files_are_checked_before_anything_is_written(workspace, capsys):
    out, markdown = workspace["out"], workspace["markdown"]
    snapshot = ["--snapshot", str(workspace["snapshot"])]
    other = out / "other.md"
    # A table with a block in two files, or twice in one.
    other.write_text("<!-- report:two -->\n<!-- /report:two -->\n")
    fails(capsys, workspace, [*snapshot, "--update", str(markdown), str(other)],
          f"{markdown}, {other}: 2 blocks <!-- report:two -->")
    other.write_text("<!-- report:one -->\n<!-- /report:one -->\n<!-- report:one -->\n<!-- /report:one -->\n")
    fails(capsys, workspace, [*snapshot, "--update", str(other)], f"{other}: 2 blocks <!-- report:one -->")
    # A block of no table of tables.toml names the file and the id.
    other.write_text("<!-- report:three -->\nx\n<!-- /report:three -->\n")
    fails(capsys, workspace, [*snapshot, "--update", str(markdown), str(other)],
          f"{other}: the block <!-- report:three --> is of no table of the tables file")
    # A table in none of the files names the id (and the files looked in).
    markdown.write_text("<!-- report:one -->\n<!-- /report:one -->\n")
    other.write_text("<!-- report:other-runs -->\n<!-- /report:other-runs -->\n")
    fails(capsys, workspace, [*snapshot, "--update", str(markdown), str(other)],
          f"{markdown}, {other}: no <!-- report:two --> ... <!-- /report:two --> block for table 'two'")
    # A block that does not close; a file given twice.
    other.write_text("<!-- report:two -->\n<!-- report:other-runs -->\n<!-- /report:other-runs -->\n")
    fails(capsys, workspace, [*snapshot, "--update", str(markdown), str(other)],
          f"{other}: <!-- report:two --> has no <!-- /report:two --> line after it")
    fails(capsys, workspace, [*snapshot, "--update", str(markdown), str(markdown)], f"--update {markdown}: is given twice")


def test_replacing_a_block_leaves_the_rest_of_the_text_byte_for_byte():
    # Around the blocks: trailing spaces, a tab, non-ASCII, a blank line, a
    # block's marker within a line (no block), no final newline; beside it a
    # file of no block, in Windows line endings. The new block holds what a
    # regular expression's replacement would read as groups and escapes.
    text = ("# Results  \n\nbefore — ü\t\n<!-- report:one -->\nold 1\nold 2\n<!-- /report:one -->\n"
            "between <!-- report:two --> in a line\n\n<!-- report:two -->\n<!-- /report:two -->\nafter, no final newline")
    other = "no block\r\n<!-- a comment -->\r\n"
    blocks = {"one": "| a | b |\n|---|---|\n| \\1 \\g<0> $1 | C:\\new |", "two": "two's block"}
    expected = ("# Results  \n\nbefore — ü\t\n<!-- report:one -->\n| a | b |\n|---|---|\n| \\1 \\g<0> $1 | C:\\new |\n"
                "<!-- /report:one -->\nbetween <!-- report:two --> in a line\n\n<!-- report:two -->\ntwo's block\n"
                "<!-- /report:two -->\nafter, no final newline")
    assert updated_markdown({"doc.md": text, "other.md": other}, blocks) == {"doc.md": expected, "other.md": other}
    assert markdown_blocks(expected) == blocks
