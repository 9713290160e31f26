use super::*;

const H: Micros = 3_600_000_000;
const D: Micros = 24 * H;

fn policy() -> Policy {
    Policy { now_us: 1_000 * D, post_terminal_us: 24 * H, max_file_age_us: 7 * D, keep_failed_for_us: 3 * D }
}

#[test]
fn statuses_classify_by_whether_the_job_runs_again() {
    assert_eq!(job_class("RUNNING", 1, Some(5), false), JobClass::Live);
    assert_eq!(job_class("WAITING_FOR_APPROVAL", 1, Some(5), false), JobClass::Live);
    assert_eq!(job_class("RETRYING", 1, Some(5), false), JobClass::Live);
    assert_eq!(job_class("COMPLETED", 1, Some(7), false), JobClass::Terminal { failed: false, ended_us: 7 });
    assert_eq!(job_class("CANCELLED", 0, Some(5), false), JobClass::Terminal { failed: false, ended_us: 5 });
    assert_eq!(job_class("DEAD_LETTER", 3, Some(5), true), JobClass::Terminal { failed: true, ended_us: 5 });
    // A failure with a retry left is not terminal (its next attempt recovers: kept like a live
    // job's); without one it is.
    assert_eq!(job_class("FAILED", 1, Some(5), true), JobClass::Live);
    assert_eq!(job_class("TIMED_OUT", 1, Some(9), false), JobClass::Terminal { failed: true, ended_us: 9 });
    // The next attempt of a job, not started yet: its pod will ask for a recovery plan from
    // what the last one wrote, however old that is.
    assert_eq!(job_class("SCHEDULED", 1, Some(5), false), JobClass::Live);
    assert_eq!(job_class("SCHEDULED", 0, None, false), JobClass::Live);
    assert_eq!(job_class("PENDING", 2, Some(5), false), JobClass::Live);
    // A job that never ran has no buffer to recover from.
    assert_eq!(job_class("PENDING", 0, Some(5), false), JobClass::Other);
    // A terminal job that cannot be dated is never deleted as terminal.
    assert_eq!(job_class("COMPLETED", 1, None, false), JobClass::Other);
    assert!(needs_retry_decision("FAILED") && needs_retry_decision("TIMED_OUT"));
    assert!(!needs_retry_decision("DEAD_LETTER") && !needs_retry_decision("COMPLETED"));
}

#[test]
fn a_terminal_job_is_deleted_only_after_its_window() {
    let p = policy();
    let done = |ago| DirKind::Job(JobClass::Terminal { failed: false, ended_us: p.now_us - ago });
    assert!(
        matches!(dir_verdict(&p, done(25 * H), Some(0)), DirVerdict::Delete(r) if r.contains("post_terminal (24 hours)"))
    );
    assert_eq!(dir_verdict(&p, done(23 * H), Some(0)), DirVerdict::Files { live: false, note: None });
    // Exactly at the boundary it is kept: "more than post_terminal ago".
    assert_eq!(dir_verdict(&p, done(24 * H), Some(0)), DirVerdict::Files { live: false, note: None });
}

#[test]
fn failed_jobs_are_kept_for_keep_failed_for_when_it_is_longer() {
    let p = policy();
    let failed = |ago| DirKind::Job(JobClass::Terminal { failed: true, ended_us: p.now_us - ago });
    assert!(matches!(dir_verdict(&p, failed(2 * D), None), DirVerdict::Files { .. }));
    assert!(
        matches!(dir_verdict(&p, failed(3 * D + 1), None), DirVerdict::Delete(r) if r.contains("keep_failed_for (3 days)"))
    );
    let short = Policy { keep_failed_for_us: 0, ..p };
    assert!(matches!(dir_verdict(&short, failed(2 * D), None), DirVerdict::Delete(r) if r.contains("post_terminal")));
}

#[test]
fn an_orphan_goes_once_its_newest_file_is_old() {
    let p = policy();
    assert!(
        matches!(dir_verdict(&p, DirKind::Orphan, Some(p.now_us - 2 * D)), DirVerdict::Delete(r) if r.starts_with("orphan"))
    );
    match dir_verdict(&p, DirKind::Orphan, Some(p.now_us - H)) {
        DirVerdict::Files { live: false, note: Some(n) } => assert!(n.contains("not be committed")),
        other => panic!("{other:?}"),
    }
    assert!(matches!(dir_verdict(&p, DirKind::Orphan, None), DirVerdict::Delete(_)));
}

#[test]
fn live_and_other_jobs_and_other_folders_are_looked_at_file_by_file() {
    let p = policy();
    assert_eq!(dir_verdict(&p, DirKind::Job(JobClass::Live), None), DirVerdict::Files { live: true, note: None });
    assert_eq!(dir_verdict(&p, DirKind::Job(JobClass::Other), None), DirVerdict::Files { live: false, note: None });
    assert_eq!(dir_verdict(&p, DirKind::NotJob, Some(0)), DirVerdict::Files { live: false, note: None });
}

#[test]
fn files_past_max_file_age_go_unless_a_live_plan_reads_them() {
    let p = policy();
    assert_eq!(file_verdict(&p, p.now_us - 6 * D, false), FileVerdict::Untouched);
    assert!(matches!(file_verdict(&p, p.now_us - 8 * D, false), FileVerdict::Delete(r) if r.contains("7 days")));
    assert!(matches!(file_verdict(&p, p.now_us - 8 * D, true), FileVerdict::Keep(r) if r.contains("recovery plan")));
    // A file from the future (a clock that is off) is young.
    assert_eq!(file_verdict(&p, p.now_us + D, false), FileVerdict::Untouched);
}

#[test]
fn gone_rows_wait_their_retention_and_failed_jobs_wait_longer() {
    let p = policy();
    assert!(gone_rows_expired(&p, p.now_us - 2 * D, D, false));
    assert!(!gone_rows_expired(&p, p.now_us - 2 * D, D, true));
    assert!(gone_rows_expired(&p, p.now_us - 4 * D, D, true));
}

fn vouched(known: u64, unknown: u64) -> JobIds {
    JobIds { vouched_known: known, vouched_unknown: unknown, ..JobIds::default() }
}

#[test]
fn the_wrong_table_is_told_by_the_share_of_unknown_vouched_jobs() {
    assert!(!looks_like_wrong_table(&vouched(0, 3), 0.5), "too few to judge");
    assert!(looks_like_wrong_table(&vouched(1, 3), 0.5));
    assert!(!looks_like_wrong_table(&vouched(2, 2), 0.5), "half is not most");
    assert!(!looks_like_wrong_table(&vouched(100, 0), 0.0));
    assert!(looks_like_wrong_table(&vouched(99, 1), 0.0));
    assert!(!looks_like_wrong_table(&vouched(0, 10), 1.0));
}

#[test]
fn made_up_ids_cannot_trip_the_check() {
    // Three pushes under invented ids beside one real job, with and without per-job rows.
    let mut ids = vouched(1, 0);
    (0..3).for_each(|_| ids.count(false, false));
    assert!(!looks_like_wrong_table(&ids, 0.5), "{ids:?}");
    let mut ids = JobIds::default();
    ids.count(false, true);
    (0..1000).for_each(|_| ids.count(false, false));
    assert!(!looks_like_wrong_table(&ids, 0.0), "a known buffer and nothing vouched for: {ids:?}");
    // The wrong table: it knows no buffer, vouched for or not.
    let mut ids = JobIds::default();
    (0..5).for_each(|_| ids.count(false, false));
    assert!(looks_like_wrong_table(&ids, 0.5));
    assert!(!looks_like_wrong_table(&ids, 1.0), "1 disables it");
    let mut ids = vouched(0, 4);
    (0..4).for_each(|_| ids.count(false, true));
    assert!(looks_like_wrong_table(&ids, 0.5), "vouched ids it lacks, whatever else it has: {ids:?}");
}

#[test]
fn durations_read_as_people_write_them() {
    assert_eq!(human(24 * H), "24 hours");
    assert_eq!(human(7 * D), "7 days");
    assert_eq!(human(D), "24 hours");
    assert_eq!(human(36 * H), "36 hours");
    assert_eq!(human(2 * D), "2 days");
    assert_eq!(human(90 * 60_000_000), "90 minutes");
    assert_eq!(human(45_000_000), "45 seconds");
    assert_eq!(human(0), "0 seconds");
}

#[test]
fn ages_fall_in_buckets_and_steps_round_trip() {
    let p = policy();
    assert_eq!(age_bucket(&p, p.now_us), "< 1 hour");
    assert_eq!(age_bucket(&p, p.now_us - 2 * H), "1-24 hours");
    assert_eq!(age_bucket(&p, p.now_us - 2 * D), "1-7 days");
    assert_eq!(age_bucket(&p, p.now_us - 8 * D), "7-30 days");
    assert_eq!(age_bucket(&p, 0), ">= 30 days");
    for s in [Step::Decided, Step::RowsDeleted, Step::Committed, Step::Unlinking] {
        assert_eq!(Step::parse(s.label()), Some(s));
    }
    assert_eq!(Step::parse("nope"), None);
}
