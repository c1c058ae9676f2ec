"""The serving pair: made once, kept while valid, made again (same CA) when about to expire."""

from __future__ import annotations

import datetime
from pathlib import Path

from cryptography import x509

from apiserver import certs, serving
from apiserver.options import parse


def expiry(path: Path) -> datetime.datetime:
    return x509.load_pem_x509_certificate(path.read_bytes()).not_valid_after_utc


def test_a_pair_is_kept_while_valid_and_renewed_by_the_same_ca_near_expiry(tmp_path: Path) -> None:
    options = parse([f"--cert-dir={tmp_path}"])
    first = serving.pair(options)
    assert serving.pair(options) == first
    kept = first.cert.read_bytes()
    assert serving.pair(options).cert.read_bytes() == kept
    ca = certs.Pair(tmp_path / "ca.crt", tmp_path / "ca.key")
    ca_before = ca.cert.read_bytes()
    first.cert.unlink()
    certs.ensure_cert(
        tmp_path,
        "apiserver",
        ca,
        "kmc-apiserver",
        hosts=("localhost",),
        validity=datetime.timedelta(days=2),
    )
    renewed = serving.pair(options)
    left = expiry(renewed.cert) - datetime.datetime.now(datetime.UTC)
    assert left > datetime.timedelta(days=300)
    assert ca.cert.read_bytes() == ca_before  # the caBundle the hub holds stays valid
    issuer = x509.load_pem_x509_certificate(ca_before).subject
    assert x509.load_pem_x509_certificate(renewed.cert.read_bytes()).issuer == issuer
