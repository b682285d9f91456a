//! dynolog's IPC fabric: the Unix datagram protocol through which PyTorch's Kineto, started
//! with `KINETO_USE_DAEMON=1`, polls a daemon for on-demand configs (see `wire` for the
//! bytes, `endpoint` for the names and the socket). `omniprof daemon` serves it, and an
//! omniprof process polls through it as Kineto does (`poller`), so either daemon triggers
//! either kind of process.
//!
//! A Kineto client polls the endpoint `dynolog` every five seconds with a `"req"` message
//! carrying its pid chain and job id; the daemon replies with the config text waiting for
//! that process, or an empty one. The process runs the config itself and writes its own
//! trace: the daemon never sees the trace, only the file that appears.

mod endpoint;
mod poller;
mod wire;

pub use endpoint::{
    Datagram, FabricAddr, FabricSocket, KinetoFabric, SenderCredentials, KINETO_IPC_SOCKET_DIR_ENV,
};
pub use poller::{
    kineto_daemon_opted_in, DAEMON_ENDPOINT, DAEMON_POLL_INTERVAL, KINETO_USE_DAEMON_ENV,
    OMNIPROF_CLIENT_PREFIX,
};
pub(crate) use poller::{start_polling, Profiler};
pub use wire::{
    ConfigPoll, FabricError, FabricMessage, GpuContext, CONFIG_ACTIVITIES, CONFIG_EVENTS,
    FABRIC_HEADER_LEN, FABRIC_MAX_DATAGRAM, KIND_CONTEXT, KIND_POLL,
};
