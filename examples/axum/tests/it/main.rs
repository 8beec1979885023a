//! `axum-example` as a process, one test binary: startup, settings,
//! reloads, logs and metrics (`startup`), and two processes on one Redis
//! (`two_processes`).

mod startup;
mod two_processes;
