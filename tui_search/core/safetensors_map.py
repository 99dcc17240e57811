"""``.safetensors`` files as read-only memory maps: no copy of a tensor, and every process that
maps the same file shares its pages.

The format: an 8-byte little-endian header length, a JSON header of ``dtype``/``shape``/
``data_offsets`` per tensor (and an optional ``__metadata__`` of strings), then the data. Used
for the static model's token table (19 MB, ~15 ms of each process's start-up with
``safe_open``) and the re-ranker's prepared weights in the per-user cache.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

#: safetensors dtype codes and their numpy types.
DTYPES = {
    "F64": np.float64,
    "F32": np.float32,
    "F16": np.float16,
    "I64": np.int64,
    "I32": np.int32,
    "I16": np.int16,
    "I8": np.int8,
    "U8": np.uint8,
}
#: A header longer than this is not believed (a garbled length).
MAX_HEADER = 100_000_000


def map_safetensors(path: Path) -> tuple[dict[str, str], dict[str, np.ndarray]]:
    """(the header's metadata, each tensor as a read-only array mapped from ``path``).
    OSError when the file cannot be read; ValueError when its header does not describe it
    exactly (a tensor past the end, offsets that do not match its shape, an unknown dtype)."""
    total = path.stat().st_size
    with open(path, "rb") as fh:
        size = int.from_bytes(fh.read(8), "little")
        if not 2 <= size <= min(total - 8, MAX_HEADER):
            raise ValueError("no header")
        header = json.loads(fh.read(size))
    if not isinstance(header, dict):
        raise ValueError("no header")
    meta = header.pop("__metadata__", None) or {}
    if not isinstance(meta, dict):
        raise ValueError("bad metadata")
    base = np.memmap(path, dtype=np.uint8, mode="r")  # one map, each tensor a view of it
    tensors: dict[str, np.ndarray] = {}
    try:
        for name, spec in header.items():
            dtype = np.dtype(DTYPES[spec["dtype"]])
            shape = tuple(int(n) for n in spec["shape"])
            start, end = (int(n) for n in spec["data_offsets"])
            count = int(np.prod(shape, dtype=np.int64))
            if not 0 <= start <= end or end - start != count * dtype.itemsize:
                raise ValueError(f"tensor {name}: its offsets do not match its shape")
            if 8 + size + end > total:
                raise ValueError(f"tensor {name}: past the end of the file")
            if count == 0:
                tensors[name] = np.zeros(shape, dtype=dtype)
                continue
            at = 8 + size + start
            array = base[at : at + end - start].view(dtype).reshape(shape)
            # (an offset that is not a multiple of the item size: a copy, for fast products)
            tensors[name] = array if array.flags.aligned else np.array(array)
    except (KeyError, TypeError) as exc:
        raise ValueError(f"bad header: {exc}") from exc
    return {str(k): str(v) for k, v in meta.items()}, tensors
