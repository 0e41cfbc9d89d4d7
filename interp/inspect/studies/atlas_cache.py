"""The atlas's cache: which rows of an earlier ``atlas.csv`` may lend their measures (issue 43).

A cached row is reused only when it provably is this run measured this way:

* ``checksum``: a digest of the run's stored checksums (:func:`run_checksum`), so a retrained
  run, a swapped or replaced checkpoint, gets measured again;
* ``measured_with``: the measuring options and the measures' code version
  (:func:`measured_with`: batch size, seed of the inputs, :data:`MEASURES_VERSION`);
* ``row_sha``: each row carries the sha256 of its own fields as written (:func:`seal`), so a
  row cut by a killed write or edited by hand fails it (:func:`read_sealed`) and is measured
  again.

A row of an atlas written before these columns (no ``row_sha``) is a *legacy* row: it lends its
measures only to a run that has no checkpoint to measure (nothing better exists; its labels then
read as that atlas measured them, the routing alone), and is measured again otherwise.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math

#: bumped when :func:`interp.inspect.mechanism.measure.measure`'s columns or their meaning change
#: (2: issue 42's code level; 3: the target key's code of a model read at the key position,
#: the mirror, is asked among the key positions, no longer the value positions)
MEASURES_VERSION = "3"
#: older versions whose rows a later one measures identically, and on which rows: version 2's
#: rows read at the value position (``at == "value"``) are what version 3 measures
STILL_VALID = {"2": lambda row: row.get("at") == "value"}
KEY = ("checksum", "measured_with")
SEAL = "row_sha"


def run_checksum(checksums) -> str:
    """A digest of a stored run's ``{file: sha256}`` checksums (dict or JSON); "" when none."""
    if checksums is None or (isinstance(checksums, float) and math.isnan(checksums)) or checksums == "":
        return ""
    if isinstance(checksums, str):
        checksums = json.loads(checksums)
    return hashlib.sha256(json.dumps(checksums, sort_keys=True).encode()).hexdigest()[:16]


def text(value) -> str:
    """A key field as text: an empty field (read back as NaN) and None are ""."""
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)


def measured_with(batch_size: int, seed: int = 0, version: str = MEASURES_VERSION) -> str:
    return f"batch={batch_size};seed={seed};measures={version}"


def same_measures(old: dict, measured: str) -> bool:
    """Whether a cached row ``old`` holds what measuring with ``measured`` (a
    :func:`measured_with` of this version) would give: the same options and version, or the
    same options under an older version that :data:`STILL_VALID` declares valid for this row."""
    was = text(old.get("measured_with"))
    if was == measured:
        return True
    head, _, version = was.rpartition(";measures=")
    return (version in STILL_VALID and f"{head};measures={MEASURES_VERSION}" == measured
            and STILL_VALID[version](old))


def _sha(header: list[str], fields: list[str]) -> str:
    return hashlib.sha256(json.dumps([header, fields]).encode()).hexdigest()[:16]


def seal(csv_text: str) -> str:
    """``csv_text`` (a header and rows) with a last column ``row_sha``: each row's digest of the
    header and its own fields as written."""
    rows = list(csv.reader(io.StringIO(csv_text)))
    if not rows:
        return csv_text
    header = rows[0]
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow([*header, SEAL])
    for fields in rows[1:]:
        w.writerow([*fields, _sha(header, fields)])
    return out.getvalue()


def read_sealed(text: str) -> tuple[set[int], int]:
    """(the data-row indices whose seal holds, the number of rows whose seal fails); every row
    of an unsealed table counts as neither (legacy: the first set is empty, the count 0)."""
    rows = list(csv.reader(io.StringIO(text)))
    if not rows or rows[0][-1:] != [SEAL]:
        return set(), 0
    header = rows[0][:-1]
    ok, bad = set(), 0
    for i, fields in enumerate(rows[1:]):
        if len(fields) == len(header) + 1 and fields[-1] == _sha(header, fields[:-1]):
            ok.add(i)
        else:
            bad += 1
    return ok, bad
