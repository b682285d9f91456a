//! Per-thread record buffers: fixed-size 16-byte records in pre-faulted 64 KiB chunks.
//!
//! Ownership protocol (what makes the raw pointers below sound):
//! - A thread's [`ThreadBuffer`] is created on its first event, registered in [`REGISTRY`]
//!   and never freed while the thread lives: the registry drops it only after the thread
//!   has exited *and* its records were drained.
//! - Only the owning thread writes records and moves its write position. Chunks are never
//!   freed or handed back to the pool while they belong to a live thread, except by the owner
//!   itself when it starts a new session, under the buffer's `chunks` lock.
//! - The hot path touches only the thread's own thread-local state and the slot it writes:
//!   nothing is published per event. Each slot vouches for itself instead: its word carries
//!   the session's [tag](super::word::session_tag) and its tick, stored last with Release,
//!   is newer than the previous session's end. The drainer reads the chunk list under the `chunks` lock and
//!   takes slots, tick first (Acquire), up to the first one that fails either test or is
//!   newer than the stop. Chunks are recycled without being cleared; what a slot held before
//!   fails the test. Slots are atomics, so a late write from a thread that has not yet
//!   noticed the stop is a race on values, never on memory, and is left out by its tick.
//!
//! After `fork` (a DataLoader worker, a `multiprocessing` child): the child has one thread,
//! the one that forked, and a copy of every buffer. A session inherited in the child holds
//! only what the child records after the fork: the drain there leaves out the buffers of the
//! parent's other threads (they do not exist in the child; each [`ThreadBuffer`] says in
//! which process its thread records) and what the forking thread recorded before the fork
//! (older than the fork's tick). So the child's `stop()` costs what its own records cost,
//! not what the parent had recorded (8 recording threads' ~2.8M events took over a minute to
//! sort in a child before). The parent's buffers in the child are forgotten, never freed or
//! locked: a lock held by a parent's thread at the fork stays held in the child, and freeing
//! would copy pages the child shares with the parent. Fork handlers ([`at_fork`]) hold the
//! registry and pool locks across the fork, so the child's copies are unlocked.

use std::cell::{Cell, RefCell};
use std::ptr::null_mut;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};

use super::autograd::Autograd;
use super::memory::MemoryReport;
use super::op_stack::OpStack;
use super::word::{session_tag, tag_of, untagged};
use crate::Value;
use crate::{lock, wait};

/// Records per chunk: 4096 × 16 B = 64 KiB, small enough to stay cache-friendly and to
/// pre-fault cheaply, large enough that taking a new chunk is rare.
pub(crate) const CHUNK_SLOTS: usize = 4096;
const PAGE_SLOTS: usize = 4096 / std::mem::size_of::<Slot>();

/// One record: what happened (`word`, with the session tag) and when (`tick`).
#[derive(Default)]
#[repr(C)]
pub(crate) struct Slot {
    word: AtomicU64,
    tick: AtomicU64,
}

type Chunk = Box<[Slot]>;

fn new_chunk() -> Chunk {
    let chunk: Chunk = (0..CHUNK_SLOTS).map(|_| Slot::default()).collect();
    // Atomic stores cannot be elided, so every page is really touched here rather than on
    // the recording path, even if the allocator handed out lazily mapped zero pages.
    for slot in chunk.iter().step_by(PAGE_SLOTS) {
        slot.word.store(0, Ordering::Relaxed);
    }
    chunk
}

/// Pre-faulted chunks waiting for a thread.
static POOL: Mutex<Vec<Chunk>> = Mutex::new(Vec::new());
/// Every thread that has recorded and whose records may still be needed.
static REGISTRY: Mutex<Vec<Arc<ThreadBuffer>>> = Mutex::new(Vec::new());
static NEXT_THREAD_INDEX: AtomicU32 = AtomicU32::new(0);
/// The tick at which this process was forked from its parent (0 in a process that was not):
/// the records of an inherited session older than it are the parent's (module docs).
static FORK_TICK: AtomicU64 = AtomicU64::new(0);
/// The per-thread cap, in records.
static MAX_RECORDS: AtomicUsize = AtomicUsize::new(4 << 20);

/// Sets the per-thread cap in records for sessions started later.
pub(crate) fn set_max_records_per_thread(records: u64) {
    MAX_RECORDS.store(records.try_into().unwrap_or(usize::MAX), Ordering::Relaxed);
}

/// Tops the pool up to `chunks` pre-faulted chunks (done at prepare, off the recording path).
pub(crate) fn prefill_pool(chunks: usize) {
    let have = lock(&POOL).len();
    let fresh: Vec<Chunk> = (have..chunks).map(|_| new_chunk()).collect();
    lock(&POOL).extend(fresh);
}

/// Below this many pooled chunks, the refill thread is woken.
const POOL_LOW: usize = 16;
/// The refill thread tops the pool up to this many chunks (4 MiB).
const POOL_HIGH: usize = 64;

fn take_chunk() -> Chunk {
    let (chunk, left) = {
        let mut pool = lock(&POOL);
        (pool.pop(), pool.len())
    };
    if left < POOL_LOW {
        refiller().request();
    }
    // Only when the refill thread has fallen behind does a recording thread fault pages in.
    chunk.unwrap_or_else(new_chunk)
}

/// A background thread that pre-faults chunks, so recording threads that fill many chunks
/// take them ready-made instead of paying the first touch of fresh pages.
struct Refiller {
    wanted: Mutex<bool>,
    wake: Condvar,
}

impl Refiller {
    fn request(&self) {
        let mut wanted = lock(&self.wanted);
        if !*wanted {
            *wanted = true;
            self.wake.notify_one();
        }
    }

    fn run(&self) {
        loop {
            {
                let mut wanted = lock(&self.wanted);
                while !*wanted {
                    wanted = wait(&self.wake, wanted);
                }
            }
            prefill_pool(POOL_HIGH);
            *lock(&self.wanted) = false;
        }
    }
}

fn refiller() -> &'static Refiller {
    static REFILLER: OnceLock<&'static Refiller> = OnceLock::new();
    REFILLER.get_or_init(|| {
        let refiller: &'static Refiller = Box::leak(Box::new(Refiller {
            wanted: Mutex::new(false),
            wake: Condvar::new(),
        }));
        let spawned = std::thread::Builder::new()
            .name("omniprof-refill".into())
            .spawn(|| refiller.run());
        if let Err(e) = spawned {
            log::warn!("omniprof: no buffer refill thread ({e}); recording threads fault pages in");
        }
        refiller
    })
}

/// A thread's records for the session it last recorded in.
pub(crate) struct ThreadBuffer {
    pub(crate) index: u32,
    pub(crate) tid: i64,
    pub(crate) name: Mutex<String>,
    chunks: Mutex<Vec<Chunk>>,
    /// The session state the contents belong to.
    state: AtomicU64,
    dropped: AtomicU64,
    /// The words of dropped records that end a range (not [beginnings](Local::push)): their
    /// ranges' beginnings were kept, so the drain must not close them at the window's end.
    /// Only ranges open when the cap was reached can lose an end, so this stays small.
    dropped_ends: Mutex<Vec<u64>>,
    args: Mutex<Vec<(u32, Arc<str>, Value)>>,
    /// Allocator reports, kept compact (their six args each are made at the drain).
    memory: Mutex<Vec<(u32, MemoryReport)>>,
    /// What autograd knows of ops (their args and forward/backward links are made at the
    /// drain).
    autograd: Mutex<Vec<(u32, Autograd)>>,
    exited: AtomicBool,
    /// The process the owning thread records in: set at registration, and by the fork
    /// handler for the thread that forked. A buffer of another process is a parent's.
    pid: AtomicU32,
}

/// Everything a session needs from one thread, copied out of its buffer.
pub(crate) struct DrainedThread {
    pub(crate) index: u32,
    pub(crate) tid: i64,
    pub(crate) name: String,
    pub(crate) records: Vec<(u64, u64)>,
    pub(crate) args: Vec<(u32, Arc<str>, Value)>,
    pub(crate) autograd: Vec<(u32, Autograd)>,
    pub(crate) dropped: u64,
    pub(crate) dropped_ends: Vec<u64>,
}

/// The owning thread's view of its buffer; const-initialized and without `Drop`, so the
/// hot path pays no lazy-initialization check.
pub(crate) struct Local {
    pos: Cell<*mut Slot>,
    end: Cell<*mut Slot>,
    state: Cell<u64>,
    /// The session's tag, already in place in a record word.
    tag: Cell<u64>,
    /// Where the chunk being written starts, and how many records the earlier chunks of this
    /// session hold: the count the cap is checked against, kept off the per-event path.
    chunk_start: Cell<*mut Slot>,
    filled: Cell<usize>,
    seq: Cell<u32>,
    /// This thread's index, shifted into the high half of its correlation ids.
    id_base: Cell<u64>,
    /// Whether the session has correlation listeners (see [`super::correlation`]).
    listening: Cell<bool>,
    buffer: Cell<*const ThreadBuffer>,
    /// The thread's pushed ops ([`super::push_op`]), allocated on its first push.
    op_stack: Cell<*mut OpStack>,
    exiting: Cell<bool>,
}

thread_local! {
    static LOCAL: Local = const {
        Local {
            pos: Cell::new(null_mut()),
            end: Cell::new(null_mut()),
            state: Cell::new(0),
            tag: Cell::new(0),
            chunk_start: Cell::new(null_mut()),
            filled: Cell::new(0),
            seq: Cell::new(0),
            id_base: Cell::new(0),
            listening: Cell::new(false),
            buffer: Cell::new(std::ptr::null()),
            op_stack: Cell::new(null_mut()),
            exiting: Cell::new(false),
        }
    };
    static EXIT: ExitGuard = const { ExitGuard };
}

/// Runs `f` on the calling thread's [`Local`]. `LocalKey::with` is taken only for the
/// address, so it stays small enough to inline on the hot path whatever `f` does.
#[inline(always)]
pub(crate) fn with_local<R>(f: impl FnOnce(&Local) -> R) -> R {
    // SAFETY: used by this thread within this call only.
    f(unsafe { this_thread() })
}

/// The calling thread's [`Local`], for a hot path called from several places: its body is
/// then inlined into each, where a closure passed to [`with_local`] stays one function (a
/// call and a frame more per event).
///
/// # Safety
/// The reference is used by the calling thread only, within the call that took it.
#[inline(always)]
pub(crate) unsafe fn this_thread<'a>() -> &'a Local {
    let local: *const Local = LOCAL.with(|l| l as *const Local);
    // SAFETY: `LOCAL` is const-initialized and has no destructor, so its storage lives as
    // long as the thread; the caller keeps the reference on this thread, within its call.
    unsafe { &*local }
}

/// Marks the thread's buffer as exited when the thread ends, so it can be freed once drained.
struct ExitGuard;

impl Drop for ExitGuard {
    fn drop(&mut self) {
        let _ = LOCAL.try_with(|l| {
            l.exiting.set(true);
            l.pos.set(null_mut());
            l.end.set(null_mut());
            l.state.set(0);
            let ops = l.op_stack.replace(null_mut());
            if !ops.is_null() {
                // SAFETY: made by `allocate_op_stack` from a box, freed once (it was taken
                // out of the cell); `exiting` keeps another from being allocated.
                drop(unsafe { Box::from_raw(ops) });
            }
            let buffer = l.buffer.get();
            if !buffer.is_null() {
                // SAFETY: the registry keeps the buffer alive until `exited` is set and the
                // buffer drained; this is the last use of the pointer by its thread.
                unsafe { (*buffer).exited.store(true, Ordering::Release) };
            }
        });
    }
}

impl Local {
    /// Appends one record for session `state`; false when it was dropped (cap reached or the
    /// thread is exiting). `word` gets the sequence number when `begins_range`.
    #[inline(always)]
    pub(crate) fn push(&self, state: u64, word: u64, begins_range: bool) -> Option<u32> {
        if state != self.state.get() || self.pos.get() == self.end.get() {
            self.make_room(state, word, begins_range)?;
        }
        let seq = if begins_range {
            let seq = self.seq.get().wrapping_add(1);
            self.seq.set(seq);
            seq
        } else {
            word as u32
        };
        let tick = crate::clock::ticks();
        let pos = self.pos.get();
        // SAFETY: `make_room` guarantees `pos < end` inside a chunk this thread owns (see the
        // module docs).
        unsafe {
            (*pos)
                .word
                .store(word | self.tag.get() | seq as u64, Ordering::Relaxed);
            // Stored last: a drainer that sees this tick sees the word above.
            (*pos).tick.store(tick, Ordering::Release);
            self.pos.set(pos.add(1));
        }
        Some(seq)
    }

    /// The slow path: register the thread, start a new session's contents, or take a chunk.
    /// Past the cap the record (`word`) is dropped and counted, and remembered when it ends a
    /// range.
    #[cold]
    #[inline(never)]
    fn make_room(&self, state: u64, word: u64, begins_range: bool) -> Option<()> {
        if self.exiting.get() {
            return None;
        }
        let buffer = self.buffer_or_register();
        if state != self.state.get() {
            let mut chunks = lock(&buffer.chunks);
            let mut old = std::mem::take(&mut *chunks);
            let first = if old.is_empty() {
                take_chunk()
            } else {
                old.swap_remove(0)
            };
            lock(&POOL).extend(old);
            chunks.push(first);
            buffer.dropped.store(0, Ordering::Relaxed);
            lock(&buffer.dropped_ends).clear();
            lock(&buffer.args).clear();
            lock(&buffer.memory).clear();
            lock(&buffer.autograd).clear();
            buffer.state.store(state, Ordering::Release);
            self.filled.set(0);
            self.point_at(&mut chunks[0]);
            self.state.set(state);
            self.tag.set(session_tag(state));
            self.seq.set(0);
            self.listening.set(super::correlation::refresh_thread());
            if self.pos.get() != self.end.get() {
                return Some(());
            }
        }
        let mut chunks = lock(&buffer.chunks);
        // SAFETY: both point into the chunk being written, `chunk_start` at its first slot.
        let in_chunk = unsafe { self.pos.get().offset_from(self.chunk_start.get()) } as usize;
        let recorded = self.filled.get() + in_chunk;
        if recorded >= MAX_RECORDS.load(Ordering::Relaxed) {
            buffer.dropped.fetch_add(1, Ordering::Relaxed);
            if !begins_range {
                lock(&buffer.dropped_ends).push(word);
            }
            return None;
        }
        self.filled.set(recorded);
        chunks.push(take_chunk());
        let last = chunks.len() - 1;
        self.point_at(&mut chunks[last]);
        Some(())
    }

    /// Writes go to `chunk` next, up to its end or to the cap, whichever comes first.
    fn point_at(&self, chunk: &mut Chunk) {
        let room = MAX_RECORDS
            .load(Ordering::Relaxed)
            .saturating_sub(self.filled.get())
            .min(chunk.len());
        let start = chunk.as_mut_ptr();
        self.chunk_start.set(start);
        self.pos.set(start);
        // SAFETY: `room` ≤ the chunk's length, so the end stays within (or one past) it.
        self.end.set(unsafe { start.add(room) });
    }

    /// This thread's buffer, created and registered on first use.
    pub(crate) fn buffer_or_register(&self) -> &ThreadBuffer {
        if self.buffer.get().is_null() {
            let tid = current_tid();
            let name = std::thread::current()
                .name()
                .map(str::to_owned)
                .unwrap_or_else(|| os_thread_name(tid));
            let buffer = Arc::new(ThreadBuffer {
                index: NEXT_THREAD_INDEX.fetch_add(1, Ordering::Relaxed),
                tid,
                name: Mutex::new(name),
                chunks: Mutex::new(Vec::new()),
                state: AtomicU64::new(0),
                dropped: AtomicU64::new(0),
                dropped_ends: Mutex::new(Vec::new()),
                args: Mutex::new(Vec::new()),
                memory: Mutex::new(Vec::new()),
                autograd: Mutex::new(Vec::new()),
                exited: AtomicBool::new(false),
                pid: AtomicU32::new(std::process::id()),
            });
            at_fork();
            self.buffer.set(Arc::as_ptr(&buffer));
            self.id_base.set((buffer.index as u64) << 32);
            lock(&REGISTRY).push(buffer);
            EXIT.with(|_| ());
        }
        // SAFETY: set just above or earlier by this thread; the registry keeps it alive
        // until this thread has exited (module docs).
        unsafe { &*self.buffer.get() }
    }

    /// This thread's stack of pushed ops, or null before its first push (and once it is
    /// exiting).
    #[inline(always)]
    pub(crate) fn op_stack(&self) -> *mut OpStack {
        self.op_stack.get()
    }

    /// Allocates this thread's stack of pushed ops; `None` once it is exiting (it could not
    /// be freed).
    #[cold]
    #[inline(never)]
    pub(crate) fn allocate_op_stack(&self) -> Option<*mut OpStack> {
        if self.exiting.get() {
            return None;
        }
        // Registering arms the exit guard that frees it.
        self.buffer_or_register();
        let ops = Box::into_raw(OpStack::new());
        self.op_stack.set(ops);
        Some(ops)
    }

    /// This thread's index (the high half of its correlation ids), once it has recorded.
    #[inline(always)]
    pub(crate) fn index(&self) -> Option<u32> {
        let buffer = self.buffer.get();
        // SAFETY: non-null buffers are alive while their thread lives (module docs).
        (!buffer.is_null()).then(|| unsafe { (*buffer).index })
    }

    /// The correlation id of this thread's range `seq`.
    #[inline(always)]
    pub(crate) fn correlation_id(&self, seq: u32) -> u64 {
        self.id_base.get() | seq as u64
    }

    /// True when the current session's backends want correlation pushes.
    #[inline(always)]
    pub(crate) fn listening(&self, state: u64) -> bool {
        self.listening.get() && self.state.get() == state
    }

    /// Attaches an arg to the range or instant `seq` of the current session.
    pub(crate) fn add_arg(&self, state: u64, seq: u32, key: Arc<str>, value: Value) {
        if state == self.state.get() && !self.buffer.get().is_null() {
            // SAFETY: non-null buffers are alive while their thread lives (module docs).
            let buffer = unsafe { &*self.buffer.get() };
            lock(&buffer.args).push((seq, key, value));
        }
    }

    /// Attaches what autograd knows of op `seq`.
    pub(crate) fn add_autograd(&self, state: u64, seq: u32, autograd: Autograd) {
        if state == self.state.get() && !self.buffer.get().is_null() {
            // SAFETY: non-null buffers are alive while their thread lives (module docs).
            let buffer = unsafe { &*self.buffer.get() };
            lock(&buffer.autograd).push((seq, autograd));
        }
    }

    /// Attaches an allocator report to record `seq` (written out as its args at the drain).
    pub(crate) fn add_memory(&self, state: u64, seq: u32, report: MemoryReport) {
        if state == self.state.get() && !self.buffer.get().is_null() {
            // SAFETY: non-null buffers are alive while their thread lives (module docs).
            let buffer = unsafe { &*self.buffer.get() };
            lock(&buffer.memory).push((seq, report));
        }
    }
}

/// Copies out every buffer that recorded in session `state`, and frees the buffers of
/// threads that have exited. `floor` is a tick taken before the session started and after
/// the previous one stopped: every record of this session is newer. A thread's records come
/// in tick order, so its copy ends at the first record newer than `ceiling`.
///
/// In a forked child, the buffers of the parent's threads are forgotten unread and the
/// records older than the fork are skipped (module docs).
pub(crate) fn drain(state: u64, floor: u64, ceiling: u64) -> Vec<DrainedThread> {
    let tag = session_tag(state);
    let me = std::process::id();
    // What a session inherited through a fork recorded before it is the parent's.
    let start = floor.max(FORK_TICK.load(Ordering::Relaxed));
    let mut registry = lock(&REGISTRY);
    let mut out = Vec::new();
    registry.retain(|buffer| {
        if buffer.pid.load(Ordering::Relaxed) != me {
            // A thread of the parent: not in this process. Its locks may be held for good
            // and its chunks are pages shared with the parent, so it is neither locked nor
            // freed.
            std::mem::forget(Arc::clone(buffer));
            return false;
        }
        // Read before the records: once `exited` is seen, no write can follow.
        let exited = buffer.exited.load(Ordering::Acquire);
        let mut chunks = lock(&buffer.chunks);
        if buffer.state.load(Ordering::Acquire) == state {
            let records = chunks
                .iter()
                .flat_map(|c| c.iter())
                .map(|s| {
                    let tick = s.tick.load(Ordering::Acquire);
                    (s.word.load(Ordering::Relaxed), tick)
                })
                // The forking thread's records from before the fork (none elsewhere).
                .skip_while(|&(word, tick)| tag_of(word) == tag && (floor..start).contains(&tick))
                .take_while(|&(word, tick)| {
                    tag_of(word) == tag && (start..=ceiling).contains(&tick)
                })
                .map(|(word, tick)| (untagged(word), tick))
                .collect();
            out.push(DrainedThread {
                index: buffer.index,
                tid: buffer.tid,
                name: lock(&buffer.name).clone(),
                records,
                args: {
                    let mut args = std::mem::take(&mut *lock(&buffer.args));
                    let memory = std::mem::take(&mut *lock(&buffer.memory));
                    args.extend(memory.iter().flat_map(|(seq, report)| {
                        super::memory::args(report).map(|(key, value)| (*seq, key, value))
                    }));
                    args
                },
                autograd: std::mem::take(&mut *lock(&buffer.autograd)),
                dropped: buffer.dropped.load(Ordering::Relaxed),
                dropped_ends: std::mem::take(&mut *lock(&buffer.dropped_ends)),
            });
        }
        if exited {
            lock(&POOL).extend(chunks.drain(..));
        }
        !exited
    });
    out
}

/// The registry and pool locks, held by the forking thread across a fork.
type ForkGuards = (
    MutexGuard<'static, Vec<Arc<ThreadBuffer>>>,
    MutexGuard<'static, Vec<Chunk>>,
);

thread_local! {
    static FORK_GUARDS: RefCell<Option<ForkGuards>> = const { RefCell::new(None) };
}

/// Installs the fork handlers, once: before a fork they take the registry and pool locks
/// (so no other thread holds them when the child is made; a fork waits for a drain in
/// progress), and release them after it in both processes. In the child they also mark the
/// forking thread's buffer as the child's and note the fork's tick (module docs).
fn at_fork() {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        // SAFETY: the handlers are `extern "C"` functions without arguments that live for
        // the whole process; none unwinds.
        let rc =
            unsafe { libc::pthread_atfork(Some(before_fork), Some(after_fork), Some(in_child)) };
        if rc != 0 {
            log::warn!("omniprof: cannot install fork handlers (error {rc})");
        }
    });
}

extern "C" fn before_fork() {
    let guards = (lock(&REGISTRY), lock(&POOL));
    let _ = FORK_GUARDS.try_with(|g| *g.borrow_mut() = Some(guards));
}

extern "C" fn after_fork() {
    let _ = FORK_GUARDS.try_with(|g| g.borrow_mut().take());
}

extern "C" fn in_child() {
    FORK_TICK.store(crate::clock::ticks(), Ordering::Relaxed);
    let _ = LOCAL.try_with(|l| {
        let buffer = l.buffer.get();
        if !buffer.is_null() {
            // SAFETY: the forking thread's own buffer, alive while it lives (module docs).
            unsafe { (*buffer).pid.store(std::process::id(), Ordering::Relaxed) };
        }
    });
    after_fork();
}

/// The OS ids of the threads that have recorded and may record again.
pub(crate) fn thread_ids() -> Vec<i64> {
    lock(&REGISTRY).iter().map(|b| b.tid).collect()
}

/// The number of threads with a live buffer (for tests and diagnostics).
pub(crate) fn registered_threads() -> usize {
    lock(&REGISTRY).len()
}

fn current_tid() -> i64 {
    // SAFETY: gettid has no preconditions and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as i64 }
}

fn os_thread_name(tid: i64) -> String {
    std::fs::read_to_string(format!("/proc/self/task/{tid}/comm"))
        .map(|s| s.trim_end().to_owned())
        .unwrap_or_default()
}

/// Renames the calling thread's row.
pub(crate) fn set_current_thread_name(name: &str) {
    with_local(|l| {
        if !l.exiting.get() {
            *lock(&l.buffer_or_register().name) = name.to_owned();
        }
    });
}
