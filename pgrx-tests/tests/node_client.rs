//! The TypeScript client (`clients/node/`, `@cortex-buffer/client`) against a real cluster: its
//! own tests (`npm test`: `tsc --strict`, then `node:test` on dispatch, the pod's calls, typed
//! errors, plans, `resume()`, the session writer, rollover and the Graphile Worker tasks), and a
//! newcomer's project (`clients/node/scripts/newcomer.sh`): the packed tarball installed into an
//! empty project whose few lines dispatch a job, kill its pod mid-call and resume it.

use std::path::{Path, PathBuf};
use std::process::Command;

use cortex_buffer_e2e::Cluster;

fn client() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../clients/node")
}

/// Runs `program args` in the client's directory with the cluster's connection in the standard
/// PostgreSQL variables and its sessions directory in `CORTEX_SESSIONS_DIR`.
fn run_against(c: &Cluster, program: &str, args: &[&str]) -> (bool, String) {
    let out = Command::new(program)
        .args(args)
        .current_dir(client())
        .env("PGHOST", &c.socket_dir)
        .env("PGPORT", c.port.to_string())
        .env("PGUSER", "postgres")
        .env("PGDATABASE", "postgres")
        .env("CORTEX_SESSIONS_DIR", &c.sessions)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

fn cluster(name: &str) -> Cluster {
    // The worker stays on: the client's pods rely on recovery_plan's call-time catch-up and on
    // index_now(), as real pods do.
    let c = Cluster::new(name, &["cortex_buffer.settle_period = 0"]);
    c.start();
    c.create_extension();
    let _ = Command::new("chown").args(["-R", "postgres:postgres"]).arg(&c.sessions).status();
    c
}

/// One test, not two: both build the package in `clients/node/` (`dist/`), which two builds at
/// once would race on.
#[test]
fn the_clients_tests_and_a_newcomers_project_pass_against_a_real_cluster() {
    assert!(
        client().join("node_modules/pg").exists(),
        "clients/node/node_modules is missing: scripts/lib.sh installs it (npm ci in clients/node)"
    );
    let c = cluster("node-client");
    let (ok, text) = run_against(&c, "npm", &["test", "--silent"]);
    assert!(ok, "npm test in clients/node failed:\n{text}\n{}", c.log_tail());
    assert!(text.contains("# fail 0"), "{text}");
    // The newcomer's project: the packed tarball in an empty project, dispatch, a pod killed
    // mid-call, the next pod resumed (clients/node/examples/newcomer/newcomer.mjs asserts it).
    let (ok, text) = run_against(&c, "bash", &["scripts/newcomer.sh"]);
    assert!(ok, "clients/node/scripts/newcomer.sh failed:\n{text}\n{}", c.log_tail());
}
