//! The base config: a file of Kineto keys that applies to every on-demand trace, under the
//! request's own text (`reference/config.md` §5).

use std::path::PathBuf;

use crate::config::{Config, ConfigError};

/// omniprof's name for the base config file; wins over [`KINETO_CONFIG_ENV`].
pub const OMNIPROF_CONFIG_ENV: &str = "OMNIPROF_CONFIG";
/// Kineto's name for the base config file.
pub const KINETO_CONFIG_ENV: &str = "KINETO_CONFIG";
/// Kineto's base config when neither variable is set; a missing file there is no error.
const DEFAULT_BASE_CONFIG: &str = "/etc/libkineto.conf";

/// A base config file that could not be used. The request it was read for is refused.
#[derive(Debug, thiserror::Error)]
pub enum BaseConfigError {
    #[error("base config {} ({source_name}): cannot read: {error}", path.display())]
    Read {
        path: PathBuf,
        /// Where the path came from: the variable, or Kineto's default.
        source_name: &'static str,
        error: std::io::Error,
    },
    #[error("base config {}: {error}", path.display())]
    Parse { path: PathBuf, error: ConfigError },
}

/// The base config: `$OMNIPROF_CONFIG`, else `$KINETO_CONFIG`, else `/etc/libkineto.conf` if
/// it exists, parsed onto the defaults (unrestricted, as Kineto treats its config file). Read
/// at every request, so an edited file applies to the next trace.
pub(crate) fn load() -> Result<Config, BaseConfigError> {
    let named = [OMNIPROF_CONFIG_ENV, KINETO_CONFIG_ENV]
        .into_iter()
        .find_map(|var| Some((PathBuf::from(std::env::var_os(var)?), var)));
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
