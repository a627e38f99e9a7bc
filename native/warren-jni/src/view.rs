//! The export of `Communicator.takeViewChange()`: the last change of membership of an elastic
//! job ([`warren::ViewChange`]), once, as a flat string array the Java side turns into an
//! `io.warren.ViewChange`. [`flatten`] is the pure layout; the export only crosses JNI.

use jni::EnvUnowned;
use jni::objects::{JClass, JObjectArray, JString};
use jni::sys::jlong;
use warren::ViewChange;

use crate::comm;
use crate::errors::run;
use crate::string_array::string_array;

/// The fixed fields before the member lists in [`flatten`]'s layout.
pub const HEADER: usize = 5;

/// `change` as seen by task `task`, flattened:
/// `[old epoch, new epoch, task, new rank ("" if it left), old world, old members..., new
/// members...]` (members in rank order, so a task's old rank is its index in the old list).
pub fn flatten(change: &ViewChange, task: &str) -> Vec<String> {
    let (from, to) = (change.from.members(), change.to.members());
    let mut out = Vec::with_capacity(HEADER + from.len() + to.len());
    out.push(change.from.epoch().to_string());
    out.push(change.to.epoch().to_string());
    out.push(task.to_string());
    out.push(change.rank.map(|r| r.to_string()).unwrap_or_default());
    out.push(from.len().to_string());
    out.extend(from.iter().cloned());
    out.extend(to.iter().cloned());
    out
}

/// The last change of membership of this worker's elastic job, once (null if none since the
/// last call): see [`flatten`] for the layout.
#[unsafe(no_mangle)]
pub extern "system" fn Java_io_warren_Native_commTakeViewChange<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    h: jlong,
) -> JObjectArray<'l, JString<'l>> {
    run(&mut env, |env| {
        let c = comm(h)?;
        let Some(change) = c.comm.take_view_change() else {
            return Ok(JObjectArray::<JString>::null());
        };
        Ok(string_array(env, &flatten(&change, &c.comm.config().task_id))?)
    })
}

#[cfg(test)]
mod tests {
    use warren::membership::View;

    use super::*;

    #[test]
    fn a_change_flattens_to_epochs_own_task_new_rank_and_both_member_lists() {
        let grow = ViewChange { from: View::new(1, ["0", "2"]), to: View::new(2, ["5", "0", "2"]), rank: Some(1) };
        assert_eq!(flatten(&grow, "2"), ["1", "2", "2", "1", "2", "0", "2", "0", "2", "5"]);
        let left = ViewChange { from: View::new(3, ["0", "1"]), to: View::new(4, ["0"]), rank: None };
        assert_eq!(flatten(&left, "1"), ["3", "4", "1", "", "2", "0", "1", "0"]);
    }
}
