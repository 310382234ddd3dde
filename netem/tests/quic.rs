//! QUIC through `NetemSocket`s on loopback: a partition made at run time stalls a live
//! connection, and healing it lets the connection carry on (docs/design.md §4).

use quinn::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use redt_netem::{endpoint, NetemSocket, WanModel};
use redt_proto::{DcId, LinkConditions};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const A: DcId = DcId(0);
const B: DcId = DcId(1);

struct Setup {
    model: Arc<Mutex<WanModel>>,
    client_socket: Arc<NetemSocket>,
    server_socket: Arc<NetemSocket>,
    client: quinn::Endpoint,
    server: quinn::Endpoint,
    client_config: quinn::ClientConfig,
}

fn setup(rtt: Duration) -> Setup {
    let model = Arc::new(Mutex::new(WanModel::new(2)));
    let server_socket = NetemSocket::bind_with_seed("127.0.0.1:0".parse().unwrap(), A, model.clone(), 1).unwrap();
    let client_socket = NetemSocket::bind_with_seed("127.0.0.1:0".parse().unwrap(), B, model.clone(), 2).unwrap();
    {
        let mut m = model.lock().unwrap();
        let link = LinkConditions { rtt, ..LinkConditions::default() };
        m.set_link(A, B, link).unwrap();
        m.set_link(B, A, link).unwrap();
        m.register_addr(quinn::AsyncUdpSocket::local_addr(&*server_socket).unwrap(), A);
        m.register_addr(quinn::AsyncUdpSocket::local_addr(&*client_socket).unwrap(), B);
    }
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let cert_der: CertificateDer<'static> = cert.cert.der().clone();
    let key: PrivateKeyDer<'static> = PrivatePkcs8KeyDer::from(cert.signing_key.serialize_der()).into();
    let server_config = quinn::ServerConfig::with_single_cert(vec![cert_der.clone()], key).unwrap();
    let mut roots = quinn::rustls::RootCertStore::empty();
    roots.add(cert_der).unwrap();
    let client_config = quinn::ClientConfig::with_root_certificates(Arc::new(roots)).unwrap();
    let server = endpoint(server_socket.clone(), quinn::EndpointConfig::default(), Some(server_config)).unwrap();
    let client = endpoint(client_socket.clone(), quinn::EndpointConfig::default(), None).unwrap();
    Setup { model, client_socket, server_socket, client, server, client_config }
}

async fn echo(server: quinn::Endpoint) {
    let conn = server.accept().await.unwrap().await.unwrap();
    let (mut send, mut recv) = conn.accept_bi().await.unwrap();
    let mut buf = [0u8; 8];
    while recv.read_exact(&mut buf).await.is_ok() {
        send.write_all(&buf).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partition_at_run_time_stalls_then_heals() {
    let s = setup(Duration::from_millis(10));
    tokio::spawn(echo(s.server.clone()));
    let server_addr = s.server.local_addr().unwrap();
    let conn = s.client.connect_with(s.client_config.clone(), server_addr, "localhost").unwrap().await.unwrap();
    let (mut send, mut recv) = conn.open_bi().await.unwrap();
    let mut buf = [0u8; 8];
    send.write_all(&1u64.to_le_bytes()).await.unwrap();
    recv.read_exact(&mut buf).await.unwrap();
    assert_eq!(buf, 1u64.to_le_bytes());

    s.model.lock().unwrap().set_isolated(B, true).unwrap();
    let before = s.client_socket.stats().dropped_partition;
    send.write_all(&2u64.to_le_bytes()).await.unwrap();
    // quinn keeps retransmitting into the partition; wait until some of it is dropped.
    for _ in 0..500 {
        if s.client_socket.stats().dropped_partition > before {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(s.client_socket.stats().dropped_partition > before);

    s.model.lock().unwrap().set_isolated(B, false).unwrap();
    tokio::time::timeout(Duration::from_secs(20), recv.read_exact(&mut buf)).await.unwrap().unwrap();
    assert_eq!(buf, 2u64.to_le_bytes());
    let (c, v) = (s.client_socket.stats(), s.server_socket.stats());
    assert!(c.delayed > 0 && v.delayed > 0 && c.sent > 0 && v.sent > 0, "{c:?} {v:?}");
    conn.close(0u32.into(), b"done");
}
