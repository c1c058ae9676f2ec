"""`kmc-apiserver`: options → serving certificate → the app, served over TLS."""

from __future__ import annotations

import logging
import ssl
import sys
from importlib.metadata import version

from aiohttp import web

from apiserver import certs
from apiserver.app import make_app
from apiserver.options import Options, OptionsError, parse


def serving_context(options: Options) -> ssl.SSLContext:
    """TLS from the given files, or from a CA and certificate made once in --cert-dir."""
    if options.tls_cert_file and options.tls_private_key_file:
        cert, key = options.tls_cert_file, options.tls_private_key_file
    else:
        ca = certs.ensure_ca(options.cert_dir, "ca", "kmc-apiserver-ca")
        pair = certs.ensure_cert(
            options.cert_dir, "apiserver", ca, options.service_name, hosts=options.serving_hosts
        )
        cert, key = pair.cert, pair.key
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(str(cert), str(key))
    return context


def main(argv: list[str] | None = None) -> None:
    try:
        options = parse(argv)
    except OptionsError as err:
        print(f"kmc-apiserver: error: {err}", file=sys.stderr)
        raise SystemExit(2) from err
    logging.basicConfig(
        level=options.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("apiserver").info(
        "kmc-apiserver %s serving on https://%s:%d",
        version("kubectl-mc"),
        options.bind_address,
        options.secure_port,
    )
    context = serving_context(options)
    web.run_app(
        make_app(options, context),
        host=options.bind_address,
        port=options.secure_port,
        ssl_context=context,
        access_log=None,
        print=None,
    )
