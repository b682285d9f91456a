//! The recorder as a table of C functions, for the PyTorch op observer
//! (`python/omniprof/csrc/observer.cpp`), so ops PyTorch reports through `RecordFunction` are
//! recorded with no Python on the path.
//!
//! Python hands the table's address to the observer as an integer. The observer keeps each
//! op's range in its `ObserverContext` (a slot of [`RANGE_SLOT_SIZE`] bytes it owns) and ends
//! it from the op's end callback, which for an async op may run on another thread: the range
//! is an [`OwnedRange`], whose end may be recorded from any thread.

use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};

use omniprof::{Name, OwnedRange};
use pyo3::prelude::*;

/// Bytes the observer reserves per op for its range (8-byte aligned).
const RANGE_SLOT_SIZE: u32 = 32;
const _: () = assert!(std::mem::size_of::<OwnedRange>() <= RANGE_SLOT_SIZE as usize);
const _: () = assert!(std::mem::align_of::<OwnedRange>() <= 8);

/// The table's layout version; the observer refuses another.
const TABLE_VERSION: u32 = 1;

/// What the observer calls; mirrored by `struct Table` in `observer.cpp`.
#[repr(C)]
pub struct RecorderTable {
    version: u32,
    range_slot_size: u32,
    intern: unsafe extern "C" fn(name: *const u8, name_len: usize) -> u32,
    begin: unsafe extern "C" fn(
        user: u8,
        name: u32,
        dims: *const i64,
        ranks: *const usize,
        inputs: usize,
        out: *mut c_void,
    ) -> u8,
    end: unsafe extern "C" fn(range: *mut c_void),
}

static TABLE: RecorderTable = RecorderTable {
    version: TABLE_VERSION,
    range_slot_size: RANGE_SLOT_SIZE,
    intern,
    begin,
    end,
};

/// The id of the name in the `name_len` UTF-8 bytes at `name` (invalid UTF-8 is replaced), for
/// [`begin`]; ids stay valid for the life of the process.
///
/// # Safety
/// `name` is valid for `name_len` bytes.
unsafe extern "C" fn intern(name: *const u8, name_len: usize) -> u32 {
    // SAFETY: the caller passes `name_len` readable bytes (the function's contract).
    let bytes = unsafe { std::slice::from_raw_parts(name, name_len) };
    // A panic must not unwind into C++; the table-full id stands in.
    catch_unwind(|| Name::new(&String::from_utf8_lossy(bytes)).to_raw()).unwrap_or(u32::MAX)
}

/// Begins a user range (`user != 0`) or host op named by the [`intern`]ed id `name`; when `inputs > 0`, input `i` has `ranks[i]` sizes, all of them one after another in `dims`
/// (`Input Dims`). On success writes the range into `out` and returns 1; returns 0 when
/// nothing records (then `out` is untouched and must not be passed to [`end`]).
///
/// # Safety
/// `ranks` is valid for `inputs` entries and `dims` for their
/// sum; `out` is valid for [`RANGE_SLOT_SIZE`] bytes, 8-byte aligned.
unsafe extern "C" fn begin(
    user: u8,
    name: u32,
    dims: *const i64,
    ranks: *const usize,
    inputs: usize,
    out: *mut c_void,
) -> u8 {
    // A panic must not unwind into C++: it only costs this op its range.
    let begun = catch_unwind(AssertUnwindSafe(|| {
        let name = Name::from_raw(name);
        let range = if user != 0 {
            OwnedRange::begin(name)
        } else {
            OwnedRange::begin_op(name)
        }?;
        if inputs == 0 {
            return Some(range);
        }
        // SAFETY: `ranks` holds `inputs` entries and `dims` their sum (the contract).
        let ranks = unsafe { std::slice::from_raw_parts(ranks, inputs) };
        let total = ranks.iter().sum();
        // SAFETY: as above.
        let dims = unsafe { std::slice::from_raw_parts(dims, total) };
        let mut rest = dims;
        let shapes: Vec<&[i64]> = ranks
            .iter()
            .map(|&rank| {
                let (shape, tail) = rest.split_at(rank);
                rest = tail;
                shape
            })
            .collect();
        Some(range.with_input_shapes(&shapes))
    }));
    match begun {
        Ok(Some(range)) => {
            // SAFETY: `out` is valid and aligned for a range (the contract, checked against
            // the asserts above by the observer through `range_slot_size`).
            unsafe { out.cast::<OwnedRange>().write(range) };
            1
        }
        _ => 0,
    }
}

/// Ends the range [`begin`] wrote into `range`, on any thread.
///
/// # Safety
/// `range` was filled by a successful [`begin`] and is passed here once.
unsafe extern "C" fn end(range: *mut c_void) {
    // SAFETY: a range `begin` wrote, read once (the contract).
    let range = unsafe { range.cast::<OwnedRange>().read() };
    let _ = catch_unwind(AssertUnwindSafe(|| range.end()));
}

/// The address of the recorder's C function table, for the PyTorch op observer.
#[pyfunction]
fn recorder_table() -> usize {
    &TABLE as *const RecorderTable as usize
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(recorder_table, m)?)
}
