//! A `String[]` the JVM passed, read ([`strings`]); `string_array.rs` makes one to return.
//! Local references are deleted as each element is done, so a long array never fills the
//! JVM's local-reference table.

use jni::Env;
use jni::objects::{JObjectArray, JString};

use crate::errors::{JniError, JniResult};

/// The elements of a `String[]` (none may be null); `what` names it in errors.
pub(crate) fn strings(env: &mut Env<'_>, array: &JObjectArray<'_, JString<'_>>, what: &str) -> JniResult<Vec<String>> {
    if array.is_null() {
        return Err(JniError::Argument(format!("{what} is null")));
    }
    let n = array.len(env)?;
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let s = array.get_element(env, i)?;
        if s.is_null() {
            return Err(JniError::Argument(format!("{what} holds null")));
        }
        out.push(s.try_to_string(env)?);
        env.delete_local_ref(s);
    }
    Ok(out)
}
