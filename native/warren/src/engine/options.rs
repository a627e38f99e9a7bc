//! What a caller can say about one collective call besides its data: [`CallOptions`].

use std::borrow::Cow;
use std::panic::Location;

/// Options of one collective call: whether it is a bootstrap call (and under which key), and
/// a tag every rank must pass alike. The default is a plain call with no tag; it holds no
/// heap data, so passing it costs nothing.
///
/// ```
/// use warren::CallOptions;
/// let plain = CallOptions::new();
/// let site = CallOptions::new().bootstrap(); // keyed by this line
/// let keyed = CallOptions::new().bootstrap_key("feature-count").tag(7);
/// assert!(!plain.is_bootstrap() && site.is_bootstrap() && keyed.is_bootstrap());
/// assert_eq!(keyed.tag_value(), 7);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallOptions {
    bootstrap: Option<BootstrapSite>,
    tag: u32,
}

/// Where a bootstrap call's key comes from. Each use of one site gets the next count
/// (`site#0`, `site#1`, ...), so a site called in a loop or from a helper still gives every
/// call its own key, as long as every worker makes the calls in the same order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BootstrapSite {
    /// The source location that built the options ([`CallOptions::bootstrap`]).
    Location(&'static Location<'static>),
    /// A key the caller chose ([`CallOptions::bootstrap_key`]); foreign callers pass their own
    /// call-site description.
    Key(Cow<'static, str>),
}

impl BootstrapSite {
    /// The site as the bootstrap cache names it: `file:line:column` or `key:<key>`.
    pub fn name(&self) -> String {
        match self {
            BootstrapSite::Location(l) => format!("{}:{}:{}", l.file(), l.line(), l.column()),
            BootstrapSite::Key(k) => format!("key:{k}"),
        }
    }
}

impl CallOptions {
    /// A plain call with no tag (the same as `CallOptions::default()`).
    pub const fn new() -> CallOptions {
        CallOptions { bootstrap: None, tag: 0 }
    }

    /// Makes the call a bootstrap call: one made once before the first checkpoint (a feature
    /// count, a seed) whose result is kept for the whole job and served to a restarted worker
    /// (unless `WARREN_BOOTSTRAP_CACHE=0`). Its key is the source location of this method's
    /// caller, so build the options where the call is made.
    #[track_caller]
    #[must_use]
    pub fn bootstrap(mut self) -> CallOptions {
        self.bootstrap = Some(BootstrapSite::Location(Location::caller()));
        self
    }

    /// Makes the call a bootstrap call (see [`CallOptions::bootstrap`]) under an explicit
    /// `key`, the same on every worker: for a helper called from several places whose source
    /// location does not tell its calls apart.
    #[must_use]
    pub fn bootstrap_key(mut self, key: impl Into<Cow<'static, str>>) -> CallOptions {
        self.bootstrap = Some(BootstrapSite::Key(key.into()));
        self
    }

    /// Sets a tag that every rank must pass alike (ranks passing different tags get
    /// [`crate::Error::Mismatch`]). It names what the caller means by the call: a user
    /// reducer's identity ([`crate::Communicator::allreduce_custom`]), or the length of the
    /// whole buffer when a large one is reduced as several calls on its pieces (so that ranks
    /// splitting buffers of different lengths are told so instead of pairing pieces of
    /// different calls). 0, the default, is no tag.
    #[must_use]
    pub fn tag(mut self, tag: u32) -> CallOptions {
        self.tag = tag;
        self
    }

    /// Whether the call is a bootstrap call.
    pub fn is_bootstrap(&self) -> bool {
        self.bootstrap.is_some()
    }

    /// Where the bootstrap key comes from; `None` for an ordinary call.
    pub fn bootstrap_site(&self) -> Option<&BootstrapSite> {
        self.bootstrap.as_ref()
    }

    /// The tag (0: none).
    pub fn tag_value(&self) -> u32 {
        self.tag
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_a_plain_untagged_call() {
        let o = CallOptions::default();
        assert_eq!(o, CallOptions::new());
        assert!(!o.is_bootstrap());
        assert_eq!(o.bootstrap_site(), None);
        assert_eq!(o.tag_value(), 0);
    }

    #[test]
    fn bootstrap_is_keyed_by_the_line_that_built_it() {
        let (a, b) = (CallOptions::new().bootstrap(), CallOptions::new().bootstrap());
        let (na, nb) = (a.bootstrap_site().unwrap().name(), b.bootstrap_site().unwrap().name());
        assert!(na.starts_with(file!()) && na.contains(&format!(":{}:", line!() - 2)), "{na}");
        assert_ne!(na, nb, "two sites on one line differ by column");
        let again = || CallOptions::new().bootstrap();
        assert_eq!(again(), again(), "one site gives one key (the cache counts its calls)");
    }

    #[test]
    fn explicit_keys_and_tags_compose() {
        let o = CallOptions::new().tag(9).bootstrap_key("k");
        assert_eq!(o.bootstrap_site().unwrap().name(), "key:k");
        assert_eq!(o.tag_value(), 9);
        let owned = CallOptions::new().bootstrap_key(String::from("k")).tag(9);
        assert_eq!(o, owned);
        assert_ne!(o, CallOptions::new().bootstrap_key("k2").tag(9));
    }
}
