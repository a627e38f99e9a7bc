//! A `String[]` to return to the JVM. Local references are deleted as each element is done,
//! so a long array never fills the JVM's local-reference table.

use jni::Env;
use jni::objects::{JObjectArray, JString};

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
