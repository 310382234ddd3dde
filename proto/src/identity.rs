//! Who a cluster certificate says its holder is: the `redt://` URI a certificate carries as a
//! subject alternative name.
//!
//! The cluster CA (`redt certs init`, `redt_transport::ClusterCa`) writes one
//! URI SAN into every certificate it issues; servers that must know more than "signed by the
//! cluster CA" read it back after the TLS handshake. The in-DC verbs transports
//! (`redt-dc-executor`'s TCP verbs server and RDMA bootstrap) accept only
//! [`CertIdentity::Node`] of their own DC; the nodes serve admin requests (`redt netem set`,
//! what a drill sends) to [`CertIdentity::Operator`] only.
//!
//! # Format
//! - a node: `redt://node/<dc>/<node>`, e.g. `redt://node/dc1/dc1-n2`;
//! - a non-node client: `redt://client/<name>`, e.g. `redt://client/redt-client`;
//! - an operator: `redt://operator/<name>`, e.g. `redt://operator/redt-operator`.
//!
//! Each component is percent-encoded: every byte other than an ASCII letter, digit, `-`,
//! `.`, `_` or `~` is written `%XX` (upper-case hex), so DC names with spaces or slashes
//! survive and the URI stays IA5 (ASCII), as X.509 requires. Parsing is strict: any other
//! shape, an empty component, a bad escape or a component that is not UTF-8 is no identity.

use std::fmt;

/// The scheme and separator every identity URI starts with.
const SCHEME: &str = "redt://";

/// The role and name a cluster certificate carries (see the module docs for its URI).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum CertIdentity {
    /// A node of the cluster: its DC's name and its own name, as in the topology file.
    Node {
        /// The DC's name (`dcs[i].name`).
        dc: String,
        /// The node's name (`dcs[i].nodes[j].name`).
        name: String,
    },
    /// A non-node client (the `redt client` CLI's identity): transactions and status only.
    Client {
        /// The certificate's name.
        name: String,
    },
    /// An operator: a client that may also change the cluster outside transactions
    /// (`redt netem set`, drills).
    Operator {
        /// The certificate's name.
        name: String,
    },
}

impl CertIdentity {
    /// Returns the identity as its `redt://` URI (see the module docs).
    pub fn to_uri(&self) -> String {
        match self {
            CertIdentity::Node { dc, name } => format!("{SCHEME}node/{}/{}", encode(dc), encode(name)),
            CertIdentity::Client { name } => format!("{SCHEME}client/{}", encode(name)),
            CertIdentity::Operator { name } => format!("{SCHEME}operator/{}", encode(name)),
        }
    }

    /// The role's name as the URI writes it: `node`, `client` or `operator`.
    pub fn role(&self) -> &'static str {
        match self {
            CertIdentity::Node { .. } => "node",
            CertIdentity::Client { .. } => "client",
            CertIdentity::Operator { .. } => "operator",
        }
    }

    /// Parses a `redt://` URI written by [`CertIdentity::to_uri`]; `None` for anything else
    /// (another scheme, a wrong number of components, an empty component, a bad escape).
    pub fn from_uri(uri: &str) -> Option<CertIdentity> {
        let rest = uri.strip_prefix(SCHEME)?;
        let parts: Vec<&str> = rest.split('/').collect();
        match parts.as_slice() {
            ["node", dc, name] => Some(CertIdentity::Node { dc: decode(dc)?, name: decode(name)? }),
            ["client", name] => Some(CertIdentity::Client { name: decode(name)? }),
            ["operator", name] => Some(CertIdentity::Operator { name: decode(name)? }),
            _ => None,
        }
    }
}

impl fmt::Display for CertIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CertIdentity::Node { dc, name } => write!(f, "node {name} of DC {dc}"),
            CertIdentity::Client { name } => write!(f, "client {name}"),
            CertIdentity::Operator { name } => write!(f, "operator {name}"),
        }
    }
}

/// Whether `b` is written as itself in a component.
fn unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for &b in s.as_bytes() {
        if unreserved(b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn decode(s: &str) -> Option<String> {
    if s.is_empty() {
        return None;
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = bytes.get(i + 1..i + 3)?;
                let hex = std::str::from_utf8(hex).ok()?;
                if !hex.bytes().all(|c| c.is_ascii_hexdigit()) {
                    return None;
                }
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b if unreserved(b) => {
                out.push(b);
                i += 1;
            }
            _ => return None,
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn uris_are_as_documented() {
        let node = CertIdentity::Node { dc: "dc1".into(), name: "dc1-n2".into() };
        assert_eq!(node.to_uri(), "redt://node/dc1/dc1-n2");
        let client = CertIdentity::Client { name: "redt-client".into() };
        assert_eq!(client.to_uri(), "redt://client/redt-client");
        let operator = CertIdentity::Operator { name: "alice".into() };
        assert_eq!(operator.to_uri(), "redt://operator/alice");
        assert_eq!(CertIdentity::from_uri("redt://operator/alice"), Some(operator));
        let odd = CertIdentity::Node { dc: "eu west/1".into(), name: "n".into() };
        assert_eq!(odd.to_uri(), "redt://node/eu%20west%2F1/n");
        assert_eq!(CertIdentity::from_uri(&odd.to_uri()), Some(odd));
    }

    #[test]
    fn anything_else_is_no_identity() {
        for bad in [
            "",
            "redt://",
            "redt://node/dc1",
            "redt://node/dc1/n/extra",
            "redt://node//n",
            "redt://operator/",
            "redt://operator/a/b",
            "redt://admin/x",
            "https://node/dc1/n",
            "redt://node/dc1/n%2",
            "redt://node/dc1/n%zz",
            "redt://node/dc1/n%FF",
            "redt://node/dc 1/n",
            "redt://client/",
        ] {
            assert_eq!(CertIdentity::from_uri(bad), None, "{bad:?}");
        }
    }

    proptest! {
        #[test]
        fn every_identity_round_trips(dc in ".{1,12}", name in ".{1,12}", role in 0..3u8) {
            let id = match role {
                0 => CertIdentity::Node { dc, name },
                1 => CertIdentity::Client { name },
                _ => CertIdentity::Operator { name },
            };
            let uri = id.to_uri();
            prop_assert!(uri.is_ascii());
            prop_assert_eq!(CertIdentity::from_uri(&uri), Some(id));
        }

        #[test]
        fn arbitrary_text_never_panics(s in ".{0,40}") {
            let _ = CertIdentity::from_uri(&s);
        }
    }
}
