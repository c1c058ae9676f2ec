"""Per-location overrides (issue #32): what differs between the copies of one hub object.

Pure: the rule format (`rules.py`), its variables (`variables.py`), RFC 6902 JSON Patch
(`jsonpatch.py`), applying an ordered list of rules to a child object for one location
(`apply.py`), and the one-off form, the `kmc.dev/overrides` annotation (`annotation.py`). The
sync loop asks `annotation.py` which rules a location gets and hands them to
`sync/desired.py`; the admission webhook asks it whether an annotation parses. No I/O here.
"""
