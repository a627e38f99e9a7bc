//! Registration of servers and trainers in etcd, as in the seed design (the pure part: key
//! names, which index a server may claim, the roster of addresses read back). The I/O is
//! `registry_etcd.rs` ([`EtcdRegistry`](super::EtcdRegistry)).
//!
//! Keys, under a prefix per job (`etcd:HOST:PORT/PREFIX`, default [`DEFAULT_PS_PREFIX`]):
//!
//! - `<prefix>/servers`: the job's server count `S`, written by the first server; a server
//!   started with another count is refused, naming both.
//! - `<prefix>/ps/<index>`: server `index`'s `host:port`, bound to the server's lease (gone
//!   a TTL after the server dies). A server claims the first free index below `S` in a
//!   transaction (create only if absent), so two servers racing never share one; a server
//!   restarted with `--index I` waits until the dead one's key has expired, then claims it.
//!   The value is empty between the claim and the moment the server listens.
//! - `<prefix>/trainer/<unique id>`: a trainer's key, bound to its lease: gone when it dies.

use warren_base::error::{Error, Result};

/// Key prefix in etcd when a spec `etcd:HOST:PORT` names none.
pub const DEFAULT_PS_PREFIX: &str = "/warren/ps/default";

/// The etcd key names of one job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegistryKeys {
    prefix: String,
}

impl RegistryKeys {
    /// The keys under `prefix` (which must start with `/`; a trailing `/` is dropped).
    pub fn new(prefix: &str) -> Result<RegistryKeys> {
        if !prefix.starts_with('/') {
            return Err(Error::Config(format!("etcd key prefix {prefix:?} must start with '/'")));
        }
        Ok(RegistryKeys { prefix: prefix.trim_end_matches('/').to_string() })
    }

    /// The job's prefix.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// `<prefix>/servers`: the server count.
    pub fn count(&self) -> String {
        format!("{}/servers", self.prefix)
    }

    /// `<prefix>/ps/`: every server's key starts so.
    pub fn servers(&self) -> String {
        format!("{}/ps/", self.prefix)
    }

    /// `<prefix>/ps/<index>`.
    pub fn server(&self, index: usize) -> String {
        format!("{}{index}", self.servers())
    }

    /// `<prefix>/trainer/<id>`.
    pub fn trainer(&self, id: &str) -> String {
        format!("{}/trainer/{id}", self.prefix)
    }

    /// The index named by a server key, if `key` is one.
    pub fn server_index(&self, key: &[u8]) -> Option<usize> {
        let rest = std::str::from_utf8(key).ok()?.strip_prefix(&self.servers())?;
        if rest.is_empty() || !rest.bytes().all(|b| b.is_ascii_digit()) || (rest.len() > 1 && rest.starts_with('0')) {
            return None;
        }
        rest.parse().ok()
    }
}

/// The indices a server may try to claim, in order: `wanted` alone, or every index below
/// `servers` not in `taken`, lowest first. An index out of range is [`Error::Config`].
pub fn candidates(servers: usize, wanted: Option<usize>, taken: &[usize]) -> Result<Vec<usize>> {
    if servers == 0 {
        return Err(Error::Config("the server count must be at least 1".into()));
    }
    match wanted {
        Some(i) if i >= servers => Err(Error::Config(format!("--index {i} is not below --servers {servers}"))),
        Some(i) => Ok(vec![i]),
        None => Ok((0..servers).filter(|i| !taken.contains(i)).collect()),
    }
}

/// The count a job's `<prefix>/servers` key holds, checked against `servers`: a clear error
/// when another count was registered (or the value is garbage).
pub fn check_count(found: &[u8], servers: usize, prefix: &str) -> Result<()> {
    let text = String::from_utf8_lossy(found);
    match text.trim().parse::<usize>() {
        Ok(n) if n == servers => Ok(()),
        Ok(n) => Err(Error::Config(format!(
            "the job under etcd prefix {prefix} has {n} parameter servers, not {servers}: give every server \
             the same --servers (or give this job its own prefix)"
        ))),
        Err(_) => Err(Error::Config(format!("{prefix}/servers holds {text:?}, not a server count"))),
    }
}

/// Server addresses by index from `(key, value)` pairs listed under `<prefix>/ps/`: `None`
/// where no server (or one not listening yet: empty value) is registered. Keys out of range
/// or not naming an index are ignored.
pub fn roster<'a>(
    keys: &RegistryKeys,
    servers: usize,
    kvs: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
) -> Vec<Option<String>> {
    let mut out = vec![None; servers];
    for (k, v) in kvs {
        match keys.server_index(k) {
            Some(i) if i < servers && !v.is_empty() => out[i] = Some(String::from_utf8_lossy(v).into_owned()),
            _ => {}
        }
    }
    out
}

/// The indices missing from a roster, for progress lines and errors.
pub fn missing(roster: &[Option<String>]) -> Vec<usize> {
    roster.iter().enumerate().filter(|(_, a)| a.is_none()).map(|(i, _)| i).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_under_the_job_prefix_and_name_their_index() {
        let k = RegistryKeys::new("/warren/ps/job1/").unwrap();
        assert_eq!(k.server(3), "/warren/ps/job1/ps/3");
        assert_eq!(k.trainer("t-1"), "/warren/ps/job1/trainer/t-1");
        assert_eq!(k.count(), "/warren/ps/job1/servers");
        assert_eq!(k.server_index(b"/warren/ps/job1/ps/12"), Some(12));
        for bad in [&b"/warren/ps/job1/ps/"[..], b"/warren/ps/job1/ps/x", b"/warren/ps/job1/ps/01", b"/other/ps/1"] {
            assert_eq!(k.server_index(bad), None, "{}", String::from_utf8_lossy(bad));
        }
        assert!(matches!(RegistryKeys::new("job"), Err(Error::Config(m)) if m.contains("start with '/'")));
    }

    #[test]
    fn a_server_tries_the_free_indices_lowest_first_or_the_one_it_was_given() {
        assert_eq!(candidates(4, None, &[0, 2]).unwrap(), vec![1, 3]);
        assert_eq!(candidates(2, None, &[0, 1]).unwrap(), Vec::<usize>::new());
        assert_eq!(candidates(4, Some(2), &[2]).unwrap(), vec![2]);
        assert!(matches!(candidates(2, Some(2), &[]), Err(Error::Config(m)) if m.contains("--index 2")));
        assert!(candidates(0, None, &[]).is_err());
    }

    #[test]
    fn a_count_other_than_the_registered_one_is_refused_naming_both() {
        assert!(check_count(b"2", 2, "/p").is_ok());
        let err = check_count(b"3", 2, "/p").unwrap_err().to_string();
        assert!(err.contains("3 parameter servers, not 2") && err.contains("/p"), "{err}");
        assert!(check_count(b"x", 2, "/p").is_err());
    }

    #[test]
    fn the_roster_holds_listening_servers_only() {
        let k = RegistryKeys::new("/j").unwrap();
        let kvs: Vec<(&[u8], &[u8])> =
            vec![(b"/j/ps/1", b"127.0.0.1:5"), (b"/j/ps/0", b""), (b"/j/ps/7", b"127.0.0.1:6"), (b"/j/servers", b"2")];
        let r = roster(&k, 2, kvs);
        assert_eq!(r, vec![None, Some("127.0.0.1:5".to_string())]);
        assert_eq!(missing(&r), vec![0]);
    }
}
