"""kubeconfig loading as kubectl does it: KUBECONFIG with several files, the first one wins."""

import os
from pathlib import Path

import pytest
import yaml

from kubectl_mc.kube import warning_text
from kubectl_mc.kubeconfig import KubeconfigError, load, select


def write(path: Path, **config: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture
def two_files(tmp_path: Path) -> tuple[Path, Path]:
    first = write(
        tmp_path / "a" / "config",
        clusters=[
            {"name": "hub", "cluster": {"server": "https://a", "certificate-authority": "ca.crt"}}
        ],
        users=[{"name": "me", "user": {"token": "a"}}],
        contexts=[
            {"name": "hub", "context": {"cluster": "hub", "user": "me", "namespace": "demo"}}
        ],
    )
    second = write(
        tmp_path / "b" / "config",
        clusters=[
            {"name": "hub", "cluster": {"server": "https://b"}},
            {"name": "other", "cluster": {"server": "https://o"}},
        ],
        users=[{"name": "me", "user": {"token": "b"}}],
        contexts=[
            {"name": "hub", "context": {"cluster": "other", "user": "me"}},
            {"name": "other", "context": {"cluster": "other", "user": "me"}},
        ],
        **{"current-context": "other"},
    )
    return first, second


def test_several_files_merge_and_the_first_definition_wins(
    two_files: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = two_files
    missing = first.parent / "missing"
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join([str(missing), str(first), "", str(second)]))
    config, _ = load(None)
    assert config["current-context"] == "other"  # the first file sets none
    hub = select(config, "hub")
    assert hub.cluster["server"] == "https://a" and hub.user["token"] == "a"
    assert hub.user_name == "me"  # credential errors name the user
    assert hub.namespace == "demo"
    assert hub.cluster["certificate-authority"] == str(first.parent / "ca.crt")
    other = select(config)
    assert other.cluster["server"] == "https://o" and other.namespace == "default"
    assert select(config, "hub", cluster="other").cluster["server"] == "https://o"


def test_the_flag_overrides_the_environment(
    two_files: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = two_files
    monkeypatch.setenv("KUBECONFIG", str(first))
    config, _ = load(str(second))
    assert select(config, "hub").cluster["server"] == "https://o"
    with pytest.raises(KubeconfigError, match="no such file"):
        load(str(first.parent / "missing"))
    with pytest.raises(KubeconfigError, match="context was not found for specified context: nope"):
        select(config, "nope")


def test_warning_headers_are_unquoted() -> None:
    assert (
        warning_text('299 - "location us-east left out: \\"x\\""')
        == 'location us-east left out: "x"'
    )
    assert warning_text("just text") == "just text"
