//! The plugin ABI's event types mapped to omniprof's by their Kineto enumerator, never by
//! integer: the ABI has its own numbering (`docs/plugin-abi.md`, section 3).

use omniprof_plugin_sys::ProfileEventType;

use crate::{ActivitySet, ActivityType};

/// The omniprof type of an ABI type; `None` for `INVALID`, the count and unknown values.
pub(crate) fn activity_type(t: ProfileEventType) -> Option<ActivityType> {
    if !t.is_valid() {
        return None;
    }
    ActivityType::from_enumerator(t.name()?)
}

/// The ABI type of an omniprof type, when the ABI has one.
pub(crate) fn abi_type(t: ActivityType) -> Option<ProfileEventType> {
    ProfileEventType::ALL
        .iter()
        .copied()
        .find(|&abi| activity_type(abi) == Some(t))
}

/// The ABI types of a selection (those the ABI can express).
pub(crate) fn abi_types(set: ActivitySet) -> Vec<ProfileEventType> {
    set.iter().filter_map(abi_type).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_abi_type_maps_by_name_and_back() {
        let expected: [(i32, ActivityType); 24] = [
            (1, ActivityType::CpuOp),
            (2, ActivityType::UserAnnotation),
            (3, ActivityType::GpuUserAnnotation),
            (4, ActivityType::GpuMemcpy),
            (5, ActivityType::GpuMemset),
            (6, ActivityType::ConcurrentKernel),
            (7, ActivityType::ExternalCorrelation),
            (8, ActivityType::CudaRuntime),
            (9, ActivityType::CudaDriver),
            (10, ActivityType::CpuInstantEvent),
            (11, ActivityType::PythonFunction),
            (12, ActivityType::Overhead),
            (13, ActivityType::MtiaRuntime),
            (14, ActivityType::MtiaCcpEvents),
            (15, ActivityType::MtiaInsight),
            (16, ActivityType::CudaSync),
            (17, ActivityType::GlowRuntime),
            (18, ActivityType::CudaProfilerRange),
            (19, ActivityType::HpuOp),
            (20, ActivityType::XpuRuntime),
            (21, ActivityType::CollectiveComm),
            (22, ActivityType::GpuPmCounter),
            (23, ActivityType::PrivateUse1Runtime),
            (24, ActivityType::PrivateUse1Driver),
        ];
        for (abi, t) in expected {
            assert_eq!(activity_type(ProfileEventType(abi)), Some(t), "ABI {abi}");
            assert_eq!(abi_type(t), Some(ProfileEventType(abi)));
        }
        for bad in [0, 25, -1, 99] {
            assert_eq!(activity_type(ProfileEventType(bad)), None);
        }
        assert_eq!(abi_type(ActivityType::XpuDriver), None);
    }
}
