//! `FlightRecorder`: the engine's flight recorder ([`omniprof::FlightRecorder`]) for
//! `omniprof.flight_recorder` (python/omniprof/_flight.py), which adds the context manager,
//! the environment switch, the failure hooks and the warnings.

use std::time::Duration;

use omniprof::config_keys::{PROFILE_PROFILE_MEMORY, PROFILE_REPORT_INPUT_SHAPES};
use omniprof::{Config, DumpReason, FlightRecorder};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::error::profiler_error;

/// The running flight recorder, from `start`; `stop` ends it.
#[pyclass(module = "omniprof._native", name = "FlightRecorder")]
pub(crate) struct PyFlightRecorder {
    recorder: Option<FlightRecorder>,
}

impl PyFlightRecorder {
    fn running(&self) -> PyResult<&FlightRecorder> {
        self.recorder
            .as_ref()
            .ok_or_else(|| profiler_error("the flight recorder was stopped"))
    }
}

/// A duration from seconds given by the user; `what` names the argument in the error.
fn seconds(what: &str, value: f64) -> PyResult<Duration> {
    Duration::try_from_secs_f64(value).map_err(|_| {
        PyValueError::new_err(format!(
            "{what} must be a number of seconds from 0, not {value}"
        ))
    })
}

#[pymethods]
impl PyFlightRecorder {
    /// Starts the process's flight recorder (see `omniprof.flight_recorder`).
    #[new]
    #[pyo3(signature = (
        seconds_kept, max_bytes, dump_dir, keep, min_interval_s, slow_factor, warmup_steps,
        hang_after_s, record_shapes, profile_memory, serve_dump_requests
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        seconds_kept: f64,
        max_bytes: usize,
        dump_dir: Option<String>,
        keep: usize,
        min_interval_s: f64,
        slow_factor: f64,
        warmup_steps: usize,
        hang_after_s: Option<f64>,
        record_shapes: bool,
        profile_memory: bool,
        serve_dump_requests: bool,
    ) -> PyResult<Self> {
        let mut text = String::new();
        if record_shapes {
            text.push_str(&format!("{PROFILE_REPORT_INPUT_SHAPES}=true\n"));
        }
        if profile_memory {
            text.push_str(&format!("{PROFILE_PROFILE_MEMORY}=true\n"));
        }
        let config = Config::parse(&text).map_err(|e| PyValueError::new_err(e.to_string()))?;
        let mut builder = FlightRecorder::builder()
            .window(seconds("seconds", seconds_kept)?)
            .max_bytes(max_bytes)
            .keep(keep)
            .min_interval(seconds("min_interval_s", min_interval_s)?)
            .slow_step(slow_factor, warmup_steps)
            .serve_dump_requests(serve_dump_requests)
            .config(config);
        if let Some(dir) = dump_dir {
            builder = builder.dump_dir(dir);
        }
        if let Some(after) = hang_after_s {
            builder = builder.hang_after(seconds("hang_after_s", after)?);
        }
        let recorder = builder.start().map_err(|e| match e {
            omniprof::FlightError::Invalid(_) => PyValueError::new_err(e.to_string()),
            _ => profiler_error(e),
        })?;
        Ok(Self {
            recorder: Some(recorder),
        })
    }

    /// Writes the window, ending now, to `path`; returns a dict of what it holds (`path`,
    /// `events`, `overwritten`, `cut_short`).
    fn dump<'py>(&self, py: Python<'py>, path: std::path::PathBuf) -> PyResult<Bound<'py, PyDict>> {
        let recorder = self.running()?;
        let dump = py.detach(|| recorder.dump(&path)).map_err(profiler_error)?;
        let out = PyDict::new(py);
        out.set_item("path", dump.path.to_string_lossy())?;
        out.set_item("events", dump.events)?;
        out.set_item("overwritten", dump.overwritten)?;
        out.set_item("cut_short", dump.cut_short)?;
        Ok(out)
    }

    /// Asks for a dump into the dump directory for `reason` (`failure`, `request`,
    /// `slow_step`, `hang`).
    fn trigger(&self, reason: &str) -> PyResult<()> {
        let reason = match reason {
            "failure" => DumpReason::Failure,
            "request" => DumpReason::Request,
            "slow_step" => DumpReason::SlowStep,
            "hang" => DumpReason::Hang,
            other => {
                return Err(PyValueError::new_err(format!(
                    "unknown dump reason {other:?} (failure, request, slow_step, hang)"
                )))
            }
        };
        self.running()?.trigger(reason);
        Ok(())
    }

    /// Waits up to `timeout_s` for the dumps asked for; False when some are still pending.
    fn flush(&self, py: Python<'_>, timeout_s: f64) -> PyResult<bool> {
        let recorder = self.running()?;
        let timeout = seconds("timeout_s", timeout_s)?;
        Ok(py.detach(|| recorder.flush(timeout)))
    }

    /// The dumps kept in the dump directory, oldest first.
    fn dumps(&self) -> PyResult<Vec<String>> {
        let dumps = self.running()?.dumps();
        Ok(dumps
            .iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect())
    }

    /// The warnings since the last call.
    fn take_warnings(&self) -> Vec<String> {
        self.recorder
            .as_ref()
            .map(FlightRecorder::take_warnings)
            .unwrap_or_default()
    }

    /// What the recorder holds and has done, as a dict.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let stats = self.running()?.stats();
        let out = PyDict::new(py);
        out.set_item("held_bytes", stats.held_bytes)?;
        out.set_item("max_bytes", stats.max_bytes)?;
        out.set_item("overwritten", stats.overwritten)?;
        out.set_item("dumps_written", stats.dumps_written)?;
        out.set_item("dumps_skipped", stats.dumps_skipped)?;
        Ok(out)
    }

    /// Stops recording, after the dumps asked for are written; returns the warnings left.
    fn stop(&mut self, py: Python<'_>) -> Vec<String> {
        match self.recorder.take() {
            Some(recorder) => py.detach(|| {
                recorder.flush(Duration::from_secs(60));
                let left = recorder.take_warnings();
                recorder.stop();
                left
            }),
            None => Vec::new(),
        }
    }

    /// Whether it still records.
    #[getter]
    fn running_now(&self) -> bool {
        self.recorder.is_some()
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyFlightRecorder>()
}
