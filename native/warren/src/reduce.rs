//! Element types, reduction operators and the kernels that apply them.
//!
//! Kernels are plain element-wise loops over slices so that the compiler vectorizes them.
//! Reductions never reassociate: `acc[i] = acc[i] op other[i]`, and the collective algorithms
//! fix which `other` is applied when, so results are bit-identical across ranks and runs.

use crate::error::{Error, Result};

/// Wire code of an element type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum DataType {
    /// Signed 8-bit integer.
    I8 = 1,
    /// Signed 16-bit integer.
    I16 = 2,
    /// Signed 32-bit integer.
    I32 = 3,
    /// Signed 64-bit integer.
    I64 = 4,
    /// Unsigned 8-bit integer.
    U8 = 5,
    /// Unsigned 16-bit integer.
    U16 = 6,
    /// Unsigned 32-bit integer.
    U32 = 7,
    /// Unsigned 64-bit integer.
    U64 = 8,
    /// 32-bit IEEE float.
    F32 = 9,
    /// 64-bit IEEE float.
    F64 = 10,
    /// Opaque bytes reduced by a user function; the element size travels separately.
    User = 11,
}

impl DataType {
    /// Size of one element in bytes (1 for [`DataType::User`], whose size is given by the caller).
    pub fn size(self) -> usize {
        match self {
            DataType::I8 | DataType::U8 | DataType::User => 1,
            DataType::I16 | DataType::U16 => 2,
            DataType::I32 | DataType::U32 | DataType::F32 => 4,
            DataType::I64 | DataType::U64 | DataType::F64 => 8,
        }
    }

    /// Lower-case name, as used by the CLI and in error messages.
    pub fn name(self) -> &'static str {
        match self {
            DataType::I8 => "i8",
            DataType::I16 => "i16",
            DataType::I32 => "i32",
            DataType::I64 => "i64",
            DataType::U8 => "u8",
            DataType::U16 => "u16",
            DataType::U32 => "u32",
            DataType::U64 => "u64",
            DataType::F32 => "f32",
            DataType::F64 => "f64",
            DataType::User => "user",
        }
    }

    /// Parses a wire code.
    pub fn from_code(code: u8) -> Option<DataType> {
        Self::ALL.iter().copied().chain([DataType::User]).find(|d| *d as u8 == code)
    }

    /// Parses a lower-case name (`f32`, `i64`, ...).
    pub fn from_name(name: &str) -> Option<DataType> {
        Self::ALL.iter().copied().find(|d| d.name() == name)
    }

    /// Every numeric type, in wire-code order.
    pub const ALL: [DataType; 10] = [
        DataType::I8,
        DataType::I16,
        DataType::I32,
        DataType::I64,
        DataType::U8,
        DataType::U16,
        DataType::U32,
        DataType::U64,
        DataType::F32,
        DataType::F64,
    ];

    fn is_float(self) -> bool {
        matches!(self, DataType::F32 | DataType::F64)
    }
}

/// A reduction operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Op {
    /// Sum.
    Sum = 1,
    /// Product.
    Prod = 2,
    /// Minimum (for floats: `f32::min`, which ignores NaN unless both are NaN).
    Min = 3,
    /// Maximum (for floats: `f32::max`).
    Max = 4,
    /// Bitwise and (integers only).
    BitAnd = 5,
    /// Bitwise or (integers only).
    BitOr = 6,
    /// Bitwise xor (integers only).
    BitXor = 7,
    /// A user-supplied reducer over raw bytes.
    User = 8,
}

impl Op {
    /// Every built-in operator.
    pub const ALL: [Op; 7] = [Op::Sum, Op::Prod, Op::Min, Op::Max, Op::BitAnd, Op::BitOr, Op::BitXor];

    /// Lower-case name, as used by the CLI and in error messages.
    pub fn name(self) -> &'static str {
        match self {
            Op::Sum => "sum",
            Op::Prod => "prod",
            Op::Min => "min",
            Op::Max => "max",
            Op::BitAnd => "bitand",
            Op::BitOr => "bitor",
            Op::BitXor => "bitxor",
            Op::User => "user",
        }
    }

    /// Parses a lower-case name.
    pub fn from_name(name: &str) -> Option<Op> {
        Self::ALL.iter().copied().find(|o| o.name() == name)
    }

    /// Parses a wire code.
    pub fn from_code(code: u8) -> Option<Op> {
        Self::ALL.iter().copied().chain([Op::User]).find(|o| *o as u8 == code)
    }

    /// Whether `self` is defined for `dtype` (bitwise operators are not defined for floats).
    pub fn supports(self, dtype: DataType) -> bool {
        match self {
            Op::BitAnd | Op::BitOr | Op::BitXor => !dtype.is_float() && dtype != DataType::User,
            Op::User => dtype == DataType::User,
            _ => dtype != DataType::User,
        }
    }
}

/// A numeric element type that Warren can reduce. Implemented for the ten primitive types.
pub trait Element: bytemuck::Pod + Send + Sync + 'static {
    /// The wire code of this type.
    const DTYPE: DataType;
    /// `acc[i] = acc[i] op other[i]` for every `i`. `op` must support this type.
    fn reduce(acc: &mut [Self], other: &[Self], op: Op);
}

macro_rules! zip_apply {
    ($acc:expr, $other:expr, |$a:ident, $b:ident| $body:expr) => {
        for ($a, &$b) in $acc.iter_mut().zip($other.iter()) {
            *$a = $body;
        }
    };
}

macro_rules! int_element {
    ($($t:ty => $d:ident),*) => {$(
        impl Element for $t {
            const DTYPE: DataType = DataType::$d;
            fn reduce(acc: &mut [Self], other: &[Self], op: Op) {
                match op {
                    Op::Sum => zip_apply!(acc, other, |a, b| a.wrapping_add(b)),
                    Op::Prod => zip_apply!(acc, other, |a, b| a.wrapping_mul(b)),
                    Op::Min => zip_apply!(acc, other, |a, b| (*a).min(b)),
                    Op::Max => zip_apply!(acc, other, |a, b| (*a).max(b)),
                    Op::BitAnd => zip_apply!(acc, other, |a, b| *a & b),
                    Op::BitOr => zip_apply!(acc, other, |a, b| *a | b),
                    Op::BitXor => zip_apply!(acc, other, |a, b| *a ^ b),
                    Op::User => unreachable!("user op on a built-in type"),
                }
            }
        }
    )*};
}
int_element!(i8 => I8, i16 => I16, i32 => I32, i64 => I64, u8 => U8, u16 => U16, u32 => U32, u64 => U64);

macro_rules! float_element {
    ($($t:ty => $d:ident),*) => {$(
        impl Element for $t {
            const DTYPE: DataType = DataType::$d;
            fn reduce(acc: &mut [Self], other: &[Self], op: Op) {
                match op {
                    Op::Sum => zip_apply!(acc, other, |a, b| *a + b),
                    Op::Prod => zip_apply!(acc, other, |a, b| *a * b),
                    Op::Min => zip_apply!(acc, other, |a, b| a.min(b)),
                    Op::Max => zip_apply!(acc, other, |a, b| a.max(b)),
                    _ => unreachable!("bitwise op on a float type"),
                }
            }
        }
    )*};
}
float_element!(f32 => F32, f64 => F64);

/// A reducer over raw bytes: `acc = acc op other`, both of the same length, a multiple of the
/// element size, and aligned to the element type.
pub type ByteReducer<'a> = dyn Fn(&mut [u8], &[u8]) + 'a;

/// Builds the byte-level reducer of a built-in operator for element type `T`.
pub fn typed_reducer<T: Element>(op: Op) -> Result<impl Fn(&mut [u8], &[u8])> {
    if !op.supports(T::DTYPE) {
        return Err(Error::InvalidArgument(format!("operator {} is not defined for {}", op.name(), T::DTYPE.name())));
    }
    Ok(move |acc: &mut [u8], other: &[u8]| T::reduce(bytemuck::cast_slice_mut(acc), bytemuck::cast_slice(other), op))
}

/// Applies a built-in operator to byte slices holding elements of `dtype` (used where the type
/// is only known at run time, e.g. from the JVM or the benchmark CLI).
pub fn reduce_dyn(dtype: DataType, op: Op, acc: &mut [u8], other: &[u8]) {
    fn go<T: Element>(acc: &mut [u8], other: &[u8], op: Op) {
        T::reduce(bytemuck::cast_slice_mut(acc), bytemuck::cast_slice(other), op)
    }
    match dtype {
        DataType::I8 => go::<i8>(acc, other, op),
        DataType::I16 => go::<i16>(acc, other, op),
        DataType::I32 => go::<i32>(acc, other, op),
        DataType::I64 => go::<i64>(acc, other, op),
        DataType::U8 => go::<u8>(acc, other, op),
        DataType::U16 => go::<u16>(acc, other, op),
        DataType::U32 => go::<u32>(acc, other, op),
        DataType::U64 => go::<u64>(acc, other, op),
        DataType::F32 => go::<f32>(acc, other, op),
        DataType::F64 => go::<f64>(acc, other, op),
        DataType::User => unreachable!("reduce_dyn on user bytes"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_names_round_trip() {
        for d in DataType::ALL {
            assert_eq!(DataType::from_code(d as u8), Some(d));
            assert_eq!(DataType::from_name(d.name()), Some(d));
        }
        for o in Op::ALL {
            assert_eq!(Op::from_code(o as u8), Some(o));
            assert_eq!(Op::from_name(o.name()), Some(o));
        }
        assert_eq!(DataType::from_code(0), None);
        assert_eq!(Op::from_code(99), None);
    }

    #[test]
    fn integer_ops_wrap_and_combine() {
        let mut a = [250u8, 3, 0b1100];
        u8::reduce(&mut a, &[10, 4, 0b1010], Op::Sum);
        assert_eq!(a, [4, 7, 0b10110]);
        let mut b = [0b1100i32, -5];
        i32::reduce(&mut b, &[0b1010, 7], Op::BitXor);
        assert_eq!(b, [0b0110, -5 ^ 7]);
        let mut c = [3i64, -9];
        i64::reduce(&mut c, &[-4, 2], Op::Min);
        assert_eq!(c, [-4, -9]);
    }

    #[test]
    fn float_ops() {
        let mut a = [1.5f32, -2.0, 3.0];
        f32::reduce(&mut a, &[2.0, 4.0, f32::NAN], Op::Max);
        assert_eq!(a, [2.0, 4.0, 3.0]);
        let mut p = [1.5f64, 2.0];
        f64::reduce(&mut p, &[2.0, 0.25], Op::Prod);
        assert_eq!(p, [3.0, 0.5]);
    }

    #[test]
    fn bitwise_on_float_is_refused() {
        assert!(typed_reducer::<f32>(Op::BitAnd).is_err());
        assert!(typed_reducer::<u16>(Op::BitAnd).is_ok());
    }

    #[test]
    fn dyn_matches_typed() {
        let mut x: Vec<u8> = bytemuck::cast_slice(&[1.0f64, 2.0]).to_vec();
        let y: Vec<u8> = bytemuck::cast_slice(&[0.5f64, 0.25]).to_vec();
        // Vec<u8> may be unaligned for f64; copy into aligned storage first.
        let mut xa = vec![0f64; 2];
        bytemuck::cast_slice_mut::<f64, u8>(&mut xa).copy_from_slice(&x);
        let mut ya = vec![0f64; 2];
        bytemuck::cast_slice_mut::<f64, u8>(&mut ya).copy_from_slice(&y);
        reduce_dyn(DataType::F64, Op::Sum, bytemuck::cast_slice_mut(&mut xa), bytemuck::cast_slice(&ya));
        assert_eq!(xa, [1.5, 2.25]);
        x.clear();
    }
}
