mod audit_explain;
mod hook;
mod run_env;
mod run_fs;
mod run_limits;
mod run_process;
mod run_work;
mod util;
