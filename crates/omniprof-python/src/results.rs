//! A finished trace, its key averages and its events, as Python objects.
//!
//! `key_averages()` and `events()` return Python's `EventList` (omniprof/_event_list.py, a
//! `list`, as PyTorch's) of `KeyAverage` rows and `FunctionEvent`s; its methods call the
//! functions here with what it holds. A table is [`omniprof_analysis::KeyAverages::table`],
//! the one implementation the CLI's `omniprof summary` prints too, so the two are equal
//! byte for byte. The events are [`omniprof_analysis::function_events`], from the same op
//! trees; each is a view into one shared list, so reading one costs nothing until an
//! attribute is asked for.

use std::sync::{Arc, OnceLock};

use omniprof_analysis::{format_time, StackMetric, StorageRead};
use omniprof_analysis::{FunctionEvent, FunctionEvents, KeyAveragesOptions, Row, SortKey};
use omniprof_analysis::{TableOptions, TimeUnit};
use omniprof_read::TraceReader;
use omniprof_trace::keys::arg;
use omniprof_trace::{Activity, ActivityType, Flow, Format, Trace, Value};

/// PyTorch's `RecordScope` values `FunctionEvent.scope` takes (`ATen/record_function.h`).
const FUNCTION: i64 = 0;
const BACKWARD_FUNCTION: i64 = 1;
const USER_SCOPE: i64 = 7;
use pyo3::exceptions::{PyFutureWarning, PyOverflowError, PyRuntimeWarning};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::error::profiler_error;
use crate::storage_reads;

/// One finished trace (a cycle's, with a schedule), and the storages its ops read (kept
/// beside it: no trace file has them).
#[pyclass(module = "omniprof._native", name = "Trace", frozen)]
pub(crate) struct PyTrace(Arc<Trace>, Vec<StorageRead>);

impl PyTrace {
    /// `trace`, with the storages its ops read taken off them when its session `asked` for
    /// them ([`storage_reads::asked`]; no other trace holds any).
    pub(crate) fn new(mut trace: Trace, asked: bool) -> Self {
        let reads = if asked {
            storage_reads::take(&mut trace)
        } else {
            Vec::new()
        };
        Self(Arc::new(trace), reads)
    }

    pub(crate) fn trace(&self) -> &Trace {
        &self.0
    }
}

#[pymethods]
impl PyTrace {
    /// Writes the trace: Perfetto's protobuf under a `.pftrace` name, else Kineto's Chrome
    /// JSON (gzip-compressed under a `.gz` name), as torch.profiler writes any name. On
    /// failure a `ProfilerError` names the path; the trace is kept, so export can be retried.
    fn export_chrome_trace(&self, py: Python<'_>, path: std::path::PathBuf) -> PyResult<()> {
        // As torch.profiler: Chrome JSON under any name, gzip under a `.gz` one; a `.pftrace`
        // gets Perfetto's format.
        let format = Format::for_path(&path).unwrap_or_else(|_| {
            if path.extension().is_some_and(|e| e == "gz") {
                Format::JsonGz
            } else {
                Format::Json
            }
        });
        py.detach(|| omniprof_trace::save_as(&self.0, &path, format))
            .map(drop)
            .map_err(profiler_error)
    }

    /// The rows; `profile_memory` and `with_flops` add PyTorch's memory and FLOPs columns to
    /// the table even where no row has any (as PyTorch's table has them when asked for);
    /// `group_by_stack_n` also groups by the first N frames of the events' Python stacks
    /// (rows then have `stack`, and the table a `Source Location` column);
    /// `include_python_functions` makes rows of `python_function` events too;
    /// `group_by_overload_name` also groups by the ops' overload names (rows then have
    /// `overload_name`, and the table an `Overload Name` column where some row has one).
    #[pyo3(signature = (
        group_by_input_shape=false,
        profile_memory=false,
        with_flops=false,
        group_by_stack_n=0,
        include_python_functions=false,
        group_by_overload_name=false
    ))]
    // One keyword argument each, as PyTorch's key_averages takes them.
    #[allow(clippy::too_many_arguments)]
    fn key_averages<'py>(
        &self,
        py: Python<'py>,
        group_by_input_shape: bool,
        profile_memory: bool,
        with_flops: bool,
        group_by_stack_n: i64,
        include_python_functions: bool,
        group_by_overload_name: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let options = KeyAveragesOptions {
            group_by_input_shapes: group_by_input_shape,
            group_by_overload_name,
            profile_memory,
            with_flops,
            // PyTorch groups by stack only for N > 0.
            group_by_stack_n: usize::try_from(group_by_stack_n).unwrap_or(0),
            include_python_functions,
            ..Default::default()
        };
        let mut summary = py.detach(|| omniprof_analysis::key_averages(&self.0, &options));
        name_privateuse1(py, &mut summary.device_name)?;
        let rows = Arc::new(TraceRows {
            trace: Arc::clone(&self.0),
            options,
            averaged: OnceLock::new(),
        });
        averages_list(py, summary, |row| {
            FirstEvent::OfTrace(Arc::clone(&rows), Arc::new(row.clone()))
        })
    }

    /// Writes `omniprof report`'s page of this trace (one self-contained HTML file): the
    /// same model and page as the CLI's, from the trace in memory. A path that cannot be
    /// written is an `OSError` naming it.
    fn export_report(&self, py: Python<'_>, path: std::path::PathBuf) -> PyResult<()> {
        let html = py.detach(|| {
            let summary = omniprof_analysis::key_averages(&self.0, &KeyAveragesOptions::default());
            omniprof_report::ReportModel::of_trace(&self.0, "the profiled run", summary).html()
        });
        std::fs::write(&path, html).map_err(|e| {
            pyo3::exceptions::PyOSError::new_err(format!("cannot write {}: {e}", path.display()))
        })
    }

    /// PyTorch's `export_stacks(path, metric)`: each event's Python stack with its self
    /// time in µs, in the folded format flame graph tools read. An unknown `metric` is a
    /// `ValueError` naming the accepted ones; a path that cannot be written an `OSError`.
    #[pyo3(signature = (path, metric="self_cpu_time_total"))]
    fn export_stacks(
        &self,
        py: Python<'_>,
        path: std::path::PathBuf,
        metric: &str,
    ) -> PyResult<()> {
        let metric = stack_metric(metric)?;
        let events = py
            .detach(|| omniprof_analysis::function_events(&self.0, &KeyAveragesOptions::default()));
        write_stacks(py, &events, metric, &path)
    }

    /// PyTorch's `events()`: every event as a `FunctionEvent`, in PyTorch's order;
    /// `metadata` exposes the args of the events PyTorch's Kineto records (see
    /// `FunctionEvent.metadata`).
    #[pyo3(signature = (profile_memory=false, with_flops=false, metadata=false))]
    fn events<'py>(
        &self,
        py: Python<'py>,
        profile_memory: bool,
        with_flops: bool,
        metadata: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let options = KeyAveragesOptions {
            profile_memory,
            with_flops,
            ..Default::default()
        };
        let mut all = py.detach(|| omniprof_analysis::function_events(&self.0, &options));
        name_privateuse1(py, &mut all.device_name)?;
        if let Some(use_device) = all.use_device.as_mut() {
            name_privateuse1(py, use_device)?;
        }
        let events = Arc::new(TraceEvents {
            all,
            trace: Arc::clone(&self.0),
            metadata,
        });
        let use_device = events.use_device.clone();
        let items = (0..events.events.len()).map(|i| PyFunctionEvent::new(&events, i));
        let items = PyList::new(py, items)?;
        event_list(
            py,
            items,
            use_device,
            events.profile_memory,
            events.with_flops,
        )
    }

    /// PyTorch's memory timeline of one device ([`omniprof_analysis::memory_timeline`]):
    /// `device_type` a `c10::DeviceType` number, `device_index` -1 for the CPU;
    /// `has_schema(name)` says whether an op is an operator with a schema (asked once per
    /// name; what it raises is raised). The storages the ops read count where the profile
    /// had `record_shapes` and `profile_memory` (a loaded trace has none). Returns the raw
    /// events `(time_ns or -1, action,
    /// bytes, temporary)` in torch's order and the allocator's largest `Total Reserved`.
    fn memory_timeline(
        &self,
        device_type: i64,
        device_index: i64,
        has_schema: &Bound<'_, PyAny>,
    ) -> PyResult<(Vec<RawMemoryEvent>, i64)> {
        let mut error = None;
        let timeline = omniprof_analysis::memory_timeline(
            &self.0,
            device_type,
            device_index,
            &self.1,
            |name| {
                // The first error is kept and raised; the names after it count as no operator.
                error.is_none()
                    && has_schema
                        .call1((name,))
                        .and_then(|v| v.is_truthy())
                        .map_err(|e| error = Some(e))
                        .unwrap_or(false)
            },
        );
        if let Some(e) = error {
            return Err(e);
        }
        let events = timeline.events.iter().map(|e| {
            (
                e.time_ns.unwrap_or(-1),
                e.action as u8,
                e.bytes,
                e.temporary,
            )
        });
        Ok((events.collect(), timeline.peak_reserved))
    }

    /// The trace's id (its `trace_id`: `REQUEST_TRACE_ID`, a `custom_trace_id_callback`'s,
    /// or one made for it), as PyTorch's `get_trace_id()` gives it; `None` for a file
    /// without one.
    #[getter]
    fn trace_id(&self) -> Option<&str> {
        self.0
            .metadata(omniprof_trace::keys::metadata::TRACE_ID)
            .and_then(Value::as_str)
    }

    /// The number of activities (host ranges, instants, device work) in the trace.
    #[getter]
    fn activity_count(&self) -> usize {
        self.0.activities.len()
    }

    /// Host events the recorder dropped at its per-thread cap (the trace's `dropped_events`).
    #[getter]
    fn dropped_events(&self) -> u64 {
        self.0.health.dropped_events.unwrap_or(0)
    }

    /// Why backends were left out of the trace (its `backend_errors`), one message each.
    #[getter]
    fn backend_errors(&self) -> Vec<String> {
        let errors = &self.0.health.backend_errors;
        errors.iter().map(ToString::to_string).collect()
    }
}

/// A memory timeline's event as `Trace.memory_timeline` returns it: time in ns (-1: there
/// from the window's start), torch's action number, bytes, temporary.
type RawMemoryEvent = (i64, u8, i64, bool);

/// A `metric` of `export_stacks`, or a `ValueError` naming the accepted ones.
fn stack_metric(metric: &str) -> PyResult<StackMetric> {
    metric
        .parse()
        .map_err(|e: omniprof_analysis::UnknownStackMetric| PyValueError::new_err(e.to_string()))
}

/// Writes the folded stacks of `events` to `path`.
fn write_stacks(
    py: Python<'_>,
    events: &FunctionEvents,
    metric: StackMetric,
    path: &std::path::Path,
) -> PyResult<()> {
    let text = py.detach(|| events.export_stacks(metric));
    std::fs::write(path, text).map_err(PyErr::from)
}

/// `omniprof.load_trace(path)`: a trace file (Kineto / PyTorch Chrome JSON or a Perfetto
/// trace, plain or gzip, omniprof's or PyTorch's) as a `Trace`, whose `key_averages()`, `events()` and
/// `export_stacks()` analyse it as they do a trace omniprof just recorded. A file that
/// cannot be read or is not a trace raises `ProfilerError` naming it; a session health entry
/// of the wrong shape (`"dropped_events": "many"`) is a `RuntimeWarning` naming the file, and
/// is left out of the trace's `dropped_events` / `backend_errors`.
#[pyfunction]
fn load_trace(py: Python<'_>, path: std::path::PathBuf) -> PyResult<PyTrace> {
    let read = py.detach(|| TraceReader::new().read_path(&path));
    if let Some(e) = read.error {
        return Err(profiler_error(format!(
            "cannot load {}: {e}",
            path.display()
        )));
    }
    for problem in &read.health_problems {
        let message = format!("omniprof: {}: {problem}", path.display());
        let message =
            std::ffi::CString::new(message.replace('\0', " ")).expect("no NUL left in the message");
        PyErr::warn(py, &py.get_type::<PyRuntimeWarning>(), &message, 1)?;
    }
    // A file holds no storages: their arg is never written.
    Ok(PyTrace::new(read.trace, false))
}

/// The Python `EventList` (omniprof/_event_list.py: PyTorch's, a `list`) holding `items`,
/// with PyTorch's `use_device`, `profile_memory` and `with_flops` of a list: what its
/// `table()`, `key_averages()`, `total_average()` and `export_stacks()` pass to the
/// functions below with the events or rows it holds when called.
fn event_list<'py>(
    py: Python<'py>,
    items: Bound<'py, PyList>,
    use_device: Option<String>,
    profile_memory: bool,
    with_flops: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let kwargs = PyDict::new(py);
    kwargs.set_item("use_device", use_device)?;
    kwargs.set_item("profile_memory", profile_memory)?;
    kwargs.set_item("with_flops", with_flops)?;
    py.import("omniprof._event_list")?
        .getattr("EventList")?
        .call((items,), Some(&kwargs))
}

/// `summary`'s rows as an `EventList` of `KeyAverage`s; `first` finds each row's first
/// event.
fn averages_list<'py>(
    py: Python<'py>,
    summary: omniprof_analysis::KeyAverages,
    first: impl Fn(&Row) -> FirstEvent,
) -> PyResult<Bound<'py, PyAny>> {
    let (profile_memory, with_flops) = (summary.profile_memory, summary.with_flops);
    let (rows, device) = rows_list(py, summary, first)?;
    let use_device = device.used.then(|| device.name.to_string());
    event_list(py, rows, use_device, profile_memory, with_flops)
}

/// `summary`'s rows as a list of `KeyAverage`s, each with the summary's device and, by
/// `first`, where its first event is.
fn rows_list<'py>(
    py: Python<'py>,
    summary: omniprof_analysis::KeyAverages,
    first: impl Fn(&Row) -> FirstEvent,
) -> PyResult<(Bound<'py, PyList>, Device)> {
    let device = Device::of(&summary);
    let rows = summary.rows.into_iter().map(|row| PyRow {
        first: first(&row),
        row,
        device: device.clone(),
    });
    Ok((PyList::new(py, rows)?, device))
}

/// PyTorch's `EventList.table()` of what a list holds (`FunctionEvent`s, as one row each,
/// and `KeyAverage`s, in the list's order), with `table()`'s arguments (see
/// [`table_options`]) and the list's `profile_memory` and `with_flops`.
#[pyfunction]
#[pyo3(signature = (
    items,
    profile_memory,
    with_flops,
    sort_by=None,
    row_limit=Some(RowLimit(Some(100))),
    max_src_column_width=75,
    max_name_column_width=55,
    max_shapes_column_width=80,
    header=None,
    top_level_events_only=false,
    time_unit=None
))]
// Written out: PyO3 would show the default `Some(100)` as `...`.
#[pyo3(
    text_signature = "(items, profile_memory, with_flops, sort_by=None, row_limit=100, \
                      max_src_column_width=75, max_name_column_width=55, \
                      max_shapes_column_width=80, header=None, top_level_events_only=False, \
                      time_unit=None)"
)]
// One argument each, as PyTorch's `table()` takes them.
#[allow(clippy::too_many_arguments)]
fn events_table(
    py: Python<'_>,
    items: &Bound<'_, PyAny>,
    profile_memory: bool,
    with_flops: bool,
    sort_by: Option<&str>,
    row_limit: Option<RowLimit>,
    max_src_column_width: i64,
    max_name_column_width: i64,
    max_shapes_column_width: i64,
    header: Option<String>,
    top_level_events_only: bool,
    time_unit: Option<&str>,
) -> PyResult<String> {
    let options = table_options(
        py,
        sort_by,
        row_limit.and_then(|limit| limit.0),
        [
            max_src_column_width,
            max_name_column_width,
            max_shapes_column_width,
        ],
        header,
        top_level_events_only,
        time_unit,
    )?;
    let summary = summary_of(items, "table()", profile_memory, with_flops)?;
    Ok(py.detach(|| summary.table(&options)))
}

/// PyTorch's `EventList.total_average()`: every event or row of a list summed into one
/// named `Total`.
#[pyfunction]
fn events_total(items: &Bound<'_, PyAny>) -> PyResult<PyRow> {
    let summary = summary_of(items, "total_average()", false, false)?;
    let row = summary.total_average().unwrap_or_else(empty_total);
    // PyTorch's total takes these fields afresh from each item it adds: the last one's.
    let mut first = FirstEvent::None;
    for item in items.try_iter()? {
        let item = item?;
        if let Ok(event) = item.cast::<PyFunctionEvent>() {
            let event = event.get();
            first = FirstEvent::Known(Arc::clone(&event.events), event.index);
        } else if let Ok(row) = item.cast::<PyRow>() {
            first = row.borrow().first.clone();
        }
    }
    Ok(PyRow {
        row,
        device: Device::of(&summary),
        first,
    })
}

/// PyTorch's `EventList.key_averages()` of a list of `FunctionEvent`s: the rows
/// ([`omniprof_analysis::average_events`]) as a list of `KeyAverage`s.
#[pyfunction]
#[pyo3(signature = (
    items,
    group_by_input_shapes=false,
    group_by_stack_n=0,
    group_by_overload_name=false,
    include_python_functions=false
))]
fn average_events<'py>(
    py: Python<'py>,
    items: &Bound<'py, PyAny>,
    group_by_input_shapes: bool,
    group_by_stack_n: i64,
    group_by_overload_name: bool,
    include_python_functions: bool,
) -> PyResult<Bound<'py, PyList>> {
    let options = KeyAveragesOptions {
        group_by_input_shapes,
        group_by_overload_name,
        group_by_stack_n: usize::try_from(group_by_stack_n).unwrap_or(0),
        include_python_functions,
        ..Default::default()
    };
    let events = events_of(items, "key_averages()")?;
    let refs = event_refs(&events);
    let summary = omniprof_analysis::KeyAverages {
        rows: py.detach(|| omniprof_analysis::average_events(&refs, &options)),
        device_name: device_name_of(events.first().map(|(all, _)| all.device_name.as_str())),
        profile_memory: false,
        with_flops: false,
        too_deep: 0,
    };
    let first = |row: &Row| match row.first_event.and_then(|at| events.get(at)) {
        Some((all, i)) => FirstEvent::Known(Arc::clone(all), *i),
        None => FirstEvent::None,
    };
    Ok(rows_list(py, summary, first)?.0)
}

/// PyTorch's `EventList.export_stacks(path, metric)` of a list of `FunctionEvent`s (see
/// `Trace.export_stacks`).
#[pyfunction]
fn events_stacks(
    py: Python<'_>,
    items: &Bound<'_, PyAny>,
    path: std::path::PathBuf,
    metric: &str,
) -> PyResult<()> {
    let metric = stack_metric(metric)?;
    let events = events_of(items, "export_stacks()")?;
    let refs = event_refs(&events);
    let text = py.detach(|| omniprof_analysis::event_stacks(&refs, metric));
    std::fs::write(path, text).map_err(PyErr::from)
}

/// The events a list holds, each as its trace's events and its place there; a
/// `TypeError` naming the first item that is not a `FunctionEvent` (`call` names the
/// method).
fn events_of(items: &Bound<'_, PyAny>, call: &str) -> PyResult<Vec<(Arc<TraceEvents>, usize)>> {
    let mut events = Vec::new();
    for (i, item) in items.try_iter()?.enumerate() {
        let item = item?;
        let Ok(event) = item.cast::<PyFunctionEvent>() else {
            return Err(not_an_event(&item, i, call, "a FunctionEvent"));
        };
        let event = event.get();
        events.push((Arc::clone(&event.events), event.index));
    }
    Ok(events)
}

/// The events `events_of` found, as the analyses take them.
fn event_refs(events: &[(Arc<TraceEvents>, usize)]) -> Vec<&FunctionEvent> {
    events.iter().map(|(all, i)| &all.events[*i]).collect()
}

/// A list's `FunctionEvent`s (as one row each, [`omniprof_analysis::event_rows`]) and
/// `KeyAverage`s as the rows of one summary, in the list's order; a `TypeError` naming the
/// first item that is neither.
fn summary_of(
    items: &Bound<'_, PyAny>,
    call: &str,
    profile_memory: bool,
    with_flops: bool,
) -> PyResult<omniprof_analysis::KeyAverages> {
    enum Item {
        Event(Arc<TraceEvents>, usize),
        Row(Row, Arc<str>),
    }
    let mut held = Vec::new();
    for (i, item) in items.try_iter()?.enumerate() {
        let item = item?;
        if let Ok(event) = item.cast::<PyFunctionEvent>() {
            let event = event.get();
            held.push(Item::Event(Arc::clone(&event.events), event.index));
        } else if let Ok(row) = item.cast::<PyRow>() {
            let row = row.borrow();
            held.push(Item::Row(row.row.clone(), Arc::clone(&row.device.name)));
        } else {
            return Err(not_an_event(
                &item,
                i,
                call,
                "a FunctionEvent or KeyAverage",
            ));
        }
    }
    let events: Vec<&FunctionEvent> = held
        .iter()
        .filter_map(|item| match item {
            Item::Event(all, i) => Some(&all.events[*i]),
            Item::Row(..) => None,
        })
        .collect();
    let mut event_rows = omniprof_analysis::event_rows(&events).into_iter();
    let device_name = device_name_of(held.first().map(|item| match item {
        Item::Event(all, _) => all.device_name.as_str(),
        Item::Row(_, device) => &**device,
    }));
    let rows = held
        .into_iter()
        .filter_map(|item| match item {
            Item::Event(..) => event_rows.next(),
            Item::Row(row, _) => Some(row),
        })
        .collect();
    Ok(omniprof_analysis::KeyAverages {
        rows,
        device_name,
        profile_memory,
        with_flops,
        too_deep: 0,
    })
}

/// The device name of a list's first item, else PyTorch's default, `cuda`.
fn device_name_of(first: Option<&str>) -> String {
    first.unwrap_or("cuda").to_string()
}

/// The `TypeError` of item `i` of a list, which is not `expected`.
fn not_an_event(item: &Bound<'_, PyAny>, i: usize, call: &str, expected: &str) -> PyErr {
    let type_name = item
        .get_type()
        .name()
        .map_or_else(|_| "?".to_string(), |n| n.to_string());
    PyTypeError::new_err(format!(
        "EventList.{call}: item {i} is a {type_name}, not {expected}"
    ))
}

/// A `row_limit` as PyTorch takes one: any Python int. A limit past what fits in 64 bits
/// keeps every row, as one past the rows' count does; a negative one keeps every row too.
pub(crate) struct RowLimit(Option<usize>);

impl<'a, 'py> FromPyObject<'a, 'py> for RowLimit {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        match obj.extract::<i64>() {
            Ok(n) => Ok(Self(usize::try_from(n).ok())),
            Err(e) if e.is_instance_of::<PyOverflowError>(obj.py()) => Ok(Self(None)),
            Err(e) => Err(e),
        }
    }
}

/// The options of PyTorch's `table()`: `sort_by` a row attribute name
/// (`self_cpu_time_total`, `cuda_time_total`, `self_cpu_memory_usage`, `flops`, ...; another
/// is a `ValueError` listing them), `row_limit` `None` or -1 for every row, the column widths
/// (source, name, shapes), a `header` line, only top-level rows, every time in `time_unit`
/// (`s`, `ms`, `us`; another is warned about and each time keeps its own unit).
fn table_options(
    py: Python<'_>,
    sort_by: Option<&str>,
    row_limit: Option<usize>,
    [src, name, shapes]: [i64; 3],
    header: Option<String>,
    top_level_events_only: bool,
    time_unit: Option<&str>,
) -> PyResult<TableOptions> {
    let sort_by = sort_by
        .map(str::parse::<SortKey>)
        .transpose()
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    // PyTorch prints each time in its own unit for any other `time_unit`: so does this, and
    // says so.
    let time_unit = match time_unit.map(str::parse::<TimeUnit>) {
        Some(Err(e)) => {
            let message = std::ffi::CString::new(format!(
                "omniprof: table(): {e}: each time is printed in its own unit"
            ))
            .unwrap_or_default();
            PyErr::warn(py, &py.get_type::<PyRuntimeWarning>(), &message, 1)?;
            None
        }
        Some(Ok(unit)) => Some(unit),
        None => None,
    };
    let width = |w: i64| usize::try_from(w).ok();
    Ok(TableOptions {
        sort_by,
        row_limit,
        max_src_column_width: width(src),
        max_name_column_width: width(name),
        max_shapes_column_width: width(shapes),
        header,
        top_level_events_only,
        time_unit,
    })
}

/// The total of no rows.
fn empty_total() -> Row {
    Row {
        name: Arc::from("Total"),
        ..Row::default()
    }
}

/// One row (PyTorch's `FunctionEventAvg`); times are microseconds. Not frozen: `add` sums
/// into it in place, as into PyTorch's.
#[pyclass(module = "omniprof._native", name = "KeyAverage")]
pub(crate) struct PyRow {
    row: Row,
    device: Device,
    first: FirstEvent,
}

impl PyRow {
    fn row(&self) -> &Row {
        &self.row
    }

    /// The row's first event, whose parent, children and scope PyTorch's row takes.
    fn first_event(&self, py: Python<'_>) -> Option<PyFunctionEvent> {
        let (events, index) = match &self.first {
            FirstEvent::None => return None,
            FirstEvent::Known(events, index) => (Arc::clone(events), *index),
            FirstEvent::OfTrace(rows, row) => py.detach(|| rows.first_of(row))?,
        };
        Some(PyFunctionEvent::new(&events, index))
    }
}

/// Where a row's first event is.
#[derive(Clone)]
enum FirstEvent {
    /// Nowhere: a row of no events.
    None,
    /// The event at this index of these events.
    Known(Arc<TraceEvents>, usize),
    /// Among the events of the trace these rows were summed from, made when first asked for
    /// (the trace's summary is made without them): the first event of this row's key.
    OfTrace(Arc<TraceRows>, Arc<Row>),
}

/// The rows of a trace's summary, for finding their first events: the trace's events,
/// averaged with the summary's options, once.
struct TraceRows {
    trace: Arc<Trace>,
    options: KeyAveragesOptions,
    averaged: OnceLock<(Arc<TraceEvents>, Vec<Row>)>,
}

impl TraceRows {
    /// The first event of `row`: that of the events' row of the same key.
    fn first_of(&self, row: &Row) -> Option<(Arc<TraceEvents>, usize)> {
        let (events, rows) = self.averaged.get_or_init(|| {
            let all = omniprof_analysis::function_events(&self.trace, &self.options);
            let events = Arc::new(TraceEvents {
                all,
                trace: Arc::clone(&self.trace),
                metadata: false,
            });
            let refs: Vec<&FunctionEvent> = events.events.iter().collect();
            let rows = omniprof_analysis::average_events(&refs, &self.options);
            (events, rows)
        });
        let same_key = |r: &&Row| {
            r.name == row.name
                && (r.on_device, r.is_legacy, r.is_user_annotation)
                    == (row.on_device, row.is_legacy, row.is_user_annotation)
                && r.input_shapes == row.input_shapes
                && r.overload_name == row.overload_name
                && r.stack == row.stack
        };
        let at = rows.iter().find(same_key)?.first_event?;
        Some((Arc::clone(events), at))
    }
}

/// The device of a summary's rows, as the summary names it.
#[derive(Clone)]
struct Device {
    /// The name its device columns carry (`cuda`, `OpenReg`).
    name: Arc<str>,
    /// Some row has device time: the name is PyTorch's `use_device` then.
    used: bool,
}

impl Device {
    fn of(summary: &omniprof_analysis::KeyAverages) -> Self {
        Self {
            name: Arc::from(summary.device_name.as_str()),
            used: summary.has_device_time(),
        }
    }
}

/// A stack's frames as Python strings.
fn frames(stack: Option<&[Arc<str>]>) -> Vec<String> {
    stack.unwrap_or(&[]).iter().map(|f| f.to_string()).collect()
}

/// Input shapes as the lists Python prints them as (`[[64, 64], []]`).
fn shapes_list<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyAny>> {
    // The shapes are kept as Python prints them, which for lists of integers is JSON.
    py.import("json")?.call_method1("loads", (text,))
}

#[pymethods]
impl PyRow {
    #[getter]
    fn key(&self) -> &str {
        &self.row().name
    }

    #[getter]
    fn count(&self) -> u64 {
        self.row().count
    }

    /// A float, or PyTorch's int 0 for a row of device work (as its events' totals are).
    #[getter]
    fn self_cpu_time_total<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        total(py, self.row().self_cpu_time_total_us, self.row().on_device)
    }

    #[getter]
    fn cpu_time_total<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        total(py, self.row().cpu_time_total_us, self.row().on_device)
    }

    /// CPU time per call.
    #[getter]
    fn cpu_time(&self) -> f64 {
        self.row().cpu_time_avg_us()
    }

    /// A float, or PyTorch's int 0 for a row without device time (its events' are ints).
    #[getter]
    fn self_device_time_total<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let us = self.row().self_device_time_total_us;
        total(py, us, self.row().device_time_total_us == 0.0)
    }

    #[getter]
    fn device_time_total<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let us = self.row().device_time_total_us;
        total(py, us, us == 0.0)
    }

    /// Device time per call.
    #[getter]
    fn device_time(&self) -> f64 {
        self.row().device_time_avg_us()
    }

    /// `device_time`, under PyTorch's deprecated name (a `FutureWarning` says so).
    #[getter]
    fn cuda_time(&self, py: Python<'_>) -> PyResult<f64> {
        deprecated(py, "cuda_time", "device_time")?;
        Ok(self.row().device_time_avg_us())
    }

    /// The input shapes when grouped by them (`[[64, 64], []]`), else `""`, as PyTorch's
    /// `key_averages()` leaves them.
    #[getter]
    fn input_shapes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match self.row().input_shapes.as_deref() {
            Some(shapes) => shapes_list(py, shapes),
            None => Ok(pyo3::types::PyString::new(py, "").into_any()),
        }
    }

    /// The first N frames of the events' Python stack, innermost first, when grouped by
    /// stack (`group_by_stack_n=N`), else an empty list.
    #[getter]
    fn stack(&self) -> Vec<String> {
        frames(self.row().stack.as_deref())
    }

    /// Bytes allocated (less those freed) inside the row's events, on the CPU.
    #[getter]
    fn cpu_memory_usage(&self) -> i64 {
        self.row().cpu_memory_usage
    }

    /// [`cpu_memory_usage`](Self::cpu_memory_usage) less that of the events' children.
    #[getter]
    fn self_cpu_memory_usage(&self) -> i64 {
        self.row().self_cpu_memory_usage
    }

    #[getter]
    fn device_memory_usage(&self) -> i64 {
        self.row().device_memory_usage
    }

    #[getter]
    fn self_device_memory_usage(&self) -> i64 {
        self.row().self_device_memory_usage
    }

    /// PyTorch's FLOP count of the row's events (0 where it counts none).
    #[getter]
    fn flops(&self) -> u64 {
        self.row().flops
    }

    #[getter]
    fn is_user_annotation(&self) -> bool {
        self.row().is_user_annotation
    }

    #[getter]
    fn on_device(&self) -> bool {
        self.row().on_device
    }

    /// As `FunctionEvent.device_type`: `CUDA` for a row of device work, else `CPU`.
    #[getter]
    fn device_type<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        device_type(py, self.row().on_device)
    }

    /// PyTorch's: an event ending on another thread than it began; false for a trace's.
    #[getter]
    fn is_async(&self) -> bool {
        self.row().is_async
    }

    /// Device time from the profiler stubs (the legacy path), which has no device timeline.
    #[getter]
    fn is_legacy(&self) -> bool {
        self.row().is_legacy
    }

    /// PyTorch's distributed node id: -1, as for every local profile.
    #[getter]
    fn node_id(&self) -> i64 {
        -1
    }

    /// PyTorch's remote flag: false, as for every local profile.
    #[getter]
    fn is_remote(&self) -> bool {
        false
    }

    /// PyTorch's overload name: the rows' (`""` for the default overload) when grouped by
    /// overload name, else empty, as in PyTorch.
    #[getter]
    fn overload_name(&self) -> &str {
        self.row().overload_name.as_deref().unwrap_or("")
    }

    /// The device's name (`cuda`) when the rows have device time, else `None`.
    #[getter]
    fn use_device(&self) -> Option<&str> {
        self.device.used.then_some(&*self.device.name)
    }

    /// The times as PyTorch's table prints them (`602.183us`, `65.251ms`).
    #[getter]
    fn self_cpu_time_total_str(&self) -> String {
        format_time(self.row().self_cpu_time_total_us)
    }

    #[getter]
    fn cpu_time_total_str(&self) -> String {
        format_time(self.row().cpu_time_total_us)
    }

    #[getter]
    fn cpu_time_str(&self) -> String {
        format_time(self.cpu_time())
    }

    #[getter]
    fn self_device_time_total_str(&self) -> String {
        format_time(self.row().self_device_time_total_us)
    }

    #[getter]
    fn device_time_total_str(&self) -> String {
        format_time(self.row().device_time_total_us)
    }

    #[getter]
    fn device_time_str(&self) -> String {
        format_time(self.device_time())
    }

    /// The parent of the row's first event, as PyTorch's row takes it (`None` for a top-level
    /// event, and for a row of no events).
    #[getter]
    fn cpu_parent(&self, py: Python<'_>) -> Option<PyFunctionEvent> {
        self.first_event(py)?.cpu_parent()
    }

    /// The children of the row's first event (`None` for a row of no events).
    #[getter]
    fn cpu_children(&self, py: Python<'_>) -> Option<Vec<PyFunctionEvent>> {
        Some(self.first_event(py)?.cpu_children())
    }

    /// The `RecordScope` of the row's first event (`None` for a row of no events).
    #[getter]
    fn scope(&self, py: Python<'_>) -> Option<i64> {
        Some(self.first_event(py)?.scope())
    }

    /// PyTorch's `FunctionEventAvg.add`: sums `other`, a `FunctionEvent` or a `KeyAverage` of
    /// the same key, into this row (its calls, times, memory and FLOPs) and returns the row.
    /// Another key is an `AssertionError`, as in PyTorch.
    fn add<'py>(slf: &Bound<'py, Self>, other: &Bound<'py, PyAny>) -> PyResult<Bound<'py, Self>> {
        let added = if let Ok(event) = other.cast::<PyFunctionEvent>() {
            event.get().event().row()
        } else if let Ok(row) = other.cast::<PyRow>() {
            row.borrow().row.clone()
        } else {
            let type_name = other.get_type().name()?;
            return Err(PyTypeError::new_err(format!(
                "KeyAverage.add: expected a FunctionEvent or KeyAverage, not {type_name}"
            )));
        };
        let mut me = slf.borrow_mut();
        if added.name != me.row.name {
            return Err(pyo3::exceptions::PyAssertionError::new_err(format!(
                "Expected keys to match, but got {} vs {}",
                added.name, me.row.name
            )));
        }
        me.row.add(&added);
        drop(me);
        Ok(slf.clone())
    }

    /// `row += other`: `add`, in place.
    fn __iadd__<'py>(slf: &Bound<'py, Self>, other: &Bound<'py, PyAny>) -> PyResult<()> {
        Self::add(slf, other).map(drop)
    }

    /// PyTorch's `FunctionEventAvg` text, field for field (`cuda` naming the device columns
    /// of rows without device time, as there).
    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let text = |name: &str| -> PyResult<String> { Ok(slf.getattr(name)?.str()?.to_string()) };
        let me = slf.borrow();
        let device = me.use_device().unwrap_or("cuda");
        Ok(format!(
            "<FunctionEventAvg key={} self_cpu_time={} cpu_time={}  self_{device}_time={} \
             {device}_time={} input_shapes={} cpu_memory_usage={} {device}_memory_usage={}>",
            me.key(),
            me.self_cpu_time_total_str(),
            me.cpu_time_str(),
            me.self_device_time_total_str(),
            me.device_time_str(),
            text("input_shapes")?,
            me.cpu_memory_usage(),
            me.device_memory_usage(),
        ))
    }
}

/// A trace's events with the trace itself, whose args an event reads only when asked (its
/// concrete inputs, its inputs' dims and strides): copied into every event, they would cost
/// `events()` a list or three per op.
pub(crate) struct TraceEvents {
    all: FunctionEvents,
    trace: Arc<Trace>,
    /// `_ExperimentalConfig(expose_kineto_event_metadata=True)`: device-side events expose
    /// their args as `metadata`.
    metadata: bool,
}

impl std::ops::Deref for TraceEvents {
    type Target = FunctionEvents;

    fn deref(&self) -> &FunctionEvents {
        &self.all
    }
}

/// One event (PyTorch's `FunctionEvent`); times are microseconds.
#[pyclass(module = "omniprof._native", name = "FunctionEvent", frozen)]
pub(crate) struct PyFunctionEvent {
    events: Arc<TraceEvents>,
    index: usize,
}

impl PyFunctionEvent {
    fn new(events: &Arc<TraceEvents>, index: usize) -> Self {
        Self {
            events: Arc::clone(events),
            index,
        }
    }

    fn event(&self) -> &omniprof_analysis::FunctionEvent {
        &self.events.events[self.index]
    }

    /// The activity that describes the event, if it has one.
    fn activity(&self) -> Option<&Activity> {
        Some(&self.events.trace.activities[self.event().activity?])
    }

    /// The arg `key` of the activity that describes the event, if it has one.
    fn arg(&self, key: &str) -> Option<&Value> {
        self.activity()?.arg(key)
    }

    /// The activity whose args are the event's `metadata`: asked for, and one PyTorch's
    /// Kineto records (its own ops, ranges and Python calls carry none).
    fn metadata_activity(&self) -> Option<&Activity> {
        let activity = self.activity().filter(|_| self.events.metadata)?;
        let own = matches!(
            activity.kind,
            ActivityType::CpuOp | ActivityType::UserAnnotation | ActivityType::PythonFunction
        );
        (!own).then_some(activity)
    }

    fn flow(&self) -> Option<Flow> {
        self.activity()?.flow
    }

    /// A `[memory]` or `[OutOfMemory]` event, which PyTorch makes with fewer fields (its
    /// `flops`, `concrete_inputs`, flow fields, ... `None`).
    fn is_memory(&self) -> bool {
        self.event().activity_type.is_none()
    }

    /// Whether PyTorch's device totals of this event are its int 0: an async event, a
    /// profile without a device, a host event with no kernel within it (PyTorch sums its
    /// kernels' float durations and its children's totals; a legacy event's own kernels
    /// only).
    fn device_times_are_ints(&self) -> bool {
        let e = self.event();
        if e.is_async || self.events.use_device.is_none() {
            return true;
        }
        if e.on_device {
            return false;
        }
        if e.is_legacy {
            return e.kernels.is_empty();
        }
        let events = &self.events.events;
        let mut within = vec![self.index];
        while let Some(i) = within.pop() {
            if !events[i].kernels.is_empty() {
                return false;
            }
            within.extend_from_slice(&events[i].children);
        }
        true
    }

    /// The integer arg `key`, `none` without it (PyTorch's value for none).
    fn int_arg(&self, key: &str, none: i64) -> i64 {
        self.arg(key).and_then(Value::as_i64).unwrap_or(none)
    }

    /// The arg `key` (a list) as Python objects; `[]` without it (`None` for a memory
    /// event, as PyTorch's).
    fn list_arg<'py>(&self, py: Python<'py>, key: &str) -> PyResult<Bound<'py, PyAny>> {
        if self.is_memory() {
            return Ok(py.None().into_bound(py));
        }
        match self.arg(key) {
            Some(value @ Value::List(_)) => python_value(py, value),
            _ => Ok(PyList::empty(py).into_any()),
        }
    }
}

/// `value` as the Python object JSON would give.
fn python_value<'py>(py: Python<'py>, value: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        Value::Null => py.None().into_bound(py),
        Value::Int(v) => v.into_pyobject(py)?.into_any(),
        Value::UInt(v) => v.into_pyobject(py)?.into_any(),
        Value::Float(v) => v.into_pyobject(py)?.into_any(),
        Value::Bool(v) => pyo3::types::PyBool::new(py, *v).to_owned().into_any(),
        Value::Str(v) => pyo3::types::PyString::new(py, v).into_any(),
        Value::List(items) => {
            let items = items.iter().map(|v| python_value(py, v));
            PyList::new(py, items.collect::<PyResult<Vec<_>>>()?)?.into_any()
        }
        Value::Map(entries) => {
            let dict = PyDict::new(py);
            for (key, v) in entries {
                dict.set_item(key, python_value(py, v)?)?;
            }
            dict.into_any()
        }
    })
}

/// A concrete input's text as the value PyTorch's `concrete_inputs` gives: `None` for what
/// has none (a tensor's `""`), a bool, an int, a float (`"0."`), a list of them (`"[2, 2]"`,
/// `"[False, True]"`), else the text.
fn concrete_value<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyAny>> {
    if text.is_empty() {
        return Ok(py.None().into_bound(py));
    }
    if let Some(b) = match text {
        "True" => Some(true),
        "False" => Some(false),
        _ => None,
    } {
        return Ok(pyo3::types::PyBool::new(py, b).to_owned().into_any());
    }
    if let Ok(v) = text.parse::<i64>() {
        return Ok(v.into_pyobject(py)?.into_any());
    }
    if let Ok(v) = text.parse::<f64>() {
        return Ok(v.into_pyobject(py)?.into_any());
    }
    if let Some(inner) = text.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
        let items = inner.split(", ").filter(|item| !item.is_empty());
        let values = items.map(|item| concrete_value(py, item));
        return Ok(PyList::new(py, values.collect::<PyResult<Vec<_>>>()?)?.into_any());
    }
    Ok(pyo3::types::PyString::new(py, text).into_any())
}

#[pymethods]
impl PyFunctionEvent {
    #[getter]
    fn name(&self) -> &str {
        &self.event().name
    }

    /// What rows group by: the name.
    #[getter]
    fn key(&self) -> &str {
        &self.event().name
    }

    /// The name as recorded (`ProfilerStep#3` where `name` is `ProfilerStep*`); `None` for a
    /// memory event, as PyTorch's.
    #[getter]
    fn trace_name(&self) -> Option<&str> {
        (!self.is_memory()).then(|| &*self.event().trace_name)
    }

    #[getter]
    fn id(&self) -> u64 {
        self.event().id
    }

    #[getter]
    fn thread(&self) -> i64 {
        self.event().thread
    }

    #[getter]
    fn count(&self) -> u64 {
        1
    }

    /// Start and end (µs from the trace's start), with `elapsed_us()`.
    #[getter]
    fn time_range(&self) -> Interval {
        Interval {
            start: self.event().start_us,
            end: self.event().end_us,
        }
    }

    /// A float, or PyTorch's int 0 for device work.
    #[getter]
    fn cpu_time_total<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let e = self.event();
        total(py, e.cpu_time_total_us, e.on_device)
    }

    /// A float, or PyTorch's int 0 for device work and an async event.
    #[getter]
    fn self_cpu_time_total<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let e = self.event();
        total(py, e.self_cpu_time_total_us, e.on_device || e.is_async)
    }

    /// A float, or PyTorch's int 0 where it sums no kernel (see `device_times_are_ints`).
    #[getter]
    fn device_time_total<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let us = self.event().device_time_total_us;
        total(py, us, self.device_times_are_ints())
    }

    #[getter]
    fn self_device_time_total<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let us = self.event().self_device_time_total_us;
        total(py, us, self.device_times_are_ints())
    }

    #[getter]
    fn input_shapes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        shapes_list(py, &self.event().input_shapes)
    }

    /// Autograd's sequence number of the op, shared by a forward op and its backward node;
    /// -1 without one.
    #[getter]
    fn sequence_nr(&self) -> i64 {
        self.event().sequence_nr
    }

    /// Each input's type: a dtype's name, `Scalar`, `ScalarList`, `TensorList` or `""`
    /// (recorded with `record_shapes`).
    #[getter]
    fn input_dtypes(&self) -> Option<Vec<&str>> {
        let types = self.event().input_dtypes.iter().map(|t| &**t);
        (!self.is_memory()).then(|| types.collect())
    }

    /// The op's overload name (`Tensor` of `aten::add.Tensor`) when
    /// `_ExperimentalConfig(capture_overload_names=True)` captured it, else `""`.
    #[getter]
    fn overload_name(&self) -> &str {
        &self.event().overload_name
    }

    #[getter]
    fn cpu_memory_usage(&self) -> i64 {
        self.event().cpu_memory_usage
    }

    #[getter]
    fn self_cpu_memory_usage(&self) -> i64 {
        self.event().self_cpu_memory_usage
    }

    #[getter]
    fn device_memory_usage(&self) -> i64 {
        self.event().device_memory_usage
    }

    #[getter]
    fn self_device_memory_usage(&self) -> i64 {
        self.event().self_device_memory_usage
    }

    /// The op's FLOPs (0 where PyTorch counts none; `None` for a memory event, as PyTorch's).
    #[getter]
    fn flops(&self) -> Option<u64> {
        (!self.is_memory()).then_some(self.event().flops)
    }

    /// CPU time per call: an event is one call, so its total (PyTorch's `cpu_time`).
    #[getter]
    fn cpu_time(&self) -> f64 {
        self.event().cpu_time_total_us
    }

    /// Device time per call: its total (PyTorch's `device_time`).
    #[getter]
    fn device_time(&self) -> f64 {
        self.event().device_time_total_us
    }

    /// The times as PyTorch's table prints them (`602.183us`, `65.251ms`).
    #[getter]
    fn cpu_time_str(&self) -> String {
        format_time(self.event().cpu_time_total_us)
    }

    #[getter]
    fn cpu_time_total_str(&self) -> String {
        format_time(self.event().cpu_time_total_us)
    }

    #[getter]
    fn self_cpu_time_total_str(&self) -> String {
        format_time(self.event().self_cpu_time_total_us)
    }

    #[getter]
    fn device_time_str(&self) -> String {
        format_time(self.event().device_time_total_us)
    }

    #[getter]
    fn device_time_total_str(&self) -> String {
        format_time(self.event().device_time_total_us)
    }

    #[getter]
    fn self_device_time_total_str(&self) -> String {
        format_time(self.event().self_device_time_total_us)
    }

    /// `device_time`, under PyTorch's deprecated name (a `FutureWarning` says so).
    #[getter]
    fn cuda_time(&self, py: Python<'_>) -> PyResult<f64> {
        deprecated(py, "cuda_time", "device_time")?;
        Ok(self.event().device_time_total_us)
    }

    /// `device_time_total`, under PyTorch's deprecated name.
    #[getter]
    fn cuda_time_total<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        deprecated(py, "cuda_time_total", "device_time_total")?;
        self.device_time_total(py)
    }

    /// `self_device_time_total`, under PyTorch's deprecated name.
    #[getter]
    fn self_cuda_time_total<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        deprecated(py, "self_cuda_time_total", "self_device_time_total")?;
        self.self_device_time_total(py)
    }

    /// `self_device_memory_usage`, under PyTorch's deprecated name.
    #[getter]
    fn self_cuda_memory_usage(&self, py: Python<'_>) -> PyResult<i64> {
        deprecated(py, "self_cuda_memory_usage", "self_device_memory_usage")?;
        Ok(self.event().self_device_memory_usage)
    }

    /// PyTorch's distributed node id: -1, as for every local profile.
    #[getter]
    fn node_id(&self) -> i64 {
        -1
    }

    /// PyTorch's remote flag: false, as for every local profile.
    #[getter]
    fn is_remote(&self) -> bool {
        false
    }

    /// The activity's process: for a host event its `pid`, for device work its device.
    #[getter]
    fn device_index(&self) -> i64 {
        self.event().process
    }

    /// The activity's thread: for a host event its OS thread id, for device work its
    /// stream.
    #[getter]
    fn device_resource_id(&self) -> i64 {
        self.event().thread
    }

    /// The activity's type as Kineto names it (`cpu_op`, `user_annotation`,
    /// `python_function`, `kernel`, ...); `None` for a `[memory]` event.
    #[getter]
    fn activity_type(&self) -> Option<&'static str> {
        self.event().activity_type.map(|t| t.name())
    }

    /// Its `External id` (0 without one): a host op's own id, device work's op's.
    #[getter]
    fn external_id(&self) -> u64 {
        self.event().external_id
    }

    /// For device work and runtime calls, the id of the op they are linked to (0: none).
    #[getter]
    fn linked_correlation_id(&self) -> u64 {
        self.event().linked_correlation_id
    }

    /// The device work linked to a host op, as `Kernel(name, device, duration)` tuples
    /// (duration in µs).
    #[getter]
    fn kernels<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let kernel = py.import("omniprof._event_list")?.getattr("Kernel")?;
        let kernels = self
            .event()
            .kernels
            .iter()
            .map(|k| kernel.call1((&*k.name, k.device, k.duration_us)));
        PyList::new(py, kernels.collect::<PyResult<Vec<_>>>()?)
    }

    /// The device's name (`cuda`) where the profile has device work, else `None`.
    #[getter]
    fn use_device(&self) -> Option<&str> {
        self.events.use_device.as_deref()
    }

    /// Each input's value where it has one (a scalar, a list of ints, a bool), else `None`
    /// (recorded with `record_shapes`; `[]` without), as PyTorch's `concrete_inputs`.
    #[getter]
    fn concrete_inputs<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyList>>> {
        if self.is_memory() {
            return Ok(None);
        }
        let items = match self.arg(arg::CONCRETE_INPUTS) {
            Some(Value::List(items)) => items.as_slice(),
            _ => &[],
        };
        let values = items.iter().map(|v| match v {
            Value::Str(text) => concrete_value(py, text),
            other => python_value(py, other),
        });
        PyList::new(py, values.collect::<PyResult<Vec<_>>>()?).map(Some)
    }

    /// Each input's dims, a tensor list's as a list of them (the trace's `Input Dims`), as
    /// PyTorch's `structured_input_shapes`; `[]` without `record_shapes`.
    #[getter]
    fn structured_input_shapes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.list_arg(py, arg::INPUT_DIMS)
    }

    /// Each input's strides, as `structured_input_shapes` (the trace's `Input Strides`).
    #[getter]
    fn structured_input_strides<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.list_arg(py, arg::INPUT_STRIDES)
    }

    /// PyTorch's `RecordScope` of the event, as its `scope`: 7 (`USER_SCOPE`) for a user
    /// range, 2 (`TORCHSCRIPT_FUNCTION`) for a TorchScript function (its `Record scope` arg),
    /// 1 (`BACKWARD_FUNCTION`) for an autograd node (an op directly inside the engine's
    /// `autograd::engine::evaluate_function: <its name>`), else 0 (`FUNCTION`).
    #[getter]
    fn scope(&self) -> i64 {
        let e = self.event();
        if e.is_user_annotation {
            return USER_SCOPE;
        }
        if let Some(scope) = self.arg(arg::RECORD_SCOPE).and_then(Value::as_i64) {
            return scope;
        }
        let evaluated = e.parent.is_some_and(|p| {
            let parent = &self.events.events[p];
            !parent.is_python_function
                && omniprof_trace::keys::name::evaluates(&parent.trace_name, &e.trace_name)
        });
        if evaluated {
            BACKWARD_FUNCTION
        } else {
            FUNCTION
        }
    }

    /// The thread of a backward node's forward op (its `Fwd thread id`), else 0, as
    /// PyTorch's `fwd_thread`.
    #[getter]
    fn fwd_thread(&self) -> i64 {
        self.int_arg(arg::FWD_THREAD_ID, 0)
    }

    /// A Python event's id (`with_stack`: its `Python id`, counted from 1 in each trace), else
    /// -1, as PyTorch's `python_id`.
    #[getter]
    fn python_id(&self) -> i64 {
        self.int_arg(arg::PYTHON_ID, -1)
    }

    /// The id of the Python event this one ran in (`Python parent id`), else -1.
    #[getter]
    fn python_parent_id(&self) -> i64 {
        self.int_arg(arg::PYTHON_PARENT_ID, -1)
    }

    /// An `nn.Module` event's module id (`Python module id`), else -1.
    #[getter]
    fn python_module_id(&self) -> i64 {
        self.int_arg(arg::PYTHON_MODULE_ID, -1)
    }

    /// The id of the flow arrow the event carries (PyTorch's): a forward op and its backward
    /// node share a `fwdbwd` one, a launch and its device work an `ac2g` one; 0 without.
    /// (`None` for a memory event, as each flow field, as PyTorch's.)
    #[getter]
    fn flow_id(&self) -> Option<u64> {
        (!self.is_memory()).then(|| self.flow().map_or(0, |f| f.id))
    }

    /// The flow's link type: 1 `fwdbwd`, 2 `ac2g`; 0 without a flow.
    #[getter]
    fn flow_type(&self) -> Option<u32> {
        (!self.is_memory()).then(|| self.flow().map_or(0, |f| f.kind as u32))
    }

    /// Whether the event is its flow's start (the forward op, the launch).
    #[getter]
    fn flow_start(&self) -> Option<bool> {
        (!self.is_memory()).then(|| self.flow().is_some_and(|f| f.start))
    }

    /// PyTorch's keyword inputs, which it records for `_RecordFunctionFast` ranges only
    /// (torch.compile's Triton launches, with `record_shapes`) and hands to its own profiler
    /// alone: always empty here (`None` for a memory event, as PyTorch's).
    #[getter]
    fn kwinputs<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyDict>> {
        (!self.is_memory()).then(|| PyDict::new(py))
    }

    /// With `_ExperimentalConfig(expose_kineto_event_metadata=True)`, the args of an event
    /// PyTorch's Kineto records (device work, runtime calls) by their trace names, as typed
    /// values; else `None`, as for PyTorch's own ops and ranges.
    #[getter]
    fn metadata<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let Some(activity) = self.metadata_activity() else {
            return Ok(None);
        };
        let dict = PyDict::new(py);
        for (key, value) in &activity.args {
            // PyTorch's trace writer adds it; the activity's metadata lacks it.
            if &**key != arg::EXTERNAL_ID {
                dict.set_item(&**key, python_value(py, value)?)?;
            }
        }
        Ok((!dict.is_empty()).then_some(dict))
    }

    /// `metadata` as PyTorch's deprecated `EventMetadata` (a `FutureWarning` says so):
    /// `None` where none of its fields is there.
    #[getter]
    fn event_metadata<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        deprecated(py, "event_metadata", "metadata")?;
        let Some(activity) = self.metadata_activity() else {
            return Ok(None);
        };
        // PyTorch builds it from the metadata's JSON texts.
        let texts = PyDict::new(py);
        for (key, value) in &activity.args {
            texts.set_item(&**key, value.to_json())?;
        }
        let built = py
            .import("torch.autograd.profiler_util")?
            .call_method1("_build_metadata", (texts,))?;
        Ok((!built.is_none()).then_some(built))
    }

    /// PyTorch's shares of the table's totals, which its `table()` writes onto the events it
    /// prints; omniprof's table writes none: -1, PyTorch's value until then.
    #[getter]
    fn self_cpu_percent(&self) -> i64 {
        -1
    }

    #[getter]
    fn total_cpu_percent(&self) -> i64 {
        -1
    }

    #[getter]
    fn total_device_percent(&self) -> i64 {
        -1
    }

    /// PyTorch's profiler builds its events with these; omniprof's are views of the
    /// trace, which they cannot change: a `TypeError` says so.
    #[pyo3(signature = (*_args))]
    fn append_kernel(&self, _args: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<()> {
        Err(read_only("append_kernel"))
    }

    fn append_cpu_child(&self, _child: &Bound<'_, PyAny>) -> PyResult<()> {
        Err(read_only("append_cpu_child"))
    }

    fn set_cpu_parent(&self, _parent: &Bound<'_, PyAny>) -> PyResult<()> {
        Err(read_only("set_cpu_parent"))
    }

    /// The events directly inside this one on its thread.
    #[getter]
    fn cpu_children(&self) -> Vec<PyFunctionEvent> {
        self.event()
            .children
            .iter()
            .map(|&i| PyFunctionEvent::new(&self.events, i))
            .collect()
    }

    /// The event this one is directly inside, or `None`.
    #[getter]
    fn cpu_parent(&self) -> Option<PyFunctionEvent> {
        self.event()
            .parent
            .map(|i| PyFunctionEvent::new(&self.events, i))
    }

    /// PyTorch's `DeviceType` (`torch.autograd.DeviceType.CPU`, or `CUDA` for device work;
    /// its name as a string where torch is not imported).
    #[getter]
    fn device_type<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        device_type(py, self.event().on_device)
    }

    #[getter]
    fn is_async(&self) -> bool {
        self.event().is_async
    }

    #[getter]
    fn is_user_annotation(&self) -> bool {
        self.event().is_user_annotation
    }

    #[getter]
    fn is_legacy(&self) -> bool {
        self.event().is_legacy
    }

    /// A `python_function` event (PyTorch's `with_stack=True`).
    #[getter]
    fn is_python_function(&self) -> bool {
        self.event().is_python_function
    }

    /// The Python frames the event ran under, innermost first (empty for none).
    #[getter]
    fn stack(&self) -> Vec<String> {
        frames(Some(&self.event().stack))
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other.cast::<PyFunctionEvent>().is_ok_and(|o| {
            let o = o.get();
            Arc::ptr_eq(&self.events, &o.events) && self.index == o.index
        })
    }

    fn __hash__(&self) -> u64 {
        (Arc::as_ptr(&self.events) as u64).wrapping_mul(31) ^ self.index as u64
    }

    /// PyTorch's `FunctionEvent` text, field for field (its `use_device`, `None` without a
    /// device, naming the device fields, as there).
    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let py = slf.py();
        let text = |name: &str| -> PyResult<String> { Ok(slf.getattr(name)?.str()?.to_string()) };
        let me = slf.get();
        let e = me.event();
        let device = me.use_device().unwrap_or("None");
        let children: Vec<u64> = e.children.iter().map(|&i| me.events.events[i].id).collect();
        // Python's texts of the floats and lists, as PyTorch's f-string writes them.
        let float = |v: f64| -> PyResult<String> { Ok(v.into_pyobject(py)?.str()?.to_string()) };
        Ok(format!(
            "<FunctionEvent id={} name={} overload_name={} device_type={} node_id={} \
             cpu_time={} start_us={} end_us={} cpu_children={} {device}_time={} name={} \
             thread={} input_shapes={} cpu_memory_usage={} {device}_memory_usage={} \
             is_async={} is_remote={} seq_nr={} is_legacy={}>",
            e.id,
            e.name,
            e.overload_name,
            text("device_type")?,
            me.node_id(),
            me.cpu_time_str(),
            float(e.start_us)?,
            float(e.end_us)?,
            PyList::new(py, children)?.str()?,
            me.device_time_str(),
            e.name,
            e.thread,
            text("input_shapes")?,
            e.cpu_memory_usage,
            e.device_memory_usage,
            pybool(e.is_async),
            pybool(me.is_remote()),
            e.sequence_nr,
            pybool(e.is_legacy),
        ))
    }
}

/// Whether this process imported torch.
fn torch_loaded(py: Python<'_>) -> PyResult<bool> {
    py.import("sys")?.getattr("modules")?.contains("torch")
}

/// Names a device the analysis calls `privateuseone` (PyTorch's name of a PrivateUse1
/// backend that has not renamed itself, all a trace file says of one) by the name the
/// backend gave itself in this process, as torch.profiler's `use_device` names it.
fn name_privateuse1(py: Python<'_>, name: &mut String) -> PyResult<()> {
    if name == crate::privateuse1::UNRENAMED && torch_loaded(py)? {
        if let Some(renamed) = crate::privateuse1::renamed(py)? {
            *name = renamed;
        }
    }
    Ok(())
}

/// A time total as PyTorch's events and rows type it: its int 0 where its sum met no float
/// (`int_zero`), else the float.
fn total(py: Python<'_>, us: f64, int_zero: bool) -> PyResult<Bound<'_, PyAny>> {
    Ok(if int_zero {
        0i64.into_pyobject(py)?.into_any()
    } else {
        us.into_pyobject(py)?.into_any()
    })
}

/// Python's text of a bool.
fn pybool(value: bool) -> &'static str {
    if value {
        "True"
    } else {
        "False"
    }
}

/// An event's start and end (PyTorch's `Interval`), in µs.
#[pyclass(module = "omniprof._native", name = "Interval", frozen)]
pub(crate) struct Interval {
    #[pyo3(get)]
    start: f64,
    #[pyo3(get)]
    end: f64,
}

#[pymethods]
impl Interval {
    fn elapsed_us(&self) -> f64 {
        self.end - self.start
    }

    fn __repr__(&self) -> String {
        format!("Interval(start={}, end={})", self.start, self.end)
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyTrace>()?;
    m.add_class::<PyRow>()?;
    m.add_class::<PyFunctionEvent>()?;
    m.add_class::<Interval>()?;
    m.add_function(wrap_pyfunction!(load_trace, m)?)?;
    m.add_function(wrap_pyfunction!(events_table, m)?)?;
    m.add_function(wrap_pyfunction!(events_total, m)?)?;
    m.add_function(wrap_pyfunction!(average_events, m)?)?;
    m.add_function(wrap_pyfunction!(events_stacks, m)?)?;
    Ok(())
}

/// The error of a call that would change a `FunctionEvent`.
fn read_only(method: &str) -> PyErr {
    PyTypeError::new_err(format!(
        "FunctionEvent.{method}: omniprof's events are read-only views of their trace \
         (PyTorch's profiler calls it while building its own events)"
    ))
}

/// Warns, with a `FutureWarning` as PyTorch does, that attribute `old` is deprecated in
/// favour of `new`.
fn deprecated(py: Python<'_>, old: &str, new: &str) -> PyResult<()> {
    let message = std::ffi::CString::new(format!(
        "`{old}` is deprecated (as in PyTorch): use `{new}`"
    ))
    .unwrap_or_default();
    PyErr::warn(py, &py.get_type::<PyFutureWarning>(), &message, 1)
}

/// PyTorch's `DeviceType` for an event or row (`torch.autograd.DeviceType.CPU`; for device
/// work `CUDA`, or `PrivateUse1` once a PrivateUse1 backend renamed itself, as PyTorch reads
/// any device activity then), or its name as a string where torch is not imported.
fn device_type(py: Python<'_>, on_device: bool) -> PyResult<Bound<'_, PyAny>> {
    if !torch_loaded(py)? {
        let name = if on_device { "CUDA" } else { "CPU" };
        return Ok(pyo3::types::PyString::new(py, name).into_any());
    }
    let name = if !on_device {
        "CPU"
    } else if crate::privateuse1::renamed(py)?.is_some() {
        "PrivateUse1"
    } else {
        "CUDA"
    };
    py.import("torch.autograd")?
        .getattr("DeviceType")?
        .getattr(name)
}
