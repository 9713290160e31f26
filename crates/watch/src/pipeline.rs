//! The reader-thread pipeline: a helper thread reads and judges a file's new lines and builds
//! each payload's `jsonb` bytes while the calling (backend) thread inserts the previous batch.
//! Pure Rust: the helper never calls PostgreSQL, and the caller supplies the insert step and
//! an `idle` step run at least every [`IDLE_CHECK`] (the shell checks for interrupts there,
//! so `pg_cancel_backend()` and `statement_timeout` work while a file is indexed).
//!
//! Memory is bounded: a batch is sent once it holds `max_rows` rows or `max_bytes` bytes; at
//! most [`QUEUE_DEPTH`] batches wait in the channel, and the bytes handed over but not yet
//! inserted never exceed four batches' worth (a single larger batch, one huge line, waits until
//! everything before it is inserted). Each payload's conversion is bounded by the rules'
//! `max_line_memory` before it starts (`indexer::payload_problem`).

use std::io::Read;
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use cortex_buffer_core::indexer::event_columns::EventColumn;
use cortex_buffer_core::indexer::index_file::{
    index_file, CorruptRow, EventRow, FileRules, IndexError, Progress, Sink,
};
use cortex_buffer_core::indexer::normalize::Columns;
use cortex_buffer_core::int::count_i64;
use cortex_buffer_core::json::jsonb_write::{to_jsonb_with, Scratch};

/// Batches queued between the threads (each way).
pub const QUEUE_DEPTH: usize = 4;
/// The longest the calling thread waits for a batch before running `idle` again.
pub const IDLE_CHECK: Duration = Duration::from_millis(50);
/// A returned batch whose arena grew beyond this is dropped rather than kept for reuse.
const RECYCLE_MAX_BYTES: usize = 4 << 20;

/// One event row as plain data, built on the reading thread. Its text columns and its `jsonb`
/// payload are ready-made varlenas (4-byte header) in its batch's arena, so the inserting
/// thread hands PostgreSQL pointers into it instead of copying each value.
pub struct OwnedEvent {
    pub offset: i64,
    pub line_no: i64,
    /// Numbers, time and job id (its strings have moved into the arena).
    pub columns: Columns,
    /// Arena offsets of the text and payload columns' varlenas, by [`EventColumn`].
    pub varlenas: [Option<u32>; EventColumn::ALL.len()],
}

/// Appends a varlena (4-byte header) holding `bytes` at the next 4-byte boundary.
fn push_varlena(arena: &mut Vec<u8>, bytes: &[u8]) -> Option<u32> {
    arena.resize(arena.len().next_multiple_of(4), 0);
    let at = u32::try_from(arena.len()).ok()?;
    let header = u32::try_from(bytes.len() + 4).ok().filter(|l| *l < 1 << 30)?;
    arena.extend_from_slice(&(header << 2).to_ne_bytes());
    arena.extend_from_slice(bytes);
    Some(at)
}

/// The text a row carries in `col`, taken out of its columns.
fn take_text(c: &mut Columns, col: EventColumn) -> Option<String> {
    match col {
        EventColumn::Type => c.event_type.take(),
        EventColumn::SessionId => c.session_id.take(),
        EventColumn::AgentId => c.agent_id.take(),
        EventColumn::InvocationId => c.invocation_id.take(),
        EventColumn::ToolName => c.tool_name.take(),
        EventColumn::CheckpointId => c.checkpoint_id.take(),
        EventColumn::RequestId => c.request_id.take(),
        _ => None,
    }
}

impl OwnedEvent {
    /// Moves `row`'s strings and payload (as jsonb) into `arena`.
    fn build(row: EventRow<'_>, arena: &mut Vec<u8>, scratch: &mut Scratch) -> OwnedEvent {
        let mut columns = row.columns;
        let mut varlenas = [None; EventColumn::ALL.len()];
        for col in EventColumn::ALL {
            if let Some(text) = take_text(&mut columns, col) {
                varlenas[col as usize] = push_varlena(arena, text.as_bytes());
            }
        }
        let mut problem = row.payload_problem;
        if let Some(text) = row.payload {
            arena.resize(arena.len().next_multiple_of(4), 0);
            let at = arena.len();
            match to_jsonb_with(&text, row.tokens, arena, scratch) {
                Ok(()) => varlenas[EventColumn::Payload as usize] = u32::try_from(at).ok(),
                Err(_) => {
                    arena.truncate(at);
                    let why = "larger than jsonb can hold";
                    problem = Some(match problem {
                        Some(p) => format!("{why}; {p}").into(),
                        None => why.into(),
                    });
                }
            }
        }
        if let Some(p) = problem {
            varlenas[EventColumn::PayloadProblem as usize] = push_varlena(arena, p.as_bytes());
        }
        OwnedEvent { offset: count_i64(row.offset), line_no: count_i64(row.line_no), columns, varlenas }
    }
}

/// A batch of rows: built on the reading thread, inserted on the calling one, then sent back
/// to be refilled, so the steady state allocates (and frees across threads) nothing per row.
#[derive(Default)]
pub struct Rows {
    pub events: Vec<OwnedEvent>,
    pub corrupt: Vec<CorruptRow>,
    /// The events' text and jsonb varlenas, each 4-byte aligned (offsets, not pointers: the
    /// vector grows while the batch fills).
    pub arena: Vec<u8>,
    corrupt_bytes: usize,
    /// In a batch of [`run_many`], whose rows are which: one part per file, in file order,
    /// covering every row. Empty in a batch of one file ([`run`], [`run_inline`]).
    pub parts: Vec<Part>,
}

/// The rows of one file in a batch of [`run_many`], which may hold the rows of many small
/// files: where they are, and, when they are the file's last, its progress.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    /// The file's index in the input.
    pub file: usize,
    pub events: std::ops::Range<usize>,
    pub corrupt: std::ops::Range<usize>,
    /// Set when the file ends in this batch: its progress, once these rows are in.
    pub done: Option<Progress>,
}

impl Rows {
    pub fn len(&self) -> usize {
        self.events.len() + self.corrupt.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes the batch holds (what counts against the in-flight limit).
    pub fn bytes(&self) -> usize {
        self.arena.len() + self.corrupt_bytes
    }

    fn clear(&mut self) {
        self.events.clear();
        self.corrupt.clear();
        self.arena.clear();
        self.corrupt_bytes = 0;
        self.parts.clear();
    }

    /// The part of `file` that rows are added to: the last one, or a new one when the last is
    /// another file's or ended.
    fn part_of(&mut self, file: usize) -> &mut Part {
        let open = self.parts.last().is_some_and(|p| p.file == file && p.done.is_none());
        if !open {
            let (e, c) = (self.events.len(), self.corrupt.len());
            self.parts.push(Part { file, events: e..e, corrupt: c..c, done: None });
        }
        let last = self.parts.len() - 1;
        &mut self.parts[last]
    }

    /// The whole varlena of `e`'s column `col` (header included), if it is not NULL.
    pub fn varlena(&self, e: &OwnedEvent, col: EventColumn) -> Option<&[u8]> {
        let at = e.varlenas.get(col as usize).copied().flatten()? as usize;
        let header = self.arena.get(at..at + 4)?;
        let len = (u32::from_ne_bytes([header[0], header[1], header[2], header[3]]) >> 2) as usize;
        self.arena.get(at..at + len)
    }

    /// A text column's value.
    pub fn text(&self, e: &OwnedEvent, col: EventColumn) -> Option<&str> {
        self.varlena(e, col).and_then(|v| std::str::from_utf8(v.get(4..)?).ok())
    }
}

/// Bytes handed to the inserting thread and not yet inserted. The reader waits while adding a
/// batch would pass the limit (unless nothing is in flight); closing it releases the reader
/// for good (the inserting side stopped).
struct InFlight {
    state: Mutex<(usize, bool)>,
    changed: Condvar,
    limit: usize,
}

impl InFlight {
    fn new(limit: usize) -> InFlight {
        InFlight { state: Mutex::new((0, false)), changed: Condvar::new(), limit }
    }

    /// Waits until `bytes` may be sent; false once closed.
    fn acquire(&self, bytes: usize) -> bool {
        let Ok(mut s) = self.state.lock() else { return false };
        while !s.1 && s.0 > 0 && s.0.saturating_add(bytes) > self.limit {
            s = match self.changed.wait(s) {
                Ok(s) => s,
                Err(_) => return false,
            };
        }
        if s.1 {
            return false;
        }
        s.0 = s.0.saturating_add(bytes);
        true
    }

    fn release(&self, bytes: usize) {
        if let Ok(mut s) = self.state.lock() {
            s.0 = s.0.saturating_sub(bytes);
        }
        self.changed.notify_all();
    }

    fn close(&self) {
        if let Ok(mut s) = self.state.lock() {
            s.1 = true;
        }
        self.changed.notify_all();
    }
}

/// Closes the gauge when the inserting side leaves, by any path (an error, or PostgreSQL's
/// ERROR unwinding through it).
struct CloseOnDrop<'a>(&'a InFlight);

impl Drop for CloseOnDrop<'_> {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// The reading thread's sink: judged lines become rows (payloads become jsonb here too) and
/// are sent a batch at a time. A closed channel or gauge (the inserting side stopped) stops the
/// reading.
struct ChannelSink<'g> {
    tx: SyncSender<Rows>,
    /// Batches the inserting side has finished with.
    returned: Receiver<Rows>,
    rows: Rows,
    limits: Limits,
    gauge: &'g InFlight,
    scratch: Scratch,
}

/// The inserting side went away.
#[derive(Debug)]
pub struct Stopped;

impl ChannelSink<'_> {
    fn maybe_send(&mut self) -> Result<(), Stopped> {
        if self.rows.len() >= self.limits.max_rows || self.rows.bytes() >= self.limits.max_bytes {
            self.send()?;
        }
        Ok(())
    }

    fn send(&mut self) -> Result<(), Stopped> {
        if self.rows.is_empty() {
            return Ok(());
        }
        if !self.gauge.acquire(self.rows.bytes()) {
            return Err(Stopped);
        }
        let mut next = self.returned.try_recv().unwrap_or_default();
        next.clear();
        self.tx.send(std::mem::replace(&mut self.rows, next)).map_err(|_| Stopped)
    }
}

impl Sink for ChannelSink<'_> {
    type Error = Stopped;

    fn event(&mut self, row: EventRow<'_>) -> Result<(), Stopped> {
        let event = OwnedEvent::build(row, &mut self.rows.arena, &mut self.scratch);
        self.rows.events.push(event);
        self.maybe_send()
    }

    fn corrupt(&mut self, row: CorruptRow) -> Result<(), Stopped> {
        self.rows.corrupt_bytes += row.preview.len() + row.reason.len();
        self.rows.corrupt.push(row);
        self.maybe_send()
    }
}

/// The sink of [`run_inline`]: batches are inserted as soon as they fill, on this thread.
struct InlineSink<F> {
    rows: Rows,
    limits: Limits,
    scratch: Scratch,
    insert: F,
}

impl<F, E> InlineSink<F>
where
    F: FnMut(&Rows) -> Result<(), E>,
{
    fn maybe_flush(&mut self) -> Result<(), E> {
        if self.rows.len() >= self.limits.max_rows || self.rows.bytes() >= self.limits.max_bytes {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), E> {
        if !self.rows.is_empty() {
            (self.insert)(&self.rows)?;
            self.rows.clear();
        }
        Ok(())
    }
}

impl<F, E> Sink for InlineSink<F>
where
    F: FnMut(&Rows) -> Result<(), E>,
{
    type Error = E;

    fn event(&mut self, row: EventRow<'_>) -> Result<(), E> {
        let event = OwnedEvent::build(row, &mut self.rows.arena, &mut self.scratch);
        self.rows.events.push(event);
        self.maybe_flush()
    }

    fn corrupt(&mut self, row: CorruptRow) -> Result<(), E> {
        self.rows.corrupt_bytes += row.preview.len() + row.reason.len();
        self.rows.corrupt.push(row);
        self.maybe_flush()
    }
}

/// Files with at most this many new bytes are read on the calling thread ([`run_inline`]):
/// starting a thread and handing batches across costs more than overlapping so little saves.
pub const INLINE_MAX_BYTES: u64 = 64 * 1024;

/// Indexes what `file` (positioned at `progress.offset`) holds on the calling thread: the same
/// judgement and the same batches as [`run`], without the helper thread. For small reads
/// ([`INLINE_MAX_BYTES`]); `idle` runs between batches.
pub fn run_inline<R, E>(
    file: R,
    progress: Progress,
    rules: &FileRules<'_>,
    limits: Limits,
    insert: impl FnMut(&Rows) -> Result<(), E>,
    mut idle: impl FnMut(),
) -> Result<Progress, PipelineError<E>>
where
    R: Read + cortex_buffer_core::indexer::lines::HoleSkip,
{
    let mut calls = 0usize;
    let mut insert = insert;
    let counted = |rows: &Rows| {
        calls += 1;
        if calls > 1 {
            idle();
        }
        insert(rows)
    };
    let mut sink = InlineSink { rows: Rows::default(), limits, scratch: Scratch::default(), insert: counted };
    let progress = match index_file(file, progress, rules, &mut sink) {
        Ok(p) => p,
        Err(IndexError::Read(e)) => return Err(PipelineError::Read(e)),
        Err(IndexError::Sink(e)) => return Err(PipelineError::Insert(e)),
    };
    sink.flush().map_err(PipelineError::Insert)?;
    Ok(progress)
}

/// The reading thread's sink in [`run_many`]: the rows of one file after the other go into
/// the same batch, each file's in a [`Part`] of it, and a batch is sent when it is full, so many
/// small files share one hand-over (and one insert) instead of paying one each.
struct TaggedSink<'g> {
    tx: SyncSender<Rows>,
    /// Batches the inserting side has finished with.
    returned: Receiver<Rows>,
    file: usize,
    rows: Rows,
    limits: Limits,
    gauge: &'g InFlight,
    scratch: Scratch,
}

impl TaggedSink<'_> {
    fn maybe_send(&mut self) -> Result<(), Stopped> {
        if self.rows.len() >= self.limits.max_rows || self.rows.bytes() >= self.limits.max_bytes {
            self.send()?;
        }
        Ok(())
    }

    fn send(&mut self) -> Result<(), Stopped> {
        if self.rows.parts.is_empty() {
            return Ok(());
        }
        if !self.gauge.acquire(self.rows.bytes()) {
            return Err(Stopped);
        }
        let mut next = self.returned.try_recv().unwrap_or_default();
        next.clear();
        self.tx.send(std::mem::replace(&mut self.rows, next)).map_err(|_| Stopped)
    }

    /// The current file ended with `progress`: its last part says so.
    fn end(&mut self, progress: Progress) -> Result<(), Stopped> {
        self.rows.part_of(self.file).done = Some(progress);
        self.maybe_send()
    }
}

impl Sink for TaggedSink<'_> {
    type Error = Stopped;

    fn event(&mut self, row: EventRow<'_>) -> Result<(), Stopped> {
        let event = OwnedEvent::build(row, &mut self.rows.arena, &mut self.scratch);
        self.rows.part_of(self.file);
        self.rows.events.push(event);
        let n = self.rows.events.len();
        if let Some(p) = self.rows.parts.last_mut() {
            p.events.end = n;
        }
        self.maybe_send()
    }

    fn corrupt(&mut self, row: CorruptRow) -> Result<(), Stopped> {
        self.rows.corrupt_bytes += row.preview.len() + row.reason.len();
        self.rows.part_of(self.file);
        self.rows.corrupt.push(row);
        let n = self.rows.corrupt.len();
        if let Some(p) = self.rows.parts.last_mut() {
            p.corrupt.end = n;
        }
        self.maybe_send()
    }
}

/// Indexes several files with one reading thread: it judges them one after the other (each
/// positioned at its progress's offset), so that reading the next overlaps inserting the
/// last, however small each is. A batch may hold the rows of several files, each in a
/// [`Part`]: `insert` gets each batch, in file order; `done` gets each file's progress once all
/// its rows were inserted. A failure stops it all: the caller rolls the batch back.
pub fn run_many<'r, R, E>(
    files: Vec<(R, Progress, FileRules<'r>)>,
    limits: Limits,
    mut insert: impl FnMut(&Rows) -> Result<(), E>,
    mut done: impl FnMut(usize, Progress) -> Result<(), E>,
    mut idle: impl FnMut(),
) -> Result<(), PipelineError<E>>
where
    R: Read + cortex_buffer_core::indexer::lines::HoleSkip + Send,
{
    let gauge = InFlight::new(limits.max_bytes.saturating_mul(QUEUE_DEPTH));
    std::thread::scope(|scope| {
        let closer = CloseOnDrop(&gauge);
        let (tx, rx) = std::sync::mpsc::sync_channel::<Rows>(QUEUE_DEPTH);
        let (give_back, returned) = std::sync::mpsc::sync_channel::<Rows>(QUEUE_DEPTH);
        let gauge = &gauge;
        let reader = spawn_with_signals_blocked(scope, move || -> Result<(), Option<std::io::Error>> {
            let mut sink =
                TaggedSink { tx, returned, file: 0, rows: Rows::default(), limits, gauge, scratch: Scratch::default() };
            for (i, (file, progress, rules)) in files.into_iter().enumerate() {
                sink.file = i;
                match index_file(file, progress, &rules, &mut sink) {
                    Ok(p) => sink.end(p).map_err(|Stopped| None)?,
                    Err(IndexError::Read(e)) => return Err(Some(e)),
                    Err(IndexError::Sink(Stopped)) => return Err(None),
                }
            }
            sink.send().map_err(|Stopped| None)
        })
        .map_err(|e| PipelineError::Thread(format!("could not start the reading thread: {e}")))?;
        loop {
            match rx.recv_timeout(IDLE_CHECK) {
                Ok(mut rows) => {
                    idle();
                    if !rows.is_empty() {
                        insert(&rows).map_err(PipelineError::Insert)?;
                    }
                    gauge.release(rows.bytes());
                    for part in rows.parts.iter_mut() {
                        if let Some(progress) = part.done.take() {
                            done(part.file, progress).map_err(PipelineError::Insert)?;
                        }
                    }
                    // Full (the reader has spares) or gone: this batch is simply freed.
                    if rows.arena.capacity() <= RECYCLE_MAX_BYTES {
                        let _ = give_back.try_send(rows);
                    }
                }
                Err(RecvTimeoutError::Timeout) => idle(),
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        drop(closer);
        match reader.join() {
            Ok(Ok(())) => Ok(()),
            Ok(Err(Some(e))) => Err(PipelineError::Read(e)),
            Ok(Err(None)) => Err(PipelineError::Thread("the reading thread stopped early".into())),
            Err(_) => Err(PipelineError::Thread("the reading thread panicked".into())),
        }
    })
}

/// How much one batch may hold.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_rows: usize,
    pub max_bytes: usize,
}

#[derive(Debug)]
pub enum PipelineError<E> {
    /// The insert step failed; the reader was stopped.
    Insert(E),
    /// Reading the file failed.
    Read(std::io::Error),
    /// The helper thread could not be started, stopped early or panicked (a bug).
    Thread(String),
}

/// Runs `f` on a new scoped thread with every signal blocked from its first instruction: the
/// mask is set on the calling thread before spawning (the new thread inherits it) and restored
/// right after, so no signal meant for the backend can ever be delivered to the helper.
pub fn spawn_with_signals_blocked<'scope, T: Send + 'scope>(
    scope: &'scope std::thread::Scope<'scope, '_>,
    f: impl FnOnce() -> T + Send + 'scope,
) -> std::io::Result<std::thread::ScopedJoinHandle<'scope, T>> {
    // SAFETY: plain libc calls on local, fully initialised signal sets; the previous mask is
    // restored whatever the spawn returns.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut previous: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, &mut previous);
        let handle = std::thread::Builder::new().name("cortex_buffer reader".into()).spawn_scoped(scope, f);
        libc::pthread_sigmask(libc::SIG_SETMASK, &previous, std::ptr::null_mut());
        handle
    }
}

/// Indexes what `file` (positioned at `progress.offset`) holds: reads on a helper thread,
/// inserts each batch with `insert` on this one, runs `idle` between batches and while waiting.
pub fn run<R, E>(
    file: R,
    progress: Progress,
    rules: &FileRules<'_>,
    limits: Limits,
    mut insert: impl FnMut(&Rows) -> Result<(), E>,
    mut idle: impl FnMut(),
) -> Result<Progress, PipelineError<E>>
where
    R: Read + cortex_buffer_core::indexer::lines::HoleSkip + Send,
{
    let gauge = InFlight::new(limits.max_bytes.saturating_mul(QUEUE_DEPTH));
    std::thread::scope(|scope| {
        let closer = CloseOnDrop(&gauge);
        let (tx, rx) = std::sync::mpsc::sync_channel::<Rows>(QUEUE_DEPTH);
        let (give_back, returned) = std::sync::mpsc::sync_channel::<Rows>(QUEUE_DEPTH);
        let gauge = &gauge;
        let reader = spawn_with_signals_blocked(scope, move || {
            let mut sink =
                ChannelSink { tx, returned, rows: Rows::default(), limits, gauge, scratch: Scratch::default() };
            match index_file(file, progress, rules, &mut sink) {
                Ok(p) => sink.send().map(|()| p).map_err(|Stopped| None),
                Err(IndexError::Read(e)) => Err(Some(e)),
                Err(IndexError::Sink(Stopped)) => Err(None),
            }
        })
        .map_err(|e| PipelineError::Thread(format!("could not start the reading thread: {e}")))?;
        loop {
            match rx.recv_timeout(IDLE_CHECK) {
                Ok(rows) => {
                    idle();
                    insert(&rows).map_err(PipelineError::Insert)?;
                    gauge.release(rows.bytes());
                    // Full (the reader has spares) or gone: this batch is simply freed.
                    if rows.arena.capacity() <= RECYCLE_MAX_BYTES {
                        let _ = give_back.try_send(rows);
                    }
                }
                Err(RecvTimeoutError::Timeout) => idle(),
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        drop(closer);
        match reader.join() {
            Ok(Ok(p)) => Ok(p),
            Ok(Err(Some(e))) => Err(PipelineError::Read(e)),
            Ok(Err(None)) => Err(PipelineError::Thread("the reading thread stopped early".into())),
            Err(_) => Err(PipelineError::Thread("the reading thread panicked".into())),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use cortex_buffer_core::indexer::dialect::Dialect;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn rules() -> FileRules<'static> {
        FileRules {
            dialect: Some(Dialect::CortexSpike),
            job_dir: "job",
            max_line_bytes: 1 << 20,
            max_line_memory: 64 << 20,
            settled: true,
            max_bytes: u64::MAX,
            resume: None,
        }
    }

    fn lines(n: usize) -> String {
        (0..n)
            .map(|i| format!("{{\"type\":\"T\",\"timestamp\":\"t\",\"seq\":{i},\"tool_name\":\"x\\u0000\"}}\n"))
            .collect()
    }

    #[test]
    fn every_row_arrives_once_in_order_with_its_columns() {
        let data = lines(1000);
        let mut seen = Vec::new();
        let p = run(
            data.as_bytes(),
            Progress::default(),
            &rules(),
            Limits { max_rows: 7, max_bytes: 1 << 20 },
            |rows: &Rows| -> Result<(), ()> {
                for e in &rows.events {
                    seen.push((e.columns.seq, rows.text(e, EventColumn::Type).map(str::to_owned)));
                    assert_eq!(rows.text(e, EventColumn::ToolName), Some("x\u{fffd}"));
                    assert!(rows.varlena(e, EventColumn::Payload).is_none(), "\\u0000 is not stored as jsonb");
                    assert!(rows.text(e, EventColumn::PayloadProblem).is_some_and(|p| p.contains("u0000")));
                }
                Ok(())
            },
            || {},
        )
        .unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(p.events_added, 1000);
        assert_eq!(seen.len(), 1000);
        assert!(seen.iter().enumerate().all(|(i, (seq, t))| *seq == Some(i as i64) && t.as_deref() == Some("T")));
    }

    #[test]
    fn inline_and_threaded_runs_give_the_same_rows_and_progress() {
        let data = lines(500) + "{\"type\":\"T\",\"timestamp\":\"t\",\"seq\":\"broken\n{\"unterminated";
        let collect = |threaded: bool| {
            let mut seen = Vec::new();
            let mut record = |rows: &Rows| -> Result<(), ()> {
                for e in &rows.events {
                    seen.push((e.offset, e.line_no, rows.text(e, EventColumn::Type).map(str::to_owned)));
                }
                for c in &rows.corrupt {
                    seen.push((count_i64(c.offset), count_i64(c.line_no), Some(c.reason.clone())));
                }
                Ok(())
            };
            let limits = Limits { max_rows: 9, max_bytes: 1 << 20 };
            let p = if threaded {
                run(data.as_bytes(), Progress::default(), &rules(), limits, &mut record, || {})
            } else {
                run_inline(data.as_bytes(), Progress::default(), &rules(), limits, &mut record, || {})
            };
            (p.unwrap_or_else(|e| panic!("{e:?}")), seen)
        };
        let (inline, threaded) = (collect(false), collect(true));
        assert_eq!(inline.1, threaded.1);
        assert_eq!(inline.0, threaded.0);
        assert_eq!(inline.0.events_added, 500);
    }

    #[test]
    fn many_files_on_one_thread_give_each_file_the_rows_and_progress_it_gives_alone() {
        let datas: Vec<String> = (0..20).map(|k| lines(k * 7) + if k % 3 == 0 { "{\"cut" } else { "" }).collect();
        let alone: Vec<(Progress, usize)> = datas
            .iter()
            .map(|d| {
                let mut n = 0;
                let p = run_inline(
                    d.as_bytes(),
                    Progress::default(),
                    &rules(),
                    Limits { max_rows: 5, max_bytes: 1 << 20 },
                    |rows: &Rows| -> Result<(), ()> {
                        n += rows.len();
                        Ok(())
                    },
                    || {},
                )
                .unwrap_or_else(|e| panic!("{e:?}"));
                (p, n)
            })
            .collect();
        let mut rows_of = vec![0usize; datas.len()];
        let mut progress_of: Vec<Option<Progress>> = vec![None; datas.len()];
        let mut last_file = 0;
        let mut batches = 0;
        let ended = std::cell::RefCell::new(vec![false; datas.len()]);
        run_many(
            datas.iter().map(|d| (d.as_bytes(), Progress::default(), rules())).collect(),
            Limits { max_rows: 5, max_bytes: 1 << 20 },
            |rows: &Rows| -> Result<(), ()> {
                batches += 1;
                assert!(rows.len() <= 5 + 1, "a batch holds at most its limit (and a file's end)");
                let (mut e, mut c) = (0, 0);
                for part in &rows.parts {
                    let i = part.file;
                    assert!(i >= last_file, "files arrive in order");
                    assert!(!ended.borrow()[i], "no rows after a file's end");
                    assert_eq!((part.events.start, part.corrupt.start), (e, c), "parts cover the batch in order");
                    (e, c) = (part.events.end, part.corrupt.end);
                    last_file = i;
                    rows_of[i] += part.events.len() + part.corrupt.len();
                }
                assert_eq!((e, c), (rows.events.len(), rows.corrupt.len()), "every row is in a part");
                Ok(())
            },
            |i, p| {
                ended.borrow_mut()[i] = true;
                progress_of[i] = Some(p);
                Ok(())
            },
            || {},
        )
        .unwrap_or_else(|e| panic!("{e:?}"));
        let total: usize = alone.iter().map(|(_, n)| n).sum();
        for (k, (p, n)) in alone.into_iter().enumerate() {
            assert_eq!(progress_of[k].as_ref(), Some(&p), "file {k}");
            assert_eq!(rows_of[k], n, "file {k}");
        }
        assert!(batches <= total / 5 + 2, "small files share batches: {batches} for {total} rows");
    }

    #[test]
    fn a_failing_inline_insert_is_returned() {
        let data = lines(100);
        let mut batches = 0;
        let r = run_inline(
            data.as_bytes(),
            Progress::default(),
            &rules(),
            Limits { max_rows: 10, max_bytes: 1 << 20 },
            |_: &Rows| {
                batches += 1;
                if batches == 3 {
                    Err("refused")
                } else {
                    Ok(())
                }
            },
            || {},
        );
        assert!(matches!(r, Err(PipelineError::Insert("refused"))));
        assert_eq!(batches, 3);
    }

    #[test]
    fn a_failing_insert_stops_the_reader_and_is_returned() {
        let data = lines(100_000);
        let mut batches = 0;
        let r = run(
            data.as_bytes(),
            Progress::default(),
            &rules(),
            Limits { max_rows: 10, max_bytes: 1 << 20 },
            |_: &Rows| {
                batches += 1;
                if batches == 3 {
                    Err("refused")
                } else {
                    Ok(())
                }
            },
            || {},
        );
        assert!(matches!(r, Err(PipelineError::Insert("refused"))));
        assert_eq!(batches, 3);
    }

    #[test]
    fn a_panicking_insert_unwinds_after_the_reader_is_stopped() {
        // PostgreSQL's ERROR reaches Rust as an unwinding panic: the reader must let go of the
        // scope (it would otherwise wait on the in-flight gauge for ever).
        let data = lines(100_000);
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _ = run(
                data.as_bytes(),
                Progress::default(),
                &rules(),
                Limits { max_rows: 1, max_bytes: 64 },
                |_: &Rows| -> Result<(), ()> { panic!("canceling statement due to user request") },
                || {},
            );
        }));
        assert!(caught.is_err());
    }

    #[test]
    fn the_in_flight_gauge_holds_the_reader_back_until_bytes_are_inserted_or_it_is_closed() {
        let g = InFlight::new(100);
        assert!(g.acquire(60));
        let done = AtomicUsize::new(0);
        std::thread::scope(|scope| {
            scope.spawn(|| {
                let ok = g.acquire(60);
                done.store(if ok { 1 } else { 2 }, Ordering::SeqCst);
            });
            std::thread::sleep(Duration::from_millis(50));
            assert_eq!(done.load(Ordering::SeqCst), 0, "60 + 60 > 100: the second batch waits");
            g.release(60);
        });
        assert_eq!(done.load(Ordering::SeqCst), 1);
        // One batch larger than the limit passes once nothing else is in flight.
        g.release(60);
        assert!(g.acquire(500));
        std::thread::scope(|scope| {
            let waiter = scope.spawn(|| g.acquire(1));
            std::thread::sleep(Duration::from_millis(20));
            g.close();
            assert_eq!(waiter.join().ok(), Some(false), "closing releases a waiting reader");
        });
        assert!(!g.acquire(1));
    }

    #[test]
    fn batches_respect_their_row_and_byte_limits() {
        let data = lines(5000);
        let limits = Limits { max_rows: 1_000_000, max_bytes: 4096 };
        let mut n = 0;
        run(
            data.as_bytes(),
            Progress::default(),
            &rules(),
            limits,
            |rows: &Rows| -> Result<(), ()> {
                n += rows.len();
                // A batch is sent as soon as it reaches the limit: at most one row more.
                assert!(rows.bytes() < limits.max_bytes + 1024, "{}", rows.bytes());
                Ok(())
            },
            || {},
        )
        .unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(n, 5000);
    }

    #[test]
    fn idle_runs_while_the_reader_is_busy() {
        // A reader that blocks: idle must keep being called (that is where interrupts are
        // checked), and a panic from it (an interrupt's ERROR) ends the run.
        struct Slow(usize);
        impl cortex_buffer_core::indexer::lines::HoleSkip for Slow {}
        impl Read for Slow {
            fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
                std::thread::sleep(Duration::from_millis(20));
                self.0 += 1;
                if self.0 > 30 || out.is_empty() {
                    return Ok(0);
                }
                out[0] = b' ';
                Ok(1)
            }
        }
        let calls = AtomicUsize::new(0);
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _ = run(
                Slow(0),
                Progress::default(),
                &rules(),
                Limits { max_rows: 10, max_bytes: 1 << 20 },
                |_: &Rows| -> Result<(), ()> { Ok(()) },
                || {
                    if calls.fetch_add(1, Ordering::SeqCst) == 3 {
                        panic!("canceling statement due to statement timeout");
                    }
                },
            );
        }));
        assert!(caught.is_err());
        assert_eq!(calls.load(Ordering::SeqCst), 4);
    }

    #[test]
    fn the_helper_thread_starts_with_every_signal_blocked_and_the_caller_keeps_its_mask() {
        fn blocked(sig: i32) -> bool {
            // SAFETY: reads the calling thread's mask into a local set.
            unsafe {
                let mut set: libc::sigset_t = std::mem::zeroed();
                libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut set);
                libc::sigismember(&set, sig) == 1
            }
        }
        let before = (blocked(libc::SIGINT), blocked(libc::SIGUSR1));
        std::thread::scope(|scope| {
            let h = spawn_with_signals_blocked(scope, || {
                [libc::SIGINT, libc::SIGTERM, libc::SIGUSR1, libc::SIGUSR2, libc::SIGALRM, libc::SIGHUP]
                    .iter()
                    .all(|s| blocked(*s))
            })
            .unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(h.join().ok(), Some(true));
        });
        assert_eq!((blocked(libc::SIGINT), blocked(libc::SIGUSR1)), before);
    }
}
