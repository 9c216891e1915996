"""``python -m audiorepro ...``: the ``audiorepro`` command (:mod:`audiorepro.cli`)."""

from audiorepro.cli import main

raise SystemExit(main())
