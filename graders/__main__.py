"""``python -m graders``: the same as the ``graders`` console script."""

from graders.cli import console_main

raise SystemExit(console_main())
