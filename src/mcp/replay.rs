//! A handshake-era session's replay ring: every frame its streams send, numbered, so a client
//! whose connection dropped resumes with `Last-Event-ID` on GET and gets exactly what it
//! missed, or, when the ring has moved past its cursor, a clear "Replay window exceeded"
//! (never a silently short replay).
//!
//! An event id is `<stream>-<seq>`: `seq` counts frames across the session (so ids are unique
//! within it) and `stream` says which stream it belongs to (0 is the GET channel; each
//! streamed call gets its own). A stream's last frame (its result) is pinned: count and byte
//! eviction skip it until the client acknowledges it (a resume cursor at or past it) or more
//! than [`PINNED_LAST`] are pinned, when the oldest loses its exemption.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

/// The most frames a ring keeps, and their most bytes.
pub const RING_EVENTS: usize = 1024;
pub const RING_BYTES: usize = 2 << 20;
/// The most bytes all rings of the server keep together: past it, a ring that grows evicts
/// its own oldest unpinned frames first (so many sessions cannot add up to gigabytes).
pub const ALL_RINGS_BYTES: usize = 256 << 20;

/// The bytes every ring of a server holds, shared by them.
pub type Budget = Arc<std::sync::atomic::AtomicUsize>;
/// The most pinned last frames (results) a ring exempts from eviction.
pub const PINNED_LAST: usize = 16;
/// The GET channel's stream number.
pub const CHANNEL: u64 = 0;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EventId {
    pub stream: u64,
    pub seq: u64,
}

impl EventId {
    pub fn parse(text: &str) -> Option<Self> {
        let (stream, seq) = text.trim().split_once('-')?;
        Some(Self { stream: stream.parse().ok()?, seq: seq.parse().ok()? })
    }
}

impl std::fmt::Display for EventId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.stream, self.seq)
    }
}

/// One frame: its id, its JSON (empty for a priming event), whether it ends its stream.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    pub id: EventId,
    pub data: Arc<str>,
    pub last: bool,
}

/// The ring has moved past the cursor (or never knew its stream).
#[derive(Debug, PartialEq, Eq)]
pub struct Gap;

#[derive(Default, Debug)]
struct Inner {
    next_seq: u64,
    next_stream: u64,
    events: VecDeque<Event>,
    bytes: usize,
    /// Per stream, the highest seq evicted: a cursor below it has lost frames.
    evicted: HashMap<u64, u64>,
    /// Streams this ring has opened (a cursor naming another is not ours).
    opened: std::collections::HashSet<u64>,
    /// Streams whose last frame has been pushed: a follower past it has nothing to wait for.
    finished: std::collections::HashSet<u64>,
    /// Which GET currently owns the channel (a new GET supersedes the last).
    channel_owner: u64,
    closed: bool,
    /// Only the GET channel ends (the server is stopping; calls still deliver their results).
    channel_closed: bool,
}

/// One session's ring, shared by the calls writing to it and the connections reading it.
#[derive(Debug)]
pub struct Ring {
    inner: Mutex<Inner>,
    /// Bumped on every change readers wait for: a frame, a takeover, the end.
    changed: watch::Sender<u64>,
    budget: Budget,
    budget_limit: usize,
}

impl Default for Ring {
    fn default() -> Self {
        Self::within(Budget::default(), ALL_RINGS_BYTES)
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        let bytes = self.inner.get_mut().map(|i| i.bytes).unwrap_or_else(|e| e.into_inner().bytes);
        self.budget.fetch_sub(bytes, Ordering::Relaxed);
    }
}

impl Ring {
    /// A ring whose bytes count against `budget`, shared with the server's other rings.
    pub fn within(budget: Budget, budget_limit: usize) -> Self {
        let mut inner = Inner { next_stream: 1, ..Inner::default() };
        inner.opened.insert(CHANNEL);
        Self { inner: Mutex::new(inner), changed: watch::channel(0).0, budget, budget_limit }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn wake(&self) {
        self.changed.send_modify(|v| *v += 1);
    }

    /// What readers wait on.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// The newest frame's seq: a reader that starts now reads after it.
    pub fn head(&self) -> Option<u64> {
        self.lock().next_seq.checked_sub(1)
    }

    /// A new stream for a streamed call.
    pub fn open_stream(&self) -> u64 {
        let mut inner = self.lock();
        let stream = inner.next_stream;
        inner.next_stream += 1;
        inner.opened.insert(stream);
        stream
    }

    /// Appends a frame; evicts the oldest unpinned frames past the bounds.
    pub fn push(&self, stream: u64, data: impl Into<Arc<str>>, last: bool) -> EventId {
        let id = {
            let mut inner = self.lock();
            let id = EventId { stream, seq: inner.next_seq };
            inner.next_seq += 1;
            let data = data.into();
            inner.bytes += data.len();
            self.budget.fetch_add(data.len(), Ordering::Relaxed);
            if last {
                inner.finished.insert(stream);
            }
            inner.events.push_back(Event { id, data, last });
            let over_budget =
                |freed: usize| self.budget.load(Ordering::Relaxed).saturating_sub(freed) > self.budget_limit;
            let before = inner.events.len() + 1;
            let freed = evict(&mut inner, over_budget);
            let evicted = before.saturating_sub(inner.events.len() + 1);
            if evicted > 0 {
                crate::metrics::replay_evicted(evicted as u64);
            }
            self.budget.fetch_sub(freed, Ordering::Relaxed);
            id
        };
        self.wake();
        id
    }

    /// The frames of `stream` after `cursor` (a seq), oldest first. A cursor the ring has
    /// moved past, or a stream it never opened, is a [`Gap`]. Pinned frames of the stream at
    /// or before the cursor are released: the client has them.
    pub fn after(&self, stream: u64, cursor: Option<u64>) -> Result<Vec<Event>, Gap> {
        let mut inner = self.lock();
        if !inner.opened.contains(&stream) {
            return Err(Gap);
        }
        // A cursor this ring never issued (from a stream another replica served, say): what
        // came before it is not here either.
        if cursor.is_some_and(|c| c >= inner.next_seq) {
            return Err(Gap);
        }
        if let (Some(cursor), Some(&evicted)) = (cursor, inner.evicted.get(&stream))
            && evicted > cursor
        {
            return Err(Gap);
        }
        if cursor.is_none() && inner.evicted.contains_key(&stream) {
            return Err(Gap);
        }
        if let Some(cursor) = cursor {
            for e in inner.events.iter_mut() {
                if e.id.stream == stream && e.id.seq <= cursor {
                    e.last = false;
                }
            }
        }
        Ok(inner
            .events
            .iter()
            .filter(|e| e.id.stream == stream && cursor.is_none_or(|c| e.id.seq > c))
            .cloned()
            .collect())
    }

    /// Whether `stream`'s last frame has been pushed.
    pub fn is_finished(&self, stream: u64) -> bool {
        self.lock().finished.contains(&stream)
    }

    /// A GET takes the channel over; the one before it (if any) ends. Returns the new owner.
    pub fn take_channel(&self) -> u64 {
        let owner = {
            let mut inner = self.lock();
            inner.channel_owner += 1;
            inner.channel_owner
        };
        self.wake();
        owner
    }

    pub fn channel_owner(&self) -> u64 {
        self.lock().channel_owner
    }

    /// The session ended: every reader ends.
    pub fn close(&self) {
        self.lock().closed = true;
        self.wake();
    }

    pub fn is_closed(&self) -> bool {
        self.lock().closed
    }

    /// The server is stopping: the GET channel ends; streamed calls end with their results.
    pub fn close_channel(&self) {
        self.lock().channel_closed = true;
        self.wake();
    }

    pub fn is_channel_closed(&self) -> bool {
        let inner = self.lock();
        inner.closed || inner.channel_closed
    }
}

/// Evicts past the ring's own bounds, and while the server's rings together are over their
/// budget (`over_budget(freed so far)`; never the frame just pushed). The bytes freed.
fn evict(inner: &mut Inner, over_budget: impl Fn(usize) -> bool) -> usize {
    let mut freed = 0;
    loop {
        let over_own = inner.events.len() > RING_EVENTS || inner.bytes > RING_BYTES;
        let over_all = inner.events.len() > 1 && over_budget(freed);
        if !over_own && !over_all {
            return freed;
        }
        let pinned = inner.events.iter().filter(|e| e.last).count();
        // The oldest unpinned frame goes; with too many pinned, the oldest pinned one.
        let victim = match inner.events.iter().position(|e| !e.last) {
            Some(i) if pinned <= PINNED_LAST => i,
            _ => 0,
        };
        if !over_own && victim + 1 == inner.events.len() {
            return freed;
        }
        let Some(event) = inner.events.remove(victim) else { return freed };
        inner.bytes -= event.data.len();
        freed += event.data.len();
        let highest = inner.evicted.entry(event.id.stream).or_insert(0);
        *highest = (*highest).max(event.id.seq);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resume_gets_its_own_stream_after_the_cursor_and_nothing_else() {
        let ring = Ring::default();
        let (a, b) = (ring.open_stream(), ring.open_stream());
        let first = ring.push(a, "a1", false);
        ring.push(b, "b1", false);
        ring.push(a, "a2", true);
        let missed = ring.after(a, Some(first.seq)).unwrap();
        assert_eq!(missed.iter().map(|e| &*e.data).collect::<Vec<_>>(), vec!["a2"]);
        assert!(missed[0].last);
        assert_eq!(ring.after(99, None), Err(Gap), "a stream this ring never opened");
        assert_eq!(EventId::parse(&first.to_string()), Some(first));
        assert_eq!(EventId::parse("x-1"), None);
    }

    #[test]
    fn eviction_keeps_results_and_turns_a_lost_cursor_into_a_gap() {
        let ring = Ring::default();
        let (talky, quiet) = (ring.open_stream(), ring.open_stream());
        let cursor = ring.push(talky, "first", false);
        let result = ring.push(quiet, "the result", true);
        for i in 0..RING_EVENTS + 10 {
            ring.push(talky, format!("progress {i}"), false);
        }
        assert_eq!(ring.after(talky, Some(cursor.seq)), Err(Gap), "frames after the cursor were evicted");
        let kept = ring.after(quiet, None).unwrap();
        assert_eq!(kept.len(), 1, "the pinned result survived the churn");
        assert_eq!(kept[0].id, result);
        // Acknowledged (a cursor at it), it is an ordinary frame again.
        assert!(ring.after(quiet, Some(result.seq)).unwrap().is_empty());
        for i in 0..RING_EVENTS + 10 {
            ring.push(talky, format!("more {i}"), false);
        }
        assert_eq!(ring.after(quiet, Some(result.seq - 1)), Err(Gap));
    }

    #[test]
    fn rings_together_stay_within_the_servers_budget() {
        let budget = Budget::default();
        let (a, b) = (Ring::within(budget.clone(), 100), Ring::within(budget.clone(), 100));
        let (sa, sb) = (a.open_stream(), b.open_stream());
        for _ in 0..5 {
            a.push(sa, "x".repeat(30), false);
        }
        assert!(budget.load(Ordering::Relaxed) <= 100, "one ring alone keeps to the budget");
        let first = b.push(sb, "y".repeat(30), false);
        let last = b.push(sb, "y".repeat(30), false);
        assert!(budget.load(Ordering::Relaxed) <= 130, "the growing ring gave back its own frames");
        let kept = b.after(sb, Some(first.seq)).unwrap();
        assert_eq!(kept.iter().map(|e| e.id).collect::<Vec<_>>(), vec![last], "but never the frame just pushed");
        drop(a);
        assert!(budget.load(Ordering::Relaxed) <= 30, "a ring's bytes leave the budget with it");
    }

    #[test]
    fn too_many_pinned_results_lose_their_exemption_oldest_first() {
        let ring = Ring::default();
        let streams: Vec<u64> = (0..PINNED_LAST + 2).map(|_| ring.open_stream()).collect();
        for s in &streams {
            ring.push(*s, "result", true);
        }
        let talky = ring.open_stream();
        for i in 0..RING_EVENTS * 2 {
            ring.push(talky, format!("{i}"), false);
        }
        assert_eq!(ring.after(streams[0], None), Err(Gap));
        assert_eq!(ring.after(*streams.last().unwrap(), None).unwrap().len(), 1);
    }
}
