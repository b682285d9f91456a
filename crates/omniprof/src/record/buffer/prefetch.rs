//! Fetching the lines a thread is about to write before it writes them.
//!
//! A thread's records, and its packed args, go to memory it has not written since the chunk
//! or block was handed to it: each new cache line a write reaches is a miss to memory. In a
//! tight loop of ops the processor's own prefetcher sees the stream and hides it; in a
//! training step, where thousands of instructions of the model's own work separate two
//! records, it does not, and the write waits for its line (a transformer block's step,
//! 535 ops, spent about 40 µs of the 130 µs omniprof added over do-nothing callbacks on
//! those misses; docs/benchmarks.md). One prefetch a few lines ahead of each write starts
//! each line's fetch a few ops before a write reaches it.

/// How far ahead of a write its line is fetched: four lines, eight ops' records (16 bytes
/// each, two an op) or two to four ops' packed args, so that the fetch has the time of a few
/// ops to complete, and stays within the few lines the processor can fetch at once.
const AHEAD: usize = 256;

/// Starts fetching the line `AHEAD` bytes past `at` into the cache, to be written. It reads
/// nothing into the program and cannot fault, so `at` may be anywhere, the end of a chunk
/// included (the line past it is then fetched for nothing). A no-op where there is no
/// prefetch instruction to use (only x86-64 has one here).
#[inline(always)]
pub(super) fn ahead_of<T>(at: *const T) {
    #[cfg(target_arch = "x86_64")]
    {
        let line = at.cast::<i8>().wrapping_add(AHEAD);
        // SAFETY: a prefetch is a hint: it neither reads nor writes memory the program sees,
        // and never faults, whatever the address.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(line);
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = at;
}
