//! A test PKI made with `openssl`: CAs, and certificates they sign for a server on 127.0.0.1 or
//! for a client. Keys are P-256, certificates valid for two days; each name `N` leaves `N.key`
//! and `N.pem` in the directory.

use std::path::Path;
use std::process::Command;

/// Extensions of a server certificate for 127.0.0.1.
pub const SERVER_127: &str = "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n";
/// Extensions of a client certificate.
pub const CLIENT: &str = "extendedKeyUsage=clientAuth\n";

const EC_KEY: [&str; 5] = [
    "-newkey",
    "ec",
    "-pkeyopt",
    "ec_paramgen_curve:prime256v1",
    "-nodes",
];

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run openssl");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A self-signed CA `name` in `dir` (`name.key`, `name.pem`, subject `CN=name`).
pub fn make_ca(dir: &Path, name: &str) {
    let (key, pem, subj) = (
        format!("{name}.key"),
        format!("{name}.pem"),
        format!("/CN={name}"),
    );
    let mut args = vec!["req", "-x509"];
    args.extend(EC_KEY);
    args.extend([
        "-keyout",
        &key,
        "-out",
        &pem,
        "-days",
        "2",
        "-subj",
        &subj,
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
    ]);
    openssl(dir, &args);
}

/// A certificate `name` signed by CA `ca` of the same directory, with the extensions `ext`
/// ([`SERVER_127`], [`CLIENT`]).
pub fn make_cert(dir: &Path, ca: &str, name: &str, ext: &str) {
    let (key, csr, pem, extfile, subj) = (
        format!("{name}.key"),
        format!("{name}.csr"),
        format!("{name}.pem"),
        format!("{name}.ext"),
        format!("/CN={name}"),
    );
    let (ca_pem, ca_key) = (format!("{ca}.pem"), format!("{ca}.key"));
    std::fs::write(dir.join(&extfile), ext).unwrap();
    let mut req = vec!["req"];
    req.extend(EC_KEY);
    req.extend(["-keyout", &key, "-out", &csr, "-subj", &subj]);
    openssl(dir, &req);
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            &ca_pem,
            "-CAkey",
            &ca_key,
            "-CAcreateserial",
            "-days",
            "2",
            "-out",
            &pem,
            "-extfile",
            &extfile,
        ],
    );
}

/// A site's PKI in `dir`: CA `ca`, a server certificate `server` for 127.0.0.1 and a client
/// certificate `agent`, both signed by it.
pub fn make_site(dir: &Path) {
    make_ca(dir, "ca");
    make_cert(dir, "ca", "server", SERVER_127);
    make_cert(dir, "ca", "agent", CLIENT);
}
