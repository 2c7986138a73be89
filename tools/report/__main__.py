"""`python -m tools.report`: the command line of tools.report.cli."""

import sys

from tools.report.cli import main, parse_args

__all__ = ["main", "parse_args"]

if __name__ == "__main__":
    sys.exit(main())
