//! [`TableWriter`]: one table's Parquet file, written a row group at a time. Rows are
//! pushed a value at a time ([`Row`], a typed method per column type) into a typed buffer
//! per column, and flushed every [`ROW_GROUP_ROWS`] rows, so that memory holds one row
//! group's values whatever the trace's size. String columns hold ids in the file's
//! [`Strings`] until then. A row group's columns are encoded by [`ChunkEncoder`] (strings
//! dictionary-encoded from those ids) and their pages compressed with zstd; only float
//! columns go through the `parquet` crate's own column writer.

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

/// The values of one column not yet written.
enum Buffer {
    I64(Vec<i64>),
    /// Values of the non-null rows, and each row's definition level (1 set, 0 null).
    NullableI64(Vec<i64>, Vec<i16>),
    F64(Vec<f64>),
    Bool(Vec<bool>),
    /// Ids in the file's [`Strings`].
    Str(Vec<u32>),
    NullableStr(Vec<u32>, Vec<i16>),
}

impl Buffer {
    /// An empty buffer with room for a row group, so that it never grows by copying (the
    /// pages of the room no row reaches are never touched).
    fn new(ty: ColumnType) -> Self {
        fn room<T>() -> Vec<T> {
            Vec::with_capacity(ROW_GROUP_ROWS)
        }
        match ty {
            ColumnType::Int64 => Buffer::I64(room()),
            ColumnType::NullableInt64 => Buffer::NullableI64(room(), room()),
            ColumnType::Float64 => Buffer::F64(room()),
            ColumnType::Bool => Buffer::Bool(room()),
            ColumnType::String => Buffer::Str(room()),
            ColumnType::NullableString => Buffer::NullableStr(room(), room()),
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

    /// Drops the values of the rows from `rows` on (a row left unfinished).
    fn truncate(&mut self, rows: usize) {
        fn nullable<T>(v: &mut Vec<T>, d: &mut Vec<i16>, rows: usize) {
            let set = d
                .get(rows..)
                .map_or(0, |extra| extra.iter().filter(|&&level| level == 1).count());
            v.truncate(v.len() - set);
            d.truncate(rows);
        }
        match self {
            Buffer::I64(v) => v.truncate(rows),
            Buffer::NullableI64(v, d) => nullable(v, d, rows),
            Buffer::F64(v) => v.truncate(rows),
            Buffer::Bool(v) => v.truncate(rows),
            Buffer::Str(v) => v.truncate(rows),
            Buffer::NullableStr(v, d) => nullable(v, d, rows),
        }
    }

    fn type_name(&self) -> &'static str {
        match self {
            Buffer::I64(_) => ColumnType::Int64.doc_name(),
            Buffer::NullableI64(..) => ColumnType::NullableInt64.doc_name(),
            Buffer::F64(_) => ColumnType::Float64.doc_name(),
            Buffer::Bool(_) => ColumnType::Bool.doc_name(),
            Buffer::Str(_) => ColumnType::String.doc_name(),
            Buffer::NullableStr(..) => ColumnType::NullableString.doc_name(),
        }
    }
}

/// One table's file being written.
pub(crate) struct TableWriter {
    table: Table,
    path: PathBuf,
    writer: SerializedFileWriter<File>,
    buffers: Vec<Buffer>,
    /// Each column's descriptor, for the chunks [`ChunkEncoder`] writes.
    descriptors: Vec<ColumnDescPtr>,
    /// The file's strings, which its string columns hold by id.
    strings: Strings,
    encoder: ChunkEncoder,
    rows: usize,
    written: u64,
}

/// One row being added ([`TableWriter::row`]): a value per column, pushed in the table's
/// column order by the method of the column's type, then [`Row::end`].
pub(crate) struct Row<'a> {
    writer: &'a mut TableWriter,
    column: usize,
    /// The first column given a value of another type, and that type.
    wrong: Option<(usize, &'static str)>,
    /// A string could not be given an id: the file holds 2^32 distinct strings.
    full: bool,
}

/// Runs `$push` on the row's next column's buffer if it matches `$buffer`, else notes that
/// the row gave that column a value of type `$ty`; then moves on to the next column.
macro_rules! push {
    ($row:ident, $ty:expr, |$buffer:pat_param| $push:expr) => {{
        match $row.writer.buffers.get_mut($row.column) {
            Some($buffer) => $push,
            _ => $row.wrong($ty),
        }
        $row.column += 1;
        $row
    }};
}

impl Row<'_> {
    #[cold]
    fn wrong(&mut self, ty: ColumnType) {
        self.wrong.get_or_insert((self.column, ty.doc_name()));
    }

    /// A string's id, or 0 noting that the file has no id left for it.
    #[inline]
    fn id(&mut self, id: Option<u32>) -> u32 {
        match id {
            Some(id) => id,
            None => self.full(),
        }
    }

    #[cold]
    fn full(&mut self) -> u32 {
        self.full = true;
        0
    }

    /// An `INT64`.
    #[inline]
    pub(crate) fn i64(&mut self, x: i64) -> &mut Self {
        push!(self, ColumnType::Int64, |Buffer::I64(v)| v.push(x))
    }

    /// A nullable `INT64`.
    #[inline]
    pub(crate) fn opt_i64(&mut self, x: Option<i64>) -> &mut Self {
        push!(self, ColumnType::NullableInt64, |Buffer::NullableI64(
            v,
            d,
        )| {
            d.push(i16::from(x.is_some()));
            v.extend(x);
        })
    }

    /// A `DOUBLE`.
    #[inline]
    pub(crate) fn f64(&mut self, x: f64) -> &mut Self {
        push!(self, ColumnType::Float64, |Buffer::F64(v)| v.push(x))
    }

    /// A `BOOLEAN`.
    #[inline]
    pub(crate) fn bool(&mut self, x: bool) -> &mut Self {
        push!(self, ColumnType::Bool, |Buffer::Bool(v)| v.push(x))
    }

    /// A `STRING` shared with the reader or the summary.
    #[inline]
    pub(crate) fn shared(&mut self, s: &Arc<str>) -> &mut Self {
        let id = self.writer.strings.shared(s);
        self.string(id)
    }

    /// A `STRING` that lives as long as the program (an activity type's name).
    #[inline]
    pub(crate) fn fixed(&mut self, s: &'static str) -> &mut Self {
        let id = self.writer.strings.fixed(s);
        self.string(id)
    }

    /// Any other `STRING`.
    pub(crate) fn text(&mut self, s: &str) -> &mut Self {
        let id = self.writer.strings.text(s);
        self.string(id)
    }

    /// A `STRING` by its id in the file's [`Strings`] (`None`: no id was left for it).
    #[inline]
    fn string(&mut self, id: Option<u32>) -> &mut Self {
        let id = self.id(id);
        push!(self, ColumnType::String, |Buffer::Str(v)| v.push(id))
    }

    /// A nullable `STRING`.
    pub(crate) fn opt_text(&mut self, s: Option<&str>) -> &mut Self {
        let id = match s {
            Some(s) => {
                let id = self.writer.strings.text(s);
                Some(self.id(id))
            }
            None => None,
        };
        push!(self, ColumnType::NullableString, |Buffer::NullableStr(
            v,
            d,
        )| {
            d.push(i16::from(id.is_some()));
            v.extend(id);
        })
    }

    /// Ends the row, which must have had a value of the right type for every column; a
    /// row group is written once [`ROW_GROUP_ROWS`] rows are held. A row that does not
    /// match the schema, or has a string the file has no id left for, is dropped whole,
    /// so that the columns stay aligned.
    #[inline]
    pub(crate) fn end(&mut self) -> Result<(), ParquetError> {
        let writer = &mut *self.writer;
        if self.wrong.is_some() || self.full || self.column != writer.buffers.len() {
            return Err(self.mismatch());
        }
        writer.rows += 1;
        if writer.rows >= ROW_GROUP_ROWS {
            writer.flush()?;
        }
        Ok(())
    }

    #[cold]
    fn mismatch(&mut self) -> ParquetError {
        let writer = &mut *self.writer;
        let table = writer.table;
        for buffer in &mut writer.buffers {
            buffer.truncate(writer.rows);
        }
        if self.full {
            return ParquetError::parquet(
                &writer.path,
                parquet::errors::ParquetError::General(format!(
                    "{}: more than 2^32 distinct strings, which one file's ids cannot number",
                    table.name
                )),
            );
        }
        let problem = match self.wrong {
            Some((column, given)) => format!(
                "a {given} for {} ({})",
                table.columns.get(column).map_or("no column", |c| c.name),
                writer.buffers.get(column).map_or("-", Buffer::type_name),
            ),
            None => format!("{} values for {} columns", self.column, table.columns.len()),
        };
        ParquetError::Schema(format!("{}: {problem}", table.name))
    }
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
            buffers: table.columns.iter().map(|c| Buffer::new(c.ty)).collect(),
            descriptors,
            strings: Strings::default(),
            encoder: ChunkEncoder::new(level).map_err(|e| ParquetError::parquet(path, e))?,
            rows: 0,
            written: 0,
        })
    }

    /// Starts a row.
    #[inline]
    pub(crate) fn row(&mut self) -> Row<'_> {
        Row {
            writer: self,
            column: 0,
            wrong: None,
            full: false,
        }
    }

    /// Writes the buffered rows as one row group.
    fn flush(&mut self) -> Result<(), ParquetError> {
        if self.rows == 0 {
            return Ok(());
        }
        let path = &self.path;
        let err = |e| ParquetError::parquet(path, e);
        let strings = &self.strings;
        let mut group = self.writer.next_row_group().map_err(err)?;
        for ((buffer, column), descr) in self
            .buffers
            .iter_mut()
            .zip(self.table.columns)
            .zip(&self.descriptors)
        {
            let int = |v| match column.unit {
                DURATION_NS => Values::PlainI64(v),
                _ => Values::DeltaI64(v),
            };
            let descr = descr.clone();
            let encoder = &mut self.encoder;
            match &*buffer {
                Buffer::I64(v) => encoder.append(&mut group, descr, int(v), None),
                Buffer::NullableI64(v, d) => encoder.append(&mut group, descr, int(v), Some(d)),
                Buffer::Bool(v) => encoder.append(&mut group, descr, Values::Bools(v), None),
                Buffer::Str(ids) => {
                    encoder.append(&mut group, descr, Values::Strings(ids, strings), None)
                }
                Buffer::NullableStr(ids, d) => {
                    encoder.append(&mut group, descr, Values::Strings(ids, strings), Some(d))
                }
                // Counter values keep the crate's writer: its statistics of floats know
                // NaN and signed zeros.
                Buffer::F64(v) => {
                    let Some(mut writer) = group.next_column().map_err(err)? else {
                        return Err(ParquetError::Schema("fewer columns than buffers".into()));
                    };
                    let ColumnWriter::DoubleColumnWriter(w) = writer.untyped() else {
                        return Err(ParquetError::Schema("a column of another type".into()));
                    };
                    w.write_batch(v, None, None).map_err(err)?;
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
    use crate::schema::{COUNTERS, DEVICE_PROPERTIES, METADATA};
    use parquet::file::reader::{FileReader, SerializedFileReader};

    #[test]
    fn a_row_of_the_wrong_type_is_refused_whole_and_the_next_rows_are_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("metadata.parquet");
        let mut writer = TableWriter::create(METADATA, &path).unwrap();
        writer.row().text("a").text("k").text("1").end().unwrap();
        let err = writer.row().text("a").i64(2).text("2").end().unwrap_err();
        assert_eq!(
            err.to_string(),
            "schema: metadata: a INT64 for key (STRING)"
        );
        let err = writer.row().text("a").end().unwrap_err();
        assert_eq!(err.to_string(), "schema: metadata: 1 values for 3 columns");
        let err = writer.row().text("a").text("k").text("v").text("w").end();
        assert_eq!(
            err.unwrap_err().to_string(),
            "schema: metadata: a STRING for no column (-)"
        );
        writer.row().text("b").text("k").text("3").end().unwrap();
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
                .row()
                .text("mem")
                .fixed("gpu_memset")
                .i64(1)
                .i64(2)
                .text(series(i))
                .i64(1_000 + i as i64)
                .f64(i as f64 / 4.0)
                .end()
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
                .row()
                .i64(i as i64)
                .opt_i64(None)
                .opt_text(name(i).as_deref())
                .text("{}")
                .end()
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
