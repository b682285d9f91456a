//! The `args` and `deviceProperties` Kineto writes for CUPTI's records, with their keys and
//! in Kineto's order, so that HTA and TensorBoard read omniprof's CUDA traces as Kineto's.

use std::sync::Arc;

use omniprof::trace::{Activity, Value};

use crate::library::DeviceProperties;
use crate::records;

/// A kernel's `args`, as Kineto writes them.
pub(crate) fn kernel_args(
    k: &records::Kernel,
    props: Option<&DeviceProperties>,
) -> Vec<(Arc<str>, Value)> {
    let mut args: Vec<(Arc<str>, Value)> = vec![
        ("queued".into(), Value::from(k.queued.min(i64::MAX as u64))),
        ("device".into(), Value::from(k.device)),
        ("context".into(), Value::from(k.context)),
        ("stream".into(), Value::from(k.stream)),
        (
            "registers per thread".into(),
            Value::from(u32::from(k.registers)),
        ),
        ("shared memory".into(), Value::from(k.shared_memory)),
    ];
    let occupancy = props.and_then(|p| Occupancy::estimate(p, k));
    if let Some(occupancy) = occupancy {
        args.push(("blocks per SM".into(), Value::from(occupancy.blocks_per_sm)));
        args.push(("warps per SM".into(), Value::from(occupancy.warps_per_sm)));
    }
    args.push(("grid".into(), Value::from(k.grid.to_vec())));
    args.push(("block".into(), Value::from(k.block.to_vec())));
    if let Some(occupancy) = occupancy {
        args.push((
            "est. achieved occupancy %".into(),
            Value::from(occupancy.percent),
        ));
    }
    args
}

/// A copy's or set's `args`.
pub(crate) fn transfer_args(
    a: &Activity,
    device: u32,
    context: u32,
    stream: u32,
    bytes: u64,
) -> Vec<(Arc<str>, Value)> {
    let ns = a.duration_ns().max(1) as f64;
    vec![
        ("device".into(), Value::from(device)),
        ("context".into(), Value::from(context)),
        ("stream".into(), Value::from(stream)),
        ("bytes".into(), Value::from(bytes)),
        (
            "memory bandwidth (GB/s)".into(),
            Value::from(bytes as f64 / ns),
        ),
    ]
}

/// A kernel's estimated occupancy, from its launch and the device's limits (the occupancy
/// calculator's rules: warps, registers allocated per warp in 256s, shared memory with 1 KiB
/// reserved per block, blocks per SM).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Occupancy {
    blocks_per_sm: f64,
    warps_per_sm: f64,
    percent: i64,
}

impl Occupancy {
    fn estimate(p: &DeviceProperties, k: &records::Kernel) -> Option<Self> {
        let positive = |v: i32| u64::try_from(v).ok().filter(|&v| v > 0);
        let warp = positive(p.warp_size)?;
        let sms = positive(p.num_sms)?;
        let threads: u64 = k.block.iter().map(|&d| positive(d).unwrap_or(1)).product();
        let blocks: u64 = k.grid.iter().map(|&d| positive(d).unwrap_or(1)).product();
        let warps_per_block = threads.div_ceil(warp);
        let max_warps = positive(p.max_threads_per_sm)? / warp;
        let by_warps = max_warps / warps_per_block.max(1);
        let regs_per_warp = (u64::from(k.registers) * warp).div_ceil(256) * 256;
        let by_regs = match regs_per_warp * warps_per_block {
            0 => u64::MAX,
            per_block => positive(p.regs_per_sm).unwrap_or(0) / per_block,
        };
        let by_shared = match u64::try_from(k.shared_memory).unwrap_or(0) {
            0 => u64::MAX,
            shared => positive(p.shared_mem_per_sm).unwrap_or(0) / (shared + 1024),
        };
        let by_blocks = positive(p.max_blocks_per_sm).unwrap_or(u64::MAX);
        let resident = by_warps.min(by_regs).min(by_shared).min(by_blocks);
        let blocks_per_sm = blocks as f64 / sms as f64;
        let achieved = (resident as f64).min(blocks_per_sm.ceil());
        let percent = (achieved * warps_per_block as f64 / max_warps.max(1) as f64 * 100.0)
            .round()
            .min(100.0) as i64;
        Some(Self {
            blocks_per_sm,
            warps_per_sm: blocks_per_sm * warps_per_block as f64,
            percent,
        })
    }
}

/// A device's `deviceProperties` entry, with Kineto's keys in Kineto's order.
pub(crate) fn properties_value(p: &DeviceProperties) -> Value {
    [
        ("id", Value::from(p.id)),
        ("name", Value::from(p.name.as_str())),
        ("totalGlobalMem", Value::from(p.total_global_mem)),
        ("computeMajor", Value::from(p.compute_major)),
        ("computeMinor", Value::from(p.compute_minor)),
        ("maxThreadsPerBlock", Value::from(p.max_threads_per_block)),
        (
            "maxThreadsPerMultiprocessor",
            Value::from(p.max_threads_per_sm),
        ),
        ("regsPerBlock", Value::from(p.regs_per_block)),
        ("regsPerMultiprocessor", Value::from(p.regs_per_sm)),
        ("warpSize", Value::from(p.warp_size)),
        ("sharedMemPerBlock", Value::from(p.shared_mem_per_block)),
        (
            "sharedMemPerMultiprocessor",
            Value::from(p.shared_mem_per_sm),
        ),
        ("numSms", Value::from(p.num_sms)),
        (
            "sharedMemPerBlockOptin",
            Value::from(p.shared_mem_per_block_optin),
        ),
    ]
    .into_iter()
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h100() -> DeviceProperties {
        DeviceProperties {
            id: 0,
            name: "NVIDIA H100".into(),
            total_global_mem: 80 << 30,
            compute_major: 9,
            compute_minor: 0,
            max_threads_per_block: 1024,
            max_threads_per_sm: 2048,
            regs_per_block: 65536,
            regs_per_sm: 65536,
            warp_size: 32,
            shared_mem_per_block: 49152,
            shared_mem_per_sm: 233472,
            num_sms: 132,
            shared_mem_per_block_optin: 232448,
            max_blocks_per_sm: 32,
        }
    }

    fn kernel(grid: [i32; 3], block: [i32; 3], registers: u16, shared: i64) -> records::Kernel {
        records::Kernel {
            start: 0,
            end: 1,
            device: 0,
            context: 1,
            stream: 7,
            grid,
            block,
            registers,
            shared_memory: shared,
            correlation: 5,
            name_ptr: 0,
            queued: 0,
        }
    }

    #[test]
    fn occupancy_is_limited_by_registers_when_they_run_out_first() {
        // 256 threads = 8 warps; 64 registers → 2048 per warp, 16384 per block: 4 blocks.
        let k = kernel([1320, 1, 1], [256, 1, 1], 64, 0);
        let o = Occupancy::estimate(&h100(), &k).unwrap();
        assert_eq!(o.blocks_per_sm, 10.0);
        assert_eq!(o.warps_per_sm, 80.0);
        assert_eq!(o.percent, 50);
    }

    #[test]
    fn occupancy_of_a_small_grid_is_what_its_blocks_fill() {
        // 66 blocks over 132 SMs: half a block each, rounded up to one block of 4 warps.
        let k = kernel([66, 1, 1], [128, 1, 1], 32, 1024);
        let o = Occupancy::estimate(&h100(), &k).unwrap();
        assert_eq!(o.blocks_per_sm, 0.5);
        assert_eq!(o.percent, 6);
    }

    #[test]
    fn device_properties_use_kinetos_keys_in_order() {
        let json = properties_value(&h100()).to_json();
        assert!(json.starts_with(
            "{\"id\": 0, \"name\": \"NVIDIA H100\", \"totalGlobalMem\": 85899345920, \
             \"computeMajor\": 9, \"computeMinor\": 0,"
        ));
        assert!(json.ends_with("\"numSms\": 132, \"sharedMemPerBlockOptin\": 232448}"));
    }
}
