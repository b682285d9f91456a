//! A finished trace and its key averages, as Python objects.
//!
//! `KeyAverages.table` is [`omniprof::analysis::KeyAverages::table`], the one implementation
//! the CLI's `omniprof summary` prints too, so the two are equal byte for byte.

use std::sync::Arc;

use omniprof::analysis::{self, KeyAveragesOptions, ReportOptions, SortKey};
use omniprof::export;
use omniprof::keys::metadata;
use omniprof::{Trace, Value};
use pyo3::exceptions::{PyIndexError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyIterator, PyList};

use crate::profiler_error;

/// One finished trace (a cycle's, with a schedule).
#[pyclass(module = "omniprof._native", name = "Trace", frozen)]
pub(crate) struct PyTrace(Arc<Trace>);

impl PyTrace {
    pub(crate) fn new(trace: Trace) -> Self {
        Self(Arc::new(trace))
    }

    pub(crate) fn trace(&self) -> &Trace {
        &self.0
    }
}

#[pymethods]
impl PyTrace {
    /// Writes the trace in the format the path's extension names: Kineto's Chrome JSON
    /// (`.json`, `.json.gz`) or Perfetto's protobuf (`.pftrace`). On failure (an unknown
    /// extension included) a `ProfilerError` names the path; the trace is kept, so export can
    /// be retried.
    fn export_chrome_trace(&self, py: Python<'_>, path: std::path::PathBuf) -> PyResult<()> {
        py.detach(|| export::save(&self.0, &path))
            .map(drop)
            .map_err(profiler_error)
    }

    #[pyo3(signature = (group_by_input_shape=false))]
    fn key_averages(&self, py: Python<'_>, group_by_input_shape: bool) -> PyKeyAverages {
        let options = KeyAveragesOptions {
            group_by_input_shapes: group_by_input_shape,
            device_name: None,
        };
        PyKeyAverages(Arc::new(
            py.detach(|| analysis::key_averages(&self.0, &options)),
        ))
    }

    /// The number of activities (host ranges, instants, device work) in the trace.
    #[getter]
    fn activity_count(&self) -> usize {
        self.0.activities.len()
    }

    /// Host events the recorder dropped at its per-thread cap (the trace's `dropped_events`).
    #[getter]
    fn dropped_events(&self) -> u64 {
        match self.0.metadata(metadata::DROPPED_EVENTS) {
            Some(value) => value.as_i64().map_or(0, |n| n.max(0) as u64),
            None => 0,
        }
    }

    /// Why backends were left out of the trace (its `backend_errors`), one message each.
    #[getter]
    fn backend_errors(&self) -> Vec<String> {
        match self.0.metadata(metadata::BACKEND_ERRORS) {
            Some(Value::List(errors)) => errors
                .iter()
                .map(|e| e.as_str().map_or_else(|| e.to_json(), str::to_owned))
                .collect(),
            _ => Vec::new(),
        }
    }
}

/// PyTorch's `EventList` of averages: the rows, iterable and indexable, and the table.
#[pyclass(module = "omniprof._native", name = "KeyAverages", frozen, sequence)]
pub(crate) struct PyKeyAverages(Arc<analysis::KeyAverages>);

#[pymethods]
impl PyKeyAverages {
    /// PyTorch's `table()`: `sort_by` is a row attribute name (`self_cpu_time_total`,
    /// `cuda_time_total`, ...), `row_limit` -1 prints every row.
    #[pyo3(signature = (sort_by=None, row_limit=100))]
    fn table(&self, sort_by: Option<&str>, row_limit: i64) -> PyResult<String> {
        let sort_by = sort_by
            .map(str::parse::<SortKey>)
            .transpose()
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        let options = ReportOptions {
            sort_by,
            row_limit: usize::try_from(row_limit).ok(),
        };
        Ok(self.0.table(&options))
    }

    fn __len__(&self) -> usize {
        self.0.rows.len()
    }

    fn __getitem__(&self, index: isize) -> PyResult<PyRow> {
        let len = self.0.rows.len() as isize;
        let at = if index < 0 { index + len } else { index };
        if !(0..len).contains(&at) {
            return Err(PyIndexError::new_err("key averages index out of range"));
        }
        Ok(PyRow {
            averages: self.0.clone(),
            index: at as usize,
        })
    }

    fn __iter__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyIterator>> {
        let this = slf.get();
        let rows = (0..this.0.rows.len()).map(|index| PyRow {
            averages: this.0.clone(),
            index,
        });
        PyList::new(slf.py(), rows)?.try_iter()
    }

    fn __str__(&self) -> String {
        self.0.table(&ReportOptions::default())
    }

    /// The device name the device columns carry (`cuda`, `OpenReg`).
    #[getter]
    fn device_name(&self) -> &str {
        &self.0.device_name
    }
}

/// One row (PyTorch's `FunctionEventAvg`); times are microseconds.
#[pyclass(module = "omniprof._native", name = "KeyAverage", frozen)]
pub(crate) struct PyRow {
    averages: Arc<analysis::KeyAverages>,
    index: usize,
}

impl PyRow {
    fn row(&self) -> &analysis::Row {
        &self.averages.rows[self.index]
    }
}

fn us(ns: i64) -> f64 {
    ns as f64 / 1000.0
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

    #[getter]
    fn self_cpu_time_total(&self) -> f64 {
        us(self.row().self_cpu_time_total_ns)
    }

    #[getter]
    fn cpu_time_total(&self) -> f64 {
        us(self.row().cpu_time_total_ns)
    }

    /// CPU time per call.
    #[getter]
    fn cpu_time(&self) -> f64 {
        self.row().cpu_time_avg_us()
    }

    #[getter]
    fn self_device_time_total(&self) -> f64 {
        us(self.row().self_device_time_total_ns)
    }

    #[getter]
    fn device_time_total(&self) -> f64 {
        us(self.row().device_time_total_ns)
    }

    /// Device time per call.
    #[getter]
    fn device_time(&self) -> f64 {
        self.row().device_time_avg_us()
    }

    /// The input shapes when grouped by them (`[[64, 64], []]`), else an empty list.
    #[getter]
    fn input_shapes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let Some(text) = &self.row().input_shapes else {
            return Ok(PyList::empty(py).into_any());
        };
        // The shapes are kept as Python prints them, which for lists of integers is JSON.
        py.import("json")?.call_method1("loads", (&**text,))
    }

    #[getter]
    fn is_user_annotation(&self) -> bool {
        self.row().is_user_annotation
    }

    #[getter]
    fn on_device(&self) -> bool {
        self.row().on_device
    }

    fn __repr__(&self) -> String {
        let r = self.row();
        format!(
            "<KeyAverage key={:?} count={} self_cpu_time_total={:.3} cpu_time_total={:.3} \
             self_device_time_total={:.3} device_time_total={:.3}>",
            &*r.name,
            r.count,
            us(r.self_cpu_time_total_ns),
            us(r.cpu_time_total_ns),
            us(r.self_device_time_total_ns),
            us(r.device_time_total_ns)
        )
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyTrace>()?;
    m.add_class::<PyKeyAverages>()?;
    m.add_class::<PyRow>()?;
    Ok(())
}
