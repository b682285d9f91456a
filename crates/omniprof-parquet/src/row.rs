//! A row of a table as its writer takes it: a tuple of typed cells, such as
//! `(I64(id), Shared(&name), OptI64(parent))`. Each cell's column type is part of its Rust
//! type, so a row's shape ([`Row::SHAPE`]) is a constant that the writer checks against the
//! table's columns, and each value goes to its column's buffer without a branch on its
//! type: adding a row costs a few instructions a value (it is done for every event of a
//! trace).

use std::sync::Arc;

use crate::schema::ColumnType;
use crate::strings::Strings;

/// A value of one column type. Its bits are what the writer buffers: an `INT64` as its
/// two's complement, a `DOUBLE` as its bits, a `BOOLEAN` as 0 or 1, a `STRING` as its id in
/// the file's [`Strings`].
pub(crate) trait Cell {
    /// The column type the value is for.
    const TYPE: ColumnType;

    /// The value's bits; `Ok(None)` for a null, `Err(StringsFull)` when a string has no id
    /// left in `strings`.
    fn bits(self, strings: &mut Strings) -> Result<Option<u64>, StringsFull>;
}

/// A file already numbers 2^32 distinct strings: a new one cannot have an id.
#[derive(Debug)]
pub(crate) struct StringsFull;

fn id(id: Option<u32>) -> Result<Option<u64>, StringsFull> {
    id.map(|id| Some(u64::from(id))).ok_or(StringsFull)
}

/// An `INT64`.
pub(crate) struct I64(pub i64);
/// A nullable `INT64`.
pub(crate) struct OptI64(pub Option<i64>);
/// A `DOUBLE`.
pub(crate) struct F64(pub f64);
/// A `BOOLEAN`.
pub(crate) struct Bool(pub bool);
/// A `STRING` shared with the reader or the summary (known by its address).
pub(crate) struct Shared<'a>(pub &'a Arc<str>);
/// A `STRING` that lives as long as the program (an activity type's name).
pub(crate) struct Fixed(pub &'static str);
/// Any other `STRING`.
pub(crate) struct Text<'a>(pub &'a str);
/// A nullable `STRING`.
pub(crate) struct OptText<'a>(pub Option<&'a str>);

impl Cell for I64 {
    const TYPE: ColumnType = ColumnType::Int64;
    #[inline]
    fn bits(self, _: &mut Strings) -> Result<Option<u64>, StringsFull> {
        Ok(Some(self.0 as u64))
    }
}

impl Cell for OptI64 {
    const TYPE: ColumnType = ColumnType::NullableInt64;
    #[inline]
    fn bits(self, _: &mut Strings) -> Result<Option<u64>, StringsFull> {
        Ok(self.0.map(|x| x as u64))
    }
}

impl Cell for F64 {
    const TYPE: ColumnType = ColumnType::Float64;
    #[inline]
    fn bits(self, _: &mut Strings) -> Result<Option<u64>, StringsFull> {
        Ok(Some(self.0.to_bits()))
    }
}

impl Cell for Bool {
    const TYPE: ColumnType = ColumnType::Bool;
    #[inline]
    fn bits(self, _: &mut Strings) -> Result<Option<u64>, StringsFull> {
        Ok(Some(u64::from(self.0)))
    }
}

impl Cell for Shared<'_> {
    const TYPE: ColumnType = ColumnType::String;
    #[inline]
    fn bits(self, strings: &mut Strings) -> Result<Option<u64>, StringsFull> {
        id(strings.shared(self.0))
    }
}

impl Cell for Fixed {
    const TYPE: ColumnType = ColumnType::String;
    #[inline]
    fn bits(self, strings: &mut Strings) -> Result<Option<u64>, StringsFull> {
        id(strings.fixed(self.0))
    }
}

impl Cell for Text<'_> {
    const TYPE: ColumnType = ColumnType::String;
    #[inline]
    fn bits(self, strings: &mut Strings) -> Result<Option<u64>, StringsFull> {
        id(strings.text(self.0))
    }
}

impl Cell for OptText<'_> {
    const TYPE: ColumnType = ColumnType::NullableString;
    #[inline]
    fn bits(self, strings: &mut Strings) -> Result<Option<u64>, StringsFull> {
        match self.0 {
            Some(s) => id(strings.text(s)),
            None => Ok(None),
        }
    }
}

/// One column's values not yet written.
#[derive(Default)]
pub(crate) struct ColumnBuffer {
    /// The values of the rows where the column is not null, as their bits ([`Cell`]).
    pub(crate) values: Vec<u64>,
    /// Each row's definition level (1 set, 0 null), for a nullable column only.
    pub(crate) levels: Vec<i16>,
}

impl ColumnBuffer {
    /// A buffer with room for `rows` rows, so that it never grows by copying (the pages of
    /// the room no row reaches are never touched).
    pub(crate) fn with_capacity(ty: ColumnType, rows: usize) -> Self {
        Self {
            values: Vec::with_capacity(rows),
            levels: Vec::with_capacity(if ty.nullable() { rows } else { 0 }),
        }
    }

    #[inline]
    fn put<C: Cell>(&mut self, bits: Option<u64>) {
        if C::TYPE.nullable() {
            self.levels.push(i16::from(bits.is_some()));
            self.values.extend(bits);
        } else {
            self.values.push(bits.unwrap_or_default());
        }
    }

    pub(crate) fn clear(&mut self) {
        self.values.clear();
        self.levels.clear();
    }
}

/// A row: a tuple of [`Cell`]s, one per column.
pub(crate) trait Row {
    /// Each value's column type, in order.
    const SHAPE: &'static [ColumnType];

    /// Adds each value to its column's buffer (`columns` has one per value), or none of
    /// them when a string has no id left.
    fn write(self, strings: &mut Strings, columns: &mut [ColumnBuffer]) -> Result<(), StringsFull>;
}

/// Implements [`Row`] for the tuple of the given cell type parameters (with a name for
/// each column buffer, and the index of each).
macro_rules! row {
    ($($cell:ident $column:ident $i:tt),+) => {
        impl<$($cell: Cell),+> Row for ($($cell,)+) {
            const SHAPE: &'static [ColumnType] = &[$($cell::TYPE),+];

            #[inline]
            fn write(
                self,
                strings: &mut Strings,
                columns: &mut [ColumnBuffer],
            ) -> Result<(), StringsFull> {
                // Every value's bits first: a row is added whole or not at all.
                let bits = ($(self.$i.bits(strings)?,)+);
                let [$($column),+] = columns else {
                    unreachable!("the writer checks the row's shape");
                };
                $($column.put::<$cell>(bits.$i);)+
                Ok(())
            }
        }
    };
}

row!(A a 0);
row!(A a 0, B b 1);
row!(A a 0, B b 1, C c 2);
row!(A a 0, B b 1, C c 2, D d 3);
row!(A a 0, B b 1, C c 2, D d 3, E e 4);
row!(A a 0, B b 1, C c 2, D d 3, E e 4, F f 5);
row!(A a 0, B b 1, C c 2, D d 3, E e 4, F f 5, G g 6);
row!(A a 0, B b 1, C c 2, D d 3, E e 4, F f 5, G g 6, H h 7);
row!(A a 0, B b 1, C c 2, D d 3, E e 4, F f 5, G g 6, H h 7, I i 8);
row!(A a 0, B b 1, C c 2, D d 3, E e 4, F f 5, G g 6, H h 7, I i 8, J j 9);
row!(A a 0, B b 1, C c 2, D d 3, E e 4, F f 5, G g 6, H h 7, I i 8, J j 9, K k 10);
row!(A a 0, B b 1, C c 2, D d 3, E e 4, F f 5, G g 6, H h 7, I i 8, J j 9, K k 10, L l 11);
row!(A a 0, B b 1, C c 2, D d 3, E e 4, F f 5, G g 6, H h 7, I i 8, J j 9, K k 10, L l 11, M m 12);
row!(A a 0, B b 1, C c 2, D d 3, E e 4, F f 5, G g 6, H h 7, I i 8, J j 9, K k 10, L l 11, M m 12, N n 13);
