//! Where a node is reached: an IP address or a host name, and a port (a node's `advertise`
//! address in the topology file).
//!
//! A host name is kept as written and resolved only when a peer connects
//! ([`HostPort::resolve`]), so a node whose peer's name does not resolve yet still starts,
//! and a name that moves to another IP is followed at the next connection.

use std::fmt;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::str::FromStr;

/// The host part of a [`HostPort`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Host {
    /// An IP address (v4 or v6).
    Ip(IpAddr),
    /// A DNS host name (`db1.eu.example.net`), lowercase, resolved when connecting.
    Name(String),
}

impl Host {
    /// Whether the host is this machine by definition: a loopback IP (`127.0.0.0/8`, `::1`)
    /// or the name `localhost`.
    pub fn is_loopback(&self) -> bool {
        match self {
            Host::Ip(ip) => ip.is_loopback(),
            Host::Name(n) => n == "localhost",
        }
    }

    /// Whether `self` and `other` name one machine as far as the topology can tell: both are
    /// loopback ([`Host::is_loopback`]), or they are the same IP address or the same host
    /// name. Two different names (or a name and an IP) are taken as two machines, even when
    /// DNS would map them to one.
    pub fn same_machine(&self, other: &Host) -> bool {
        (self.is_loopback() && other.is_loopback()) || self == other
    }
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Ip(ip) => write!(f, "{ip}"),
            Host::Name(n) => f.write_str(n),
        }
    }
}

/// A host (IP address or host name) and a port: `10.0.0.7:7100`, `[2001:db8::7]:7100`,
/// `db1.eu.example.net:7100`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct HostPort {
    /// The host.
    pub host: Host,
    /// The port (UDP for QUIC, TCP for the in-DC verbs and the RDMA bootstrap).
    pub port: u16,
}

/// A host name that does not resolve, or resolves to no address.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("cannot resolve `{host}`: {why}")]
pub struct ResolveError {
    /// The host name as written.
    pub host: String,
    /// What the resolver said.
    pub why: String,
}

impl HostPort {
    /// The socket address, when the host is an IP address (`None` for a host name).
    pub fn socket_addr(&self) -> Option<SocketAddr> {
        match self.host {
            Host::Ip(ip) => Some(SocketAddr::new(ip, self.port)),
            Host::Name(_) => None,
        }
    }

    /// The IP address, when the host is one (`None` for a host name).
    pub fn ip(&self) -> Option<IpAddr> {
        match self.host {
            Host::Ip(ip) => Some(ip),
            Host::Name(_) => None,
        }
    }

    /// Every socket address the host stands for: itself for an IP address, what the system
    /// resolver (`getaddrinfo`: `/etc/hosts`, DNS) answers for a name, in its order. Blocks
    /// while a name is looked up.
    ///
    /// # Errors
    /// [`ResolveError`] when the name does not resolve or resolves to no address.
    pub fn resolve(&self) -> Result<Vec<SocketAddr>, ResolveError> {
        let name = match &self.host {
            Host::Ip(ip) => return Ok(vec![SocketAddr::new(*ip, self.port)]),
            Host::Name(n) => n,
        };
        let error = |why: String| ResolveError { host: name.clone(), why };
        let addrs: Vec<SocketAddr> =
            (name.as_str(), self.port).to_socket_addrs().map_err(|e| error(e.to_string()))?.collect();
        if addrs.is_empty() {
            return Err(error("it resolves to no address".into()));
        }
        Ok(addrs)
    }

    /// The first address [`HostPort::resolve`] gives of the family of `local` (IPv4 or IPv6),
    /// the family a socket bound to `local` can reach.
    ///
    /// # Errors
    /// As [`HostPort::resolve`]; also when the name resolves to addresses of the other
    /// family only.
    pub fn resolve_for(&self, local: SocketAddr) -> Result<SocketAddr, ResolveError> {
        let addrs = self.resolve()?;
        addrs.iter().copied().find(|a| a.is_ipv4() == local.is_ipv4()).ok_or_else(|| ResolveError {
            host: self.host.to_string(),
            why: format!(
                "it resolves to {} only, and this socket is {}",
                addrs.iter().map(|a| a.ip().to_string()).collect::<Vec<_>>().join(", "),
                if local.is_ipv4() { "IPv4" } else { "IPv6" }
            ),
        })
    }
}

impl From<SocketAddr> for HostPort {
    fn from(addr: SocketAddr) -> HostPort {
        HostPort { host: Host::Ip(addr.ip()), port: addr.port() }
    }
}

impl fmt::Display for HostPort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.host {
            Host::Ip(IpAddr::V6(ip)) => write!(f, "[{ip}]:{}", self.port),
            host => write!(f, "{host}:{}", self.port),
        }
    }
}

/// Longest DNS name (RFC 1035, without the trailing dot).
const MAX_NAME_BYTES: usize = 253;
/// Longest label of a DNS name.
const MAX_LABEL_BYTES: usize = 63;

/// Checks a host name: dot-separated labels of ASCII letters, digits and `-`, none empty,
/// longer than 63 bytes or starting or ending with `-`, at most 253 bytes in all, not all
/// digits and dots (that would be a malformed IPv4 address).
fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("the host is empty".into());
    }
    if name.len() > MAX_NAME_BYTES {
        return Err(format!("the host name is longer than {MAX_NAME_BYTES} bytes"));
    }
    if name.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return Err(format!("`{name}` is not a valid IPv4 address"));
    }
    for label in name.split('.') {
        let ok = !label.is_empty()
            && label.len() <= MAX_LABEL_BYTES
            && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            && !label.starts_with('-')
            && !label.ends_with('-');
        if !ok {
            return Err(format!(
                "`{name}` is neither an IP address nor a host name (labels of letters, digits and `-`, \
                 separated by dots)"
            ));
        }
    }
    Ok(())
}

impl FromStr for HostPort {
    type Err = String;

    /// Parses `HOST:PORT`: an IPv4 address, an IPv6 address in brackets, or a host name
    /// (lowercased), then a port from 0 to 65535.
    fn from_str(s: &str) -> Result<HostPort, String> {
        let s = s.trim();
        if let Ok(addr) = s.parse::<SocketAddr>() {
            return Ok(addr.into());
        }
        let expected = "expected HOST:PORT, with an IPv4 address, an [IPv6] address in brackets or a host name";
        let (host, port) = s.rsplit_once(':').ok_or_else(|| format!("`{s}` has no port: {expected}"))?;
        let port: u16 = port.parse().map_err(|_| format!("`{port}` in `{s}` is not a port (0 to 65535)"))?;
        if host.starts_with('[') || host.contains(':') {
            return Err(format!("`{host}` is not a valid IPv6 address: {expected}"));
        }
        check_name(host).map_err(|why| format!("{why}: {expected}"))?;
        Ok(HostPort { host: Host::Name(host.to_ascii_lowercase()), port })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ips_names_and_refuses_the_rest() {
        let p = |s: &str| s.parse::<HostPort>();
        assert_eq!(p("10.0.0.7:7100").unwrap().socket_addr(), Some("10.0.0.7:7100".parse().unwrap()));
        assert_eq!(p("[::1]:7100").unwrap().to_string(), "[::1]:7100");
        let named = p("DB1.eu.Example.net:7100").unwrap();
        assert_eq!(named.host, Host::Name("db1.eu.example.net".into()));
        assert_eq!((named.to_string(), named.ip()), ("db1.eu.example.net:7100".into(), None));
        for bad in
            ["db1", "db1:", "db1:70000", "-db1:7100", "db_1:7100", "a..b:7100", "::1:7100", "[::1:7100", "10.0.0:7100"]
        {
            assert!(p(bad).is_err(), "{bad} parsed");
        }
        assert!(p("10.0.0:7100").unwrap_err().contains("not a valid IPv4 address"));
    }

    #[test]
    fn same_machine_is_loopback_or_equal_hosts() {
        let h = |s: &str| s.parse::<HostPort>().unwrap().host;
        assert!(h("127.0.1.1:1").same_machine(&h("127.0.2.2:1")));
        assert!(h("localhost:1").same_machine(&h("[::1]:1")));
        assert!(h("db1:1").same_machine(&h("DB1:1")));
        assert!(!h("10.0.0.1:1").same_machine(&h("10.0.0.2:1")));
        assert!(!h("db1:1").same_machine(&h("10.0.0.1:1")));
    }

    #[test]
    fn resolving_an_ip_needs_no_resolver_and_a_bad_name_says_which() {
        let ip: HostPort = "10.0.0.7:7100".parse().unwrap();
        assert_eq!(ip.resolve().unwrap(), vec!["10.0.0.7:7100".parse::<SocketAddr>().unwrap()]);
        let local: HostPort = "localhost:7100".parse().unwrap();
        assert!(local.resolve().is_ok_and(|a| a.iter().all(|a| a.ip().is_loopback())));
        // `.invalid` never resolves (RFC 2606).
        let bad: HostPort = "nowhere.invalid:7100".parse().unwrap();
        let e = bad.resolve().unwrap_err();
        assert_eq!(e.host, "nowhere.invalid");
        assert!(e.to_string().starts_with("cannot resolve `nowhere.invalid`: "), "{e}");
    }
}
