"""Unit tests are pure: no timing deadlines, and no kubeconfig from the shell that runs them."""

import pytest
from hypothesis import settings

# Property tests run beside a busy test bed: timing says nothing about correctness there.
settings.register_profile("kmc", deadline=None, print_blob=True)
settings.load_profile("kmc")


@pytest.fixture(autouse=True)
def _no_kubeconfig_from_the_shell(monkeypatch: pytest.MonkeyPatch) -> None:
    """kmc-apiserver's flags default to $KUBECONFIG: one left in the shell (the bed's, after
    the bed went down) must not decide a unit test. Tests that want one set it themselves."""
    monkeypatch.delenv("KUBECONFIG", raising=False)
