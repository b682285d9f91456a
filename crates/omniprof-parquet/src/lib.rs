//! omniprof's Parquet tables: Kineto traces (one or more per rank of a job) converted to
//! columnar tables that DuckDB, Spark or any Parquet reader query with SQL, laid out as
//! `OUT_DIR/<table>/rank=<N>/part-<k>.parquet`, a part per trace of the rank (Hive
//! partitioning, which both read natively). `docs/parquet.md` documents every table and column and gives the SQL of the
//! summary's key averages and of the per-rank breakdown.
//!
//! Each trace is streamed: its items go to the tables' writers as the reader delivers them,
//! and each writer holds one row group of values at a time, so memory does not grow with the
//! trace. The `ops` table holds the events exactly as `omniprof summary` counts them (self
//! and total host and device time, parent, depth, device work's host op), from the
//! summary's own builder
//! ([`KeyAveragesBuilder::list_events`](omniprof_analysis::KeyAveragesBuilder::list_events)),
//! so that summing it per name gives the summary's rows.
//!
//! [`convert()`] writes the tables of each trace with its [`ConvertOptions`] and says, per
//! trace, its rank and [`RowCounts`] ([`ConvertedTrace`]); which files of a directory are
//! traces is the caller's rule (the CLI's, shared by its commands); a failure is a
//! [`ParquetError`]. The tables are declared once in
//! [`TABLES`]: each [`Table`] names its [`Column`]s and their [`ColumnType`], and every file
//! carries [`SCHEMA_VERSION`] under [`SCHEMA_VERSION_KEY`].
//!
//! A separate crate, because only the CLI writes Parquet: the `parquet` crate (with only its
//! `zstd` codec, without Arrow) stays out of the library and the Python module.
//!
//! ```
//! use omniprof_parquet::{convert, ConvertOptions};
//!
//! let dir = tempfile::tempdir()?;
//! let trace = dir.path().join("rank0.json");
//! std::fs::write(&trace, r#"{"distributedInfo": {"rank": 3}, "traceEvents": [
//!   {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1, "dur": 2}
//! ]}"#)?;
//! let out = dir.path().join("tables");
//! let converted = convert(&[trace], &out, ConvertOptions::default())?;
//! assert_eq!(converted[0].rank, 3);
//! assert!(out.join("slices/rank=3/part-0.parquet").is_file());
//! assert!(out.join("ops/rank=3/part-0.parquet").is_file());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod column_chunk;
mod convert;
mod error;
mod output_dir;
mod rank_ids;
mod row;
mod schema;
mod strings;
mod table_writer;
mod trace_tables;

pub use convert::{convert, ConvertOptions, ConvertedTrace};
pub use error::ParquetError;
pub use schema::{Column, ColumnType, Table, SCHEMA_VERSION, SCHEMA_VERSION_KEY, TABLES};
pub use trace_tables::RowCounts;
