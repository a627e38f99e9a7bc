//! numpy arrays as the mutable slices Warren's calls take, without a copy: the array must be
//! C-contiguous, writable, in native byte order and of an element type Warren reduces;
//! anything else is a `TypeError` or `ValueError` that names the requirement and the fix.

use numpy::{
    PyArrayDescrMethods, PyArrayDyn, PyArrayMethods, PyReadwriteArrayDyn, PyUntypedArray, PyUntypedArrayMethods,
};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

/// The numpy dtypes Warren reduces, as numpy names them.
pub const SUPPORTED: &str = "int8, int16, int32, int64, uint8, uint16, uint32, uint64, float32, float64";

/// A writable borrow of an array of one of the supported element types.
pub enum Borrowed<'py> {
    /// `int8`.
    I8(PyReadwriteArrayDyn<'py, i8>),
    /// `int16`.
    I16(PyReadwriteArrayDyn<'py, i16>),
    /// `int32`.
    I32(PyReadwriteArrayDyn<'py, i32>),
    /// `int64`.
    I64(PyReadwriteArrayDyn<'py, i64>),
    /// `uint8`.
    U8(PyReadwriteArrayDyn<'py, u8>),
    /// `uint16`.
    U16(PyReadwriteArrayDyn<'py, u16>),
    /// `uint32`.
    U32(PyReadwriteArrayDyn<'py, u32>),
    /// `uint64`.
    U64(PyReadwriteArrayDyn<'py, u64>),
    /// `float32`.
    F32(PyReadwriteArrayDyn<'py, f32>),
    /// `float64`.
    F64(PyReadwriteArrayDyn<'py, f64>),
}

/// The array's elements as one mutable slice of its element type.
pub enum Slice<'a> {
    /// `int8`.
    I8(&'a mut [i8]),
    /// `int16`.
    I16(&'a mut [i16]),
    /// `int32`.
    I32(&'a mut [i32]),
    /// `int64`.
    I64(&'a mut [i64]),
    /// `uint8`.
    U8(&'a mut [u8]),
    /// `uint16`.
    U16(&'a mut [u16]),
    /// `uint32`.
    U32(&'a mut [u32]),
    /// `uint64`.
    U64(&'a mut [u64]),
    /// `float32`.
    F32(&'a mut [f32]),
    /// `float64`.
    F64(&'a mut [f64]),
}

macro_rules! each_type {
    ($m:ident) => {
        $m!(I8, i8);
        $m!(I16, i16);
        $m!(I32, i32);
        $m!(I64, i64);
        $m!(U8, u8);
        $m!(U16, u16);
        $m!(U32, u32);
        $m!(U64, u64);
        $m!(F32, f32);
        $m!(F64, f64);
    };
}

impl<'py> Borrowed<'py> {
    /// The elements of the borrowed array (contiguity was checked when it was borrowed).
    pub fn slice(&mut self) -> PyResult<Slice<'_>> {
        macro_rules! arm {
            ($($v:ident),*) => {
                match self {
                    $( Borrowed::$v(a) => Slice::$v(a.as_slice_mut().map_err(|e| PyValueError::new_err(e.to_string()))?), )*
                }
            };
        }
        Ok(arm!(I8, I16, I32, I64, U8, U16, U32, U64, F32, F64))
    }
}

impl<'a> Slice<'a> {
    /// The same memory as bytes (for a broadcast, which moves bytes of any type).
    pub fn into_bytes(self) -> &'a mut [u8] {
        macro_rules! arm {
            ($($v:ident),*) => {
                match self {
                    $( Slice::$v(s) => bytemuck::cast_slice_mut(s), )*
                }
            };
        }
        arm!(I8, I16, I32, I64, U8, U16, U32, U64, F32, F64)
    }
}

/// Borrows `obj` for writing: a numpy array, C-contiguous, writable, of a supported dtype in
/// native byte order. `call` names the call in the error messages.
pub fn borrow<'py>(obj: &Bound<'py, PyAny>, call: &str) -> PyResult<Borrowed<'py>> {
    let Ok(arr) = obj.cast::<PyUntypedArray>() else {
        let ty = obj.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "?".into());
        return Err(PyTypeError::new_err(format!(
            "{call} works in place on a numpy.ndarray, got {ty}: build one with numpy.array(x, dtype=numpy.float64) \
             (say) and read the result from it"
        )));
    };
    if !arr.is_c_contiguous() {
        return Err(PyValueError::new_err(format!(
            "{call} works in place and needs a C-contiguous array; this one is not (a slice with a step, a \
             transpose or a Fortran-order array): pass numpy.ascontiguousarray(a) and use that array"
        )));
    }
    let dtype = arr.dtype();
    let py = obj.py();
    macro_rules! try_type {
        ($v:ident, $t:ty) => {
            if dtype.is_equiv_to(&numpy::dtype::<$t>(py)) {
                let typed = arr.cast::<PyArrayDyn<$t>>()?;
                return typed.try_readwrite().map(Borrowed::$v).map_err(|e| not_writable(call, e));
            }
        };
    }
    each_type!(try_type);
    Err(PyTypeError::new_err(format!(
        "{call} cannot reduce an array of dtype {dtype}: supported are {SUPPORTED} (native byte order); \
         convert it with a.astype(numpy.float64) (say), which makes a new array"
    )))
}

fn not_writable(call: &str, e: numpy::BorrowError) -> PyErr {
    match e {
        numpy::BorrowError::NotWriteable => PyValueError::new_err(format!(
            "{call} works in place and needs a writable array; this one is read-only (a.flags.writeable is False): \
             pass a writable copy, a.copy(), and use that array"
        )),
        other => PyValueError::new_err(format!("{call} cannot borrow the array for writing: {other}")),
    }
}
