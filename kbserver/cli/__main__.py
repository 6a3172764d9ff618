"""`python -m kbserver.cli`: the `kbserver` command."""

import sys

from kbserver.cli import main

sys.exit(main())
