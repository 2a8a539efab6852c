"""Element types of register tiles: PTX names, register types, bit patterns.

>>> dtype("float16").name, dtype("f16").reg_type, dtype("bf16").numpy
('f16', '.b16', 'uint16')
>>> hex(bits_of("bf16", 1.0)), hex(bits_of("f16", -65504.0)), hex(bits_of("f32", 1.0))
('0x3f80', '0xfbff', '0x3f800000')

bfloat16 has no numpy type: its arrays are carried as ``uint16`` bit patterns
(`to_bits` / `from_bits` convert, rounding to nearest even).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass


@dataclass(frozen=True)
class DType:
    """An element type: ``name`` is the PTX type suffix (``f32``, ``f16``, ``bf16``, ``s32``, ``u32``).

    >>> t = dtype("bfloat16")
    >>> str(t), t.bits, t.nbytes, t.is_half, t.reg_type
    ('bf16', 16, 2, True, '.b16')
    """

    name: str
    bits: int
    reg_type: str  # the .reg type that holds one element
    is_float: bool
    numpy: str  # numpy dtype of host arrays (bf16: its uint16 bit patterns)

    @property
    def nbytes(self) -> int:
        return self.bits // 8

    @property
    def is_half(self) -> bool:
        """True for the 16-bit floats, which pack two to a 32-bit register."""
        return self.bits == 16

    def __str__(self) -> str:
        return self.name


DTYPES = {
    "f32": DType("f32", 32, ".f32", True, "float32"),
    "f16": DType("f16", 16, ".b16", True, "float16"),
    "bf16": DType("bf16", 16, ".b16", True, "uint16"),
    "s32": DType("s32", 32, ".b32", False, "int32"),
    "u32": DType("u32", 32, ".b32", False, "uint32"),
}
_ALIASES = {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "int32": "s32", "uint32": "u32"}


def dtype(name: "str | DType") -> DType:
    """The `DType` for a PTX or numpy-style name.

    >>> dtype("int32").name
    's32'
    """
    if isinstance(name, DType):
        return name
    key = _ALIASES.get(name, name)
    if key not in DTYPES:
        raise ValueError(f"unsupported dtype {name!r}; expected one of {sorted(DTYPES)} (or {sorted(_ALIASES)})")
    return DTYPES[key]


def bits_of(name: "str | DType", value: float) -> int:
    """The bit pattern of `value` in the type (rounded to nearest even).

    >>> hex(bits_of("f32", -3.4028234663852886e38)), hex(bits_of("bf16", 3.4028234663852886e38))
    ('0xff7fffff', '0x7f80')
    """
    t = dtype(name)
    if t.name == "f32":
        return struct.unpack("<I", struct.pack("<f", value))[0]
    if t.name == "f16":
        return struct.unpack("<H", struct.pack("<e", value))[0]
    if t.name == "bf16":
        return _f32_bits_to_bf16(struct.unpack("<I", struct.pack("<f", value))[0])
    return int(value) & 0xFFFFFFFF


def _f32_bits_to_bf16(bits: int) -> int:
    if (bits & 0x7F800000) == 0x7F800000 and bits & 0x007FFFFF:
        return 0x7FC0 | ((bits >> 16) & 0x8000)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF


def to_bits(name: "str | DType", array):
    """A numpy array of values → the host array of that type (bf16: uint16 bits, rounded).

    >>> import numpy as np
    >>> to_bits("bf16", np.array([1.0, -2.5])).tolist()
    [16256, 49184]
    """
    import numpy as np

    t = dtype(name)
    if t.name != "bf16":
        with np.errstate(over="ignore"):
            return np.asarray(array).astype(t.numpy)
    bits = np.asarray(array, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(np.asarray(array, dtype=np.float32))
    return np.where(nan, np.uint16(0x7FC0), rounded).astype(np.uint16)


def from_bits(name: "str | DType", array):
    """The host array of a type → float64 (or int64) values.

    >>> import numpy as np
    >>> from_bits("bf16", np.array([0x3F80], dtype=np.uint16)).tolist()
    [1.0]
    """
    import numpy as np

    t = dtype(name)
    array = np.asarray(array)
    if t.name == "bf16":
        return (array.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return array.astype(np.float64 if t.is_float else np.int64)


def round_to(name: "str | DType", array):
    """Values rounded to the type (float64 out): what a store of them would hold.

    >>> import numpy as np
    >>> round_to("f16", np.array([1.0001])).tolist()
    [1.0]
    """
    return from_bits(name, to_bits(name, array))
