"""The loops: the I/O around the pure cores, one package or module each.

`placement/` decides where each hub object runs, `sync/` makes the children match and folds
their status back, `locations.py` keeps every Location's status true, `imports.py` negotiates
hub CRDs from the locations' APIs. No loop imports another: `handoff.py` is the one thing the
placement and sync loops share, and `app.py` wires them (functions given to constructors for
what one asks another, `Signal`s for what one tells another).
"""
