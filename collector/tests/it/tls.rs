//! TLS and mutual TLS on the listener, with certificates made by `openssl` for the test.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::sync::Arc;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use storwatch_collector::client::Client;
use storwatch_collector::config::{Config, OutputConfig, TlsConfig};
use storwatch_test_support::pki::{make_ca, make_cert, CLIENT, SERVER_127};

/// A client trusting `ca.pem` of `dir`, presenting `<name>.pem` and `<name>.key` when named.
fn client(dir: &Path, ca: &str, identity: Option<&str>) -> Client {
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(dir.join(format!("{ca}.pem"))).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let b = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let config = match identity {
        Some(name) => {
            let chain = CertificateDer::pem_file_iter(dir.join(format!("{name}.pem")))
                .unwrap()
                .collect::<Result<Vec<_>, _>>()
                .unwrap();
            let key = PrivateKeyDer::from_pem_file(dir.join(format!("{name}.key"))).unwrap();
            b.with_client_auth_cert(chain, key).unwrap()
        }
        None => b.with_no_client_auth(),
    };
    Client::builder().tls_config(config).build().unwrap()
}

#[tokio::test]
async fn mutual_tls_admits_only_clients_of_the_allowed_ca() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    make_ca(d, "site-ca");
    make_ca(d, "other-ca");
    make_cert(d, "site-ca", "server", SERVER_127);
    make_cert(d, "site-ca", "agent", CLIENT);
    make_cert(d, "other-ca", "stranger", CLIENT);
    std::fs::write(d.join("tokens"), "agents:tls-agents-token-0123456789\n").unwrap();
    std::fs::set_permissions(
        d.join("tokens"),
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();

    let cfg = Config {
        listen: "127.0.0.1:0".into(),
        queue_dir: d.join("queue"),
        token_file: Some(d.join("tokens")),
        tls: TlsConfig {
            cert_file: Some(d.join("server.pem")),
            key_file: Some(d.join("server.key")),
            client_ca_file: Some(d.join("site-ca.pem")),
        },
        outputs: vec![OutputConfig {
            url: "http://127.0.0.1:9".into(),
            db: Some("x".into()),
            ..OutputConfig::default()
        }],
        ..Config::default()
    };
    let collector = storwatch_collector::start(cfg).await.unwrap();
    let url = format!("https://127.0.0.1:{}/write?db=x", collector.addr.port());
    let send = |c: Client, url: String| async move {
        c.post(&url)
            .header("Authorization", "Token tls-agents-token-0123456789")
            .body("disk,host=n1 util_pct=1")
            .send()
            .await
    };
    // The site's agent: admitted.
    let r = send(client(d, "site-ca", Some("agent")), url.clone())
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 204);
    // No client certificate, or one from another CA: the handshake fails.
    assert!(send(client(d, "site-ca", None), url.clone()).await.is_err());
    assert!(send(client(d, "site-ca", Some("stranger")), url.clone())
        .await
        .is_err());
    // A certificate does not replace the token.
    let r = client(d, "site-ca", Some("agent"))
        .post(&url)
        .body("m v=1")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    // A server the client's CA did not sign is not trusted.
    let e = send(client(d, "other-ca", Some("agent")), url.clone())
        .await
        .unwrap_err();
    assert!(e.to_string().contains("certificate"), "{e}");
    // Plain HTTP to the TLS port gets nowhere.
    let plain = format!("http://127.0.0.1:{}/ping", collector.addr.port());
    assert!(Client::new().unwrap().get(&plain).send().await.is_err());
    collector.shutdown().await;
}

/// A TLS key other users can read is refused, naming the fix, as ssh refuses such a key.
#[tokio::test]
async fn a_tls_key_open_to_other_users_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    make_ca(d, "site-ca");
    make_cert(d, "site-ca", "server", SERVER_127);
    std::fs::write(d.join("tokens"), "agents:tls-agents-token-0123456789\n").unwrap();
    std::fs::set_permissions(d.join("tokens"), std::fs::Permissions::from_mode(0o600)).unwrap();
    let cfg = Config {
        listen: "127.0.0.1:0".into(),
        queue_dir: d.join("queue"),
        token_file: Some(d.join("tokens")),
        tls: TlsConfig {
            cert_file: Some(d.join("server.pem")),
            key_file: Some(d.join("server.key")),
            client_ca_file: None,
        },
        outputs: vec![OutputConfig {
            url: "http://127.0.0.1:9".into(),
            db: Some("x".into()),
            ..OutputConfig::default()
        }],
        ..Config::default()
    };
    let key = d.join("server.key");
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let err = storwatch_collector::start(cfg.clone()).await.unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("server.key") && text.contains("chmod 600"),
        "{text}"
    );
    // readable by its group only (root:storwatch 0640): started, with a warning
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o640)).unwrap();
    let collector = storwatch_collector::start(cfg).await.unwrap();
    collector.shutdown().await;
}
