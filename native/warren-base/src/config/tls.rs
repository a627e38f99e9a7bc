//! The TLS settings of a worker or a service (`WARREN_TLS`, `WARREN_TLS_CA`,
//! `WARREN_TLS_CERT`, `WARREN_TLS_KEY`): plain values, checked together; the TLS context they
//! describe comes from `warren_wire::Tls`.

use std::path::PathBuf;

use super::keys;
use crate::error::{Error, Result};

/// Where TLS comes from: the settings `WARREN_TLS`, `WARREN_TLS_CA`, `WARREN_TLS_CERT` and
/// `WARREN_TLS_KEY` (see [`super::keys`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsSettings {
    /// TLS on every connection that can leave a host. Default: off.
    pub enabled: bool,
    /// PEM bundle of the authorities that sign every end's certificate; with `cert` and `key`.
    pub ca: Option<PathBuf>,
    /// PEM certificate chain this process presents.
    pub cert: Option<PathBuf>,
    /// PEM private key of `cert`.
    pub key: Option<PathBuf>,
}

impl TlsSettings {
    /// TLS keyed from the job secret (ephemeral certificates), as `WARREN_TLS=1` alone.
    pub fn on() -> TlsSettings {
        TlsSettings { enabled: true, ..TlsSettings::default() }
    }

    /// Reads the settings through `get` (the environment's keys). Certificates without
    /// `WARREN_TLS=1`, or only some of the three paths, are a configuration error.
    pub fn from_lookup(get: &impl Fn(&str) -> Option<String>) -> Result<TlsSettings> {
        let path = |k: &str| get(k).map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).map(PathBuf::from);
        let s = TlsSettings {
            enabled: super::flag(get, keys::TLS)?.unwrap_or(false),
            ca: path(keys::TLS_CA),
            cert: path(keys::TLS_CERT),
            key: path(keys::TLS_KEY),
        };
        s.validate()?;
        Ok(s)
    }

    /// Reads the settings from the process environment.
    pub fn from_env() -> Result<TlsSettings> {
        TlsSettings::from_lookup(&|k| std::env::var(k).ok())
    }

    /// Checks that the settings make sense together.
    pub fn validate(&self) -> Result<()> {
        let given = [(keys::TLS_CA, &self.ca), (keys::TLS_CERT, &self.cert), (keys::TLS_KEY, &self.key)];
        let set: Vec<&str> = given.iter().filter(|(_, p)| p.is_some()).map(|(k, _)| *k).collect();
        if !set.is_empty() && !self.enabled {
            return Err(Error::Config(format!(
                "{} set but {} is not 1: set {}=1 to encrypt with these certificates (or unset them)",
                set.join(", "),
                keys::TLS,
                keys::TLS
            )));
        }
        if !set.is_empty() && set.len() < given.len() {
            let missing: Vec<&str> = given.iter().filter(|(_, p)| p.is_none()).map(|(k, _)| *k).collect();
            return Err(Error::Config(format!(
                "TLS with user certificates needs {}, {} and {}: {} missing",
                keys::TLS_CA,
                keys::TLS_CERT,
                keys::TLS_KEY,
                missing.join(" and ")
            )));
        }
        Ok(())
    }
}
