"""Soul bundles: a soul — its files, optionally its sessions and memory field — as one
`.tar.gz` with a manifest, written by `soul pack` and restored by `soul unpack` and `soul
sessions import` on another machine, on either store backend (docs/bundles.md).

`collect` finds the files a soul is made of; `manifest` is the bundle's table of contents and
the rules of its names and sizes; `writing` packs; `reading` checks and stages an archive as
the hostile input it is; `restore` puts a staged bundle in place, all or nothing.
"""

from soul.bundles.collect import soul_files
from soul.bundles.manifest import FORMAT, Limits, Manifest
from soul.bundles.reading import Staged, stage
from soul.bundles.restore import Unpacked, import_sessions, unpack
from soul.bundles.writing import Packed, pack

__all__ = [
    "FORMAT",
    "Limits",
    "Manifest",
    "Packed",
    "Staged",
    "Unpacked",
    "import_sessions",
    "pack",
    "soul_files",
    "stage",
    "unpack",
]
