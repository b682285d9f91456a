//! [`ChunkEncoder`]: one column chunk of a row group encoded here, as one data page (after a
//! dictionary page for strings), zstd-compressed, and handed to the row group whole
//! (`append_column`); the `parquet` crate still writes the page headers, the chunk's
//! metadata and the footer.
//!
//! Why not the crate's column writers: they encode a value at a time through general
//! machinery: a hash of every string value for the chunk's dictionary although the table
//! writer has already numbered its strings, a bit-writer call per delta-packed integer. On
//! the benchmark trace they took 16 % of the whole conversion's instructions besides zstd
//! (docs/benchmarks.md). The tables use four encodings, each a few lines of Parquet's
//! format (`Encodings.md` of the format's specification):
//! - `PLAIN` for durations (which zstd packs better than their deltas) and flags (a bit
//!   each);
//! - `DELTA_BINARY_PACKED` for ids and points in time, which mostly grow by small steps:
//!   blocks of 256 deltas, each block's deltas less their minimum, bit-packed in four
//!   miniblocks of 64 with a width each;
//! - `RLE_DICTIONARY` for strings: the chunk's distinct strings in a `PLAIN` dictionary
//!   page, in first-seen order, and each row's index into it, bit-packed;
//! - definition levels (nullable columns: 1 set, 0 null) in the RLE / bit-packing hybrid,
//!   bit-packed.
//!
//! Bit-packed runs only (no run-length runs): zstd, which compresses every page, finds the
//! repeats the runs would have found. Statistics (chunk minimum, maximum and null count)
//! are kept for ids and points in time, which grow and so let a reader skip row groups.

use std::fs::File;

use bytes::Bytes;
use parquet::basic::{Compression, Encoding, EncodingMask, PageType, ZstdLevel};
use parquet::column::page::{CompressedPage, Page, PageWriter};
use parquet::column::writer::ColumnCloseResult;
use parquet::errors::ParquetError;
use parquet::file::metadata::{ColumnChunkMetaData, PageEncodingStats};
use parquet::file::page_index::offset_index::{OffsetIndexMetaData, PageLocation};
use parquet::file::statistics::{Statistics, ValueStatistics};
use parquet::file::writer::{SerializedPageWriter, SerializedRowGroupWriter, TrackedWrite};
use parquet::schema::types::ColumnDescPtr;

use crate::strings::Strings;

/// Deltas in a block of `DELTA_BINARY_PACKED` (as the `parquet` crate writes them: on the
/// benchmark trace, blocks of 128 made the tables 1.5 % larger).
const DELTA_BLOCK: usize = 256;
/// Miniblocks in a block, each with its own bit width.
const MINIBLOCKS: usize = 4;
/// Deltas in a miniblock.
const MINIBLOCK: usize = DELTA_BLOCK / MINIBLOCKS;

/// One column chunk's values, and how they are encoded. The values are the writer's bits
/// ([`Cell`](crate::row::Cell)), so that its buffers need no copy of another type.
pub(crate) enum Values<'a> {
    /// `INT64` (two's complement), `PLAIN`.
    PlainI64(&'a [u64]),
    /// `INT64` (two's complement), `DELTA_BINARY_PACKED`, with statistics.
    DeltaI64(&'a [u64]),
    /// `BOOLEAN` (0 or 1), `PLAIN`.
    Bools(&'a [u64]),
    /// `BYTE_ARRAY` strings by their ids in the file's [`Strings`], `RLE_DICTIONARY`.
    Strings(&'a [u64], &'a Strings),
}

/// Encodes column chunks; holds the buffers and the zstd context from one chunk to the
/// next.
pub(crate) struct ChunkEncoder {
    level: ZstdLevel,
    compressor: zstd::bulk::Compressor<'static>,
    /// A page's body before compression.
    body: Vec<u8>,
    /// Each file string id's index in the chunk's dictionary, plus one (0: not in it).
    dictionary_index: Vec<u32>,
    /// The chunk's dictionary: file string ids in first-seen order.
    dictionary: Vec<u32>,
    /// Row indexes into the dictionary.
    indexes: Vec<u32>,
}

impl ChunkEncoder {
    /// An encoder compressing pages with zstd at `level`.
    pub(crate) fn new(level: ZstdLevel) -> Result<Self, ParquetError> {
        Ok(Self {
            level,
            compressor: zstd::bulk::Compressor::new(level.compression_level())
                .map_err(|e| ParquetError::General(format!("zstd: {e}")))?,
            body: Vec::new(),
            dictionary_index: Vec::new(),
            dictionary: Vec::new(),
            indexes: Vec::new(),
        })
    }

    /// Appends the next column of `group`: `values`, with `levels` the definition level of
    /// each row when the column is nullable (`values` then holds the set rows' only).
    pub(crate) fn append(
        &mut self,
        group: &mut SerializedRowGroupWriter<'_, File>,
        descr: ColumnDescPtr,
        values: Values<'_>,
        levels: Option<&[i16]>,
    ) -> Result<(), ParquetError> {
        let set = match values {
            Values::PlainI64(v) | Values::DeltaI64(v) | Values::Bools(v) => v.len(),
            Values::Strings(ids, _) => ids.len(),
        };
        let rows = levels.map_or(set, <[i16]>::len);
        let mut sink = TrackedWrite::new(Vec::new());
        let mut pages = SerializedPageWriter::new(&mut sink);
        let mut encodings = vec![Encoding::RLE];
        let mut encoding_stats = Vec::new();
        let mut dictionary_offset = None;
        let mut dictionary_len = 0;
        let mut uncompressed = 0;

        if let Values::Strings(ids, strings) = values {
            dictionary_len = self.dictionary_page(ids, strings);
            let (buf, len) = self.compressed()?;
            let page = Page::DictionaryPage {
                buf,
                num_values: dictionary_len,
                encoding: Encoding::PLAIN,
                is_sorted: false,
            };
            let spec = pages.write_page(CompressedPage::new(page, len))?;
            dictionary_offset = Some(spec.offset as i64);
            uncompressed += spec.uncompressed_size;
            encodings.push(Encoding::PLAIN);
            encoding_stats.push(PageEncodingStats {
                page_type: PageType::DICTIONARY_PAGE,
                encoding: Encoding::PLAIN,
                count: 1,
            });
        }
        self.body.clear();
        if let Some(levels) = levels {
            self.body.extend_from_slice(&[0; 4]);
            hybrid(&mut self.body, levels, 1, |l| l as u64);
            let len = (self.body.len() - 4) as u32;
            self.body[..4].copy_from_slice(&len.to_le_bytes());
        }
        let (encoding, statistics) = match values {
            Values::PlainI64(v) => {
                let start = self.body.len();
                self.body.resize(start + 8 * v.len(), 0);
                for (to, x) in self.body[start..].chunks_exact_mut(8).zip(v) {
                    to.copy_from_slice(&x.to_le_bytes());
                }
                (Encoding::PLAIN, None)
            }
            Values::DeltaI64(v) => {
                let range = delta_binary_packed(&mut self.body, v);
                let (min, max) = (range.map(|r| r.0), range.map(|r| r.1));
                let nulls = (rows - set) as u64;
                let stats = ValueStatistics::new(min, max, None, Some(nulls), false)
                    .with_backwards_compatible_min_max(true);
                (
                    Encoding::DELTA_BINARY_PACKED,
                    Some(Statistics::Int64(stats)),
                )
            }
            Values::Bools(v) => {
                pack(&mut self.body, v, 1, |b| b);
                (Encoding::PLAIN, None)
            }
            Values::Strings(..) => {
                // One bit at least: a width of 0 is valid, but not every reader takes it.
                let width = bit_width(u64::from(dictionary_len.saturating_sub(1))).max(1);
                self.body.push(width as u8);
                hybrid(&mut self.body, &self.indexes, width, u64::from);
                (Encoding::RLE_DICTIONARY, None)
            }
        };
        let (buf, len) = self.compressed()?;
        let page = Page::DataPage {
            buf,
            num_values: rows as u32,
            encoding,
            def_level_encoding: Encoding::RLE,
            rep_level_encoding: Encoding::RLE,
            statistics: None,
        };
        let spec = pages.write_page(CompressedPage::new(page, len))?;
        uncompressed += spec.uncompressed_size;
        encodings.push(encoding);
        encoding_stats.push(PageEncodingStats {
            page_type: PageType::DATA_PAGE,
            encoding,
            count: 1,
        });
        pages.close()?;
        let bytes = Bytes::from(sink.into_inner()?);
        let mut metadata = ColumnChunkMetaData::builder(descr)
            .set_compression(Compression::ZSTD(self.level))
            .set_encodings_mask(EncodingMask::new_from_encodings(encodings.iter()))
            .set_page_encoding_stats(encoding_stats)
            .set_total_compressed_size(bytes.len() as i64)
            .set_total_uncompressed_size(uncompressed as i64)
            .set_num_values(rows as i64)
            .set_data_page_offset(spec.offset as i64)
            .set_dictionary_page_offset(dictionary_offset);
        if let Some(statistics) = statistics {
            metadata = metadata.set_statistics(statistics);
        }
        let close = ColumnCloseResult {
            bytes_written: bytes.len() as u64,
            rows_written: rows as u64,
            metadata: metadata.build()?,
            bloom_filter: None,
            column_index: None,
            // Where the one data page is. Readers do without it, but the file's writer
            // takes a chunk without one only when no chunk of the file has one, and the
            // crate's own column writer (counter values) gives one.
            offset_index: Some(OffsetIndexMetaData {
                page_locations: vec![PageLocation {
                    offset: spec.offset as i64,
                    compressed_page_size: spec.compressed_size as i32,
                    first_row_index: 0,
                }],
                unencoded_byte_array_data_bytes: None,
            }),
        };
        group.append_column(&bytes, close)
    }

    /// Numbers the distinct strings of `ids` in first-seen order (the chunk's dictionary),
    /// each row's number in `self.indexes`, and puts the dictionary page's values (`PLAIN`:
    /// a little-endian `u32` length, then the bytes) in `self.body`.
    fn dictionary_page(&mut self, ids: &[u64], strings: &Strings) -> u32 {
        if self.dictionary_index.len() < strings.len() {
            self.dictionary_index.resize(strings.len(), 0);
        }
        self.indexes.clear();
        for &id in ids {
            // Ids were `u32`s when they were pushed.
            let id = id as u32;
            let slot = &mut self.dictionary_index[id as usize];
            if *slot == 0 {
                self.dictionary.push(id);
                *slot = self.dictionary.len() as u32;
            }
            self.indexes.push(*slot - 1);
        }
        self.body.clear();
        for &id in &self.dictionary {
            let s = strings.bytes(id);
            self.body.extend_from_slice(&(s.len() as u32).to_le_bytes());
            self.body.extend_from_slice(s);
            // Cleared for the next chunk as it is read.
            self.dictionary_index[id as usize] = 0;
        }
        let len = self.dictionary.len() as u32;
        self.dictionary.clear();
        len
    }

    /// `self.body` compressed, and its length before.
    fn compressed(&mut self) -> Result<(Bytes, usize), ParquetError> {
        let compressed = self
            .compressor
            .compress(&self.body)
            .map_err(|e| ParquetError::General(format!("zstd: {e}")))?;
        Ok((Bytes::from(compressed), self.body.len()))
    }
}

/// The bits an unsigned value needs.
fn bit_width(max: u64) -> u32 {
    64 - max.leading_zeros()
}

/// Writes values of at most 64 bits each, least significant bit first, into bytes.
struct BitWriter<'a> {
    out: &'a mut Vec<u8>,
    /// Bits not yet written, from bit 0.
    pending: u64,
    /// How many: always below 64.
    bits: u32,
}

impl<'a> BitWriter<'a> {
    fn new(out: &'a mut Vec<u8>) -> Self {
        Self {
            out,
            pending: 0,
            bits: 0,
        }
    }

    /// Appends the low `width` bits of `v` (whose other bits are 0).
    #[inline(always)]
    fn put(&mut self, v: u64, width: u32) {
        self.pending |= v << self.bits;
        let total = self.bits + width;
        if total >= 64 {
            self.out.extend_from_slice(&self.pending.to_le_bytes());
            // The bits of `v` that did not fit (none when `v` started a new word).
            self.pending = if self.bits == 0 {
                0
            } else {
                v >> (64 - self.bits)
            };
            self.bits = total - 64;
        } else {
            self.bits = total;
        }
    }

    /// Writes the bytes the pending bits touch.
    fn finish(self) {
        let bytes = self.bits.div_ceil(8) as usize;
        self.out
            .extend_from_slice(&self.pending.to_le_bytes()[..bytes]);
    }
}

/// Appends `v` as an unsigned LEB128 varint (Parquet's ULEB128).
fn uleb128(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// `v` zigzag-mapped onto the unsigned integers (0, -1, 1, -2, … to 0, 1, 2, 3, …).
fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// Appends `values` (each below 2^`width` once `bits` maps it to an integer) in the
/// RLE / bit-packing hybrid as one bit-packed run: its header (groups of eight values,
/// shifted, with the low bit set), then the groups.
fn hybrid<T: Copy>(out: &mut Vec<u8>, values: &[T], width: u32, bits: impl Fn(T) -> u64) {
    let groups = values.len().div_ceil(8);
    if groups == 0 {
        return;
    }
    uleb128(out, (groups as u64) << 1 | 1);
    pack(out, values, width, bits);
}

/// Appends `values` (each below 2^`width` once `bits` maps it to an integer), least
/// significant bit first, each group of eight in `width` bytes; a last group of fewer is
/// padded with zeros.
fn pack<T: Copy>(out: &mut Vec<u8>, values: &[T], width: u32, bits: impl Fn(T) -> u64) {
    if width == 0 {
        return;
    }
    let mut groups = values.chunks_exact(8);
    if width <= 16 {
        // A group fits one 128-bit integer: a shift and an or per value.
        for group in &mut groups {
            let mut packed = 0u128;
            for (i, &v) in group.iter().enumerate() {
                packed |= u128::from(bits(v)) << (i as u32 * width);
            }
            out.extend_from_slice(&packed.to_le_bytes()[..width as usize]);
        }
    } else {
        let mut writer = BitWriter::new(out);
        for group in &mut groups {
            for &v in group {
                writer.put(bits(v), width);
            }
        }
        writer.finish();
    }
    let rest = groups.remainder();
    if !rest.is_empty() {
        let mut last = [0u64; 8];
        for (to, &v) in last.iter_mut().zip(rest) {
            *to = bits(v);
        }
        pack(out, &last, width, u64::from);
    }
}

/// Appends `values` in `DELTA_BINARY_PACKED`: the header (block size, miniblocks per
/// block, value count, first value), then per block of [`DELTA_BLOCK`] deltas their
/// minimum, each miniblock's bit width, and the miniblocks that hold deltas, each delta
/// less the minimum (wrapping, as readers add it back). Returns the values' minimum and
/// maximum, found on the way (`None`: no values).
fn delta_binary_packed(out: &mut Vec<u8>, values: &[u64]) -> Option<(i64, i64)> {
    uleb128(out, DELTA_BLOCK as u64);
    uleb128(out, MINIBLOCKS as u64);
    uleb128(out, values.len() as u64);
    let first = values.first().map(|&v| v as i64);
    uleb128(out, zigzag(first.unwrap_or(0)));
    let first = first?;
    let (mut low, mut high) = (first, first);
    let mut packed = [0u64; DELTA_BLOCK];
    for (block, previous) in values[1..]
        .chunks(DELTA_BLOCK)
        .zip(values.chunks(DELTA_BLOCK))
    {
        let mut min = i64::MAX;
        for (&v, &p) in block.iter().zip(previous) {
            let (v, p) = (v as i64, p as i64);
            min = min.min(v.wrapping_sub(p));
            low = low.min(v);
            high = high.max(v);
        }
        uleb128(out, zigzag(min));
        let packed = &mut packed[..block.len()];
        for ((slot, &v), &p) in packed.iter_mut().zip(block).zip(previous) {
            *slot = (v as i64).wrapping_sub(p as i64).wrapping_sub(min) as u64;
        }
        let mut widths = [0u32; MINIBLOCKS];
        for (width, mini) in widths.iter_mut().zip(packed.chunks(MINIBLOCK)) {
            // The widest value's width is the width of all their bits together.
            *width = bit_width(mini.iter().fold(0, |all, &d| all | d));
        }
        out.extend(widths.iter().map(|&w| w as u8));
        for (mini, &width) in packed.chunks(MINIBLOCK).zip(&widths) {
            pack(out, mini, width, u64::from);
            // A short last miniblock is padded to a whole one.
            let missing_groups = (MINIBLOCK - mini.len().div_ceil(8) * 8) / 8;
            out.resize(out.len() + missing_groups * width as usize, 0);
        }
    }
    Some((low, high))
}

#[cfg(test)]
mod tests {
    use super::*;
    use parquet::file::properties::WriterProperties;
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::file::writer::SerializedFileWriter;
    use parquet::record::Field;
    use parquet::schema::parser::parse_message_type;
    use std::sync::Arc;

    const SCHEMA: &str = "message m {
        required int64 plain; optional int64 delta; required boolean flag;
        required binary name (UTF8); optional binary label (UTF8);
    }";

    /// One row of [`SCHEMA`].
    #[derive(Clone, Debug, PartialEq)]
    struct Row {
        plain: i64,
        delta: Option<i64>,
        flag: bool,
        name: String,
        label: Option<String>,
    }

    /// Writes `rows` as one row group through [`ChunkEncoder`] and reads them back with the
    /// `parquet` crate's reader; also returns the `delta` column's statistics.
    fn round_trip(rows: &[Row]) -> (Vec<Row>, Option<Statistics>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.parquet");
        let schema = Arc::new(parse_message_type(SCHEMA).unwrap());
        let props = Arc::new(WriterProperties::builder().build());
        let file = File::create(&path).unwrap();
        let mut writer = SerializedFileWriter::new(file, schema, props).unwrap();
        let columns = writer.schema_descr().columns().to_vec();
        let mut strings = Strings::default();
        let names: Vec<u64> = rows
            .iter()
            .map(|r| u64::from(strings.text(&r.name).unwrap()))
            .collect();
        let labels: Vec<u64> = rows
            .iter()
            .filter_map(|r| r.label.as_deref())
            .map(|l| u64::from(strings.text(l).unwrap()))
            .collect();
        let label_levels: Vec<i16> = rows.iter().map(|r| i16::from(r.label.is_some())).collect();
        let plain: Vec<u64> = rows.iter().map(|r| r.plain as u64).collect();
        let delta: Vec<u64> = rows
            .iter()
            .filter_map(|r| r.delta)
            .map(|d| d as u64)
            .collect();
        let delta_levels: Vec<i16> = rows.iter().map(|r| i16::from(r.delta.is_some())).collect();
        let flags: Vec<u64> = rows.iter().map(|r| u64::from(r.flag)).collect();
        let mut encoder = ChunkEncoder::new(ZstdLevel::try_new(1).unwrap()).unwrap();
        let mut group = writer.next_row_group().unwrap();
        let chunks = [
            (Values::PlainI64(&plain), None),
            (Values::DeltaI64(&delta), Some(&delta_levels[..])),
            (Values::Bools(&flags), None),
            (Values::Strings(&names, &strings), None),
            (Values::Strings(&labels, &strings), Some(&label_levels[..])),
        ];
        for ((values, levels), descr) in chunks.into_iter().zip(columns) {
            encoder.append(&mut group, descr, values, levels).unwrap();
        }
        group.close().unwrap();
        writer.close().unwrap();

        let reader = SerializedFileReader::new(File::open(&path).unwrap()).unwrap();
        let stats = reader
            .metadata()
            .row_group(0)
            .column(1)
            .statistics()
            .cloned();
        let read = reader
            .get_row_iter(None)
            .unwrap()
            .map(|row| {
                let row = row.unwrap();
                let fields: Vec<Field> = row.get_column_iter().map(|(_, f)| f.clone()).collect();
                let text = |f: &Field| match f {
                    Field::Str(s) => Some(s.clone()),
                    Field::Null => None,
                    other => panic!("not a string: {other:?}"),
                };
                Row {
                    plain: match fields[0] {
                        Field::Long(v) => v,
                        ref other => panic!("not a long: {other:?}"),
                    },
                    delta: match fields[1] {
                        Field::Long(v) => Some(v),
                        Field::Null => None,
                        ref other => panic!("not a long: {other:?}"),
                    },
                    flag: fields[2] == Field::Bool(true),
                    name: text(&fields[3]).unwrap(),
                    label: text(&fields[4]),
                }
            })
            .collect();
        (read, stats)
    }

    fn rows(n: usize, delta: impl Fn(usize) -> Option<i64>) -> Vec<Row> {
        (0..n)
            .map(|i| Row {
                plain: (i as i64).wrapping_mul(0x9e37_79b9_7f4a_7c15_u64 as i64),
                delta: delta(i),
                flag: i % 3 == 0,
                name: format!("op{}", i % 300),
                label: (i % 5 != 0).then(|| format!("l{}", i % 2)),
            })
            .collect()
    }

    #[test]
    fn every_length_around_the_packing_units_reads_back_as_written() {
        for n in [
            1, 2, 7, 8, 9, 63, 64, 65, 255, 256, 257, 258, 511, 1000, 4099,
        ] {
            let written = rows(n, |i| Some(i as i64 * 3 - 50));
            let (read, _) = round_trip(&written);
            assert_eq!(read, written, "{n} rows");
        }
    }

    #[test]
    fn deltas_of_every_width_read_back_as_written() {
        let extremes = [i64::MIN, i64::MAX, 0, -1, i64::MAX, i64::MIN, 1];
        let written = rows(700, |i| Some(extremes[i % extremes.len()]));
        assert_eq!(round_trip(&written).0, written);
        let written = rows(700, |_| Some(42));
        assert_eq!(round_trip(&written).0, written);
        let written = rows(700, |i| Some(i64::MAX - i as i64));
        assert_eq!(round_trip(&written).0, written);
        for modulus in [1 << 12, 1 << 20, 1 << 40] {
            let written = rows(700, |i| Some((i as i64 * 7919) % modulus));
            assert_eq!(round_trip(&written).0, written, "deltas below {modulus}");
        }
    }

    #[test]
    fn nulls_one_name_and_all_null_columns_read_back_as_written() {
        let written: Vec<Row> = rows(300, |i| (i % 4 == 1).then_some(i as i64))
            .into_iter()
            .map(|r| Row {
                name: "only".into(),
                ..r
            })
            .collect();
        assert_eq!(round_trip(&written).0, written);
        let written: Vec<Row> = rows(100, |_| None)
            .into_iter()
            .map(|r| Row { label: None, ..r })
            .collect();
        assert_eq!(round_trip(&written).0, written);
    }

    #[test]
    fn a_delta_column_states_its_minimum_maximum_and_nulls() {
        let written = rows(1000, |i| (i % 10 != 0).then_some(500 - i as i64));
        let (_, stats) = round_trip(&written);
        let Some(Statistics::Int64(stats)) = stats else {
            panic!("no INT64 statistics: {stats:?}");
        };
        assert_eq!(stats.min_opt(), Some(&-499));
        assert_eq!(stats.max_opt(), Some(&499));
        assert_eq!(stats.null_count_opt(), Some(100));
    }

    #[test]
    fn the_hybrid_header_counts_groups_of_eight() {
        let mut out = Vec::new();
        hybrid(&mut out, &[1u64, 0, 1], 1, |v| v);
        assert_eq!(out, [0b11, 0b101]);
        out.clear();
        let values: Vec<u32> = (0..17).map(|v| v % 4).collect();
        hybrid(&mut out, &values, 2, u64::from);
        assert_eq!(out[0], 3 << 1 | 1);
        assert_eq!(out.len(), 1 + 3 * 2);
    }
}
