//! `axum-example` as a process, one test binary: startup, settings,
//! reloads, logs and metrics (`startup`), the Grafana dashboard's metrics
//! (`dashboard`), and two processes on one Redis (`two_processes`).

mod chat;
mod dashboard;
mod fleet;
mod startup;
mod two_processes;
