//! `String[]` across the boundary, both ways: read one the JVM passed ([`strings`]), make one
//! to return ([`string_array`]). Local references are deleted as each element is done, so a
//! long array never fills the JVM's local-reference table.

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

/// A new `String[]` holding `items`, in order.
pub(crate) fn string_array<'l, S: AsRef<str>>(
    env: &mut Env<'l>,
    items: &[S],
) -> jni::errors::Result<JObjectArray<'l, JString<'l>>> {
    let out = JObjectArray::<JString>::new(env, items.len(), JString::null())?;
    for (i, item) in items.iter().enumerate() {
        let s = env.new_string(item.as_ref())?;
        out.set_element(env, i, &s)?;
        env.delete_local_ref(s);
    }
    Ok(out)
}
