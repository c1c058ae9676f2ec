"""Property tests run beside a busy test bed: timing says nothing about correctness there."""

from hypothesis import settings

settings.register_profile("kmc", deadline=None, print_blob=True)
settings.load_profile("kmc")
