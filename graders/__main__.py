"""``python -m graders``: the same as the ``graders`` console script."""

from graders.cli import main

raise SystemExit(main())
