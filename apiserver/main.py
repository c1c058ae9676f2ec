"""`kmc-apiserver`: options → serving certificate → the app, served over TLS."""

from __future__ import annotations

import logging
import sys
from importlib.metadata import version

from aiohttp import web

from apiserver import serving
from apiserver.app import make_app
from apiserver.options import OptionsError, parse

MAX_HEADER_BYTES = 1 << 20
SHUTDOWN_GRACE = 5.0  # seconds


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
    context = serving.context(options)
    web.run_app(
        make_app(options, context),
        host=options.bind_address,
        port=options.secure_port,
        ssl_context=context,
        access_log=None,
        print=None,
        # kube-apiserver (Go's net/http) takes a megabyte of request line and headers; aiohttp's
        # 8 KiB default would refuse a long label selector with a plain-text 400.
        max_line_size=MAX_HEADER_BYTES,
        max_field_size=MAX_HEADER_BYTES,
        # On SIGTERM, how long requests still open (a watch, a list) may finish before the
        # loops stop and the lease is handed back; streams are ended at once.
        shutdown_timeout=SHUTDOWN_GRACE,
    )
