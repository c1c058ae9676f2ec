"""The serving certificate, and keeping it fresh while the server runs.

Given files (`--tls-cert-file`, from a Secret in a cluster) are reloaded when they change on
disk. A certificate we made ourselves in `--cert-dir` is made again, by the same CA, when it
is about to expire (or is missing): the APIServices' caBundle names the CA, so the hub keeps
trusting us across the renewal. Either way the running TLS context takes the new pair for
every new connection; nothing restarts.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import ssl
from pathlib import Path

from cryptography import x509

from apiserver import certs
from apiserver.options import Options

log = logging.getLogger(__name__)

RENEW_BEFORE = datetime.timedelta(days=30)


def pair(options: Options) -> certs.Pair:
    """The files to serve with: the given ones, or ours, (re)made when missing or expiring."""
    if options.tls_cert_file and options.tls_private_key_file:
        return certs.Pair(options.tls_cert_file, options.tls_private_key_file)
    folder = options.cert_dir
    ca = certs.ensure_ca(folder, "ca", "kmc-apiserver-ca")
    current = certs.Pair(folder / "apiserver.crt", folder / "apiserver.key")
    if current.cert.exists() and _expires(current.cert) - _now() < RENEW_BEFORE:
        log.info("the serving certificate expires %s: making a new one", _expires(current.cert))
        current.cert.unlink()
    return certs.ensure_cert(
        folder, "apiserver", ca, options.service_name, hosts=options.serving_hosts
    )


def context(options: Options) -> ssl.SSLContext:
    served = pair(options)
    result = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    result.load_cert_chain(str(served.cert), str(served.key))
    # No TLS 1.3 session tickets: the hub's aggregator keeps no session cache to resume
    # with, and making two per connection cost every new one about 0.45 ms here (each
    # exec, attach or port-forward through the hub is a new connection).
    result.num_tickets = 0
    return result


async def keep_fresh(served: ssl.SSLContext, options: Options) -> None:
    """Every `--cert-check-interval` seconds: renew or reload the serving pair if needed."""
    last = _stamp(await asyncio.to_thread(pair, options))
    while True:
        await asyncio.sleep(options.cert_check_interval)
        try:
            current = await asyncio.to_thread(pair, options)
            stamp = _stamp(current)
            if stamp != last:
                served.load_cert_chain(str(current.cert), str(current.key))
                last = stamp
                log.info("serving certificate reloaded; valid until %s", _expires(current.cert))
        except (OSError, ValueError, ssl.SSLError) as err:
            log.error("serving certificate not reloaded (still serving the old one): %s", err)


def _stamp(served: certs.Pair) -> tuple[float, float]:
    return (served.cert.stat().st_mtime, served.key.stat().st_mtime)


def _expires(path: Path) -> datetime.datetime:
    return x509.load_pem_x509_certificate(path.read_bytes()).not_valid_after_utc


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)
