"""Allow `python -m forensics`."""

from forensics.cli.main import main

raise SystemExit(main())
