//! Checks that the emulated delay is what was configured, over real QUIC on loopback.
//!
//! [`measure_rtt`] runs two quinn endpoints on 127.0.0.1, each behind a [`NetemSocket`] in its
//! own DC of a two-DC [`WanModel`], and times ping-pongs of a small message over one
//! bidirectional stream. The emulated delay is a lower bound by construction; the report shows
//! how much the timer, the scheduler and QUIC add on top.

use crate::error::{Error, Result};
use crate::model::WanModel;
use crate::socket::{endpoint, NetemSocket};
use quinn::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use redt_proto::{DcId, LinkConditions};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Size of one ping (and of its pong), in bytes.
const PING_BYTES: usize = 32;

/// Round-trip times measured by [`measure_rtt`], in milliseconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RttReport {
    /// The RTT configured on the emulated link, in ms.
    pub configured_ms: f64,
    /// Median measured RTT (nearest rank), in ms.
    pub p50_ms: f64,
    /// 99th-percentile measured RTT (nearest rank), in ms.
    pub p99_ms: f64,
    /// Mean measured RTT, in ms.
    pub mean_ms: f64,
    /// Number of round trips measured.
    pub samples: usize,
}

/// Measures `samples` ping-pong round trips of a 32-byte message over QUIC between two
/// endpoints on 127.0.0.1 whose link is emulated with round-trip time `rtt` (no jitter, loss
/// or rate limit) by two [`NetemSocket`]s. One unmeasured round trip opens the stream first.
///
/// Must run inside a tokio runtime with I/O and time enabled (a multi-thread runtime keeps
/// the measurement free of the caller's own work).
///
/// # Errors
///
/// [`Error::NoSamples`] if `samples` is 0; socket, TLS or QUIC errors otherwise (for example
/// [`Error::Connection`] with a timeout if `rtt` exceeds quinn's idle timeout).
pub async fn measure_rtt(rtt: Duration, samples: usize) -> Result<RttReport> {
    if samples == 0 {
        return Err(Error::NoSamples);
    }
    let (server_dc, client_dc) = (DcId(0), DcId(1));
    let model = Arc::new(Mutex::new(WanModel::new(2)));
    let loopback = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
    let server_socket = NetemSocket::bind(loopback, server_dc, model.clone())?;
    let client_socket = NetemSocket::bind(loopback, client_dc, model.clone())?;
    let server_addr = quinn::AsyncUdpSocket::local_addr(&*server_socket)?;
    let client_addr = quinn::AsyncUdpSocket::local_addr(&*client_socket)?;
    {
        let mut m = model.lock().unwrap_or_else(|p| p.into_inner());
        let link = LinkConditions { rtt, ..LinkConditions::default() };
        m.set_link(server_dc, client_dc, link)?;
        m.set_link(client_dc, server_dc, link)?;
        m.register_addr(server_addr, server_dc);
        m.register_addr(client_addr, client_dc);
    }

    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()])?;
    let cert_der: CertificateDer<'static> = cert.cert.der().clone();
    let key: PrivateKeyDer<'static> = PrivatePkcs8KeyDer::from(cert.signing_key.serialize_der()).into();
    let server_config = quinn::ServerConfig::with_single_cert(vec![cert_der.clone()], key)?;
    let mut roots = quinn::rustls::RootCertStore::empty();
    roots.add(cert_der)?;
    let client_config = quinn::ClientConfig::with_root_certificates(Arc::new(roots))?;

    let server = endpoint(server_socket, quinn::EndpointConfig::default(), Some(server_config))?;
    let client = endpoint(client_socket, quinn::EndpointConfig::default(), None)?;
    let echo = tokio::spawn(echo_one_connection(server.clone()));

    let result = ping_pong(&client, client_config, server_addr, samples).await;
    echo.abort();
    client.close(0u32.into(), b"done");
    server.close(0u32.into(), b"done");
    let mut rtts_ms = result?;
    rtts_ms.sort_by(f64::total_cmp);
    let n = rtts_ms.len();
    Ok(RttReport {
        configured_ms: rtt.as_secs_f64() * 1000.0,
        p50_ms: nearest_rank(&rtts_ms, 0.50),
        p99_ms: nearest_rank(&rtts_ms, 0.99),
        mean_ms: rtts_ms.iter().sum::<f64>() / n as f64,
        samples: n,
    })
}

/// Connects, opens one stream, and returns the round-trip times of `samples` ping-pongs in
/// ms, after one unmeasured round trip.
async fn ping_pong(
    client: &quinn::Endpoint,
    config: quinn::ClientConfig,
    server: SocketAddr,
    samples: usize,
) -> Result<Vec<f64>> {
    let connection = client.connect_with(config, server, "localhost")?.await?;
    let (mut send, mut recv) = connection.open_bi().await?;
    let mut ping = [0u8; PING_BYTES];
    let mut pong = [0u8; PING_BYTES];
    let mut rtts_ms = Vec::with_capacity(samples);
    for i in 0..=samples {
        ping[..8].copy_from_slice(&(i as u64).to_le_bytes());
        let start = tokio::time::Instant::now();
        send.write_all(&ping).await?;
        recv.read_exact(&mut pong).await?;
        if i > 0 {
            rtts_ms.push(start.elapsed().as_secs_f64() * 1000.0);
        }
    }
    connection.close(0u32.into(), b"done");
    Ok(rtts_ms)
}

/// Accepts one connection and one stream on `server` and echoes fixed-size pings until the
/// stream ends.
async fn echo_one_connection(server: quinn::Endpoint) {
    let Some(incoming) = server.accept().await else { return };
    let Ok(connection) = incoming.await else { return };
    let Ok((mut send, mut recv)) = connection.accept_bi().await else { return };
    let mut buf = [0u8; PING_BYTES];
    while recv.read_exact(&mut buf).await.is_ok() {
        if send.write_all(&buf).await.is_err() {
            return;
        }
    }
}

/// Returns the nearest-rank `q`-quantile of the sorted, non-empty `sorted`.
fn nearest_rank(sorted: &[f64], q: f64) -> f64 {
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted.get(rank.saturating_sub(1).min(sorted.len().saturating_sub(1))).copied().unwrap_or(f64::NAN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<f64> = (1..=20).map(f64::from).collect();
        assert_eq!(nearest_rank(&v, 0.5), 10.0);
        assert_eq!(nearest_rank(&v, 0.99), 20.0);
        assert_eq!(nearest_rank(&[3.0], 0.5), 3.0);
        assert!(nearest_rank(&[], 0.5).is_nan());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn zero_samples_is_an_error() {
        assert!(matches!(measure_rtt(Duration::from_millis(1), 0).await, Err(Error::NoSamples)));
    }

    /// A correctness check of the delay, not a speed test: the emulated RTT is a lower bound
    /// by construction, and the median may exceed it only by timer and scheduling slack.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn measured_rtt_matches_configured_20ms() {
        let report = measure_rtt(Duration::from_millis(20), 20).await.unwrap();
        assert_eq!(report.samples, 20);
        assert!(report.p50_ms >= 20.0 && report.p50_ms <= 30.0, "{report:?}");
    }
}
