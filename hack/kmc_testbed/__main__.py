"""`python -m kmc_testbed` is what `hack/testbed` runs."""

from kmc_testbed.cli import main

raise SystemExit(main())
