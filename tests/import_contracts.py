"""The import-linter contract type of the floors: import-linter's `layers`
contract, with the command-line scripts at the repository's root on the
floors too.

import-linter analyses packages only, and train.py and evaluate.py are
modules beside them. A `layers_with_scripts` contract adds each file of
its `scripts` option (relative to the working directory, the repository's
root) to the import graph, with the imports of the analysed packages it
makes (parsed, not run), then checks the layers, which may name a script
by its module name (`train`, `evaluate`). `.importlinter` declares the
type; `tests/test_floors.py` runs it.
"""

import ast
from pathlib import Path

from importlinter.contracts.layers import LayersContract
from importlinter.domain import fields


class LayersWithScripts(LayersContract):
    scripts = fields.ListField(subfield=fields.StringField())

    def check(self, graph, verbose):
        added = [self._add_script(graph, Path(script)) for script in self.scripts]
        try:
            return super().check(graph, verbose)
        finally:
            for module in added:  # the graph is shared with the other contracts
                graph.remove_module(module)

    @staticmethod
    def _add_script(graph, path):
        """Adds the script at `path` and its imports of the graph's modules
        to `graph`; returns its module name."""
        module = path.stem
        source = path.read_text(encoding="utf-8")
        lines = source.splitlines()
        graph.add_module(module)
        for node in ast.walk(ast.parse(source, str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
            else:
                continue
            for name in names:
                if name in graph.modules:
                    graph.add_import(importer=module, imported=name, line_number=node.lineno,
                                     line_contents=lines[node.lineno - 1].strip())
        return module
