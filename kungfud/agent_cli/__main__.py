"""``python -m kungfud.agent_cli``: the ``kungfu`` program without the console script."""

import sys

from . import main

sys.exit(main())
