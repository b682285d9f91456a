//! What a drain or a ring's snapshot copies out of one thread's buffer.

use std::sync::Arc;

use super::block_list::BlockList;
use crate::record::autograd::Autograd;
use crate::record::packed_args::PackedArgs;
use crate::Value;

/// Everything a session needs from one thread, copied out of its buffer.
pub(crate) struct DrainedThread {
    pub(crate) index: u32,
    pub(crate) tid: i64,
    pub(crate) name: String,
    pub(crate) records: Vec<(u64, u64)>,
    pub(crate) args: BlockList<(u32, Arc<str>, Value)>,
    pub(crate) autograd: BlockList<(u32, Autograd)>,
    pub(crate) packed: PackedArgs,
    pub(crate) dropped: u64,
    pub(crate) dropped_ends: Vec<u64>,
}
