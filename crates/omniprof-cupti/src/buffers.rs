//! The activity buffers lent to CUPTI, recycled across requests and sessions.
//!
//! CUPTI asks for a buffer when it needs one (on the thread that fills it) and hands it back
//! full, or at a flush. Buffers come from a free list filled at session start, so an
//! application thread never allocates for a record; past [`MAX_BUFFERS`] in use CUPTI is
//! given none, drops records and counts them, and the session reports the count. CUPTI's
//! callbacks are process-wide C functions, so the pool is one static.

use std::ffi::c_void;
use std::sync::Mutex;

use omniprof::trace::lock;

use crate::library::Cupti;

/// Bytes per buffer (Kineto lends CUPTI buffers of this order).
pub(crate) const BUFFER_BYTES: usize = 8 << 20;
/// Buffers in use at most: 2 GiB of records, some 9 million kernels.
pub(crate) const MAX_BUFFERS: usize = 256;
/// Buffers made ready at session start and kept between sessions.
const READY_BUFFERS: usize = 4;

/// One buffer: `u64`s so that it is 8-byte aligned, as CUPTI requires.
pub(crate) struct Buffer(Box<[u64]>);

impl Buffer {
    fn new() -> Self {
        Self(vec![0u64; BUFFER_BYTES / 8].into_boxed_slice())
    }
}

/// A buffer CUPTI handed back, with the bytes it filled.
pub(crate) struct Completed {
    pub(crate) buffer: Buffer,
    pub(crate) valid: usize,
}

impl Completed {
    /// The raw records, for [`Cupti::next_record`].
    pub(crate) fn as_mut_ptr(&mut self) -> *mut u8 {
        self.buffer.0.as_mut_ptr().cast()
    }
}

struct Pool {
    free: Vec<Buffer>,
    completed: Vec<Completed>,
    /// Buffers made so far (free, lent or completed).
    made: usize,
    /// Requests refused because [`MAX_BUFFERS`] were in use.
    refused: u64,
    /// Records CUPTI reported dropped.
    dropped: u64,
    cupti: Option<&'static Cupti>,
}

static POOL: Mutex<Pool> = Mutex::new(Pool {
    free: Vec::new(),
    completed: Vec::new(),
    made: 0,
    refused: 0,
    dropped: 0,
    cupti: None,
});

/// Readies the pool for a session of `cupti`: buffers made ahead, counts cleared, what a
/// previous session left behind dropped.
pub(crate) fn prepare(cupti: &'static Cupti) {
    let mut pool = lock(&POOL);
    pool.cupti = Some(cupti);
    let leftovers: Vec<Buffer> = pool.completed.drain(..).map(|c| c.buffer).collect();
    pool.free.extend(leftovers);
    while pool.free.len() < READY_BUFFERS {
        pool.free.push(Buffer::new());
        pool.made += 1;
    }
    pool.refused = 0;
    pool.dropped = 0;
}

/// Takes the buffers CUPTI handed back.
pub(crate) fn take_completed() -> Vec<Completed> {
    std::mem::take(&mut lock(&POOL).completed)
}

/// Gives decoded buffers back; beyond the few kept ready they are freed.
pub(crate) fn give_back(buffers: impl IntoIterator<Item = Buffer>) {
    let mut pool = lock(&POOL);
    for buffer in buffers {
        if pool.free.len() < READY_BUFFERS {
            pool.free.push(buffer);
        } else {
            pool.made -= 1;
        }
    }
}

/// Records lost since [`prepare`]: CUPTI's own count plus, as a lower bound, one per refused
/// buffer request (CUPTI counts those records too, once it is asked).
pub(crate) fn losses() -> (u64, u64) {
    let pool = lock(&POOL);
    (pool.dropped, pool.refused)
}

/// Clears the loss counts (the window opened after a warm-up).
pub(crate) fn reset_losses() {
    let mut pool = lock(&POOL);
    pool.dropped = 0;
    pool.refused = 0;
}

/// CUPTI asks for a buffer.
pub(crate) unsafe extern "C" fn request(buffer: *mut *mut u8, size: *mut usize, max: *mut usize) {
    let given = {
        let mut pool = lock(&POOL);
        match pool.free.pop() {
            Some(b) => Some(b),
            None if pool.made < MAX_BUFFERS => {
                pool.made += 1;
                Some(Buffer::new())
            }
            None => {
                pool.refused += 1;
                None
            }
        }
    };
    let (ptr, len) = match given {
        // Ownership passes to CUPTI until `complete` takes it back.
        Some(b) => (Box::into_raw(b.0).cast::<u8>(), BUFFER_BYTES),
        None => (std::ptr::null_mut(), 0),
    };
    // SAFETY: CUPTI passes valid out-pointers.
    unsafe {
        *buffer = ptr;
        *size = len;
        *max = 0;
    }
}

/// CUPTI hands a buffer back.
pub(crate) unsafe extern "C" fn complete(
    context: *mut c_void,
    stream: u32,
    buffer: *mut u8,
    _size: usize,
    valid: usize,
) {
    if buffer.is_null() {
        return;
    }
    // SAFETY: every buffer CUPTI holds came from `request` as a boxed slice of
    // BUFFER_BYTES / 8 words, given up with `Box::into_raw`.
    let words = unsafe {
        Box::from_raw(std::ptr::slice_from_raw_parts_mut(
            buffer.cast::<u64>(),
            BUFFER_BYTES / 8,
        ))
    };
    let mut pool = lock(&POOL);
    if let Some(cupti) = pool.cupti {
        pool.dropped += cupti.dropped(context, stream) as u64;
    }
    pool.completed.push(Completed {
        buffer: Buffer(words),
        valid: valid.min(BUFFER_BYTES),
    });
}
