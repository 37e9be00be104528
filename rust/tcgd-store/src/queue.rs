//! Commits on a background thread: the recording thread hands a point over and goes on,
//! while Parquet encoding, compression and the fsyncs happen on the writer thread.
//!
//! Points are taken in the order they were handed over and committed in groups (see
//! `writer.rs`): the thread also wakes when the waiting group is due, so points reach the
//! log within `commit_interval` even when no more arrive. A point is durable once `flush`
//! returns; a crash before that loses the points still queued or waiting, never a
//! committed one.
//! The first failed commit stops the queue: the points queued after it are dropped (their
//! indices assumed it), and every later call returns that failure.

use std::collections::{HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::error::{Result, StoreError};
use crate::manifest::RunHeader;
use crate::writer::RunWriter;

/// Work for the writer thread: commits one point through the writer.
pub type CommitJob = Box<dyn FnOnce(&mut RunWriter) -> Result<()> + Send>;

enum Message {
    Commit {
        label: String,
        /// Host bytes the job keeps alive until it has run (counted against the queue's
        /// byte budget).
        held: usize,
        job: CommitJob,
    },
    /// Answered once every earlier message is done.
    Flush(SyncSender<()>),
    Close {
        complete: bool,
    },
    /// Removes the run (`RunWriter::discard`) and answers how that went.
    Discard(SyncSender<Result<()>>),
}

/// The first failure of the writer thread, kept for every later call.
type Failure = Arc<Mutex<Option<(String, String)>>>;

pub struct CommitQueue {
    dir: PathBuf,
    header: RunHeader,
    sender: Option<Sender>,
    worker: Option<JoinHandle<()>>,
    failure: Failure,
    /// Points handed over so far (committed or queued).
    submitted: u64,
    /// Labels of the points handed over and of those reserved.
    labels: HashSet<String>,
    /// Labels taken by a producer for points it hands over later ([`CommitQueue::reserve`]).
    reserved: HashSet<String>,
    closed: bool,
}

fn used_label(label: &str) -> StoreError {
    StoreError::invalid(
        "label",
        format!("point label '{label}' is already used in this run"),
    )
}

impl Message {
    fn held(&self) -> usize {
        match self {
            Message::Commit { held, .. } => *held,
            _ => 0,
        }
    }
}

impl CommitQueue {
    /// Starts the writer thread. At most `depth` points wait in the queue, holding at most
    /// `held_budget` bytes between them (a point larger than that waits alone); handing
    /// over one more blocks until the writer has taken enough of them, which bounds the
    /// memory they hold while letting points that hold little (summaries) queue deep, so
    /// that the writer's periodic group commit does not hold the recording thread up.
    pub fn start(writer: RunWriter, depth: usize, held_budget: usize) -> Result<CommitQueue> {
        let dir = writer.dir().to_path_buf();
        let header = writer.manifest().header.clone();
        let submitted = writer.point_count();
        let labels = writer.labels().cloned().collect();
        let (sender, receiver) = channel(depth.max(1), held_budget);
        let failure: Failure = Arc::new(Mutex::new(None));
        let worker_failure = Arc::clone(&failure);
        let worker = std::thread::Builder::new()
            .name("tcgd-run-writer".into())
            .spawn(move || run_worker(writer, &receiver, &worker_failure))
            .map_err(StoreError::io(&dir))?;
        Ok(CommitQueue {
            dir,
            header,
            sender: Some(sender),
            worker: Some(worker),
            failure,
            submitted,
            labels,
            reserved: HashSet::new(),
            closed: false,
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn header(&self) -> &RunHeader {
        &self.header
    }

    /// The index the next handed-over point gets.
    pub fn next_point_index(&self) -> u64 {
        self.submitted
    }

    pub fn point_count(&self) -> u64 {
        self.submitted
    }

    /// Whether a point handed over or reserved has this label.
    pub fn has_label(&self, label: &str) -> bool {
        self.labels.contains(label)
    }

    /// Takes `label` now for a point handed over later (a device point, submitted once
    /// the device has run it): from here on the label is used, and [`CommitQueue::submit`]
    /// accepts it once. An error when the label is already used, so a repeated label is
    /// refused when the point ends, not when the device has finished it.
    pub fn reserve(&mut self, label: &str) -> Result<()> {
        self.check_usable()?;
        if !self.labels.insert(label.to_owned()) {
            return Err(used_label(label));
        }
        self.reserved.insert(label.to_owned());
        Ok(())
    }

    /// Gives back a label [`CommitQueue::reserve`] took for a point that was never made.
    pub fn release(&mut self, label: &str) {
        if self.reserved.remove(label) {
            self.labels.remove(label);
        }
    }

    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// Hands a point over; `job` runs on the writer thread and must commit exactly one
    /// point (index `next_point_index()`, label `label`). `held` is the host bytes the job
    /// keeps alive until it has run.
    pub fn submit(&mut self, label: &str, held: usize, job: CommitJob) -> Result<u64> {
        self.check_usable()?;
        let reserved = self.reserved.contains(label);
        if !reserved && self.labels.contains(label) {
            return Err(used_label(label));
        }
        self.send(Message::Commit {
            label: label.to_owned(),
            held,
            job,
        })?;
        self.reserved.remove(label);
        self.labels.insert(label.to_owned());
        self.submitted += 1;
        Ok(self.submitted - 1)
    }

    /// Waits until every point handed over is durable.
    pub fn flush(&mut self) -> Result<()> {
        if self.closed {
            return self.check_failure();
        }
        let (done, wait) = sync_channel(1);
        self.send(Message::Flush(done))?;
        // A closed channel means the worker is gone; the failure says why.
        let _ = wait.recv();
        self.check_failure()
    }

    /// Commits what is queued, then closes the run (`complete` as `RunWriter::close`).
    pub fn close(&mut self, complete: bool) -> Result<()> {
        if self.closed {
            return self.check_failure();
        }
        self.closed = true;
        let sent = self.send(Message::Close { complete });
        self.sender = None;
        if let Some(worker) = self.worker.take() {
            if worker.join().is_err() {
                self.record_failure("close", "the writer thread panicked".into());
            }
        }
        sent?;
        self.check_failure()
    }

    /// Removes the run instead of closing it (`RunWriter::discard`): for a recording that
    /// failed as a whole. Points still queued are dropped with it.
    pub fn discard(&mut self) -> Result<()> {
        if self.closed {
            return Err(StoreError::RunFinished {
                path: self.dir.clone(),
            });
        }
        self.closed = true;
        let (done, wait) = sync_channel(1);
        let sent = self.send(Message::Discard(done));
        self.sender = None;
        if let Some(worker) = self.worker.take() {
            let _ = worker.join();
        }
        sent?;
        wait.recv().unwrap_or_else(|_| {
            Err(StoreError::BackgroundCommit {
                run: self.dir.clone(),
                label: "discard".into(),
                reason: "the writer thread stopped".into(),
            })
        })
    }

    fn check_usable(&self) -> Result<()> {
        if self.closed {
            return Err(StoreError::RunFinished {
                path: self.dir.clone(),
            });
        }
        self.check_failure()
    }

    fn check_failure(&self) -> Result<()> {
        match &*self.failure.lock().unwrap_or_else(|e| e.into_inner()) {
            None => Ok(()),
            Some((label, reason)) => Err(StoreError::BackgroundCommit {
                run: self.dir.clone(),
                label: label.clone(),
                reason: reason.clone(),
            }),
        }
    }

    fn record_failure(&self, label: &str, reason: String) {
        let mut failure = self.failure.lock().unwrap_or_else(|e| e.into_inner());
        failure.get_or_insert((label.to_owned(), reason));
    }

    fn send(&self, message: Message) -> Result<()> {
        let sent = self
            .sender
            .as_ref()
            .is_some_and(|s| s.send(message).is_ok());
        if !sent {
            self.record_failure("", "the writer thread stopped".into());
            return self.check_failure();
        }
        Ok(())
    }
}

impl Drop for CommitQueue {
    /// A queue dropped without `close` still commits what it was handed and leaves the
    /// run incomplete, like a writer dropped without `close`.
    fn drop(&mut self) {
        if !self.closed {
            let _ = self.close(false);
        }
    }
}

fn run_worker(mut writer: RunWriter, receiver: &Receiver, failure: &Failure) {
    let failed = |failure: &Failure| failure.lock().map_or(true, |f| f.is_some());
    let note = |failure: &Failure, label: &str, reason: String| {
        let mut f = failure.lock().unwrap_or_else(|e| e.into_inner());
        f.get_or_insert((label.to_owned(), reason));
    };
    loop {
        let message = match writer.commit_due_in() {
            Some(due) => match receiver.recv_timeout(due) {
                Ok(message) => message,
                Err(RecvTimeoutError::Timeout) => {
                    if !failed(failure) {
                        let waiting = writer.waiting_labels();
                        if let Err(e) = writer.commit_if_due() {
                            note(failure, &waiting, e.to_string());
                        }
                    }
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => break,
            },
            None => match receiver.recv() {
                Some(message) => message,
                None => break,
            },
        };
        match message {
            Message::Commit { label, job, .. } => {
                if failed(failure) {
                    continue;
                }
                // A panic in a job must not take the process (or the queue) down silently.
                let outcome =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job(&mut writer)));
                let reason = match outcome {
                    Ok(Ok(())) => None,
                    Ok(Err(e)) => Some(e.to_string()),
                    Err(_) => Some("the commit panicked".to_owned()),
                };
                if let Some(reason) = reason {
                    note(failure, &label, reason);
                }
            }
            Message::Flush(done) => {
                if !failed(failure) {
                    let waiting = writer.waiting_labels();
                    if let Err(e) = writer.flush() {
                        note(failure, &waiting, e.to_string());
                    }
                }
                let _ = done.send(());
            }
            Message::Discard(done) => {
                let _ = done.send(writer.discard());
                return;
            }
            Message::Close { complete } => {
                let waiting = writer.waiting_labels();
                if let Err(e) = writer.close(complete && !failed(failure)) {
                    let label = if waiting.is_empty() {
                        "close".to_owned()
                    } else {
                        waiting
                    };
                    note(failure, &label, e.to_string());
                }
                return;
            }
        }
    }
    // Every sender is gone without a close: leave the run incomplete.
    let _ = writer.close(false);
}

/// The queue between the recording thread and the writer thread: at most `depth` messages
/// holding at most `budget` bytes (or one message holding more), in order. A sender that
/// finds it full sleeps until it is half empty again, not until one message is taken: a producer that outpaces the writer (points handed over back to back)
/// then wakes once per half queue instead of once per point, and each wake-up is a system
/// call and a context switch on both threads. Either side waking the other only when it
/// sleeps keeps the common case (nobody waiting) free of system calls.
struct Channel {
    state: Mutex<ChannelState>,
    /// A message arrived, or the sender is gone.
    arrived: Condvar,
    /// The queue has room again, or the receiver is gone.
    room: Condvar,
    depth: usize,
    budget: usize,
}

#[derive(Default)]
struct ChannelState {
    messages: VecDeque<Message>,
    /// Bytes the queued messages hold.
    held: usize,
    sender_waits: bool,
    receiver_waits: bool,
    sender_gone: bool,
    receiver_gone: bool,
}

struct Sender(Arc<Channel>);
struct Receiver(Arc<Channel>);

fn channel(depth: usize, budget: usize) -> (Sender, Receiver) {
    let channel = Arc::new(Channel {
        state: Mutex::new(ChannelState::default()),
        arrived: Condvar::new(),
        room: Condvar::new(),
        depth,
        budget,
    });
    (Sender(Arc::clone(&channel)), Receiver(channel))
}

impl Channel {
    /// Whether a message holding `held` bytes must wait for room.
    fn full(&self, state: &ChannelState, held: usize) -> bool {
        state.messages.len() >= self.depth
            || (state.held > 0 && state.held.saturating_add(held) > self.budget)
    }

    /// Whether a waiting sender is woken: the queue half empty, in messages and in bytes.
    fn half_empty(&self, state: &ChannelState) -> bool {
        state.messages.len() <= self.depth / 2 && state.held <= self.budget / 2
    }

    fn lock(&self) -> MutexGuard<'_, ChannelState> {
        // No code panics while holding the lock; a poisoned one still holds a valid queue.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Sender {
    /// Queues `message`, waiting for room; `Err` when the receiver is gone.
    fn send(&self, message: Message) -> std::result::Result<(), Message> {
        let channel = &self.0;
        let mut state = channel.lock();
        let held = message.held();
        while channel.full(&state, held) && !state.receiver_gone {
            state.sender_waits = true;
            state = channel.room.wait(state).unwrap_or_else(|e| e.into_inner());
        }
        if state.receiver_gone {
            return Err(message);
        }
        state.messages.push_back(message);
        state.held += held;
        if state.receiver_waits {
            state.receiver_waits = false;
            channel.arrived.notify_one();
        }
        Ok(())
    }
}

impl Drop for Sender {
    fn drop(&mut self) {
        let mut state = self.0.lock();
        state.sender_gone = true;
        self.0.arrived.notify_one();
    }
}

impl Receiver {
    /// The next message, waiting at most until `deadline` (forever when `None`): `Err`
    /// when it passed first, or when the queue is empty and the sender gone.
    fn take(&self, deadline: Option<Instant>) -> std::result::Result<Message, RecvTimeoutError> {
        let channel = &self.0;
        let mut state = channel.lock();
        loop {
            if let Some(message) = state.messages.pop_front() {
                state.held -= message.held();
                if state.sender_waits && channel.half_empty(&state) {
                    state.sender_waits = false;
                    channel.room.notify_one();
                }
                return Ok(message);
            }
            if state.sender_gone {
                return Err(RecvTimeoutError::Disconnected);
            }
            state.receiver_waits = true;
            state = match deadline {
                None => channel
                    .arrived
                    .wait(state)
                    .unwrap_or_else(|e| e.into_inner()),
                Some(deadline) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        state.receiver_waits = false;
                        return Err(RecvTimeoutError::Timeout);
                    }
                    channel
                        .arrived
                        .wait_timeout(state, left)
                        .unwrap_or_else(|e| e.into_inner())
                        .0
                }
            };
        }
    }

    fn recv(&self) -> Option<Message> {
        self.take(None).ok()
    }

    fn recv_timeout(&self, wait: Duration) -> std::result::Result<Message, RecvTimeoutError> {
        self.take(Some(Instant::now() + wait))
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let mut state = self.0.lock();
        state.receiver_gone = true;
        self.0.room.notify_one();
        // What was queued goes with the queue (dropped outside the lock).
        let dropped = std::mem::take(&mut state.messages);
        drop(state);
        drop(dropped);
    }
}
