"""`python -m chatbridge ...` works like the `chatbridge` console script."""

import sys

from chatbridge.core.app.cli import main

sys.exit(main())
