//! The base config: a file of Kineto keys that applies to every on-demand trace, under the
//! request's own text (`docs/config.md` §5).

use std::ffi::OsString;
use std::path::PathBuf;

use crate::config::{Config, ConfigError};

/// omniprof's name for the base config file; wins over [`KINETO_CONFIG_ENV`].
pub(crate) const OMNIPROF_CONFIG_ENV: &str = "OMNIPROF_CONFIG";
/// Kineto's name for the base config file.
pub(crate) const KINETO_CONFIG_ENV: &str = "KINETO_CONFIG";
/// Kineto's base config when neither variable is set; a missing file there is no error.
const DEFAULT_BASE_CONFIG: &str = "/etc/libkineto.conf";

/// A base config file that could not be used. The request it was read for is refused.
#[derive(Debug, thiserror::Error)]
pub enum BaseConfigError {
    /// The file could not be read.
    #[error("base config {} ({source_name}): cannot read: {error}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Where the path came from: the variable, or Kineto's default.
        source_name: &'static str,
        /// The read's error.
        error: std::io::Error,
    },
    /// The file is not a valid config.
    #[error("base config {}: {error}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// The line refused and why.
        error: ConfigError,
    },
}

/// The base config: `$OMNIPROF_CONFIG`, else `$KINETO_CONFIG`, else `/etc/libkineto.conf` if
/// it exists, parsed onto the defaults (unrestricted, as Kineto treats its config file). Read
/// at every request, so an edited file applies to the next trace.
pub(crate) fn load() -> Result<Config, BaseConfigError> {
    load_with(|var| std::env::var_os(var))
}

/// [`load`], reading the environment through `env`.
fn load_with(env: impl Fn(&str) -> Option<OsString>) -> Result<Config, BaseConfigError> {
    let named = [OMNIPROF_CONFIG_ENV, KINETO_CONFIG_ENV]
        .into_iter()
        .find_map(|var| Some((PathBuf::from(env(var)?), var)));
    let (path, source_name) = match named {
        Some(named) => named,
        None if std::path::Path::new(DEFAULT_BASE_CONFIG).exists() => {
            (PathBuf::from(DEFAULT_BASE_CONFIG), "Kineto's default")
        }
        None => return Ok(Config::parse("").unwrap_or_default()),
    };
    let text = std::fs::read_to_string(&path).map_err(|error| BaseConfigError::Read {
        path: path.clone(),
        source_name,
        error,
    })?;
    Config::parse(&text).map_err(|error| BaseConfigError::Parse { path, error })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_or_missing_base_config_names_the_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("base.conf");
        std::fs::write(
            &path,
            "ACTIVITY_TYPES=cpu_op\nACTIVITIES_DURATION_MSECS=soon\n",
        )
        .unwrap();
        let err =
            load_with(|var| (var == KINETO_CONFIG_ENV).then(|| path.clone().into())).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "base config {}: line 2: ACTIVITIES_DURATION_MSECS: invalid integer \"soon\" \
                 (expected a base-10 integer in [0, 2147483647])",
                path.display()
            )
        );

        let missing = dir.path().join("missing.conf");
        let err = load_with(|var| (var == OMNIPROF_CONFIG_ENV).then(|| missing.clone().into()))
            .unwrap_err();
        let message = err.to_string();
        assert!(
            message.starts_with(&format!(
                "base config {} (OMNIPROF_CONFIG)",
                missing.display()
            )),
            "{message}"
        );
    }

    #[test]
    fn base_config_lies_under_the_request_and_omniprof_config_wins() {
        let dir = tempfile::tempdir().unwrap();
        let ours = dir.path().join("ours.conf");
        let kinetos = dir.path().join("kineto.conf");
        std::fs::write(
            &ours,
            "ACTIVITY_TYPES=cpu_op\nACTIVITIES_DURATION_MSECS=700",
        )
        .unwrap();
        std::fs::write(&kinetos, "ACTIVITIES_DURATION_MSECS=900").unwrap();
        let mut config = load_with(|var| match var {
            OMNIPROF_CONFIG_ENV => Some(ours.clone().into()),
            KINETO_CONFIG_ENV => Some(kinetos.clone().into()),
            _ => None,
        })
        .unwrap();
        assert_eq!(config.activities_duration().as_millis(), 700);
        config
            .apply_on_demand_strict("ACTIVITIES_DURATION_MSECS=250")
            .unwrap();
        assert_eq!(config.activities_duration().as_millis(), 250);
        assert_eq!(
            config.activity_types(),
            [crate::ActivityType::CpuOp].into_iter().collect()
        );
    }
}
