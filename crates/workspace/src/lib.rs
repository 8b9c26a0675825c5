//! Orchestrator workspaces (seed 002): every orchestrator has a private workspace; shared areas are denied
//! by default and granted per orchestrator; the settings are validated (absolute, canonical, existing
//! paths; valid step modes; granted areas; domain isolation of channel profiles) before anything runs; and
//! an orchestrator's agents run under `stockade-sandbox` with exactly that access ([`plan`]), so "sees only"
//! is enforced by the kernel.

mod error;
mod exec;
mod ops;
mod settings;

pub use error::WorkspaceError;
pub use exec::{ExecPlan, SharedGrant, plan};
pub use ops::{BOOTSTRAP_ORCHESTRATOR_YAML, add, edit, grant, init, revoke, set_workspace};
pub use settings::{
    AccessMode, ChannelProfile, Grant, OrchestratorEntry, OrchestratorFile, Problem, Settings,
    SettingsBlock, SharedArea, Step, Workflow, WorkspaceMode, check_name, settings_path,
    write_atomic,
};
