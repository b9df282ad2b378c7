"""The tensors a local checkpoint folder holds, from its index or its safetensors headers (never weight bytes).

`model.safetensors.index.json` names every tensor (weight_map) but not its dtype or shape; each `*.safetensors`
file starts with an 8-byte little-endian length and a JSON header that gives both. A folder with neither (a
config-only folder, a hub id whose cache holds only config.json) lists nothing: the checks then cannot tell.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from pathlib import Path

INDEX = "model.safetensors.index.json"
MAX_HEADER = 100 << 20  # the safetensors format caps its header at 100 MB


@dataclass
class Listing:
    """Tensor names of one checkpoint; dtypes and shapes where a safetensors header gave them."""

    names: set[str]
    source: str  # what was read, for the report
    dtypes: dict[str, str] = field(default_factory=dict)
    shapes: dict[str, list[int]] = field(default_factory=dict)


def read_header(path: Path) -> dict:
    """The JSON header of one safetensors file (name -> {dtype, shape, data_offsets}), without the weights."""
    with path.open("rb") as handle:
        (length,) = struct.unpack("<Q", handle.read(8))
        if not 0 < length <= MAX_HEADER:
            raise ValueError(f"{path.name}: not a safetensors file (header length {length})")
        header = json.loads(handle.read(length))
    header.pop("__metadata__", None)
    return header


def _from_headers(files: list[Path], listing: Listing) -> None:
    for file in files:
        for name, entry in read_header(file).items():
            listing.names.add(name)
            listing.dtypes[name] = entry.get("dtype", "")
            listing.shapes[name] = list(entry.get("shape", []))


def tensors(folder: str | Path) -> Listing | None:
    """The tensors of the checkpoint in `folder` (a local folder or a hub cache snapshot); None if unknown."""
    folder = Path(folder)
    index = folder / INDEX
    files = sorted(p for p in folder.glob("*.safetensors") if p.is_file())  # a cache symlink to a missing blob is not
    if index.is_file():
        weight_map = json.loads(index.read_text(encoding="utf-8")).get("weight_map") or {}
        listing = Listing(set(weight_map), INDEX)
        present = [folder / shard for shard in sorted(set(weight_map.values())) if (folder / shard).is_file()]
        if present:  # dtypes and shapes of the shards that are here
            _from_headers(present, listing)
            listing.source += f" + {len(present)} of {len(set(weight_map.values()))} shard headers"
        return listing
    if files:
        listing = Listing(set(), f"{len(files)} safetensors header{'s' * (len(files) > 1)}")
        _from_headers(files, listing)
        return listing
    return None


def where(folder: str | Path) -> str:
    """How to get the index into the cache, for the fix line."""
    return f"put {INDEX} (or the *.safetensors files) next to config.json in {folder} (`hf download ID {INDEX}` " \
           f"fetches the index alone)"
