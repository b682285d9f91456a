//! Runtime options: how many devices and pooled streams the runtime lays out, and how much
//! simulated memory each device has. Plain data at the bottom, because the error type
//! reports the options a runtime already runs with.

/// Most devices [`Options`] accept: far more than any test needs, small enough that a typo in
/// `OPENREG_DEVICES` cannot make the runtime allocate absurd tables.
pub(crate) const MAX_DEVICES: usize = 64;

/// Most pooled streams per device [`Options`] accept, for the same reason.
pub(crate) const MAX_POOLED_STREAMS: usize = 1024;

/// How the runtime is laid out; fixed for the life of the process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// Number of devices (0 is allowed: every device call then fails with `InvalidDevice`).
    pub devices: usize,
    /// Pooled streams per device, the default stream (index 0) included; reached through
    /// [`Stream::pooled`](crate::Stream::pooled). Each one's worker thread starts on first
    /// use.
    pub streams_per_device: usize,
    /// Simulated memory per device, in bytes; [`malloc`](crate::malloc) fails beyond it.
    pub memory_per_device: u64,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            devices: 2,
            streams_per_device: 4,
            memory_per_device: 8 << 30,
        }
    }
}

impl Options {
    /// The defaults, with `devices` taken from `OPENREG_DEVICES` when it holds a valid count.
    pub fn from_env() -> Self {
        let mut options = Self::default();
        if let Ok(value) = std::env::var("OPENREG_DEVICES") {
            match parse_device_count(&value) {
                Some(n) => options.devices = n,
                None => log::warn!(
                    "OPENREG_DEVICES={value:?} is not a count in 0..={MAX_DEVICES}; using {}",
                    options.devices
                ),
            }
        }
        options
    }

    /// Why the runtime cannot honour these options, if it cannot.
    pub(crate) fn validate(&self) -> Result<(), &'static str> {
        if self.devices > MAX_DEVICES {
            return Err("more devices than MAX_DEVICES");
        }
        if self.streams_per_device == 0 {
            return Err("streams_per_device must count the default stream");
        }
        if self.streams_per_device > MAX_POOLED_STREAMS {
            return Err("more pooled streams than MAX_POOLED_STREAMS");
        }
        Ok(())
    }
}

fn parse_device_count(value: &str) -> Option<usize> {
    value.trim().parse().ok().filter(|&n| n <= MAX_DEVICES)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_count_from_env_value() {
        assert_eq!(parse_device_count(" 3 "), Some(3));
        assert_eq!(parse_device_count("0"), Some(0));
        assert_eq!(parse_device_count("65"), None);
        assert_eq!(parse_device_count("two"), None);
    }
}
