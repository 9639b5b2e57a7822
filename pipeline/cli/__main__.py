"""`python -m soul.cli`: the same as the `soul` command."""

import sys

from soul.cli.main import main

sys.exit(main())
