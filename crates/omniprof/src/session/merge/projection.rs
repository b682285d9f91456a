//! The projection of user ranges onto device streams: device work made under a user range
//! (`record_function`) draws that range on its stream as a `gpu_user_annotation`, from the
//! first such work's start to the last one's end, as Kineto does.

use crate::FastMap;
use crate::{Activity, ActivityType};

/// A user range projected onto one device stream.
struct Projection {
    device: i64,
    stream: i64,
    user: u64,
    start_ns: i64,
    end_ns: i64,
}

/// The projections of every backend's work, by (device, stream, user range).
#[derive(Default)]
pub(super) struct Projections(FastMap<(i64, i64, u64), Projection>);

impl Projections {
    /// Widens the projection of user range `user` on `a`'s stream to cover `a`.
    pub(super) fn add(&mut self, a: &Activity, user: u64) {
        let p = self
            .0
            .entry((a.device, a.resource, user))
            .or_insert(Projection {
                device: a.device,
                stream: a.resource,
                user,
                start_ns: a.start_ns,
                end_ns: a.end_ns,
            });
        p.start_ns = p.start_ns.min(a.start_ns);
        p.end_ns = p.end_ns.max(a.end_ns);
    }

    /// The projected ranges, named after the user ranges in `host` (a projection whose
    /// range is not there is left out).
    pub(super) fn into_activities(self, host: &[Activity]) -> Vec<Activity> {
        let names: FastMap<u64, &Activity> = {
            let wanted: FastMap<u64, ()> = self.0.values().map(|p| (p.user, ())).collect();
            host.iter()
                .filter(|a| wanted.contains_key(&a.correlation))
                .map(|a| (a.correlation, a))
                .collect()
        };
        self.0
            .into_values()
            .filter_map(|p| {
                let range = names.get(&p.user)?;
                let mut a = Activity::new(
                    ActivityType::GpuUserAnnotation,
                    range.name.clone(),
                    p.device,
                    p.stream,
                    p.start_ns,
                    p.end_ns,
                );
                a.correlation = p.user;
                Some(a)
            })
            .collect()
    }
}
