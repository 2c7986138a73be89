"""The report's blocks in markdown files: what stands between the lines
`<!-- report:ID -->` and `<!-- /report:ID -->`, found, checked and
replaced."""

import re

from common.errors import InputError


def _block_pattern(table_id):
    name = re.escape(table_id)
    return re.compile(rf"(<!-- report:{name} -->\n)(?:.*?\n)?(<!-- /report:{name} -->)", re.S)


_BLOCK_START = re.compile(r"^<!-- report:(\S+) -->$", re.M)


def check_blocks(texts, table_ids):
    """InputError unless each of `table_ids` has a block in exactly one of
    the markdown files `texts` ({path: text}), once, and every block there
    is one of `table_ids` or "other-runs" (the report's own); the error
    names the file(s) and the id."""
    found = {}
    for path, text in texts.items():
        ids = [match.group(1) for match in _BLOCK_START.finditer(text)]
        for table_id in ids:
            if table_id not in table_ids and table_id != "other-runs":
                raise InputError(f"{path}: the block <!-- report:{table_id} --> is of no table of the tables file "
                                 f"(known: {', '.join(table_ids)})")
            if not _block_pattern(table_id).search(text):
                raise InputError(f"{path}: <!-- report:{table_id} --> has no <!-- /report:{table_id} --> line after it")
            found.setdefault(table_id, []).append(str(path))
    for table_id, paths in found.items():
        if len(paths) > 1:
            raise InputError(f"{', '.join(dict.fromkeys(paths))}: {len(paths)} blocks <!-- report:{table_id} -->; "
                             "a table has one block in one file")
    for table_id in table_ids:
        if table_id not in found:
            raise InputError(f"{', '.join(map(str, texts))}: no <!-- report:{table_id} --> ... <!-- /report:{table_id} --> "
                             f"block for table {table_id!r}")


def updated_markdown(texts, blocks, table_ids=()):
    """{path: text} of the markdown files `texts` ({path: text}) with each
    block's text between `<!-- report:ID -->` and `<!-- /report:ID -->`
    replaced, wherever it is; the files are checked by check_blocks for
    the blocks and `table_ids` (every table's, the ones without runs too)."""
    check_blocks(texts, list(dict.fromkeys([*table_ids, *blocks])))
    updated = {}
    for path, text in texts.items():
        for table_id, block in blocks.items():
            text = _block_pattern(table_id).sub(lambda match, block=block: match.group(1) + block + "\n" + match.group(2), text)
        updated[path] = text
    return updated


def markdown_blocks(text):
    """{table id: block} of the report blocks in markdown text."""
    blocks = re.finditer(r"<!-- report:(\S+) -->\n(?:(.*?)\n)?<!-- /report:\1 -->", text, re.S)
    return {match.group(1): match.group(2) or "" for match in blocks}


def shrinking_blocks(texts, blocks, runs=frozenset()):
    """[(path, table id, rows now, rows after)] of the blocks of the
    markdown files `texts` ({path: text}) that `blocks` ({table id: new
    block}) would leave with fewer table rows. A row of "other-runs" whose
    run (its first cell) is among `runs`, the names read, is not counted:
    it leaves that table for one that names it."""
    shrinking = []
    for path, text in texts.items():
        for table_id, block in markdown_blocks(text).items():
            rows = _table_rows(block)
            now, after = len(rows), len(_table_rows(blocks.get(table_id, block)))
            if table_id == "other-runs":
                now -= sum(row.split("|")[1].strip() in runs for row in rows)
            if after < now:
                shrinking.append((path, table_id, now, after))
    return shrinking


def _table_rows(block):
    """The rows of a block's table: its lines that begin with "|" but the
    header and the line under it."""
    return [line for line in block.splitlines() if line.startswith("|")][2:]
