"""`python -m apiserver` runs kmc-apiserver (the test bed starts it this way)."""

from apiserver.main import main

main()
