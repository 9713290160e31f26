//! Graphile Worker, the control plane's own job runner (npm graphile-worker, installed by
//! scripts/lib.sh into examples/graphile/), running the example crontab with the TypeScript
//! client's packaged tasks (`@cortex-buffer/client/graphile`, from its packed tarball) for real
//! against a cluster: the reaper turns a zombie into RETRYING and re-enqueues it after its
//! retry_after, and the retention cleanup deletes a terminal job's directory.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use cortex_buffer_e2e::{wait_for, Cluster};

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/graphile")
}

fn client() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../clients/node")
}

/// Installs the client's packed tarball as `dir/node_modules/@cortex-buffer/client` (what `npm
/// install` of the tarball puts there; its one dependency, pg, linked from the client's own
/// node_modules). The tarball is `$CORTEX_CLIENT_TARBALL` (scripts/test.sh packs it once, so
/// that no test reads `clients/node/dist` while another rebuilds it), else packed here.
fn install_client(dir: &Path) {
    let tarball = match std::env::var("CORTEX_CLIENT_TARBALL") {
        Ok(t) => PathBuf::from(t),
        Err(_) => {
            let out = Command::new("npm")
                .args(["pack", "--silent", "--pack-destination"])
                .arg(dir)
                .current_dir(client())
                .output()
                .unwrap_or_else(|e| panic!("npm pack: {e}"));
            assert!(out.status.success(), "npm pack: {}", String::from_utf8_lossy(&out.stderr));
            dir.join(String::from_utf8_lossy(&out.stdout).trim().lines().last().unwrap_or_default())
        }
    };
    let target = dir.join("node_modules/@cortex-buffer/client");
    fs::create_dir_all(&target).unwrap_or_else(|e| panic!("{e}"));
    let out = Command::new("tar")
        .args(["xzf"])
        .arg(&tarball)
        .args(["--strip-components=1", "-C"])
        .arg(&target)
        .output()
        .unwrap_or_else(|e| panic!("tar: {e}"));
    assert!(out.status.success(), "tar {}: {}", tarball.display(), String::from_utf8_lossy(&out.stderr));
    std::os::unix::fs::symlink(client().join("node_modules/pg"), dir.join("node_modules/pg"))
        .unwrap_or_else(|e| panic!("{e}"));
}

/// The worker, killed when the test ends.
struct Worker(Child);
impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn graphile_worker_reaps_re_enqueues_and_cleans_up_on_its_crontab() {
    let c = Cluster::new("graphile", &["cortex_buffer.worker_enabled = off"]);
    c.start();
    c.create_extension();
    let zombie = c.psql(
        "INSERT INTO cortex_buffer.job (agent_id, status, attempt, started_at, heartbeat_at)
         VALUES (gen_random_uuid(), 'RUNNING', 1, now() - interval '1 hour', now() - interval '10 minutes') RETURNING id",
    );
    let done = c.psql(
        "INSERT INTO cortex_buffer.job (agent_id, status, completed_at)
         VALUES (gen_random_uuid(), 'COMPLETED', now() - interval '2 days') RETURNING id",
    );
    c.put(
        &format!("{done}/session-001.jsonl"),
        &format!(r#"{{"type":"SESSION_START","timestamp":"2026-02-23T14:30:00.000Z","job_id":"{done}","session_id":"s","seq":0}}"#),
    );
    let _ = Command::new("chown").args(["-R", "postgres:postgres"]).arg(&c.sessions).status();
    c.psql("SELECT cortex_buffer.index_sessions()");
    // What the control plane's dispatch task would do, recorded instead.
    c.psql("CREATE TABLE public.dispatched (job_id uuid, at timestamptz DEFAULT now())");

    // The client's packaged tasks (each file of clients/node/tasks/ re-exports one, as a control
    // plane's tasks directory would hold them), the example crontab with the cleanup every
    // minute too, and a stand-in for the control plane's run_agent_job task.
    let dir = c.base.join("graphile");
    fs::create_dir_all(dir.join("tasks")).unwrap_or_else(|e| panic!("{e}"));
    install_client(&dir);
    for task in ["reap_zombies", "cleanup_session_buffers"] {
        // .mjs: ES modules, whatever the directory's package.json says.
        fs::copy(client().join(format!("tasks/{task}.js")), dir.join(format!("tasks/{task}.mjs")))
            .unwrap_or_else(|e| panic!("{e}"));
    }
    fs::write(
        dir.join("tasks/run_agent_job.js"),
        "module.exports = async (payload, helpers) => {\n  await helpers.query('INSERT INTO public.dispatched (job_id) VALUES ($1)', [payload.jobId]);\n};\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let crontab = fs::read_to_string(example().join("crontab")).unwrap_or_default();
    assert!(
        crontab.contains("\n* * * * * reap_zombies\n") && crontab.contains("\n0 3 * * * cleanup_session_buffers\n")
    );
    fs::write(
        dir.join("crontab"),
        crontab.replace("0 3 * * * cleanup_session_buffers", "* * * * * cleanup_session_buffers"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let url = format!("postgres://postgres@/postgres?host={}&port={}", c.socket_dir.display(), c.port);
    let bin = example().join("node_modules/.bin/graphile-worker");
    assert!(bin.exists(), "{} is missing: scripts/lib.sh installs it (npm ci in examples/graphile)", bin.display());
    let log = fs::File::create(dir.join("worker.log")).unwrap_or_else(|e| panic!("{e}"));
    let _worker = Worker(
        Command::new(&bin)
            .args(["-c", &url, "--crontab"])
            .arg(dir.join("crontab"))
            .current_dir(&dir)
            .stdout(Stdio::from(log.try_clone().unwrap_or_else(|e| panic!("{e}"))))
            .stderr(Stdio::from(log))
            .spawn()
            .unwrap_or_else(|e| panic!("graphile-worker: {e}")),
    );
    let worker_log = || fs::read_to_string(dir.join("worker.log")).unwrap_or_default();
    // The crontab fires at the top of each minute; the re-enqueued job 5 s after its reaping.
    let dispatched =
        || c.try_psql("postgres", "SELECT string_agg(job_id::text, ',') FROM public.dispatched").unwrap_or_default();
    assert!(
        wait_for(Duration::from_secs(150), || dispatched() == zombie && !c.sessions.join(&done).exists()).is_some(),
        "after 150 s: dispatched '{}', directory there: {}\n{}",
        dispatched(),
        c.sessions.join(&done).exists(),
        worker_log()
    );
    assert_eq!(c.psql(&format!("SELECT status FROM cortex_buffer.job WHERE id = '{zombie}'")), "RETRYING");
    // Re-enqueued after the retry rules' backoff (5 s for a first failure), not at once.
    let waited = c.psql(&format!(
        "SELECT d.at - c.recorded_at >= interval '5 seconds' FROM public.dispatched d, cortex_buffer.crash c
          WHERE c.job_id = '{zombie}' AND c.reason = 'zombie'"
    ));
    assert_eq!(waited, "t", "{}", worker_log());
    assert_eq!(c.psql(&format!("SELECT count(*) FROM cortex_buffer.session_file WHERE job_dir = '{done}'")), "0");
    assert!(worker_log().contains("cleanup call 1: delete_dir=1"), "{}", worker_log());
}
