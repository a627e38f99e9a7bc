//! A part of a message that many messages carry unchanged, such as a re-link round's view and
//! addresses, which every member's assignment holds: serialized once, however many connections
//! it is sent on, so a round costs the tracker one encoding of the addresses instead of one per
//! member.

use std::fmt;
use std::ops::Deref;
use std::sync::{Arc, OnceLock};

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;

/// A value shared by many messages, with its JSON made once, on the first send, and reused by
/// every clone. It reads like the value ([`Deref`]); it deserializes as the value does.
pub struct EncodedOnce<T> {
    value: Arc<T>,
    json: Arc<OnceLock<Box<RawValue>>>,
}

impl<T> EncodedOnce<T> {
    /// Wraps `value`; its JSON is made when it is first serialized.
    pub fn new(value: T) -> EncodedOnce<T> {
        EncodedOnce { value: Arc::new(value), json: Arc::new(OnceLock::new()) }
    }
}

impl<T: Clone> EncodedOnce<T> {
    /// The value itself (a copy if clones of this are still alive).
    pub fn into_inner(self) -> T {
        Arc::unwrap_or_clone(self.value)
    }
}

impl<T> Clone for EncodedOnce<T> {
    fn clone(&self) -> EncodedOnce<T> {
        EncodedOnce { value: self.value.clone(), json: self.json.clone() }
    }
}

impl<T> Deref for EncodedOnce<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.value
    }
}

impl<T: fmt::Debug> fmt::Debug for EncodedOnce<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.value.fmt(f)
    }
}

impl<T: PartialEq> PartialEq for EncodedOnce<T> {
    fn eq(&self, other: &EncodedOnce<T>) -> bool {
        self.value == other.value
    }
}

impl<T: Eq> Eq for EncodedOnce<T> {}

impl<T: Serialize> Serialize for EncodedOnce<T> {
    /// Writes the JSON made on the first call. Tracker messages travel only as JSON frames
    /// ([`crate::wire::encode_frame`]), the one format a pre-encoded part fits.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let json = self
            .json
            .get_or_init(|| serde_json::value::to_raw_value(&*self.value).expect("tracker messages always serialize"));
        json.serialize(serializer)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for EncodedOnce<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<EncodedOnce<T>, D::Error> {
        T::deserialize(deserializer).map(EncodedOnce::new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    struct Part {
        names: Vec<String>,
    }

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    #[serde(tag = "kind", rename_all = "snake_case")]
    enum Message {
        Carries { part: EncodedOnce<Part>, own: u64 },
    }

    #[test]
    fn every_clone_sends_the_same_json_as_the_plain_value() {
        let part = Part { names: vec!["a\"b".into(), "c".into()] };
        let shared = EncodedOnce::new(part.clone());
        let plain = serde_json::to_string(&serde_json::json!({"kind": "carries", "part": part, "own": 1})).unwrap();
        let m1 = Message::Carries { part: shared.clone(), own: 1 };
        let m2 = Message::Carries { part: shared.clone(), own: 2 };
        let j1 = serde_json::to_string(&m1).unwrap();
        let j2 = serde_json::to_string(&m2).unwrap();
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&j1).unwrap(),
            serde_json::from_str::<serde_json::Value>(&plain).unwrap()
        );
        assert_eq!(j1.replace("\"own\":1", "\"own\":2"), j2);
        assert_eq!(serde_json::from_str::<Message>(&j2).unwrap(), m2);
        assert!(shared.json.get().is_some(), "the JSON is made once and kept for the other clones");
    }

    #[test]
    fn a_clone_sends_the_json_made_first_and_unwraps_to_the_value() {
        let shared = EncodedOnce::new(Part { names: vec!["x".into()] });
        let first = serde_json::to_string(&shared).unwrap();
        assert_eq!(first, r#"{"names":["x"]}"#);
        assert_eq!(serde_json::to_string(&shared.clone()).unwrap(), first);
        assert_eq!(shared.clone().into_inner(), Part { names: vec!["x".into()] });
    }
}
