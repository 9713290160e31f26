//! The monitoring examples, for real: postgres_exporter (Debian's) with
//! `examples/monitoring/queries.yaml` scraped on loopback and its values checked against what
//! the test caused; the alert rules checked by `promtool test rules`, then live (Prometheus on
//! loopback scrapes the exporter, and an alert fires once the test causes its condition); the
//! Grafana dashboard's every query names a metric the exporter exports.

use std::collections::BTreeSet;
use std::fs;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use cortex_buffer_e2e::{wait_for, Cluster};

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/monitoring")
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).unwrap_or_else(|e| panic!("{e}"))
}

/// The body of `GET http://127.0.0.1:<port><path>`, or None.
fn get(port: u16, path: &str) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.0 200")
        .then(|| body.to_owned())
        .or_else(|| head.starts_with("HTTP/1.1 200").then(|| body.to_owned()))
}

/// A child process killed when dropped.
struct Daemon(Child);
impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The value of the first sample of `metric` whose labels contain `label` (e.g. `kind="file"`).
fn sample(metrics: &str, metric: &str, label: &str) -> Option<f64> {
    metrics
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.strip_prefix(metric).is_some_and(|r| r.starts_with('{') || r.starts_with(' ')))
        .find(|l| l.contains(label))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

fn firing(prom_port: u16) -> BTreeSet<String> {
    let Some(body) = get(prom_port, "/api/v1/alerts") else { return BTreeSet::new() };
    let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
    v["data"]["alerts"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|x| x["state"] == "firing")
                .filter_map(|x| x["labels"]["alertname"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn the_exporter_queries_the_alert_rules_and_the_dashboard_work_against_a_real_cluster() {
    let c = Cluster::new("monitoring", &["cortex_buffer.worker_enabled = off", "cortex_buffer.oversized_file = '1kB'"]);
    c.start();
    c.create_extension();
    // What the metrics must show: an oversized file, a quarantined file, a job at 95 % of its
    // budget.
    let job = c.psql("INSERT INTO cortex_buffer.job (agent_id, status, started_at, heartbeat_at) VALUES (gen_random_uuid(), 'RUNNING', now(), now()) RETURNING id");
    let agent = c.psql(&format!("SELECT agent_id FROM cortex_buffer.job WHERE id = '{job}'"));
    let line = |seq: usize, pad: usize| {
        format!(
            r#"{{"type":"TOOL_RESULT","timestamp":"2026-02-23T14:30:00.000Z","job_id":"{job}","session_id":"s","seq":{seq},"result_summary":"{}"}}"#,
            "x".repeat(pad)
        ) + "\n"
    };
    c.put(&format!("{job}/session-001.jsonl"), &(line(0, 1500) + &line(1, 10)));
    c.put(&format!("{job}/session-002.jsonl"), &line(0, 10));
    c.psql("SELECT cortex_buffer.index_sessions()");
    c.psql(&format!(
        "UPDATE cortex_buffer.session_file SET quarantined_at = now() WHERE path LIKE '%{job}/session-002.jsonl'"
    ));
    c.psql(&format!("SELECT cortex_buffer.set_budget('{agent}', 1000)"));
    c.psql(&format!(
        "SELECT * FROM cortex_buffer.record_usage('{job}', 'claude-sonnet-4-5-20250929', '{{\"input_tokens\": 950, \"output_tokens\": 5}}', 'r1')"
    ));
    // The exporter's own login: the operator's privileges and pg_monitor, nothing more.
    c.psql("CREATE ROLE cb_exporter LOGIN IN ROLE cortex_buffer_operator, pg_monitor");

    let port = free_port();
    let dsn =
        format!("host={} port={} user=cb_exporter dbname=postgres sslmode=disable", c.socket_dir.display(), c.port);
    let _exporter = Daemon(
        Command::new("prometheus-postgres-exporter")
            .env("DATA_SOURCE_NAME", dsn)
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg(format!("--extend.query-path={}", examples().join("queries.yaml").display()))
            .args(["--disable-default-metrics", "--disable-settings-metrics"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("prometheus-postgres-exporter (scripts/lib.sh installs it): {e}")),
    );
    let mut metrics = String::new();
    assert!(
        wait_for(Duration::from_secs(30), || {
            metrics = get(port, "/metrics").unwrap_or_default();
            metrics.contains("cortex_buffer_budget_max_used_ratio")
        })
        .is_some(),
        "the exporter exported no cortex_buffer metric:\n{metrics}"
    );
    let m = |name: &str, label: &str| {
        sample(&metrics, name, label).unwrap_or_else(|| panic!("{name} {label} missing:\n{metrics}"))
    };
    assert_eq!(m("cortex_buffer_indexer_files_tracked", ""), 2.0);
    assert_eq!(m("cortex_buffer_indexer_files_quarantined", ""), 1.0);
    assert_eq!(m("cortex_buffer_indexer_files_untrusted", ""), 0.0);
    assert_eq!(m("cortex_buffer_indexer_bytes_pending", ""), 0.0);
    assert_eq!(m("cortex_buffer_oversized_over_limit", "kind=\"file\""), 1.0);
    assert_eq!(m("cortex_buffer_oversized_over_limit", "kind=\"job_dir\""), 0.0, "a directory is over 50 MB");
    assert_eq!(m("cortex_buffer_jobs_running", ""), 1.0);
    assert_eq!(m("cortex_buffer_jobs_zombies", ""), 0.0);
    assert_eq!(m("cortex_buffer_budget_live_jobs_over_90pct", ""), 1.0);
    assert!((m("cortex_buffer_budget_max_used_ratio", "") - 0.95).abs() < 1e-9);
    assert_eq!(m("cortex_buffer_reaper_seconds_since_last_reap", ""), -1.0);

    // Every metric the dashboard queries is exported.
    let dash: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(examples().join("grafana-dashboard.json")).unwrap_or_default())
            .unwrap_or_else(|e| panic!("grafana-dashboard.json: {e}"));
    let mut queried = BTreeSet::new();
    for p in dash["panels"].as_array().unwrap_or(&Vec::new()) {
        for t in p["targets"].as_array().unwrap_or(&Vec::new()) {
            let expr = t["expr"].as_str().unwrap_or_default();
            for word in expr.split(|ch: char| !(ch.is_ascii_alphanumeric() || ch == '_')) {
                if word.starts_with("cortex_buffer_") {
                    queried.insert(word.to_owned());
                }
            }
        }
    }
    assert!(queried.len() >= 10, "{queried:?}");
    for name in &queried {
        assert!(
            sample(&metrics, name, "").is_some(),
            "the dashboard queries {name}, which the exporter does not export"
        );
    }

    // The rules' own unit tests.
    let out = Command::new("promtool")
        .args(["test", "rules"])
        .arg(examples().join("alerts_test.yml"))
        .output()
        .unwrap_or_else(|e| panic!("promtool (scripts/lib.sh installs prometheus): {e}"));
    assert!(out.status.success(), "promtool test rules:\n{}", String::from_utf8_lossy(&out.stdout));

    // Live: Prometheus scrapes the exporter every second and evaluates the rules (their "for"
    // shortened to nothing). The oversized file is an alert at once; the zombie backlog only
    // once the test makes a zombie.
    let dir = c.base.join("prometheus");
    fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let rules = fs::read_to_string(examples().join("alerts.yml")).unwrap_or_default();
    let rules: String = rules
        .lines()
        .map(|l| {
            if l.trim_start().starts_with("for:") {
                format!("{}for: 0s", &l[..l.len() - l.trim_start().len()])
            } else {
                l.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    fs::write(dir.join("rules.yml"), rules).unwrap_or_else(|e| panic!("{e}"));
    fs::write(
        dir.join("prometheus.yml"),
        format!(
            "global: {{scrape_interval: 1s, evaluation_interval: 1s}}\nrule_files: [{}]\nscrape_configs:\n  - job_name: cortex_buffer\n    static_configs: [{{targets: ['127.0.0.1:{port}']}}]\n",
            dir.join("rules.yml").display()
        ),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let prom_port = free_port();
    let _prometheus = Daemon(
        Command::new("prometheus")
            .arg(format!("--config.file={}", dir.join("prometheus.yml").display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{prom_port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("prometheus (scripts/lib.sh installs it): {e}")),
    );
    assert!(
        wait_for(Duration::from_secs(60), || firing(prom_port).contains("CortexBufferOversizedBuffer")).is_some(),
        "the oversized-buffer alert never fired: {:?}",
        firing(prom_port)
    );
    let before = firing(prom_port);
    assert!(
        before.contains("CortexBufferQuarantinedFiles") && before.contains("CortexBufferBudgetNearLimit"),
        "{before:?}"
    );
    assert!(!before.contains("CortexBufferZombieBacklog"), "a zombie alert without a zombie: {before:?}");
    c.psql(
        "INSERT INTO cortex_buffer.job (agent_id, status, started_at, heartbeat_at)
         VALUES (gen_random_uuid(), 'RUNNING', now() - interval '1 hour', now() - interval '10 minutes')",
    );
    assert!(
        wait_for(Duration::from_secs(30), || firing(prom_port).contains("CortexBufferZombieBacklog")).is_some(),
        "the zombie alert did not fire: {:?}",
        firing(prom_port)
    );
}
