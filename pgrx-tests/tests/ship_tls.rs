//! The shipper over TLS (docs/operations.md, Push ingestion): a server whose certificate a test
//! CA signed (made here with `openssl`), reachable over TCP only with TLS (`hostnossl ... reject`),
//! and `cortex-buffer-ship --once` with each `sslmode`:
//!
//! - `verify-full` with the CA, by the certificate's host name: connects, pushes, and the server
//!   logs the session as TLS;
//! - `verify-full` by another name (the IP address): refused, the name does not match;
//! - `verify-ca` by that address: connects (the chain is checked, not the name);
//! - `verify-ca` or `verify-full` with another CA: refused;
//! - `require` without a root certificate: connects, with the warning at start;
//! - `disable`: refused by the server, so every success above was encrypted.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use cortex_buffer_e2e::{wait_for, Cluster};

const JOB: &str = "0193a8b2-7c41-7d2e-9f00-00000000d001";

fn ship_bin() -> PathBuf {
    std::env::var("CORTEX_SHIP_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|_| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/debug/cortex-buffer-ship"))
}

fn openssl(dir: &Path, args: &[&str]) {
    let out =
        Command::new("openssl").current_dir(dir).args(args).output().expect("openssl (scripts/lib.sh installs it)");
    assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// A CA, a server certificate it signed for `localhost`, and another CA.
fn certificates(dir: &Path) {
    std::fs::create_dir_all(dir).expect("cert dir");
    for ca in ["ca", "other-ca"] {
        openssl(
            dir,
            &[
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-keyout",
                &format!("{ca}.key"),
                "-out",
                &format!("{ca}.crt"),
                "-days",
                "2",
                "-subj",
                &format!("/CN=cortex_buffer test {ca}"),
            ],
        );
    }
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
            "-subj",
            "/CN=localhost",
        ],
    );
    std::fs::write(
        dir.join("server.ext"),
        "subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n",
    )
    .expect("ext");
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.crt",
            "-days",
            "2",
            "-extfile",
            "server.ext",
        ],
    );
    Command::new("chown").args(["-R", "postgres"]).arg(dir).status().expect("chown");
    Command::new("chmod").arg("600").arg(dir.join("server.key")).status().expect("chmod");
}

/// Runs the shipper `--once` with `dsn`: Ok(its log) when it finished, Err(its log) once it
/// said it cannot connect (it would retry forever).
fn ship_once(c: &Cluster, dir: &Path, dsn: &str) -> Result<String, String> {
    let token = c.psql("SELECT cortex_buffer.push_source_token('tls-node')");
    let mut child = Command::new(ship_bin())
        .env("CB_SHIP_SOURCE_TOKEN", token)
        .args(["--sessions-dir", &dir.display().to_string(), "--source", "tls-node", "--dsn", dsn, "--once"])
        .args(["--poll-interval", "50", "--settle", "0"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e} (build it: cargo build -p cortex_buffer_ship)", ship_bin().display()));
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut log = String::new();
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        while let Ok(line) = rx.try_recv() {
            log.push_str(&line);
            log.push('\n');
        }
        if log.contains("\"cannot connect\"") {
            let _ = child.kill();
            let _ = child.wait();
            return Err(log);
        }
        if let Ok(Some(status)) = child.try_wait() {
            std::thread::sleep(Duration::from_millis(50));
            while let Ok(line) = rx.try_recv() {
                log.push_str(&line);
                log.push('\n');
            }
            assert!(status.success(), "the shipper failed otherwise: {log}\n{}", c.log_tail());
            return Ok(log);
        }
        assert!(Instant::now() < until, "the shipper neither finished nor failed to connect: {log}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_shipper_verifies_the_server_as_its_sslmode_says() {
    let c = Cluster::new(
        "shiptls",
        &["listen_addresses = '127.0.0.1'", "log_connections = on", "cortex_buffer.settle_period = '1s'"],
    );
    let certs = c.base.join("certs");
    certificates(&certs);
    let conf = c.pgdata.join("postgresql.conf");
    let mut text = std::fs::read_to_string(&conf).expect("postgresql.conf");
    text.push_str(&format!(
        "ssl = on\nssl_cert_file = '{0}/server.crt'\nssl_key_file = '{0}/server.key'\n",
        certs.display()
    ));
    std::fs::write(&conf, text).expect("write postgresql.conf");
    // Over TCP the shipper's login gets in with TLS only.
    let hba = c.pgdata.join("pg_hba.conf");
    let text = std::fs::read_to_string(&hba).expect("pg_hba.conf");
    std::fs::write(
        &hba,
        format!("hostssl all shipper 127.0.0.1/32 trust\nhostnossl all shipper 127.0.0.1/32 reject\n{text}"),
    )
    .expect("write pg_hba.conf");
    c.start();
    c.create_extension();
    c.psql("CREATE ROLE shipper LOGIN; GRANT cortex_buffer_pusher TO shipper");
    c.psql("INSERT INTO cortex_buffer.push_source (source, login, all_jobs) VALUES ('tls-node', 'shipper', true)");
    let node = c.base.join("node");
    std::fs::create_dir_all(node.join(JOB)).expect("node dir");
    let line = format!(r#"{{"type":"A","timestamp":"2026-02-23T14:30:00.000Z","job_id":"{JOB}","seq":0}}"#);
    std::fs::write(node.join(JOB).join("session-001.jsonl"), line + "\n").expect("session file");

    let base = format!("port={} user=shipper dbname=postgres", c.port);
    let ca = certs.join("ca.crt").display().to_string();
    let other = certs.join("other-ca.crt").display().to_string();
    let by_name = format!("host=localhost hostaddr=127.0.0.1 {base}");
    let by_address = format!("host=127.0.0.1 {base}");

    let log =
        ship_once(&c, &node, &format!("{by_name} sslmode=verify-full sslrootcert={ca}")).expect("verify-full by name");
    assert!(!log.contains("not verified"), "{log}");
    wait_for(Duration::from_secs(10), || {
        c.psql("SELECT count(*) FROM cortex_buffer.pushed_offsets('tls-node') WHERE committed_offset > 0") == "1"
    })
    .expect("the file was pushed over TLS");
    assert!(
        c.log_text().contains("application_name=cortex-buffer-ship SSL enabled"),
        "the server logs the shipper's session as TLS:\n{}",
        c.log_tail()
    );
    let refused = ship_once(&c, &node, &format!("{by_address} sslmode=verify-full sslrootcert={ca}"))
        .expect_err("verify-full by a name the certificate does not hold");
    assert!(refused.contains("NotValidForName") || refused.contains("not valid for name"), "{refused}");
    ship_once(&c, &node, &format!("{by_address} sslmode=verify-ca sslrootcert={ca}")).expect("verify-ca by address");
    for mode in ["verify-ca", "verify-full"] {
        let refused = ship_once(&c, &node, &format!("{by_name} sslmode={mode} sslrootcert={other}"))
            .expect_err("a certificate another CA signed");
        assert!(refused.contains("UnknownIssuer") || refused.contains("unknown issuer"), "{mode}: {refused}");
    }
    let log = ship_once(&c, &node, &format!("{by_name} sslmode=require")).expect("require");
    assert!(log.contains("sslmode=require without a root certificate"), "the warning at start: {log}");
    let refused = ship_once(&c, &node, &format!("{by_name} sslmode=disable")).expect_err("plain text is refused");
    assert!(refused.contains("pg_hba.conf rejects"), "{refused}");
    // A bad sslmode or an unreadable root certificate is a bad argument (exit 2), said at start.
    for dsn in
        [format!("{by_name} sslmode=verify"), format!("{by_name} sslmode=verify-full sslrootcert=/nonexistent.pem")]
    {
        let out = Command::new(ship_bin())
            .env("CB_SHIP_SOURCE_TOKEN", c.psql("SELECT cortex_buffer.push_source_token('tls-node')"))
            .args(["--sessions-dir", &node.display().to_string(), "--source", "tls-node", "--dsn", &dsn, "--once"])
            .output()
            .expect("shipper");
        assert_eq!(out.status.code(), Some(2), "{dsn}: {}", String::from_utf8_lossy(&out.stderr));
    }
    eprintln!("tls: verify-full, verify-ca and require connect as they should; a wrong name, a wrong CA and plain text do not");
}
