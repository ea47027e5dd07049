"""Whether specs can run on this machine: each resolved with a profile, the datasets its
configurations read named, and those files checked (:mod:`sweeps.preflight`).

``ortho reproduce`` (a command of ``analysis``, which may not import ``sweeps`` beyond its
contract) asks this module, as a child process, before it starts any sweep::

    python -m sweeps.ready --profile P [--address A] SPEC [SPEC ...]

It prints one JSON object per spec on stdout: ``spec``; ``sha256``, the hash of the spec as
resolved with the profile (tag ``ortho.spec_sha256`` of a sweep of it); ``datasets``, each
dataset the spec's configurations read mapped to the command that fetches it (``ortho data
download NAME``) or None where none does (G's music files come with the repository's data
folder); ``missing``, None or the check's message naming the first missing or corrupt file
and how to get it; ``file``, that file. A spec or profile that does not resolve is bad
input: its message (the spec file's line where it has one) on stderr, exit status 2, nothing
on stdout. So is an address that is no running Ray cluster's
(:func:`sweeps.ray_session.check_address`), checked first: then stdout holds one JSON object
``{"address": {"expected", "value"}}``, so that ``reproduce`` names the field as
``ortho sweep run`` does. """

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from ortho_core import experiments
from ortho_core.config import from_dict
from ortho_core.data.checksums import DOWNLOADS
from ortho_core.errors import ConfigError, DataError
from sweeps import preflight
from sweeps.ray_session import check_address
from sweeps.spec import ResolvedSpec, load_spec, resolve


def datasets(spec: ResolvedSpec) -> dict[str, str | None]:
    """Dataset -> the command that fetches it (None: no download exists), for every dataset
    a configuration of ``spec`` reads (an Optuna cell's at its fixed params)."""
    module = experiments.get(spec.experiment)
    files = getattr(module, "data_files", None)
    if files is None:
        return {}
    names = sorted({f.dataset for cell in spec.cells()
                    for f in files(from_dict(module.Config, cell.params))})
    return {name: f"ortho data download {name}" if name in DOWNLOADS else None
            for name in names}


def readiness(spec_ref: str, profile: str, address: str | None = None) -> dict[str, Any]:
    """The JSON object this module prints for ``spec_ref`` (see the module docstring);
    ``ConfigError`` when the spec or profile does not resolve."""
    spec = resolve(load_spec(spec_ref), profile)
    entry: dict[str, Any] = {"spec": spec.name, "sha256": spec.sha256,
                             "datasets": datasets(spec), "missing": None, "file": None}
    try:
        preflight.check_data(spec, address)
    except DataError as err:
        entry["missing"], entry["file"] = str(err), err.field
    return entry


def main(argv: Sequence[str] | None = None) -> int:
    """Print the readiness of each spec named in ``argv``; the exit status."""
    parser = argparse.ArgumentParser(prog="python -m sweeps.ready", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("specs", nargs="+", metavar="SPEC")
    parser.add_argument("--profile", required=True)
    parser.add_argument("--address")
    args = parser.parse_args(argv)
    try:
        check_address(args.address)
    except ConfigError as err:
        print(f"invalid {err}", file=sys.stderr)
        print(json.dumps({"address": {"expected": err.expected, "value": err.value}}))
        return 2
    try:
        entries = [readiness(spec, args.profile, args.address) for spec in args.specs]
    except ConfigError as err:
        print(f"invalid {err}", file=sys.stderr)
        return 2
    for entry in entries:
        print(json.dumps(entry))
    return 0


if __name__ == "__main__":
    sys.exit(main())
