//! The counter tracks of a trace's counter series: one per series and value name, found from
//! the samples as they come (a whole trace's series, or the items of a streamed one), so
//! that every track is declared before the first sample is written.
//!
//! A track is named by the value name for `hardware_counters` (the Chrome writer's
//! `GPU <n> Counters` rows), else `"<series name> <value name>"`, as Perfetto names the series
//! of a JSON `C` event. Tracks are numbered series by series, in order of first use, and
//! within a series by first use of the value name.

use std::sync::Arc;

use crate::activity::ActivityType;
use crate::counter::{CounterSample, CounterTrack};
use crate::hash::FastMap;

/// The value names of each series, as they are found.
#[derive(Default)]
pub(super) struct CounterTracksFound {
    index: FastMap<CounterTrack, usize>,
    series: Vec<(CounterTrack, Vec<Arc<str>>)>,
}

impl CounterTracksFound {
    /// Notes `sample`'s value names in `track`'s series.
    pub(super) fn add(&mut self, track: &CounterTrack, sample: &CounterSample) {
        let i = match self.index.get(track) {
            Some(&i) => i,
            None => {
                self.index.insert(track.clone(), self.series.len());
                self.series.push((track.clone(), Vec::new()));
                self.series.len() - 1
            }
        };
        let keys = &mut self.series[i].1;
        for (key, _) in &sample.values {
            if !keys.contains(key) {
                keys.push(Arc::clone(key));
            }
        }
    }

    /// The tracks, numbered.
    pub(super) fn finish(self) -> CounterTracks {
        let mut tracks = Vec::new();
        let mut first = FastMap::default();
        for (track, keys) in self.series {
            first.insert(track.clone(), (tracks.len() as u32, keys.len() as u32));
            for key in keys {
                let name = match track.kind {
                    ActivityType::HardwareCounters => key.to_string(),
                    _ => format!("{} {key}", track.name),
                };
                tracks.push(CounterTrackOut {
                    series: track.clone(),
                    key,
                    name,
                });
            }
        }
        CounterTracks { tracks, first }
    }
}

/// One counter track: its series, the value name it draws and its name.
pub(super) struct CounterTrackOut {
    pub(super) series: CounterTrack,
    pub(super) key: Arc<str>,
    pub(super) name: String,
}

/// Every counter track, in uuid order, and where each series' tracks start.
#[derive(Default)]
pub(super) struct CounterTracks {
    pub(super) tracks: Vec<CounterTrackOut>,
    /// Per series: the index of its first track and how many it has.
    first: FastMap<CounterTrack, (u32, u32)>,
}

impl CounterTracks {
    /// The series' devices, a series at a time, in order of first use.
    pub(super) fn devices(&self) -> impl Iterator<Item = i64> + '_ {
        let firsts = self.tracks.iter().enumerate();
        firsts
            .filter(|(i, t)| *i == 0 || self.tracks[i - 1].series != t.series)
            .map(|(_, t)| t.series.device)
    }

    /// Adds `sample`'s values as (time, track index, value) to `out`.
    pub(super) fn samples(
        &self,
        track: &CounterTrack,
        sample: &CounterSample,
        out: &mut Vec<(i64, u32, f64)>,
    ) {
        let Some(&(first, count)) = self.first.get(track) else {
            return;
        };
        for index in first..first + count {
            if let Some(value) = sample.value(&self.tracks[index as usize].key) {
                out.push((sample.ts_ns, index, value));
            }
        }
    }
}
