//! The names a trace's events and header share between whoever writes them (the session
//! engine, backends, the Chrome writer) and whoever reads them (the reader, the analyses, the
//! CLI). Each is spelled here once and used by name everywhere else.
//!
//! ```
//! use omniprof_trace::keys::{arg, metadata};
//! use omniprof_trace::{Activity, ActivityType, Trace, Value};
//!
//! let mut op = Activity::new(ActivityType::CpuOp, "aten::mm", 1, 1, 0, 10);
//! op.args.push((arg::INPUT_DIMS.into(), Value::from(vec![vec![2i64, 2], vec![2, 2]])));
//! let mut trace = Trace::new(0, 10);
//! trace.set_metadata(metadata::DEVICE_TYPE, Value::from("OpenReg"));
//! assert!(op.arg("Input Dims").is_some());
//! ```

/// Keys of an event's `args`.
pub mod arg {
    /// The host op a device record or runtime call belongs to (PyTorch's external
    /// correlation id); on a host op, its own id.
    pub const EXTERNAL_ID: &str = "External id";
    /// On a host op or user range recorded while PyTorch's execution trace observer records:
    /// its `RecordFunction` handle, the `rf_id` of its node in the execution trace.
    pub const RECORD_FUNCTION_ID: &str = "Record function id";
    /// The runtime's correlation id between a launch and the work it launched.
    pub const CORRELATION: &str = "correlation";
    /// An op's input shapes, a list of lists (`[[64, 64], [64, 64]]`).
    pub const INPUT_DIMS: &str = "Input Dims";
    /// A range's device time in whole microseconds, measured through the profiler stubs.
    pub const DEVICE_TIME_US: &str = "device_time_us";
    /// `false` on a range that was still open when the trace was taken.
    pub const FINISHED: &str = "finished";
    /// The number of ops in a span (the `Trace` events on the `Spans` row).
    pub const OP_COUNT: &str = "Op count";
    /// The floating-point operations an op performed (PyTorch's `with_flops`).
    pub const FLOPS: &str = "flops";
    /// On a [`[memory]`](super::name::MEMORY) record: the bytes allocated (positive) or
    /// freed (negative).
    pub const BYTES: &str = "Bytes";
    /// On a memory record: the bytes the allocator held allocated after it.
    pub const TOTAL_ALLOCATED: &str = "Total Allocated";
    /// On a memory record: the bytes the allocator held reserved after it.
    pub const TOTAL_RESERVED: &str = "Total Reserved";
    /// On a memory record: the address of the block.
    pub const ADDR: &str = "Addr";
    /// On a memory record: the memory's device, a `c10::DeviceType` integer (CPU 0, CUDA 1,
    /// MKLDNN 2, IDEEP 5, HIP 6, XPU 12, PrivateUse1 20).
    pub const DEVICE_TYPE: &str = "Device Type";
    /// On a memory record: the device's index (-1 for the CPU).
    pub const DEVICE_ID: &str = "Device Id";
    /// On a host op or user range recorded with Python stacks: the Python frames around it,
    /// innermost first, each followed by `;` (`"model.py(12): forward;train.py(40): step;"`).
    pub const CALL_STACK: &str = "Call stack";
    /// On a `python_function` event: its number in the trace, from 1.
    pub const PYTHON_ID: &str = "Python id";
    /// On a `python_function` event: the [`PYTHON_ID`] of the frame that called it.
    pub const PYTHON_PARENT_ID: &str = "Python parent id";
    /// On an `nn.Module` call's `python_function` event: the module's number among the
    /// instances of its class (the `0` of `nn.Module: Linear_0`).
    pub const PYTHON_MODULE_ID: &str = "Python module id";
    /// On an op autograd records: its sequence number, shared by the forward op and the
    /// backward node that PyTorch made for it.
    pub const SEQUENCE_NUMBER: &str = "Sequence number";
    /// On an op with a [`SEQUENCE_NUMBER`]: 0 on a forward op; on a backward node, PyTorch's
    /// id of the thread that ran its forward op.
    pub const FWD_THREAD_ID: &str = "Fwd thread id";
    /// An op's input types (`["float", "Scalar", ""]`), beside its `Input Dims`.
    pub const INPUT_TYPE: &str = "Input type";
    /// An op's input strides, a list of lists like `Input Dims`.
    pub const INPUT_STRIDES: &str = "Input Strides";
    /// On an op run by TorchScript (PyTorch's `with_modules`): the modules and methods it
    /// runs in, each followed by `.` (`"TOP(Model)::forward.linear(Linear)::forward."`).
    pub const MODULE_HIERARCHY: &str = "Module Hierarchy";
    /// An op's scalar inputs as text (`["", "1", "[4, 8]"]`; `""` for a tensor).
    pub const CONCRETE_INPUTS: &str = "Concrete Inputs";
    /// An ATen op's overload (`"Tensor"` of `aten::add.Tensor`; absent for the default
    /// overload), which the Python package records when asked as torch.profiler's
    /// `_ExperimentalConfig(capture_overload_names=True)` captures it.
    pub const OVERLOAD_NAME: &str = "Overload Name";
    /// A collective's fields, which PyTorch writes on its `record_param_comms` op and Kineto
    /// copies, in this order (those present), onto each activity linked to that op: its
    /// kernel and the launch's runtime call.
    pub const COLLECTIVE_FIELDS: [&str; 16] = [
        "Collective name",
        "In msg nelems",
        "Out msg nelems",
        "Group size",
        "dtype",
        "Input Tensors start",
        "Output Tensors start",
        "In split size",
        "Out split size",
        "Process Group Name",
        "Process Group Description",
        "Process Group Ranks",
        "Dst Rank",
        "Src Rank",
        "Seq",
        "Comms Id",
    ];
    /// The `RecordFunction` scope of a TorchScript function (PyTorch's
    /// `RecordScope::TORCHSCRIPT_FUNCTION`, 2), which the Python package records on it where
    /// PyTorch's trace keeps no scope: its `FunctionEvent.scope` is read from it.
    pub const RECORD_SCOPE: &str = "Record scope";
}

/// Names of events with a meaning of their own.
pub mod name {
    /// An allocation or a free: an instant (`cpu_instant_event`) whose args are
    /// [`Bytes`](super::arg::BYTES), [`Total Allocated`](super::arg::TOTAL_ALLOCATED),
    /// [`Total Reserved`](super::arg::TOTAL_RESERVED), [`Addr`](super::arg::ADDR),
    /// [`Device Type`](super::arg::DEVICE_TYPE) and [`Device Id`](super::arg::DEVICE_ID).
    pub const MEMORY: &str = "[memory]";
    /// An allocation that failed: an instant with the args of a [`MEMORY`] record.
    pub const OUT_OF_MEMORY: &str = "[OutOfMemory]";
    /// The start of the name of the op the autograd engine wraps each backward function
    /// in (`autograd::engine::evaluate_function: AddmmBackward0` around `AddmmBackward0`).
    pub const EVALUATE_FUNCTION_PREFIX: &str = "autograd::engine::evaluate_function: ";

    /// Whether an op named `wrapper` is the engine's range around the backward function
    /// named `node` (`autograd::engine::evaluate_function: AddmmBackward0` around
    /// `AddmmBackward0`).
    pub fn evaluates(wrapper: &str, node: &str) -> bool {
        wrapper.strip_prefix(EVALUATE_FUNCTION_PREFIX) == Some(node)
    }
    /// The start of the name of the range around each profiled step (`ProfilerStep#12`,
    /// the step's number after it), as `torch.profiler`'s `step()` and omniprof write it.
    pub const PROFILER_STEP_PREFIX: &str = "ProfilerStep#";
    /// The host op c10d records around each collective it runs (NCCL's, each one), which
    /// carries the collective's fields ([`COLLECTIVE_FIELDS`](super::arg::COLLECTIVE_FIELDS)).
    pub const RECORD_PARAM_COMMS: &str = "record_param_comms";
}

/// Keys of the trace header (the metadata beside `traceEvents`). The keys of the session
/// report (drops, `backends`, `backend_errors`, ...) are read and written only through
/// [`SessionHealth`](crate::health::SessionHealth), which holds them typed.
pub mod metadata {
    /// The device the trace's device columns are named after (`"OpenReg"`, `"cuda"`): the
    /// device type declared by the first backend that produced device data, else its name.
    pub const DEVICE_TYPE: &str = "device_type";
    /// Each backend's contribution: `name`, kept `activities`, dropped `out_of_window`, and,
    /// when not 0, how far the farthest of those started before the window
    /// (`out_of_window_before_ns`) and ended after it (`out_of_window_after_ns`).
    pub const BACKENDS: &str = "backends";
    /// Why backends were left out of the trace, one message each.
    pub const BACKEND_ERRORS: &str = "backend_errors";
    /// Plugin libraries and profilers from the plugin directories that take no part in
    /// traces, one line each naming the file and why (as `omniprof plugins list` prints).
    pub const PLUGIN_ERRORS: &str = "plugin_errors";
    /// Doubts about what backends delivered, one message each, prefixed with the backend's
    /// name (e.g. links to host ops refused because the event lies outside the op).
    pub const BACKEND_WARNINGS: &str = "backend_warnings";
    /// Host-side device events (runtime, driver) whose link to a host op was refused
    /// because they lie outside that op's time on its thread.
    pub const REFUSED_LINKS: &str = "refused_links";
    /// Runtime or driver events that lie past their host op only where the capture window
    /// cut that op (an op open at the stop, or begun before the start): their links are
    /// kept, and no warning is given.
    pub const WINDOW_CUT_LINKS: &str = "window_cut_links";
    /// Host events dropped because a thread reached its record cap.
    pub const DROPPED_EVENTS: &str = "dropped_events";
    /// Device activities dropped because they lay outside the capture window.
    pub const OUT_OF_WINDOW_EVENTS: &str = "out_of_window_events";
    /// Device activities recorded during warm-up (after the backends started, before the
    /// window opened), dropped as intended: counted apart from [`OUT_OF_WINDOW_EVENTS`],
    /// which flags anomalies.
    pub const WARMUP_EVENTS: &str = "warmup_events";
    /// Launches that shared a correlation id with an earlier one (no second flow is drawn).
    pub const DUPLICATE_FLOW_STARTS: &str = "duplicate_flow_starts";
    /// Flow ids a backend shared with an earlier source of the trace (the host or another
    /// backend), renumbered into that backend's namespace so arrows stay apart.
    pub const RENUMBERED_FLOW_IDS: &str = "renumbered_flow_ids";
    /// Host ranges named `<name table full>`: their names did not fit in the recorder's name
    /// table.
    pub const DROPPED_NAMES: &str = "dropped_names";
    /// Ranges still open at stop (written with `"finished": false`).
    pub const UNFINISHED_RANGES: &str = "unfinished_ranges";
    /// The trace's id (`REQUEST_TRACE_ID`, else 32 random hex digits, as PyTorch writes it).
    pub const TRACE_ID: &str = "trace_id";
    /// The host the trace was recorded on.
    pub const HOST_NAME: &str = "host_name";
    /// The clock the recorder read (`tsc`, `monotonic`).
    pub const CLOCK_SOURCE: &str = "clock_source";
    /// A flight recorder's dump: why it was written (`slow_step`, `hang`, `failure`,
    /// `request`; absent for a dump to a path asked for) and at which step.
    pub const FLIGHT_REASON: &str = "flight_reason";
    /// See [`FLIGHT_REASON`].
    pub const FLIGHT_STEP: &str = "flight_step";
    /// The flight recorder's window, in seconds, and its memory bound, in bytes.
    pub const FLIGHT_WINDOW_S: &str = "flight_window_s";
    /// See [`FLIGHT_WINDOW_S`].
    pub const FLIGHT_MAX_BYTES: &str = "flight_max_bytes";
    /// Records the flight recorder overwrote while still inside its window, since it
    /// started.
    pub const FLIGHT_OVERWRITTEN_RECORDS: &str = "flight_overwritten_records";
    /// True when the memory bound cut the dump's window short.
    pub const FLIGHT_CUT_SHORT: &str = "flight_cut_short";
    /// The backends that record device work continuously into the flight recorder's dumps
    /// (comma-separated; absent when none).
    pub const FLIGHT_DEVICE_BACKENDS: &str = "flight_device_backends";
    /// The backends that cannot record continuously and sit the flight recorder out: their
    /// device work is not in its dumps (comma-separated; absent when none).
    pub const FLIGHT_SITTING_OUT: &str = "flight_sitting_out";
    /// Rank and world size, the first place HTA looks for `"rank"`.
    pub const DISTRIBUTED_INFO: &str = "distributedInfo";
    /// Keys of the [`DISTRIBUTED_INFO`] object, as `torch.profiler` writes them.
    pub mod distributed {
        /// The process's rank in its job (HTA takes a trace's rank from it).
        pub const RANK: &str = "rank";
        /// The number of ranks in the job.
        pub const WORLD_SIZE: &str = "world_size";
        /// The collective backend (`gloo`, `nccl`; empty when unknown).
        pub const BACKEND: &str = "backend";
    }
    /// How many profiler-stub calls failed, and the first few messages.
    pub const STUB_ERRORS: &str = "stub_errors";
    /// Counter samples the trace holds, all series together.
    pub const COUNTER_SAMPLES: &str = "counter_samples";
    /// Counter samples dropped because they lay outside the capture window (samplers run
    /// until their backend stops, after the window closed).
    pub const OUT_OF_WINDOW_COUNTER_SAMPLES: &str = "out_of_window_counter_samples";
    /// Counter values dropped because they were not finite numbers.
    pub const DROPPED_COUNTER_VALUES: &str = "dropped_counter_values";
    /// The scope profiler's setup: `metrics` collected and `max_scopes`.
    pub const SCOPE_PROFILER: &str = "scope_profiler";
    /// Kernels past `SCOPE_PROFILER_MAX_SCOPES`, which got no metrics.
    pub const SCOPE_PROFILER_UNPROFILED_KERNELS: &str = "scope_profiler_unprofiled_kernels";
    /// Host perf events (`PERF_EVENTS`) that could not be opened, each with the reason.
    pub const UNAVAILABLE_PERF_EVENTS: &str = "unavailable_perf_events";
    /// The messages of the profiler stubs' errors.
    pub const STUB_ERROR_MESSAGES: &str = "stub_error_messages";
    /// `1` when memory was profiled (PyTorch's `profile_memory=True`).
    pub const PROFILE_MEMORY: &str = "profile_memory";
    /// `1` when FLOPs were counted (PyTorch's `with_flops=True`).
    pub const WITH_FLOPS: &str = "with_flops";
}
