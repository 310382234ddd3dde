//! The optional `verbs:` section of a topology file: the limits of a node's in-DC verbs
//! server. Its raw shape and the checks of each value; the defaults of the unset
//! ones live with the server (`redt_dc_executor::ServerLimits`).

use super::{Res, Resolver, Text};
use crate::topology::VerbsConfig;
use serde::Deserialize;
use std::time::Duration;

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawVerbs {
    max_connections: Option<u64>,
    max_connections_per_peer: Option<u64>,
    handshake_timeout: Option<Text>,
    first_frame_timeout: Option<Text>,
    idle_timeout: Option<Text>,
}

impl Resolver<'_> {
    /// Parses and checks the `verbs` section: every count set is in
    /// 1..=[`VerbsConfig::MAX_CONNECTIONS`], every duration set above zero and at most
    /// [`TimeoutsConfig::MAX`].
    pub(super) fn verbs(&self, raw: &RawVerbs) -> Res<VerbsConfig> {
        Ok(VerbsConfig {
            max_connections: self.connections("max_connections", raw.max_connections)?,
            max_connections_per_peer: self.connections("max_connections_per_peer", raw.max_connections_per_peer)?,
            handshake_timeout: self.verbs_timeout("handshake_timeout", &raw.handshake_timeout)?,
            first_frame_timeout: self.verbs_timeout("first_frame_timeout", &raw.first_frame_timeout)?,
            idle_timeout: self.verbs_timeout("idle_timeout", &raw.idle_timeout)?,
        })
    }

    /// One connection count at `verbs.{key}`, if set.
    fn connections(&self, key: &str, raw: Option<u64>) -> Res<Option<u64>> {
        match raw {
            None => Ok(None),
            Some(0) => Err(self.invalid(format!("verbs.{key}"), "must be at least 1")),
            Some(n) if n > VerbsConfig::MAX_CONNECTIONS => Err(self.invalid(
                format!("verbs.{key}"),
                format!("{n} is more than {}, the largest cap allowed", VerbsConfig::MAX_CONNECTIONS),
            )),
            Some(n) => Ok(Some(n)),
        }
    }

    /// One duration at `verbs.{key}`, if set (above zero, at most the largest timeout).
    fn verbs_timeout(&self, key: &str, raw: &Option<Text>) -> Res<Option<Duration>> {
        self.bounded_duration(&format!("verbs.{key}"), raw, false)
    }
}
