"""`python -m semcl.cli`: the command line, as the `semcl` script runs it."""

import sys

from semcl.cli.main import main

sys.exit(main())
