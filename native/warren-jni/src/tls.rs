//! Encryption in transit for the endpoints the JVM starts or connects: the tracker, the
//! data master and its clients, the parameter servers and their clients. Each export that
//! opens one takes the TLS settings as a Java `String[]` of key/value pairs (`WARREN_TLS`,
//! `WARREN_TLS_CA`, `WARREN_TLS_CERT`, `WARREN_TLS_KEY`; `io.warren.TlsSettings#flat()`), read
//! with the same rules as a worker's settings ([`warren::wire::TlsSettings::from_lookup`]): so
//! the JVM's endpoints and its workers agree on TLS by construction, and nothing reads or
//! changes the process environment. A communicator gets the same keys among its worker
//! settings (`commCreate`).

use std::collections::HashMap;

use jni::Env;
use jni::objects::{JObjectArray, JString};
use warren::wire::{Tls, TlsSettings};

use crate::errors::{JniError, JniResult};
use crate::strings::strings;

/// The TLS context of the settings `flat` (`[key0, value0, key1, value1, ...]`): `None` when
/// `flat` is null or TLS is off. An unknown key, a malformed value, certificates without
/// `WARREN_TLS=1` or an unreadable certificate file is a `WarrenConfigException` naming it.
pub(crate) fn context(env: &mut Env<'_>, flat: &JObjectArray<'_, JString<'_>>) -> JniResult<Option<Tls>> {
    if flat.is_null() {
        return Ok(None);
    }
    from_pairs(&strings(env, flat, "TLS settings")?)
}

/// The TLS context of `kv` (`[key0, value0, ...]`, possibly empty: plain TCP).
pub(crate) fn from_pairs(kv: &[String]) -> JniResult<Option<Tls>> {
    warren::wire::Tls::from_settings(&settings(kv)?).map_err(JniError::Warren)
}

/// The settings of `kv` (`[key0, value0, ...]`), checked.
fn settings(kv: &[String]) -> JniResult<TlsSettings> {
    if kv.len() % 2 != 0 {
        return Err(JniError::Argument("TLS settings must be key/value pairs".into()));
    }
    let map: HashMap<&str, &str> = kv.chunks(2).map(|p| (p[0].as_str(), p[1].as_str())).collect();
    use warren::config::keys;
    let tls_keys = [keys::TLS, keys::TLS_CA, keys::TLS_CERT, keys::TLS_KEY];
    let mut given: Vec<&str> = map.keys().copied().collect();
    given.sort_unstable();
    if let Some(k) = given.into_iter().find(|k| !tls_keys.contains(k)) {
        let why = keys::unknown(k).map(|w| format!(": {w}")).unwrap_or_default();
        return Err(JniError::Warren(warren::Error::Config(format!(
            "{k:?} is not a TLS setting (WARREN_TLS, WARREN_TLS_CA, WARREN_TLS_CERT, WARREN_TLS_KEY){why}"
        ))));
    }
    Ok(TlsSettings::from_lookup(&|k| map.get(k).map(|v| v.to_string()))?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kv(pairs: &[&str]) -> Vec<String> {
        pairs.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn pairs_read_as_a_worker_reads_its_settings() {
        assert_eq!(settings(&[]).unwrap(), TlsSettings::default());
        assert_eq!(settings(&kv(&["WARREN_TLS", "1"])).unwrap(), TlsSettings::on());
        assert_eq!(settings(&kv(&["WARREN_TLS", "0"])).unwrap(), TlsSettings::default());
        let e = settings(&kv(&["WARREN_TLS", "maybe"])).unwrap_err();
        assert!(e.to_string().contains("WARREN_TLS=\"maybe\""), "{e}");
        let e = settings(&kv(&["WARREN_TLS_CA", "/ca.pem"])).unwrap_err();
        assert!(e.to_string().contains("WARREN_TLS is not 1"), "{e}");
    }

    #[test]
    fn odd_lists_and_other_keys_are_refused() {
        assert!(matches!(settings(&kv(&["WARREN_TLS"])), Err(JniError::Argument(_))));
        let e = settings(&kv(&["WARREN_TIMEOUT_S", "1"])).unwrap_err();
        assert!(e.to_string().contains("not a TLS setting"), "{e}");
    }
}
