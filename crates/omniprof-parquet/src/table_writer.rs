//! [`TableWriter`]: one table's Parquet file, written a row group at a time. Rows are
//! pushed whole ([`TableWriter::push`], a tuple of typed cells: [`Row`]), each value into
//! its column's buffer as a `u64`, and flushed every [`ROW_GROUP_ROWS`] rows, so that
//! memory holds one row group's values whatever the trace's size. String columns hold ids
//! in the file's [`Strings`] until then. A row group's columns are encoded by
//! [`ChunkEncoder`] straight from those buffers (strings dictionary-encoded from the ids)
//! and their pages compressed with zstd; only float columns go through the `parquet`
//! crate's own column writer.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parquet::basic::{Compression, LogicalType, Repetition, Type as PhysicalType, ZstdLevel};
use parquet::column::writer::ColumnWriter;
use parquet::file::metadata::KeyValue;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::{ColumnDescPtr, Type};

use crate::column_chunk::{ChunkEncoder, Values};
use crate::error::ParquetError;
use crate::row::{ColumnBuffer, Row, StringsFull};
use crate::schema::{ColumnType, Table, DURATION_NS, SCHEMA_VERSION, SCHEMA_VERSION_KEY};
use crate::strings::Strings;

/// Rows per row group: large enough for good compression and few groups, small enough that
/// a row group's buffered values stay some tens of MB.
pub(crate) const ROW_GROUP_ROWS: usize = 1 << 17;

/// Values the crate's column writer (float columns) takes at a time: a row group's column.
/// Each batch checks the page's size and row count and updates the statistics once, so one
/// batch costs least. With no row limit on pages ([`TableWriter::create`]) its column chunk
/// is one data page, as [`ChunkEncoder`]'s are, still at most 1 MiB (2^17 values of 8
/// bytes, plain); on the benchmark trace the tables came out a little smaller than with
/// pages closed every 8,192 values past Parquet's default limit of 20,000 rows.
const WRITE_BATCH_ROWS: usize = ROW_GROUP_ROWS;

/// zstd's fastest level: on the benchmark trace level 3 was no smaller (the encodings leave
/// little to find) and took more time.
const ZSTD_LEVEL: i32 = 1;

/// One table's file being written.
pub(crate) struct TableWriter {
    table: Table,
    path: PathBuf,
    writer: SerializedFileWriter<File>,
    /// The values of the rows not yet written, a buffer per column.
    columns: Vec<ColumnBuffer>,
    /// The last row shape found to match the table's column types (a row type's shape is
    /// one constant, so a row of that type needs no comparison).
    matched: &'static [ColumnType],
    /// A float column's values, for the crate's column writer.
    floats: Vec<f64>,
    /// Each column's descriptor, for the chunks [`ChunkEncoder`] writes.
    descriptors: Vec<ColumnDescPtr>,
    /// The file's strings, which its string columns hold by id.
    strings: Strings,
    encoder: ChunkEncoder,
    rows: usize,
    written: u64,
}

impl TableWriter {
    /// Creates `path` (its folder must exist) for `table`'s rows.
    pub(crate) fn create(table: Table, path: &Path) -> Result<Self, ParquetError> {
        let file = File::create(path).map_err(|e| ParquetError::io(path, e))?;
        let level = ZstdLevel::try_new(ZSTD_LEVEL).map_err(|e| ParquetError::parquet(path, e))?;
        // What the crate's own column writer (floats only, see `flush`) goes by: min and
        // max per column chunk, enough to skip row groups.
        let properties = WriterProperties::builder()
            .set_compression(Compression::ZSTD(level))
            .set_statistics_enabled(EnabledStatistics::Chunk)
            .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
            .set_write_batch_size(WRITE_BATCH_ROWS)
            .set_data_page_row_count_limit(ROW_GROUP_ROWS)
            .set_created_by(format!("omniprof {}", env!("CARGO_PKG_VERSION")))
            .set_key_value_metadata(Some(vec![KeyValue::new(
                SCHEMA_VERSION_KEY.to_owned(),
                SCHEMA_VERSION.to_string(),
            )]))
            .build();
        let writer = SerializedFileWriter::new(file, schema(table)?, Arc::new(properties))
            .map_err(|e| ParquetError::parquet(path, e))?;
        let descriptors = writer.schema_descr().columns().to_vec();
        Ok(Self {
            table,
            path: path.to_owned(),
            writer,
            columns: table
                .columns
                .iter()
                .map(|c| ColumnBuffer::with_capacity(c.ty, ROW_GROUP_ROWS))
                .collect(),
            matched: &[],
            floats: Vec::new(),
            descriptors,
            strings: Strings::default(),
            encoder: ChunkEncoder::new(level).map_err(|e| ParquetError::parquet(path, e))?,
            rows: 0,
            written: 0,
        })
    }

    /// Adds a row: a value per column, in the table's column order, each of its column's
    /// type (see [`Row`]); a row group is written once [`ROW_GROUP_ROWS`] rows are held. A
    /// row that does not match the schema, or has a string the file has no id left for, is
    /// refused whole (the rows before and after it are written).
    #[inline]
    pub(crate) fn push<R: Row>(&mut self, row: R) -> Result<(), ParquetError> {
        if !std::ptr::eq(R::SHAPE, self.matched) {
            self.check_shape(R::SHAPE)?;
            self.matched = R::SHAPE;
        }
        if let Err(StringsFull) = row.write(&mut self.strings, &mut self.columns) {
            return Err(self.strings_full());
        }
        self.rows += 1;
        if self.rows >= ROW_GROUP_ROWS {
            self.flush()?;
        }
        Ok(())
    }

    /// Whether a row of `shape` has the table's column types, in order; the error says
    /// what it gets wrong.
    #[cold]
    fn check_shape(&self, shape: &[ColumnType]) -> Result<(), ParquetError> {
        let columns = self.table.columns;
        let wrong = shape.iter().zip(columns).find(|(given, c)| **given != c.ty);
        let problem = match wrong {
            Some((given, c)) => format!(
                "a {} for {} ({})",
                given.doc_name(),
                c.name,
                c.ty.doc_name()
            ),
            None if shape.len() != columns.len() => {
                format!("{} values for {} columns", shape.len(), columns.len())
            }
            None => return Ok(()),
        };
        Err(ParquetError::Schema(format!(
            "{}: {problem}",
            self.table.name
        )))
    }

    #[cold]
    fn strings_full(&self) -> ParquetError {
        ParquetError::parquet(
            &self.path,
            parquet::errors::ParquetError::General(format!(
                "{}: more than 2^32 distinct strings, which one file's ids cannot number",
                self.table.name
            )),
        )
    }

    /// Writes the buffered rows as one row group.
    fn flush(&mut self) -> Result<(), ParquetError> {
        if self.rows == 0 {
            return Ok(());
        }
        let path = &self.path;
        let err = |e| ParquetError::parquet(path, e);
        let mut group = self.writer.next_row_group().map_err(err)?;
        for ((column, buffer), descr) in self
            .table
            .columns
            .iter()
            .zip(&mut self.columns)
            .zip(&self.descriptors)
        {
            let levels = column.ty.nullable().then_some(&buffer.levels[..]);
            let descr = descr.clone();
            let encoder = &mut self.encoder;
            match column.ty {
                ColumnType::Int64 | ColumnType::NullableInt64 => {
                    let values = match column.unit {
                        DURATION_NS => Values::PlainI64(&buffer.values),
                        _ => Values::DeltaI64(&buffer.values),
                    };
                    encoder.append(&mut group, descr, values, levels)
                }
                ColumnType::Bool => {
                    encoder.append(&mut group, descr, Values::Bools(&buffer.values), levels)
                }
                ColumnType::String | ColumnType::NullableString => {
                    let values = Values::Strings(&buffer.values, &self.strings);
                    encoder.append(&mut group, descr, values, levels)
                }
                // Counter values keep the crate's writer: its statistics of floats know
                // NaN and signed zeros.
                ColumnType::Float64 => {
                    let floats = &mut self.floats;
                    floats.clear();
                    floats.extend(buffer.values.iter().map(|&v| f64::from_bits(v)));
                    let Some(mut writer) = group.next_column().map_err(err)? else {
                        return Err(ParquetError::Schema("fewer columns than the schema".into()));
                    };
                    let ColumnWriter::DoubleColumnWriter(w) = writer.untyped() else {
                        return Err(ParquetError::Schema("a column of another type".into()));
                    };
                    w.write_batch(floats, None, None).map_err(err)?;
                    writer.close()
                }
            }
            .map_err(err)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::row::{Fixed, OptI64, OptText, Text, F64, I64};
    use crate::schema::{COUNTERS, DEVICE_PROPERTIES, METADATA};
    use parquet::file::reader::{FileReader, SerializedFileReader};

    #[test]
    fn a_row_of_the_wrong_type_is_refused_whole_and_the_next_rows_are_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("metadata.parquet");
        let mut writer = TableWriter::create(METADATA, &path).unwrap();
        writer.push((Text("a"), Text("k"), Text("1"))).unwrap();
        let err = writer.push((Text("a"), I64(2), Text("2"))).unwrap_err();
        assert_eq!(
            err.to_string(),
            "schema: metadata: a INT64 for key (STRING)"
        );
        let err = writer.push((Text("a"),)).unwrap_err();
        assert_eq!(err.to_string(), "schema: metadata: 1 values for 3 columns");
        let err = writer.push((Text("a"), Text("k"), Text("v"), Text("w")));
        assert_eq!(
            err.unwrap_err().to_string(),
            "schema: metadata: 4 values for 3 columns"
        );
        writer.push((Text("b"), Text("k"), Text("3"))).unwrap();
        assert_eq!(writer.close().unwrap(), 2);
        let reader = SerializedFileReader::new(File::open(&path).unwrap()).unwrap();
        let rows: Vec<String> = reader
            .get_row_iter(None)
            .unwrap()
            .map(|row| row.unwrap().to_string())
            .collect();
        assert_eq!(
            rows,
            [
                r#"{source: "a", key: "k", value: "1"}"#,
                r#"{source: "b", key: "k", value: "3"}"#
            ]
        );
    }

    #[test]
    fn a_table_with_a_float_column_is_written_and_reads_back() {
        // Counter values go through the crate's own column writer, every other column
        // through `ChunkEncoder`: the file must take both, over several row groups.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("counters.parquet");
        let mut writer = TableWriter::create(COUNTERS, &path).unwrap();
        let rows = ROW_GROUP_ROWS + 3;
        let series = |i: usize| if i % 2 == 0 { "used" } else { "free" };
        for i in 0..rows {
            writer
                .push((
                    Text("mem"),
                    Fixed("gpu_memset"),
                    I64(1),
                    I64(2),
                    Text(series(i)),
                    I64(1_000 + i as i64),
                    F64(i as f64 / 4.0),
                ))
                .unwrap();
        }
        assert_eq!(writer.close().unwrap(), rows as u64);
        let reader = SerializedFileReader::new(File::open(&path).unwrap()).unwrap();
        assert_eq!(reader.metadata().num_row_groups(), 2);
        let last = reader.get_row_iter(None).unwrap().last().unwrap().unwrap();
        assert_eq!(
            last.to_string(),
            format!(
                r#"{{name: "mem", category: "gpu_memset", pid: 1, tid: 2, series: "{}", ts_ns: {}, value: {:?}}}"#,
                series(rows - 1),
                1_000 + rows - 1,
                (rows - 1) as f64 / 4.0
            )
        );
    }

    #[test]
    fn a_nullable_string_column_keeps_each_value_on_its_row() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("devices.parquet");
        let mut writer = TableWriter::create(DEVICE_PROPERTIES, &path).unwrap();
        let rows = 20_005;
        let name = |i: usize| (i % 3 != 0).then(|| format!("gpu{}", i % 7));
        for i in 0..rows {
            writer
                .push((
                    I64(i as i64),
                    OptI64(None),
                    OptText(name(i).as_deref()),
                    Text("{}"),
                ))
                .unwrap();
        }
        assert_eq!(writer.close().unwrap(), rows as u64);
        let reader = SerializedFileReader::new(File::open(&path).unwrap()).unwrap();
        let names: Vec<Option<String>> = reader
            .get_row_iter(None)
            .unwrap()
            .map(|row| {
                let row = row.unwrap();
                match &row.get_column_iter().nth(2).unwrap().1 {
                    parquet::record::Field::Str(s) => Some(s.clone()),
                    parquet::record::Field::Null => None,
                    other => panic!("a name of another type: {other:?}"),
                }
            })
            .collect();
        assert_eq!(names, (0..rows).map(name).collect::<Vec<_>>());
    }
}
