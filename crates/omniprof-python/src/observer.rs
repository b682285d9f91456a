//! The PyTorch op observer as a backend, and the recorder as a table of C functions for it
//! (`python/omniprof/csrc/observer.cpp`), so ops PyTorch reports through `RecordFunction` are
//! recorded with no Python on the path.
//!
//! Python builds the observer and hands its `attach`/`detach` entry points, in a capsule of a
//! fixed name (never as integers: no value a Python program makes up is called), to
//! [`install_torch_observer`], which registers the `pytorch` backend. Like any backend, every
//! session that selects host ops (`cpu_op`, `user_annotation`) configures it: the synchronous
//! `omniprof.profile()` and on-demand traces alike attach the observer when their capture
//! window opens and detach it when it closes, so PyTorch pays nothing outside a window.
//! `PROFILE_REPORT_INPUT_SHAPES` makes it record `Input Dims`; `PROFILE_WITH_FLOPS` adds each
//! op's `flops` (PyTorch's own count, taken by the observer); `PROFILE_PROFILE_MEMORY` makes
//! it record PyTorch's allocator reports as `[memory]` instants
//! ([`omniprof::recording::record_memory`]).
//!
//! Ops and autograd nodes begin and end on one thread, innermost first: the observer pushes
//! them on the recorder's per-thread stack ([`omniprof::recording::push_op`]) keyed by their
//! `RecordFunction`, and keeps nothing itself. A user range (`record_function`) may end on
//! another thread (async), so the observer keeps it in its `ObserverContext` (a slot of
//! [`RANGE_SLOT_SIZE`] bytes it owns) as an [`OwnedRange`], whose end may be recorded from any
//! thread.

use std::ffi::{c_char, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};

use omniprof::backends::{ActivityProfiler, ActivitySink, BackendError, HostOps, ProfilerSession};
use omniprof::recording::{
    pop_op_with_autograd, push_op, push_op_packed, Autograd, MemoryUsage, Name, OwnedRange,
    PythonFrame,
};
use omniprof::Config;

use crate::{op_details, storage_reads};
use omniprof_trace::keys::arg;
use omniprof_trace::{ActivitySet, ActivityType, Window};
use pyo3::prelude::*;

/// Bytes the observer reserves per user range for its [`OwnedRange`] (8-byte aligned).
const RANGE_SLOT_SIZE: u32 = 32;
const _: () = assert!(std::mem::size_of::<OwnedRange>() <= RANGE_SLOT_SIZE as usize);
const _: () = assert!(std::mem::align_of::<OwnedRange>() <= 8);
// The tracer keeps frames in 16-byte, 8-aligned slots (`kFrameSize` in table.h).
const _: () =
    assert!(std::mem::size_of::<PythonFrame>() == 16 && std::mem::align_of::<PythonFrame>() == 8);

/// The table's layout version; the observer refuses another.
const TABLE_VERSION: u32 = 16;

/// What the observer calls; mirrored by `struct Table` in `observer.cpp`. Names are
/// NUL-terminated; `key` is the op's `RecordFunction`; a user range's shapes come as
/// [`shapes`] reads them.
#[repr(C)]
pub(crate) struct RecorderTable {
    version: u32,
    range_slot_size: u32,
    push_op: unsafe extern "C" fn(name: *const c_char, key: *const c_void),
    push_op_packed: unsafe extern "C" fn(
        name: *const c_char,
        key: *const c_void,
        words: *const u64,
        count: usize,
    ),
    pop_op: unsafe extern "C" fn(
        key: *const c_void,
        sequence_number: i64,
        forward_thread: u64,
        thread: u64,
    ),
    begin_user: unsafe extern "C" fn(
        name: *const c_char,
        record_id: u64,
        dims: *const i64,
        ranks: *const usize,
        inputs: usize,
        out: *mut c_void,
    ) -> u8,
    end_user: unsafe extern "C" fn(range: *mut c_void),
    memory: extern "C" fn(
        addr: u64,
        bytes: i64,
        total_allocated: u64,
        total_reserved: u64,
        device_type: i32,
        device_index: i32,
        out_of_memory: u8,
    ),
    frame_name: unsafe extern "C" fn(text: *const c_char, len: usize, module: i64) -> u32,
    begin_frame: unsafe extern "C" fn(name: u32, out: *mut c_void) -> u8,
    begin_frame_at_window_start: unsafe extern "C" fn(name: u32, out: *mut c_void) -> u8,
    end_frame: unsafe extern "C" fn(frame: *const c_void),
    dtype_name: unsafe extern "C" fn(code: u8, text: *const c_char, len: usize),
}

static TABLE: RecorderTable = RecorderTable {
    version: TABLE_VERSION,
    range_slot_size: RANGE_SLOT_SIZE,
    push_op: push,
    push_op_packed: push_packed,
    pop_op: pop,
    begin_user,
    end_user,
    memory,
    frame_name,
    begin_frame,
    begin_frame_at_window_start,
    end_frame,
    dtype_name,
};

/// Begins the op `key` named `name` on this thread. Every op of a session without shapes
/// comes here, so it does nothing else. A panic must not unwind into C++: it only costs the
/// op its range (here and in the functions below).
///
/// # Safety
/// `name` is NUL-terminated.
unsafe extern "C" fn push(name: *const c_char, key: *const c_void) {
    // SAFETY: forwarded contract.
    let _ = catch_unwind(|| unsafe { push_op(name, key as usize) });
}

/// [`push`], with what `count` words at `words` pack of the op beside its name
/// ([`op_details`]): kept as they are until the session stops.
///
/// # Safety
/// As [`push`]; `words` is valid for `count` words.
unsafe extern "C" fn push_packed(
    name: *const c_char,
    key: *const c_void,
    words: *const u64,
    count: usize,
) {
    let _ = catch_unwind(|| {
        // SAFETY: the contract.
        let words = unsafe { std::slice::from_raw_parts(words, count) };
        // SAFETY: forwarded contract.
        unsafe { push_op_packed(name, key as usize, words, op_details::unpack) };
    });
}

/// Names dtype `code` (`len` bytes of UTF-8 at `text`) for the op details' `Input type`.
///
/// # Safety
/// `text` is valid for `len` bytes.
unsafe extern "C" fn dtype_name(code: u8, text: *const c_char, len: usize) {
    // SAFETY: the contract.
    let bytes = unsafe { std::slice::from_raw_parts(text.cast::<u8>(), len) };
    let _ = catch_unwind(|| op_details::name_dtype(code, &String::from_utf8_lossy(bytes)));
}

/// Records one of PyTorch's allocator reports on this thread (an `[OutOfMemory]` one when
/// `out_of_memory` is not 0).
extern "C" fn memory(
    addr: u64,
    bytes: i64,
    total_allocated: u64,
    total_reserved: u64,
    device_type: i32,
    device_index: i32,
    out_of_memory: u8,
) {
    let report = MemoryUsage {
        addr,
        bytes,
        total_allocated,
        total_reserved,
        device_type,
        device_index,
    };
    let _ = catch_unwind(|| {
        if out_of_memory != 0 {
            omniprof::recording::record_out_of_memory(&report);
        } else {
            omniprof::recording::record_memory(&report);
        }
    });
}

/// Interns the name of a Python frame, `len` bytes of UTF-8 at `text` (invalid UTF-8 is
/// replaced): a function's when `module` is negative, else an `nn.Module` call's with that
/// module id ([`Name::python`]).
///
/// # Safety
/// `text` is valid for `len` bytes.
unsafe extern "C" fn frame_name(text: *const c_char, len: usize, module: i64) -> u32 {
    catch_unwind(|| {
        // SAFETY: the contract.
        let bytes = unsafe { std::slice::from_raw_parts(text.cast::<u8>(), len) };
        let text = String::from_utf8_lossy(bytes);
        Name::python(&text, u32::try_from(module).ok()).id()
    })
    .unwrap_or(u32::MAX)
}

/// Begins the Python frame `name` on this thread into `out`; 1 when recorded.
///
/// # Safety
/// `out` is valid for a [`PythonFrame`] (16 bytes, 8-byte aligned).
unsafe extern "C" fn begin_frame(name: u32, out: *mut c_void) -> u8 {
    // SAFETY: forwarded contract.
    unsafe { begin_frame_with(PythonFrame::begin, name, out) }
}

/// [`begin_frame`], for a frame that was running when the window opened: begun at its start.
///
/// # Safety
/// As [`begin_frame`].
unsafe extern "C" fn begin_frame_at_window_start(name: u32, out: *mut c_void) -> u8 {
    // SAFETY: forwarded contract.
    unsafe { begin_frame_with(PythonFrame::begin_at_window_start, name, out) }
}

/// Begins the frame `name` with `begin`, into `out`; 1 when recorded.
///
/// # Safety
/// As [`begin_frame`].
unsafe fn begin_frame_with(
    begin: fn(Name) -> Option<PythonFrame>,
    name: u32,
    out: *mut c_void,
) -> u8 {
    match catch_unwind(|| begin(Name::from_id(name))) {
        Ok(Some(frame)) => {
            // SAFETY: the contract.
            unsafe { out.cast::<PythonFrame>().write(frame) };
            1
        }
        _ => 0,
    }
}

/// Ends a frame [`begin_frame`] wrote, on the thread that began it.
///
/// # Safety
/// `frame` was written by a successful [`begin_frame`] on this thread.
unsafe extern "C" fn end_frame(frame: *const c_void) {
    // SAFETY: the contract.
    let frame = unsafe { frame.cast::<PythonFrame>().read() };
    let _ = catch_unwind(|| frame.end());
}

/// Ends the op [`push`] began under `key` on this thread, with autograd's numbers for it
/// (written as its `Sequence number` and `Fwd thread id`, and joining forward ops to
/// backward nodes with `fwdbwd` flows; none when `sequence_number` is negative). Every op
/// ends here, so that one function's code, not two, is in the instruction cache.
unsafe extern "C" fn pop(
    key: *const c_void,
    sequence_number: i64,
    forward_thread: u64,
    thread: u64,
) {
    let autograd = Autograd {
        sequence_number,
        forward_thread,
        thread,
    };
    let _ = catch_unwind(|| pop_op_with_autograd(key as usize, autograd));
}

/// The shapes in `dims` and `ranks` (input `i` has `ranks[i]` sizes, all of them one after
/// another in `dims`); `None` when there are no inputs (the range then gets no `Input Dims`).
///
/// # Safety
/// `ranks` is valid for `inputs` entries and `dims` for their sum, for `'a` (either may be
/// null when `inputs` is 0).
unsafe fn shapes<'a>(
    dims: *const i64,
    ranks: *const usize,
    inputs: usize,
) -> Option<Vec<&'a [i64]>> {
    // An op without inputs may pass null pointers, which no slice may hold.
    if inputs == 0 {
        return None;
    }
    // SAFETY: `ranks` holds `inputs` entries and `dims` their sum (the contract).
    let ranks = unsafe { std::slice::from_raw_parts(ranks, inputs) };
    // SAFETY: as above.
    let mut rest = unsafe { std::slice::from_raw_parts(dims, ranks.iter().sum()) };
    Some(
        ranks
            .iter()
            .map(|&rank| {
                let (shape, tail) = rest.split_at(rank);
                rest = tail;
                shape
            })
            .collect(),
    )
}

/// Begins a user range named `name` (invalid UTF-8 is replaced), with its `Record function
/// id` when `record_id` (its `RecordFunction` handle) is not 0 and input shapes when
/// `inputs` is not 0 (as [`shapes`] reads them). On success writes the range into `out`
/// and returns 1; returns 0 when nothing records (then `out` is untouched and must not be
/// passed to [`end_user`]).
///
/// # Safety
/// `name` is NUL-terminated; the shapes are as [`shapes`] needs; `out` is valid for
/// [`RANGE_SLOT_SIZE`] bytes, 8-byte aligned.
unsafe extern "C" fn begin_user(
    name: *const c_char,
    record_id: u64,
    dims: *const i64,
    ranks: *const usize,
    inputs: usize,
    out: *mut c_void,
) -> u8 {
    let begun = catch_unwind(|| {
        // SAFETY: forwarded contract.
        let name = unsafe { CStr::from_ptr(name) }.to_string_lossy();
        let mut range = OwnedRange::begin(name.as_ref())?;
        if record_id != 0 {
            range = range.with_arg(arg::RECORD_FUNCTION_ID, record_id);
        }
        // SAFETY: forwarded contract.
        Some(match unsafe { shapes(dims, ranks, inputs) } {
            Some(shapes) => range.with_input_shapes(&shapes),
            None => range,
        })
    });
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

/// Ends the range [`begin_user`] wrote into `range`, on any thread.
///
/// # Safety
/// `range` was filled by a successful [`begin_user`] and is passed here once.
unsafe extern "C" fn end_user(range: *mut c_void) {
    // SAFETY: a range `begin_user` wrote, read once (the contract).
    let range = unsafe { range.cast::<OwnedRange>().read() };
    let _ = catch_unwind(AssertUnwindSafe(|| range.end()));
}

/// The observer's `attach(table, flags)`: registers its `RecordFunction` callbacks, recording
/// what `flags` asks ([`SHAPES`], [`MEMORY`], [`FLOPS`], [`STACK`]: the Python tracer,
/// [`MODULES`]: TorchScript's module hierarchy, [`OVERLOADS`]: each op's overload name,
/// [`STORAGES`]: each tensor input's storage).
type AttachFn = unsafe extern "C" fn(table: *const RecorderTable, flags: u8) -> i32;

/// `attach`'s flags; mirrored in `observer.cpp`.
const SHAPES: u8 = 1;
const MEMORY: u8 = 2;
const FLOPS: u8 = 4;
const STACK: u8 = 8;
const MODULES: u8 = 16;
const OVERLOADS: u8 = 32;
/// With [`SHAPES`] and [`MEMORY`], each tensor input's storage ([`storage_reads`]).
const STORAGES: u8 = 64;
/// The observer's `detach()`: removes them (a no-op when not registered).
type DetachFn = unsafe extern "C" fn();
/// The observer's `window_opened()`: the Python tracer begins the frames it pushed during a
/// warm-up, when the recorder does not record.
type WindowOpenedFn = unsafe extern "C" fn();
/// The observer's `set_ops_collected(on)`: removes its callbacks while collection of ops is
/// switched off (0), registers them again when it is back on; 1 when PyTorch refused them.
type SetOpsCollectedFn = unsafe extern "C" fn(on: u8) -> u8;

/// The types the observer's callbacks record: while every one is switched off, the
/// callbacks are removed (and `ProfilerActivity.CPU`'s toggle switches these, as PyTorch's
/// removes its callbacks).
pub(crate) const CALLBACK_TYPES: [ActivityType; 2] =
    [ActivityType::CpuOp, ActivityType::UserAnnotation];

/// `attach`'s results; mirrored by `AttachStatus` in `observer.cpp`.
const ATTACHED: i32 = 0;
const ALREADY_ATTACHED: i32 = 1;
const TABLE_MISMATCH: i32 = 2;

/// The registry key (and trace `backends` name) of the observer backend.
const BACKEND_NAME: &str = "pytorch";

/// The PyTorch op observer as a backend: its sessions attach the observer while their capture
/// window is open. It hands the engine no activities of its own: the ops it observes are
/// recorded by the host recorder like any range.
#[derive(Clone, Copy)]
struct TorchOps {
    attach: AttachFn,
    detach: DetachFn,
    window_opened: WindowOpenedFn,
    set_ops_collected: SetOpsCollectedFn,
}

impl ActivityProfiler for TorchOps {
    fn name(&self) -> &str {
        BACKEND_NAME
    }

    fn available_activities(&self) -> ActivitySet {
        [
            ActivityType::CpuOp,
            ActivityType::UserAnnotation,
            ActivityType::PythonFunction,
        ]
        .into_iter()
        .collect()
    }

    fn configure(
        &self,
        _: ActivitySet,
        config: &Config,
    ) -> Result<Option<Box<dyn ProfilerSession>>, BackendError> {
        let flags = [
            (config.report_input_shapes(), SHAPES),
            (config.profile_memory(), MEMORY),
            (config.with_flops(), FLOPS),
            (config.with_stack(), STACK),
            (config.with_modules(), MODULES),
            (config.capture_overload_names(), OVERLOADS),
            (storage_reads::packed_for(config), STORAGES),
        ]
        .into_iter()
        .filter(|&(on, _)| on)
        .fold(0, |flags, (_, flag)| flags | flag);
        Ok(Some(Box::new(TorchOpsSession {
            ops: *self,
            flags,
            attached: false,
        })))
    }
}

struct TorchOpsSession {
    ops: TorchOps,
    flags: u8,
    attached: bool,
}

impl TorchOpsSession {
    fn detach(&mut self) {
        if std::mem::take(&mut self.attached) {
            // SAFETY: `detach` is the observer's entry point, loaded for the process's life;
            // it takes no arguments and throws nothing.
            unsafe { (self.ops.detach)() };
        }
    }
}

impl ProfilerSession for TorchOpsSession {
    fn start(&mut self) -> Result<(), BackendError> {
        // SAFETY: `attach` is the observer's entry point (loaded for the process's life); it
        // reads the table, which is static, and throws nothing.
        match unsafe { (self.ops.attach)(&TABLE, self.flags) } {
            ATTACHED => {
                self.attached = true;
                Ok(())
            }
            ALREADY_ATTACHED => Err(BackendError::new(
                "the PyTorch op observer is already attached (by a session of another omniprof \
                 module in this process?): PyTorch ops are recorded there, not here",
            )),
            TABLE_MISMATCH => Err(BackendError::new(
                "omniprof's native module and its PyTorch op observer disagree on the recorder \
                 table: remove the omniprof_observer build under TORCH_EXTENSIONS_DIR \
                 (default ~/.cache/torch_extensions) so it is rebuilt",
            )),
            status => Err(BackendError::new(format!(
                "PyTorch refused the op observer's callbacks (status {status}): PyTorch ops \
                 are not recorded"
            ))),
        }
    }

    fn window_opened(&mut self) -> Result<(), BackendError> {
        if self.attached {
            // SAFETY: the observer's entry point (loaded for the process's life); it takes no
            // arguments and throws nothing.
            unsafe { (self.ops.window_opened)() };
        }
        Ok(())
    }

    /// While ops and user ranges are both switched off, the callbacks are removed: an op
    /// then costs nothing, as under PyTorch's `toggle_collection_dynamic`.
    fn collection_switched(&mut self, off: ActivitySet) -> Result<(), BackendError> {
        if !self.attached {
            return Ok(());
        }
        let on = u8::from(!CALLBACK_TYPES.iter().all(|&t| off.contains(t)));
        // SAFETY: the observer's entry point (loaded for the process's life), called between
        // its attach and detach, never concurrently with them; it throws nothing.
        match unsafe { (self.ops.set_ops_collected)(on) } {
            0 => Ok(()),
            _ => Err(BackendError::new(
                "PyTorch refused the op observer's callbacks when collection was switched \
                 back on: PyTorch ops are not recorded from then on",
            )),
        }
    }

    fn stop(&mut self) -> Result<(), BackendError> {
        self.detach();
        Ok(())
    }

    fn process_trace(
        &mut self,
        _: &mut dyn ActivitySink,
        _: &dyn HostOps,
        _: Window,
    ) -> Result<(), BackendError> {
        Ok(())
    }
}

impl Drop for TorchOpsSession {
    /// A session dropped without its stop (an aborted profile) detaches too.
    fn drop(&mut self) {
        self.detach();
    }
}

/// The observer's entry points as it hands them over (`struct EntryPoints` in `table.h`), in
/// a capsule named [`ENTRY_POINTS_CAPSULE`]. `version` is the recorder table's the observer was
/// built for ([`TABLE_VERSION`]); it comes first, so another layout is refused before the
/// functions are read.
#[repr(C)]
struct EntryPoints {
    version: u32,
    attach: AttachFn,
    detach: DetachFn,
    window_opened: WindowOpenedFn,
    set_ops_collected: SetOpsCollectedFn,
}

/// The name of the observer's `entry_points()` capsule (`kEntryPointsCapsule` in `table.h`).
const ENTRY_POINTS_CAPSULE: &CStr = c"omniprof.observer.entry_points";

/// Makes the PyTorch op observer whose `entry_points()` capsule is `entry_points` a backend
/// of every session from now on. Once per process: Python calls it after building the
/// observer. Anything but a capsule named [`ENTRY_POINTS_CAPSULE`] is a `TypeError` (no
/// integer is taken for an address); an observer built for another recorder table is a
/// `ValueError` saying to rebuild it.
///
/// The capsule's struct is static in the observer, which stays loaded for the life of the
/// process (Python keeps the extension module): the functions are copied out and stay valid.
#[pyfunction]
fn install_torch_observer(entry_points: &Bound<'_, PyAny>) -> PyResult<()> {
    let pointer = crate::capsule::capsule_pointer(
        entry_points,
        ENTRY_POINTS_CAPSULE,
        "the op observer's entry_points()",
    )?
    .cast::<u32>();
    // SAFETY: a capsule of this name holds an `EntryPoints`, whose first field is the
    // `u32` version; it is read alone until it says the rest has this layout.
    let version = unsafe { pointer.read() };
    if version != TABLE_VERSION {
        return Err(pyo3::exceptions::PyValueError::new_err(format!(
            "the op observer was built for recorder table version {version}, omniprof's \
             native module has {TABLE_VERSION}: remove the omniprof_observer build under \
             TORCH_EXTENSIONS_DIR (default ~/.cache/torch_extensions) so it is rebuilt"
        )));
    }
    // SAFETY: an `EntryPoints` of this version (above), static in the observer module.
    let entry_points = unsafe { pointer.cast::<EntryPoints>().as_ref() };
    let ops = TorchOps {
        attach: entry_points.attach,
        detach: entry_points.detach,
        window_opened: entry_points.window_opened,
        set_ops_collected: entry_points.set_ops_collected,
    };
    omniprof::backends::register_profiler_factory(BACKEND_NAME, Box::new(move || Box::new(ops)));
    Ok(())
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(install_torch_observer, m)?)
}
