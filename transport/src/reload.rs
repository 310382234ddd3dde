//! Certificate rotation without a restart: a node watches its certificate, key and
//! CA certificate files and, when they change, checks the new material and hands it to its
//! [`Transport`] for the connections set up from then on.
//!
//! The files are compared by modification time and length, so the driver can poll cheaply
//! (`redt node` every 2 s, and at SIGHUP). A change that does not load or does not check
//! (a key that does not fit, an expired certificate, one from another CA) is reported and
//! the transport keeps what it had; the same files are not tried again until they change.

use super::error::Result;
use super::tls::{check_identity, load_identity};
use super::x509::CertSummary;
use super::Transport;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// What a file looked like: its modification time and length (`None` while missing).
type Stamp = Option<(SystemTime, u64)>;

/// One identity's files in a certificate directory (`<name>.pem`, `<name>.key`, `ca.pem`)
/// and what they looked like when last loaded.
#[derive(Debug)]
pub struct IdentityWatch {
    dir: PathBuf,
    name: String,
    seen: Vec<Stamp>,
}

impl IdentityWatch {
    /// Watches the identity `name` of the certificate directory `dir`, taking the files as
    /// they are now as already loaded.
    pub fn new(dir: &Path, name: &str) -> IdentityWatch {
        let mut w = IdentityWatch { dir: dir.to_path_buf(), name: name.to_string(), seen: Vec::new() };
        w.seen = w.stamps();
        w
    }

    fn files(&self) -> [PathBuf; 3] {
        [
            self.dir.join(format!("{}.pem", self.name)),
            self.dir.join(format!("{}.key", self.name)),
            self.dir.join("ca.pem"),
        ]
    }

    fn stamps(&self) -> Vec<Stamp> {
        self.files()
            .iter()
            .map(|f| std::fs::metadata(f).ok().and_then(|m| Some((m.modified().ok()?, m.len()))))
            .collect()
    }

    /// Whether any of the files changed since they were last loaded (or tried).
    pub fn changed(&self) -> bool {
        self.stamps() != self.seen
    }

    /// Loads the files, checks them at `now` ([`check_identity`]) and gives them to
    /// `transport` ([`Transport::set_identity`]). Returns the new certificate's serial and
    /// validity. The files as they are now count as tried either way.
    ///
    /// # Errors
    ///
    /// What [`load_identity`], [`check_identity`] or [`Transport::set_identity`] refuse; the
    /// transport keeps its identity then.
    pub fn reload(&mut self, transport: &Transport, now: SystemTime) -> Result<CertSummary> {
        self.seen = self.stamps();
        let identity = load_identity(&self.dir, &self.name)?;
        let summary = check_identity(&identity, now)?;
        transport.set_identity(&identity)?;
        Ok(summary)
    }

    /// [`IdentityWatch::reload`] if the files [`changed`](IdentityWatch::changed); `None`
    /// when they did not.
    ///
    /// # Errors
    ///
    /// As [`IdentityWatch::reload`].
    pub fn poll(&mut self, transport: &Transport, now: SystemTime) -> Option<Result<CertSummary>> {
        self.changed().then(|| self.reload(transport, now))
    }
}
