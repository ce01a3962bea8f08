"""``python -m mediastash``: the same command line as the ``mediastash`` script."""

import sys

from mediastash.cli import main

if __name__ == '__main__':
    sys.exit(main())
