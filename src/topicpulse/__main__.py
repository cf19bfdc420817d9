"""Allow ``python -m topicpulse``."""

from topicpulse.cli import main

raise SystemExit(main())
