"""Number formats of the operands, and the one conversion of a user array into each.

One :class:`NumberFormat` record per element type an instruction reads (BF16, FP16, the 8-bit
floats E5M2 and E4M3, signed and unsigned bytes, and complex FP16 pairs). A record says how an
element is stored (its *codes*: uint16 bit patterns for the 16-bit floats, the byte for the 8-bit
floats, the bytes themselves for the integers, a (real, imaginary) FP16 pair in a uint32 for
complex), how many bytes it takes, and how a user's array becomes codes: rounded once from its own
precision (floats), range-checked (integers), never wrapped, or taken as codes where the format
says so (uint8 arrays for the 8-bit floats, uint32 arrays for complex FP16). Which format each
operand of an instruction has is in :mod:`tilegemm.instructions`; this module knows nothing about
instructions, kernels or packing.

This module must not do arithmetic on values beyond the one rounding the contract asks for
(``docs/semantics.md``, "Inputs given in other formats").
"""

from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass
from typing import Callable

import numpy as np

__all__ = [
    "NumberFormat",
    "Minifloat",
    "ComplexFormat",
    "BF16",
    "FP16",
    "BF8",
    "HF8",
    "CFP16",
    "S8",
    "U8",
    "MXINT8",
    "TF32",
    "tf32_truncate",
    "daz",
    "bf16_dtype",
    "exact_start",
]


@functools.cache
def _dtype(module: str, code: str) -> np.dtype:
    """A NumPy dtype by name; ml_dtypes is imported on first use only (it costs most of a second,
    and float32 inputs never need it: they are rounded by compiled code in ``convert``)."""
    if module == "ml_dtypes":
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, code))
    return np.dtype(code)


def bf16_dtype() -> np.dtype:
    """``ml_dtypes.bfloat16`` (imported on first use)."""
    return _dtype("ml_dtypes", "bfloat16")


def _is_ml_dtype(dt: np.dtype) -> bool:
    """An ml_dtypes type (bfloat16, float8_*), recognised without importing ml_dtypes."""
    return dt.type.__module__ == "ml_dtypes"


#: What a value beyond an 8-bit float format's range becomes (``NumberFormat.fit_fp8``).
FP8_OVERFLOW = ("error", "saturate", "nan")


def check_fp8_overflow(value: object) -> None:
    """``ValueError`` unless ``value`` is one of :data:`FP8_OVERFLOW`."""
    if value not in FP8_OVERFLOW:
        raise ValueError(f"fp8_overflow must be one of {', '.join(map(repr, FP8_OVERFLOW))}, got {value!r}")


#: torch's 8-bit and 16-bit float dtypes that NumPy has no type for, by name, with the ml_dtypes
#: type of the same encoding; the tensor is read as its bits and viewed as that type.
_TORCH_AS_ML = {
    "bfloat16": ("int16", "bfloat16"),
    "float8_e4m3fn": ("uint8", "float8_e4m3fn"),
    "float8_e5m2": ("uint8", "float8_e5m2"),
}


def host_array(x, operand: str) -> np.ndarray:
    """A user's operand as a NumPy array: ``numpy.asarray``, and torch CPU tensors read in place
    (bf16 and FP8 tensors as their ml_dtypes twins: ``Tensor.numpy()`` refuses them). Recognised
    by type name, so torch is never imported here. ``ValueError`` for a tensor on another device.
    """
    if type(x).__module__.startswith("torch") and hasattr(x, "detach") and hasattr(x, "device"):
        t = x.detach()
        if t.device.type != "cpu":
            raise ValueError(
                f"operand {operand} is a torch tensor on {t.device}; tilegemm reads host memory: pass {operand}.cpu()"
            )
        t = t.resolve_conj().resolve_neg()
        name = str(t.dtype).removeprefix("torch.")
        if name in _TORCH_AS_ML:
            bits, ml = _TORCH_AS_ML[name]
            import torch  # the tensor's own module: already imported

            return t.view(getattr(torch, bits)).numpy().view(_dtype("ml_dtypes", ml))  # same memory, strides
        return t.numpy()
    return np.asarray(x)


@functools.lru_cache(maxsize=None)
def _function(ref: str | Callable | None) -> Callable | None:
    """A function given by name in ``tilegemm.convert`` (imported now: it compiles with Numba, which
    importing the records must not load), or as itself; kept, as the tile unit asks once per
    instruction."""
    if isinstance(ref, str):
        from . import convert

        return getattr(convert, ref)
    return ref


_BAD_KINDS = {
    "c": "complex",
    "O": "object",
    "U": "string",
    "S": "bytes",
    "b": "bool",
    "V": "structured",
    "M": "datetime",
    "m": "timedelta",
}


@dataclass(frozen=True)
class Minifloat:
    """The encoding of an 8-bit float: a sign bit, ``exponent_bits``, ``mantissa_bits``, a bias.

    ``ieee_specials``: the largest exponent holds the infinities (mantissa 0) and NaNs, as in OCP
    E5M2; otherwise (OCP E4M3 "fn") there is no infinity and only the two all-ones codes are NaN.
    A finite code's value is an integer times ``2^-fix_shift`` (see ``tilegemm.reference.fp8.fix``).
    """

    exponent_bits: int
    mantissa_bits: int
    bias: int
    ieee_specials: bool

    @property
    def fix_shift(self) -> int:
        """The scale of the exact fixed-point integer: value = fix * 2^-fix_shift (E5M2 16, E4M3 9)."""
        return self.bias + self.mantissa_bits - 1


@dataclass(frozen=True)
class NumberFormat:
    """One element format.

    Attributes
    ----------
    name:
        Short name (``"bf16"``, ``"fp16"``, ``"s8"``, ``"u8"``).
    code:
        NumPy (or ml_dtypes) name of the element type in memory, e.g. ``"bfloat16"``.
    storage:
        NumPy dtype tilegemm keeps codes in: ``uint16`` bit patterns for 16-bit floats, the
        integers themselves for bytes.
    precision:
        Significant bits of a normal value, hidden bit included (BF16 8, FP16 11); 0 for integers.
    module:
        Where the element type lives: ``"numpy"``, or ``"ml_dtypes"`` (imported on first use).
    rounder:
        The function rounding float32 bits to codes (RNE), used for float32 input so that
        ml_dtypes need not load (a name in ``tilegemm.convert``, imported on first use, or a
        function); None where ``astype`` does it. :attr:`f32_round` is the function itself.
    codes_from:
        Arrays of this dtype are taken as codes, not as values (uint8 for the 8-bit floats).
    minifloat:
        The bit layout of an 8-bit float format (None for the others).
    fixed_point:
        Integer codes that stand for ``code * 2^-fixed_point`` (OCP MXINT8: 6); 0 for plain
        integers and for floats.
    widen:
        For a float format the kernels read as exact binary32 values: the functions taking codes
        to binary32 bits, ``(denormals kept, denormals read as zero)`` (names in
        ``tilegemm.convert`` or functions; ``tilegemm.packing``).
    panel_modes:
        The compiled A panel pass's modes (names in ``tilegemm.convert``) for these codes, as
        ``((from codes, from float32) keeping denormals, (the same) reading them as zero)``;
        None: packing widens the codes with :attr:`widen` and lays them out in NumPy.
    """

    name: str
    code: str
    storage: np.dtype
    precision: int
    module: str = "numpy"
    rounder: str | Callable | None = None
    codes_from: np.dtype | None = None
    minifloat: Minifloat | None = None
    fixed_point: int = 0
    widen: tuple[str | Callable, str | Callable] | None = None
    panel_modes: tuple[tuple[str, str], tuple[str, str]] | None = None

    @property
    def f32_round(self) -> Callable | None:
        """The function rounding float32 bits to codes (:attr:`rounder`), or None."""
        return _function(self.rounder)

    def widen_fn(self, daz: bool) -> Callable:
        """Codes -> binary32 bits of their values (:attr:`widen`), denormals read as zero with ``daz``."""
        if self.widen is None:
            raise TypeError(f"format {self.name} has no binary32 widening")
        fn = _function(self.widen[1 if daz else 0])
        assert fn is not None
        return fn

    def panel_mode(self, daz: bool, from_f32: bool) -> int | None:
        """The compiled A panel pass's mode (:attr:`panel_modes`), or None."""
        if self.panel_modes is None:
            return None
        from . import convert

        return int(getattr(convert, self.panel_modes[1 if daz else 0][1 if from_f32 else 0]))

    @property
    def is_float(self) -> bool:
        return self.precision > 0

    @property
    def nbytes(self) -> int:
        """Bytes per element."""
        return self.storage.itemsize

    @property
    def lanes(self) -> int:
        """Real numbers per element (2 for a complex format)."""
        return 1

    @property
    def element(self) -> np.dtype:
        """The NumPy dtype of one element (``ml_dtypes.bfloat16`` for BF16, loaded on first use)."""
        return _dtype(self.module, self.code)

    def sample(self, shape, rng: np.random.Generator, wide: bool = False) -> np.ndarray:
        """Random values a caller would pass: standard normals for floats (float32, or float64
        with ``wide``, so that the conversion has something to round), integers over the whole
        range for the integer formats (int64 with ``wide``)."""
        if self.is_float:
            x = rng.standard_normal(shape)
            return x if wide else x.astype(np.float32)
        info = np.iinfo(self.storage)
        x = rng.integers(info.min, info.max + 1, shape)
        return x if wide else x.astype(self.storage)

    def check_kind(self, x: np.ndarray, operand: str, dtype_name: str) -> None:
        """``TypeError`` for arrays this format cannot take, naming the operand and dtype."""
        kind = x.dtype.kind
        if _is_ml_dtype(x.dtype):  # bfloat16, float8_*: floats, whatever NumPy's kind says
            if self.minifloat is not None and x.dtype.itemsize == 1 and x.dtype != self.element:
                # Another 8-bit format: converting it by value would read E5M2's 1024 as an E4M3
                # NaN; it is a mix-up, as ACE's MX dtypes say (tilegemm.ace.check_operand).
                raise TypeError(
                    f"operand {operand} has dtype {x.dtype}, but dtype {dtype_name!r} reads {operand} as "
                    f"{self.code}; pass {self.code} values (or uint8 codes), or choose the dtype whose "
                    f"{operand} is {x.dtype}"
                )
            if self.is_float:
                return
            raise TypeError(
                f"operand {operand} has dtype {x.dtype}; {dtype_name!r} takes integer arrays "
                f"(quantize floats to 8-bit integers first)"
            )
        if kind in _BAD_KINDS:
            raise TypeError(
                f"operand {operand} has dtype {x.dtype} ({_BAD_KINDS[kind]}), which dtype {dtype_name!r} cannot take"
            )
        if not self.is_float and kind not in "iu":
            raise TypeError(
                f"operand {operand} has dtype {x.dtype}; {dtype_name!r} takes integer arrays "
                f"(quantize floats to 8-bit integers first)"
            )

    def asarray(self, x, operand: str, dtype_name: str) -> np.ndarray:
        """The user's operand as one array (:func:`host_array`: a NumPy array, or a torch CPU
        tensor read in place; a complex format also takes a (real, imaginary) pair and returns its
        codes)."""
        return host_array(x, operand)

    def to_element(self, x, operand: str, dtype_name: str, fp8_overflow: str = "error") -> np.ndarray:
        """A user array as this format's elements: rounded once (RNE) from the array's own
        precision, or range-checked. ``TypeError`` / ``ValueError`` name the offending operand.
        ``fp8_overflow``: what an 8-bit float format does with a value beyond its range
        (:meth:`fit_fp8`)."""
        x = np.asarray(x)
        target = self.element
        if self.codes_from is not None and x.dtype == self.codes_from:
            return x.view(target)
        self.check_kind(x, operand, dtype_name)
        if x.dtype == target:
            return x
        if self.is_float:
            # One rounding from the array's own precision: ml_dtypes and numpy both round float64
            # straight to the target, never through float32 (docs/semantics.md, "Inputs").
            with np.errstate(over="ignore", invalid="ignore"):
                y = x.astype(target)
            if self.minifloat is None:
                return y
            return self.fit_fp8(x, y.view(self.storage), operand, dtype_name, fp8_overflow).view(target)
        info = np.iinfo(target)
        if x.size:
            lo, hi = x.min(), x.max()
            if lo < info.min or hi > info.max:
                raise ValueError(
                    f"operand {operand} has values in [{lo}, {hi}], outside the {target} range "
                    f"[{info.min}, {info.max}] that dtype {dtype_name!r} needs for {operand}"
                )
        return x.astype(target)

    def to_codes(self, x, operand: str, dtype_name: str, fp8_overflow: str = "error") -> np.ndarray:
        """Like :meth:`to_element`, as codes (``storage``). float32 arrays are rounded by
        ``f32_round`` where the format has one (the RNE of ml_dtypes / numpy, tested on a dense
        sample)."""
        x = np.asarray(x)
        if self.f32_round is not None and x.dtype == np.float32:
            codes = self.f32_round(x.view(np.uint32))
            if self.minifloat is None:
                return codes
            return self.fit_fp8(x, codes, operand, dtype_name, fp8_overflow)
        if self.codes_from is not None and x.dtype == self.codes_from:
            return x.view(self.storage)
        return self.to_element(x, operand, dtype_name, fp8_overflow).view(self.storage)

    def fit_fp8(self, x: np.ndarray, codes: np.ndarray, operand: str, dtype_name: str, overflow: str) -> np.ndarray:
        """The codes of an 8-bit float format rounded from the values ``x``, with what overflowed
        handled as ``overflow`` says (the values given to ``matmul``/``pack`` as
        ``fp8_overflow``). A value overflows when it is finite, or an infinity in a format with
        none (E4M3), and its code is an infinity or a NaN: E4M3 has no infinity, so past 464 it
        rounds to NaN; E5M2 rounds from 61440 up to an infinity.

        - ``"error"``: ``ValueError`` naming the first such value (the default: a silent NaN
          in every output of its row or column is worse than a refusal).
        - ``"saturate"``: the largest finite value of the value's sign (OCP's saturating
          conversion; 448 for E4M3, 57344 for E5M2). E5M2's own infinities stay infinities.
        - ``"nan"``: the code as rounded (ml_dtypes' conversion: E4M3 NaN, E5M2 infinity).

        NaNs are NaNs in every mode. Arrays already in the format (or uint8 codes) never come here.
        """
        mf = self.minifloat
        assert mf is not None
        check_fp8_overflow(overflow)
        if overflow == "nan" or codes.size == 0:
            return codes
        top = np.uint8(0x7C if mf.ieee_specials else 0x7F)  # the codes of the top exponent that are not finite
        special = (codes & top) == top
        if not special.any():
            return codes
        v = x if x.dtype.kind == "f" and not _is_ml_dtype(x.dtype) else x.astype(np.float32)
        bad = special & (np.isfinite(v) if mf.ieee_specials else ~np.isnan(v))
        if not bad.any():
            return codes
        largest = (1 << (mf.exponent_bits + mf.mantissa_bits)) - (5 if mf.ieee_specials else 2)  # 0x7B, 0x7E
        if overflow == "error":
            where = tuple(int(i) for i in np.argwhere(bad)[0])
            value = float(np.asarray(v)[where])
            biggest = float(np.array([largest], np.uint8).view(self.element)[0])
            raise ValueError(
                f"operand {operand} has {value!r} at index {where}, beyond the range of {self.code} "
                f"(largest finite {biggest:g}) that dtype {dtype_name!r} rounds it to: it would become "
                f"{'an infinity' if mf.ieee_specials else 'NaN'}. Pass fp8_overflow='saturate' to clamp to "
                f"+-{biggest:g} (OCP's saturating conversion) or fp8_overflow='nan' to keep "
                f"ml_dtypes' conversion, or scale the operand first"
            )
        out = codes.copy()
        out[bad] = np.where(np.signbit(v[bad]), np.uint8(0x80 | largest), np.uint8(largest))
        return out

    def decode(self, codes: np.ndarray) -> np.ndarray:
        """Codes back to values (float32 for floats, exact; the integers themselves)."""
        codes = np.asarray(codes)
        if not self.is_float:
            return codes.view(self.storage)
        if self.element == np.float16:
            # NumPy's float16 cast is the CPU's conversion where NumPy uses one (FCVT on arm64),
            # which quiets a signaling NaN and raises a warning; from the fields, as the kernels
            # widen, every host gives the same bits.
            from .convert import fp16_to_f32

            return fp16_to_f32(codes.view(np.uint16)).view(np.float32)
        return codes.view(self.element).astype(np.float32)

    def holds_nan(self, x: np.ndarray) -> bool:
        """Whether ``x`` holds a NaN: codes of this format, or float values a kernel rounds to it
        (rounding makes no NaN of a number). The kernels' fast paths take a NaN only from a rule
        where every NaN in flight is the default one (``docs/semantics.md``, "NaN bits")."""
        x = np.asarray(x)
        if not self.is_float or x.size == 0:
            return False
        if x.dtype.kind in "fc":
            return any_nan(x)
        flat = x.reshape(-1)
        if self.name in _NAN_ABOVE:  # on the bits: no pass through ml_dtypes' slower ufuncs
            above = _NAN_ABOVE[self.name]
            flat = flat.view(np.uint16)

            def test(part):
                return (part & np.uint16(0x7FFF)) > above
        elif self.minifloat is not None and x.dtype.itemsize == 1:
            # 8-bit floats: the NaN codes are the magnitudes above the largest other one
            top = _minifloat_nan_above(self)
            flat = flat.view(np.uint8)

            def test(part):
                return (part & np.uint8(0x7F)) > top
        else:

            def test(part):
                return np.isnan(self.decode(part))

        # in slices, so that the scan's temporaries stay small beside the operands
        return any(bool(test(flat[i : i + _SCAN]).any()) for i in range(0, flat.size, _SCAN))


@functools.cache
def _minifloat_nan_above(fmt: NumberFormat) -> np.uint8:
    """The largest magnitude code (sign bit clear) of an 8-bit float format that is not a NaN;
    every code above it is one (E4M3: 0x7F; E5M2: 0x7D to 0x7F)."""
    magnitudes = np.arange(128, dtype=np.uint8)
    nan = np.isnan(magnitudes.view(fmt.element).astype(np.float32))
    top = int(np.flatnonzero(~nan).max())
    assert nan[top + 1 :].all(), fmt.name
    return np.uint8(top)


def kernel_input(x: np.ndarray) -> np.ndarray:
    """``x`` as a compiled pass that only reads it takes it: C-contiguous (copied only where it is
    not) and read-only. Numba compiles a function once per argument type, and an array's layout
    and writeability are part of its type: passing every input one way compiles each pass once per
    dtype, not once per layout and writeability of the callers' arrays."""
    v = np.ascontiguousarray(x).view()
    v.flags.writeable = False
    return v


def any_nan(x: np.ndarray) -> bool:
    """Whether a float or complex array holds a NaN, scanned in slices so that the temporaries
    stay small beside the array."""
    flat = np.asarray(x).reshape(-1)
    return any(bool(np.isnan(flat[i : i + _SCAN]).any()) for i in range(0, flat.size, _SCAN))


def exact_start(c, acc: np.dtype, shape: tuple[int, ...] | None = None) -> np.ndarray:
    """A start C as an ``acc`` array, refusing what the conversion would change: another shape
    than ``shape`` (no broadcasting or reshaping), or a value ``acc`` does not hold exactly (a
    fraction for int32, an int32 overflow, a float32 C for a binary16 accumulator with a value
    that rounds, an imaginary part for a real accumulator). ``ValueError`` names the first such
    element; a NaN stays a NaN (a float64 one keeps its sign and the top of its payload)."""
    c = np.asarray(c)
    acc = np.dtype(acc)
    if shape is not None and c.shape != tuple(shape):
        raise ValueError(f"c has shape {c.shape}, but the result has shape {tuple(shape)}")
    if c.dtype.kind not in "biufc":
        raise TypeError(f"c has dtype {c.dtype}, which holds no numbers for a {acc} accumulator")
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
        conv = c.astype(acc)
        back = conv.astype(c.dtype)
    same = np.ones(c.shape, bool)
    for part in (np.real, np.imag):
        x, y = part(back), part(c)
        same &= (x == y) | (np.isnan(x) & np.isnan(y)) if x.dtype.kind in "fc" else x == y
    if not same.all():
        bad = tuple(int(i) for i in np.argwhere(~same)[0])
        raise ValueError(
            f"c[{', '.join(map(str, bad))}] = {c[bad].item()!r} is not exactly a {acc} value, the "
            f"accumulator here; convert c to {acc} first"
        )
    return conv


def daz(x: np.ndarray) -> np.ndarray:
    """Read binary32 denormals as zeros of the same sign (MXCSR.DAZ), working on the bits."""
    x = np.asarray(x, dtype=np.float32)
    bits = x.view(np.uint32)
    return np.where((bits & 0x7F800000) == 0, bits & 0x80000000, bits).astype(np.uint32).view(np.float32)


_PAIR = np.dtype([("re", "<f2"), ("im", "<f2")])


@dataclass(frozen=True)
class ComplexFormat(NumberFormat):
    """A complex number as two values of ``part`` in one code: the real part in the low half,
    the imaginary part in the high half (``im:re``, as an AMX-COMPLEX dword holds it).

    A user passes complex arrays (each part rounded as ``part`` rounds a real array: as
    ``numpy.float16`` does for FP16), a ``(real, imag)`` tuple of two real arrays of one shape
    (each converted as for ``part``), or codes (``codes_from``, uint32). Real arrays alone are a
    ``TypeError``: a list ``[re, im]`` would read as one real array, so the pair must be a tuple.
    Elements (``element``) are a structured (re, im) pair of ``part``'s type.
    """

    part: NumberFormat | None = None

    @property
    def lanes(self) -> int:
        return 2

    @property
    def element(self) -> np.dtype:
        return _PAIR

    def sample(self, shape, rng: np.random.Generator, wide: bool = False) -> np.ndarray:
        """Random complex values: standard normal real and imaginary parts (complex64, or
        complex128 with ``wide``)."""
        x = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
        return x if wide else x.astype(np.complex64)

    def _part_codes(self, x, operand: str, dtype_name: str) -> np.ndarray:
        return self.part.to_codes(x, operand, dtype_name).astype(self.storage)  # type: ignore[union-attr]

    def asarray(self, x, operand: str, dtype_name: str) -> np.ndarray:
        if isinstance(x, tuple):
            if len(x) != 2:
                raise ValueError(
                    f"operand {operand}: a complex operand given as a tuple is (real, imag); got {len(x)} items"
                )
            re, im = host_array(x[0], operand), host_array(x[1], operand)
            if re.shape != im.shape:
                raise ValueError(
                    f"operand {operand}: the real part has shape {re.shape} and the imaginary part {im.shape}; "
                    f"they must be equal"
                )
            for p, which in ((re, "real"), (im, "imaginary")):
                if p.dtype.kind == "c":
                    raise TypeError(
                        f"operand {operand}: the {which} part of a (real, imag) pair is complex ({p.dtype})"
                    )
            lo = self._part_codes(re, f"{operand} (real part)", dtype_name)
            hi = self._part_codes(im, f"{operand} (imaginary part)", dtype_name)
            return lo | (hi << 16)
        return host_array(x, operand)

    def check_kind(self, x: np.ndarray, operand: str, dtype_name: str) -> None:
        if x.dtype.kind != "c":
            raise TypeError(
                f"operand {operand} has dtype {x.dtype}; dtype {dtype_name!r} takes complex arrays, a (real, imag) "
                f"tuple of real arrays, or {self.codes_from} codes (imaginary part in the high half)"
            )

    def to_codes(self, x, operand: str, dtype_name: str, fp8_overflow: str = "error") -> np.ndarray:
        x = self.asarray(x, operand, dtype_name)
        if x.dtype == self.codes_from:
            return x
        self.check_kind(x, operand, dtype_name)
        return self.asarray((x.real, x.imag), operand, dtype_name)

    def to_element(self, x, operand: str, dtype_name: str, fp8_overflow: str = "error") -> np.ndarray:
        return self.to_codes(x, operand, dtype_name).view(self.element)

    def decode(self, codes: np.ndarray) -> np.ndarray:
        """Codes back to complex64 values (exact)."""
        codes = np.asarray(codes).view(self.storage)
        part = self.part
        re = part.decode((codes & 0xFFFF).astype(part.storage))  # type: ignore[union-attr]
        im = part.decode((codes >> 16).astype(part.storage))  # type: ignore[union-attr]
        out = np.empty(codes.shape, np.complex64)
        out.real, out.imag = re, im
        return out


#: Elements per slice of :meth:`NumberFormat.holds_nan`'s scan.
_SCAN = 1 << 16
#: 16-bit formats whose NaNs are the magnitudes above infinity's code.
_NAN_ABOVE = {"bf16": np.uint16(0x7F80), "fp16": np.uint16(0x7C00)}

BF16 = NumberFormat(
    "bf16",
    "bfloat16",
    np.dtype(np.uint16),
    8,
    "ml_dtypes",
    "f32_to_bf16",
    widen=("bf16_to_f32", "bf16_to_f32_daz"),
    panel_modes=(("MODE_BF16_KEEP", "MODE_F32_TO_BF16_KEEP"), ("MODE_BF16", "MODE_F32_TO_BF16")),
)
# FP16 values are binary32 normals: DAZ never changes one.
_FP16_WIDEN = ("fp16_to_f32", "fp16_to_f32")
_FP16_MODES = (("MODE_FP16", "MODE_F32_TO_FP16"), ("MODE_FP16", "MODE_F32_TO_FP16"))
FP16 = NumberFormat(
    "fp16", "float16", np.dtype(np.uint16), 11, "numpy", "f32_to_fp16", widen=_FP16_WIDEN, panel_modes=_FP16_MODES
)
#: OCP E5M2 (AMX-FP8's "BF8"): bias 15, infinities and NaNs at exponent 31.
BF8 = NumberFormat(
    "bf8",
    "float8_e5m2",
    np.dtype(np.uint8),
    3,
    "ml_dtypes",
    "f32_to_e5m2",
    np.dtype(np.uint8),
    Minifloat(5, 2, 15, True),
)
#: OCP E4M3 "fn" (AMX-FP8's "HF8"): bias 7, no infinity, NaN only at 0x7F and 0xFF.
HF8 = NumberFormat(
    "hf8",
    "float8_e4m3fn",
    np.dtype(np.uint8),
    4,
    "ml_dtypes",
    "f32_to_e4m3fn",
    np.dtype(np.uint8),
    Minifloat(4, 3, 7, False),
)
#: A complex number as two FP16 values in a dword (AMX-COMPLEX): real in bits 15:0, imaginary in 31:16.
CFP16 = ComplexFormat(
    "cfp16",
    "complex FP16 pair",
    np.dtype(np.uint32),
    11,
    codes_from=np.dtype(np.uint32),
    part=FP16,
    widen=_FP16_WIDEN,  # each part of a complex element
    panel_modes=_FP16_MODES,
)


def tf32_truncate(bits, out=None):
    """binary32 bits -> the bits of the TF32 value AMX-TF32 reads: a NaN gets its quiet bit (bit
    22; a signalling NaN is quieted, and no NaN becomes an infinity), then the low 13 significand
    bits are cleared (truncation toward zero of the magnitude; a denormal keeps bits 13..22).
    Compiled (``tilegemm.kernels.tf32.truncate``), imported on first use."""
    from .kernels.tf32 import truncate

    bits = np.asarray(bits, np.uint32)
    return truncate(bits) if out is None else truncate(bits, out=out)


#: An FP32 operand of AMX-TF32 (TMMULTF32PS): codes are the binary32 bits, as a tile holds them
#: (other float arrays converted to float32 as NumPy does, RNE); the instruction reads each value
#: truncated to TF32 (:func:`tf32_truncate`, denormals kept: 11 significant bits at most).
TF32 = NumberFormat(
    "tf32",
    "float32",
    np.dtype(np.uint32),
    11,
    widen=(tf32_truncate, tf32_truncate),
    # A's panels are truncated in the layout pass itself: one pass over A, not two
    panel_modes=(("MODE_TF32", "MODE_TF32"), ("MODE_TF32", "MODE_TF32")),
)
S8 = NumberFormat("s8", "int8", np.dtype(np.int8), 0)
U8 = NumberFormat("u8", "uint8", np.dtype(np.uint8), 0)
#: OCP MXINT8 (ACE's TOP4MXBSSPS): int8 codes standing for code * 2^-6 (0x80 = -2). Integers are
#: range-checked as for S8; uint8 arrays are the codes' bytes.
MXINT8 = NumberFormat("mxint8", "int8", np.dtype(np.int8), 0, codes_from=np.dtype(np.uint8), fixed_point=6)
