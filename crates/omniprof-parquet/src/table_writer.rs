//! [`TableWriter`]: one table's Parquet file, written a row group at a time. Rows are
//! buffered per column and flushed every [`ROW_GROUP_ROWS`] rows, so that memory holds one
//! row group's values whatever the trace's size; strings are dictionary-encoded (Parquet's
//! default, kept) and pages are compressed with zstd.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parquet::basic::{
    Compression, Encoding, LogicalType, Repetition, Type as PhysicalType, ZstdLevel,
};
use parquet::column::writer::ColumnWriter;
use parquet::data_type::ByteArray;
use parquet::file::metadata::KeyValue;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::{ColumnPath, Type};

use crate::error::ParquetError;
use crate::schema::{ColumnType, Table, DURATION_NS, SCHEMA_VERSION, SCHEMA_VERSION_KEY};

/// Rows per row group: large enough for good compression and few groups, small enough that
/// a row group's buffered values stay some tens of MB.
pub(crate) const ROW_GROUP_ROWS: usize = 1 << 17;

/// Values a column writer takes at a time: each batch checks the page's size and updates
/// the statistics once, so larger batches cost less per value; pages still close near
/// Parquet's 1 MiB default (a batch of 8,192 integers is 64 KiB).
const WRITE_BATCH_ROWS: usize = 8192;

/// zstd's fastest level: on the benchmark trace level 3 was no smaller (the encodings leave
/// little to find) and took more time.
const ZSTD_LEVEL: i32 = 1;

/// The values of one column not yet written.
enum Buffer {
    I64(Vec<i64>),
    /// Values of the non-null rows, and each row's definition level (1 set, 0 null).
    NullableI64(Vec<i64>, Vec<i16>),
    F64(Vec<f64>),
    Bool(Vec<bool>),
    Str(Vec<ByteArray>),
    NullableStr(Vec<ByteArray>, Vec<i16>),
}

impl Buffer {
    fn new(ty: ColumnType) -> Self {
        match ty {
            ColumnType::Int64 => Buffer::I64(Vec::new()),
            ColumnType::NullableInt64 => Buffer::NullableI64(Vec::new(), Vec::new()),
            ColumnType::Float64 => Buffer::F64(Vec::new()),
            ColumnType::Bool => Buffer::Bool(Vec::new()),
            ColumnType::String => Buffer::Str(Vec::new()),
            ColumnType::NullableString => Buffer::NullableStr(Vec::new(), Vec::new()),
        }
    }

    fn clear(&mut self) {
        match self {
            Buffer::I64(v) => v.clear(),
            Buffer::NullableI64(v, d) => {
                v.clear();
                d.clear();
            }
            Buffer::F64(v) => v.clear(),
            Buffer::Bool(v) => v.clear(),
            Buffer::Str(v) => v.clear(),
            Buffer::NullableStr(v, d) => {
                v.clear();
                d.clear();
            }
        }
    }
}

/// One value of a row, in column order ([`TableWriter::row`]).
#[derive(Clone, Debug)]
pub(crate) enum Cell {
    I64(i64),
    OptI64(Option<i64>),
    F64(f64),
    Bool(bool),
    Str(ByteArray),
    OptStr(Option<ByteArray>),
}

/// One table's file being written.
pub(crate) struct TableWriter {
    table: Table,
    path: PathBuf,
    writer: SerializedFileWriter<File>,
    buffers: Vec<Buffer>,
    rows: usize,
    written: u64,
}

impl TableWriter {
    /// Creates `path` (its folder must exist) for `table`'s rows.
    pub(crate) fn create(table: Table, path: &Path) -> Result<Self, ParquetError> {
        let file = File::create(path).map_err(|e| ParquetError::io(path, e))?;
        let mut properties = WriterProperties::builder()
            .set_compression(Compression::ZSTD(
                ZstdLevel::try_new(ZSTD_LEVEL).map_err(|e| ParquetError::parquet(path, e))?,
            ))
            // Min and max per column chunk (enough to skip row groups); per page they cost
            // a comparison per value and save little here.
            .set_statistics_enabled(EnabledStatistics::Chunk)
            .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
            .set_write_batch_size(WRITE_BATCH_ROWS)
            .set_created_by(format!("omniprof {}", env!("CARGO_PKG_VERSION")))
            .set_key_value_metadata(Some(vec![KeyValue::new(
                SCHEMA_VERSION_KEY.to_owned(),
                SCHEMA_VERSION.to_string(),
            )]));
        // Integers rarely repeat, so no dictionary (it would cost a hash per value). Ids and
        // points in time mostly grow by small steps: their deltas, bit-packed, are small.
        // Durations jump up and down, often to 0: plain values, which zstd packs better.
        // Strings, flags and durations have no statistics: a string's min and max cost a
        // comparison of its bytes per value (some 8 % of the writer's time on the benchmark
        // trace), and a row group holds most names, flags and durations, so they would
        // rarely let a reader skip one (ids and points in time grow: theirs do).
        for c in table.columns {
            let path = ColumnPath::new(vec![c.name.to_owned()]);
            if matches!(
                c.ty,
                ColumnType::String | ColumnType::NullableString | ColumnType::Bool
            ) || c.unit == DURATION_NS
            {
                properties =
                    properties.set_column_statistics_enabled(path.clone(), EnabledStatistics::None);
            }
            if matches!(c.ty, ColumnType::Int64 | ColumnType::NullableInt64) {
                let encoding = match c.unit {
                    DURATION_NS => Encoding::PLAIN,
                    _ => Encoding::DELTA_BINARY_PACKED,
                };
                properties = properties
                    .set_column_dictionary_enabled(path.clone(), false)
                    .set_column_encoding(path, encoding);
            }
        }
        let properties = properties.build();
        let writer = SerializedFileWriter::new(file, schema(table)?, Arc::new(properties))
            .map_err(|e| ParquetError::parquet(path, e))?;
        Ok(Self {
            table,
            path: path.to_owned(),
            writer,
            buffers: table.columns.iter().map(|c| Buffer::new(c.ty)).collect(),
            rows: 0,
            written: 0,
        })
    }

    /// Adds one row: a cell per column, in the table's column order and of its type.
    pub(crate) fn row<const N: usize>(&mut self, cells: [Cell; N]) -> Result<(), ParquetError> {
        debug_assert_eq!(
            N,
            self.buffers.len(),
            "{}: a cell per column",
            self.table.name
        );
        for (buffer, cell) in self.buffers.iter_mut().zip(cells) {
            match (buffer, cell) {
                (Buffer::I64(v), Cell::I64(x)) => v.push(x),
                (Buffer::NullableI64(v, d), Cell::OptI64(x)) => {
                    d.push(i16::from(x.is_some()));
                    v.extend(x);
                }
                (Buffer::F64(v), Cell::F64(x)) => v.push(x),
                (Buffer::Bool(v), Cell::Bool(x)) => v.push(x),
                (Buffer::Str(v), Cell::Str(x)) => v.push(x),
                (Buffer::NullableStr(v, d), Cell::OptStr(x)) => {
                    d.push(i16::from(x.is_some()));
                    v.extend(x);
                }
                (_, cell) => {
                    return Err(ParquetError::Schema(format!(
                        "{}: a {cell:?} where the schema has another type",
                        self.table.name
                    )))
                }
            }
        }
        self.rows += 1;
        if self.rows >= ROW_GROUP_ROWS {
            self.flush()?;
        }
        Ok(())
    }

    /// Writes the buffered rows as one row group.
    fn flush(&mut self) -> Result<(), ParquetError> {
        if self.rows == 0 {
            return Ok(());
        }
        let path = &self.path;
        let err = |e| ParquetError::parquet(path, e);
        let mut group = self.writer.next_row_group().map_err(err)?;
        for buffer in &mut self.buffers {
            let Some(mut column) = group.next_column().map_err(err)? else {
                return Err(ParquetError::Schema("fewer columns than buffers".into()));
            };
            let written = match (column.untyped(), &*buffer) {
                (ColumnWriter::Int64ColumnWriter(w), Buffer::I64(v)) => {
                    w.write_batch(v, None, None)
                }
                (ColumnWriter::Int64ColumnWriter(w), Buffer::NullableI64(v, d)) => {
                    w.write_batch(v, Some(d), None)
                }
                (ColumnWriter::DoubleColumnWriter(w), Buffer::F64(v)) => {
                    w.write_batch(v, None, None)
                }
                (ColumnWriter::BoolColumnWriter(w), Buffer::Bool(v)) => {
                    w.write_batch(v, None, None)
                }
                (ColumnWriter::ByteArrayColumnWriter(w), Buffer::Str(v)) => {
                    w.write_batch(v, None, None)
                }
                (ColumnWriter::ByteArrayColumnWriter(w), Buffer::NullableStr(v, d)) => {
                    w.write_batch(v, Some(d), None)
                }
                _ => return Err(ParquetError::Schema("a column of another type".into())),
            };
            written.map_err(err)?;
            column.close().map_err(err)?;
            buffer.clear();
        }
        group.close().map_err(err)?;
        self.written += self.rows as u64;
        self.rows = 0;
        Ok(())
    }

    /// Writes what is buffered and the footer; returns the rows written.
    pub(crate) fn close(mut self) -> Result<u64, ParquetError> {
        self.flush()?;
        let path = self.path.clone();
        self.writer
            .close()
            .map_err(|e| ParquetError::parquet(&path, e))?;
        Ok(self.written)
    }
}

/// The Parquet schema of `table`.
fn schema(table: Table) -> Result<Arc<Type>, ParquetError> {
    let fields = table
        .columns
        .iter()
        .map(|c| {
            let (physical, logical, repetition) = match c.ty {
                ColumnType::Int64 => (PhysicalType::INT64, None, Repetition::REQUIRED),
                ColumnType::NullableInt64 => (PhysicalType::INT64, None, Repetition::OPTIONAL),
                ColumnType::Float64 => (PhysicalType::DOUBLE, None, Repetition::REQUIRED),
                ColumnType::Bool => (PhysicalType::BOOLEAN, None, Repetition::REQUIRED),
                ColumnType::String => (
                    PhysicalType::BYTE_ARRAY,
                    Some(LogicalType::String),
                    Repetition::REQUIRED,
                ),
                ColumnType::NullableString => (
                    PhysicalType::BYTE_ARRAY,
                    Some(LogicalType::String),
                    Repetition::OPTIONAL,
                ),
            };
            Type::primitive_type_builder(c.name, physical)
                .with_logical_type(logical)
                .with_repetition(repetition)
                .build()
                .map(Arc::new)
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| ParquetError::Schema(format!("{}: {e}", table.name)))?;
    Type::group_type_builder("schema")
        .with_fields(fields)
        .build()
        .map(Arc::new)
        .map_err(|e| ParquetError::Schema(format!("{}: {e}", table.name)))
}
