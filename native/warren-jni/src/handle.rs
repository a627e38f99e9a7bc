//! Native objects handed to Java as `long` handles: a `Box` pointer that the Java object keeps
//! and gives back on every call, and releases once.
//!
//! Every `unsafe` dereference of a handle in this crate goes through this module, under one
//! contract that the Java classes (`Communicator`, `Tracker`, `Master`, `MasterClient`,
//! `TaskReader`, `RecordIOWriter`, `RecordIOReader`) keep:
//!
//! 1. a non-zero handle was made by [`into_handle`] from a value of the type the export
//!    names (each Java class passes only its own handle to its own exports);
//! 2. the Java object zeroes its copy of the handle before passing it to the release export,
//!    and never passes it again, so a handle is released once and not used after;
//! 3. calls that take the object exclusively ([`exclusive`]) are serialised by the Java object
//!    (synchronized methods), and calls that share it ([`shared`]; `Tracker`, `Master`, and a
//!    `Communicator`'s cancel handle, whose native types are thread-safe) finish before the
//!    release (a read-write lock in Java; for the cancel handle, a lock that `cancel` and
//!    `cancelFree` both take).

use jni::sys::jlong;

use crate::errors::{JniError, JniResult};

/// Moves `value` to the heap and returns its handle for Java.
pub(crate) fn into_handle<T>(value: T) -> jlong {
    Box::into_raw(Box::new(value)) as jlong
}

/// The object behind a live handle, shared; `what` names the Java class in the error a zero
/// (closed) handle raises.
pub(crate) fn shared<'a, T: Sync>(h: jlong, what: &'static str) -> JniResult<&'a T> {
    if h == 0 {
        return Err(JniError::Closed(what));
    }
    // SAFETY: by the module's contract (1, 2) `h` points to a live `T`; (3) only shared
    // references are made while it is shared, and `T: Sync`.
    Ok(unsafe { &*(h as *const T) })
}

/// The object behind a live handle, exclusively (the Java object serialises these calls).
pub(crate) fn exclusive<'a, T>(h: jlong, what: &'static str) -> JniResult<&'a mut T> {
    if h == 0 {
        return Err(JniError::Closed(what));
    }
    // SAFETY: by the module's contract (1, 2) `h` points to a live `T`, and (3) no other
    // reference to it exists during this call.
    Ok(unsafe { &mut *(h as *mut T) })
}

/// Takes back the object of a handle being released (`None` for a zero handle, already
/// closed). The caller drops it or consumes it (to finish or stop it).
pub(crate) fn release<T>(h: jlong) -> Option<Box<T>> {
    if h == 0 {
        return None;
    }
    // SAFETY: by the module's contract (1) `h` came from `into_handle::<T>` and (2) this is its
    // only release, after every other use.
    Some(unsafe { Box::from_raw(h as *mut T) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_handles_are_closed_not_dereferenced() {
        assert!(matches!(shared::<u64>(0, "Tracker"), Err(JniError::Closed("Tracker"))));
        assert!(matches!(exclusive::<u64>(0, "Communicator"), Err(JniError::Closed("Communicator"))));
        assert!(release::<u64>(0).is_none());
    }

    #[test]
    fn a_handle_reaches_its_object_until_released() {
        let h = into_handle(vec![1u32, 2, 3]);
        exclusive::<Vec<u32>>(h, "x").unwrap().push(4);
        assert_eq!(shared::<Vec<u32>>(h, "x").unwrap().as_slice(), &[1, 2, 3, 4]);
        assert_eq!(*release::<Vec<u32>>(h).unwrap(), vec![1, 2, 3, 4]);
    }
}
