//! Versioning by unpadded struct size (`docs/plugin-abi.md`, section 1).
//!
//! Every struct starts with its producer's *unpadded size*: the offset of its last field plus
//! that field's size, trailing padding excluded. Fields are only ever appended, so a consumer
//! accepts a struct whose size is at least the one it knows, reads only the fields it knows,
//! and rejects a smaller one. The rule lives here once: [`unpadded_size!`](crate::unpadded_size) computes the
//! size, [`check_struct_size`] compares, and [`read_versioned`] does both for a struct
//! received from the other side.

use core::fmt;
use core::mem::{size_of, MaybeUninit};
use core::ptr::{self, NonNull};

use crate::abi::*;

/// The unpadded size of `$ty` when `$field` is its last field:
/// `offset_of!($ty, $field)` plus the size of `$field`, the value of the C header's
/// `KINETO_PLUGIN_UNPADDED_STRUCT_SIZE(type, field)`. Usable in constants.
///
/// ```
/// use omniprof_plugin_sys::{unpadded_size, ProfileEventFlow};
///
/// // 24 bytes in memory, but the last field (a 1-byte bool) ends at 17.
/// assert_eq!(unpadded_size!(ProfileEventFlow, is_start_point), 17);
/// assert_eq!(size_of::<ProfileEventFlow>(), 24);
/// ```
#[macro_export]
macro_rules! unpadded_size {
    ($ty:ty, $field:ident) => {
        ::core::mem::offset_of!($ty, $field)
            + $crate::__private::field_size::<$ty, _>(|s| {
                // SAFETY: the closure is never called; it only lets the compiler infer the
                // field's type from a place expression, which needs no valid value.
                unsafe { &raw const (*s).$field }
            })
    };
}

/// The size of the field a projection closure points to. The closure is only named, never
/// called: it exists so that [`unpadded_size!`] can get a field's type by inference.
#[doc(hidden)]
pub const fn field_size<S, F>(_projection: fn(*const S) -> *const F) -> usize {
    size_of::<F>()
}

/// A struct that declares fewer bytes than this side requires: its producer was built
/// against an older version of the ABI than the oldest this side supports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SizeError {
    /// The `unpaddedStructSize` the struct carries.
    pub given: usize,
    /// The unpadded size this side knows.
    pub required: usize,
}

impl fmt::Display for SizeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "struct declares {} bytes, fewer than the {} required",
            self.given, self.required
        )
    }
}

impl std::error::Error for SizeError {}

/// The versioning rule: a struct of `given` unpadded bytes is acceptable to a side that knows
/// `required` of them when it is the same size or larger (a newer producer, whose extra
/// fields are ignored); smaller is rejected.
pub const fn check_struct_size(given: usize, required: usize) -> Result<(), SizeError> {
    if given >= required {
        Ok(())
    } else {
        Err(SizeError { given, required })
    }
}

mod sealed {
    pub trait Sealed {}
}

/// A struct of the ABI: `#[repr(C)]`, starting with `unpaddedStructSize`.
///
/// Implemented only by this crate's mirrors, which all have two properties that
/// [`read_versioned`] and `Default` rely on: every byte pattern is a valid value (they hold
/// only integers, raw pointers, optional function pointers and C-enum newtypes), and zero
/// is a valid value of every field.
pub trait AbiStruct: sealed::Sealed + Copy {
    /// The C name, e.g. `"KinetoPlugin_ProfileEvent"`.
    const C_NAME: &'static str;

    /// The unpadded size of this version, the value a producer puts in
    /// `unpaddedStructSize` and the least a consumer accepts.
    const UNPADDED_SIZE: usize;

    /// [`check_struct_size`] against this struct's [`UNPADDED_SIZE`](Self::UNPADDED_SIZE).
    fn check_size(given: usize) -> Result<(), SizeError> {
        check_struct_size(given, Self::UNPADDED_SIZE)
    }
}

/// Implements [`AbiStruct`] and a `Default` that is all zeros with the size set.
macro_rules! abi_struct {
    ($($ty:ident as $c_name:literal, last $last:ident;)+) => {$(
        impl sealed::Sealed for $ty {}

        impl AbiStruct for $ty {
            const C_NAME: &'static str = $c_name;
            const UNPADDED_SIZE: usize = unpadded_size!($ty, $last);
        }

        impl Default for $ty {
            /// All fields zero (NULL, `None`, `INVALID`) except `unpadded_struct_size`.
            fn default() -> Self {
                zeroed_with_size()
            }
        }
    )+};
}

abi_struct! {
    ProfileEvent as "KinetoPlugin_ProfileEvent", last resource_id;
    ProfileEventFlow as "KinetoPlugin_ProfileEventFlow", last is_start_point;
    ProfileDeviceInfo as "KinetoPlugin_ProfileDeviceInfo", last label;
    ProfileResourceInfo as "KinetoPlugin_ProfileResourceInfo", last name;
    TraceBuilder as "KinetoPlugin_TraceBuilder", last add_resource_info;
    ProfilerCreateParams as "KinetoPlugin_ProfilerCreate_Params", last enabled_activity_types_max_len;
    ProfilerDestroyParams as "KinetoPlugin_ProfilerDestroy_Params", last profiler_handle;
    ProfilerQueryParams as "KinetoPlugin_ProfilerQuery_Params", last supported_activity_types_max_len;
    ProfilerStartParams as "KinetoPlugin_ProfilerStart_Params", last profiler_handle;
    ProfilerStopParams as "KinetoPlugin_ProfilerStop_Params", last profiler_handle;
    ProfilerProcessEventsParams as "KinetoPlugin_ProfilerProcessEvents_Params", last trace_builder;
    ProfilerPushCorrelationIdParams as "KinetoPlugin_ProfilerPushCorrelationId_Params", last profiler_handle;
    ProfilerPopCorrelationIdParams as "KinetoPlugin_ProfilerPopCorrelationId_Params", last profiler_handle;
    ProfilerPushUserCorrelationIdParams as "KinetoPlugin_ProfilerPushUserCorrelationId_Params", last profiler_handle;
    ProfilerPopUserCorrelationIdParams as "KinetoPlugin_ProfilerPopUserCorrelationId_Params", last profiler_handle;
    ProfilerInterface as "KinetoPlugin_ProfilerInterface", last profiler_process_events;
    Registry as "KinetoPlugin_Registry", last register_profiler;
}

/// All zeros, then the size of this version: what a producer starts from.
fn zeroed_with_size<T: AbiStruct>() -> T {
    // SAFETY: zero is a valid value of every field of every `AbiStruct` (the trait's
    // documented property, true of every implementation above).
    let mut value: T = unsafe { MaybeUninit::zeroed().assume_init() };
    // SAFETY: every `AbiStruct` is `#[repr(C)]` with `unpaddedStructSize: usize` at offset 0,
    // so the first `usize` of `value` is that field.
    unsafe {
        ptr::from_mut(&mut value)
            .cast::<usize>()
            .write(T::UNPADDED_SIZE)
    };
    value
}

/// Copies a struct received from the other side, after checking its size: reads its
/// `unpaddedStructSize` first, rejects it when smaller than this side's
/// [`UNPADDED_SIZE`](AbiStruct::UNPADDED_SIZE), and otherwise copies exactly that many
/// bytes, leaving anything after them (a newer producer's fields, trailing padding) unread;
/// trailing padding in the copy is zero.
///
/// The pointer need not be aligned.
///
/// # Safety
///
/// `ptr` must point to memory readable for `size_of::<usize>()` bytes, and, when the `usize`
/// there is at least `T::UNPADDED_SIZE`, for `T::UNPADDED_SIZE` bytes: that is, to a struct
/// whose producer set its size honestly.
pub unsafe fn read_versioned<T: AbiStruct>(ptr: NonNull<T>) -> Result<T, SizeError> {
    // SAFETY: every version of every struct starts with its `size_t` size, readable per the
    // caller's contract; unaligned because the contract does not promise alignment.
    let given = unsafe { ptr.cast::<usize>().as_ptr().read_unaligned() };
    T::check_size(given)?;
    let mut value = MaybeUninit::<T>::zeroed();
    // SAFETY: the source holds at least `T::UNPADDED_SIZE` readable bytes (checked above,
    // and the caller's contract), the destination is a `T`, which is at least that large,
    // and the two cannot overlap because the destination is a fresh local.
    unsafe {
        ptr::copy_nonoverlapping(
            ptr.cast::<u8>().as_ptr(),
            value.as_mut_ptr().cast::<u8>(),
            T::UNPADDED_SIZE,
        );
    }
    // SAFETY: the first `T::UNPADDED_SIZE` bytes came from the producer and any byte pattern
    // is a valid value of an `AbiStruct`'s fields; the rest is zero padding.
    Ok(unsafe { value.assume_init() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rule_accepts_equal_and_larger_and_rejects_smaller() {
        assert_eq!(check_struct_size(48, 48), Ok(()));
        assert_eq!(check_struct_size(56, 48), Ok(()));
        assert_eq!(
            check_struct_size(24, 48),
            Err(SizeError {
                given: 24,
                required: 48
            })
        );
        assert_eq!(
            SizeError {
                given: 24,
                required: 48
            }
            .to_string(),
            "struct declares 24 bytes, fewer than the 48 required"
        );
    }

    #[test]
    fn default_is_zero_with_the_size_set() {
        let flow = ProfileEventFlow::default();
        assert_eq!(flow.unpadded_struct_size, 17);
        assert_eq!(flow.flow_type, ProfileEventFlowType::INVALID);
        assert_eq!((flow.flow_id, flow.is_start_point), (0, 0));
        let interface = ProfilerInterface::default();
        assert_eq!(interface.unpadded_struct_size, 88);
        assert!(interface.profiler_create.is_none());
    }

    #[test]
    fn read_versioned_reads_only_the_known_prefix_of_a_newer_struct() {
        /// A later version of the flow: one more field appended after `is_start_point`.
        #[repr(C)]
        struct FlowV2 {
            current: ProfileEventFlow,
            appended: u64,
        }
        let mut newer = FlowV2 {
            current: ProfileEventFlow {
                flow_type: ProfileEventFlowType::ASYNC_CPU_GPU,
                flow_id: 7,
                is_start_point: 1,
                ..Default::default()
            },
            appended: u64::MAX,
        };
        newer.current.unpadded_struct_size = unpadded_size!(FlowV2, appended);
        // SAFETY: `newer` is readable for its declared 32 bytes.
        let read = unsafe { read_versioned(NonNull::from(&newer).cast::<ProfileEventFlow>()) };
        let read = read.unwrap();
        assert_eq!(read.unpadded_struct_size, 32);
        assert_eq!(
            (read.flow_type, read.flow_id, read.is_start_point),
            (ProfileEventFlowType::ASYNC_CPU_GPU, 7, 1)
        );
    }

    #[test]
    fn read_versioned_rejects_an_older_struct_before_reading_it() {
        // Only the size field exists: reading any further would be out of bounds
        // (`docs/plugin-abi.md`, defect 4).
        let older: usize = 16;
        // SAFETY: `older` is readable for its size field, and declares no more.
        let read = unsafe { read_versioned(NonNull::from(&older).cast::<ProfileEventFlow>()) };
        assert_eq!(
            read,
            Err(SizeError {
                given: 16,
                required: 17
            })
        );
    }
}
