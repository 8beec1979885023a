//! `axum-example` as a process, one test binary: its admin API against
//! an attacker (`admin`, in process), startup, settings,
//! reloads, logs and metrics (`startup`), the Grafana dashboard's metrics
//! (`dashboard`), two processes on one Redis (`two_processes`), the AI
//! gateway (`chat`), paced downloads (`download`) and the server's
//! connections: h2c, idle timeouts, caps (`connections`); a policy's
//! routes checked against the served ones (`served_routes`); the API
//! keys (`api_keys`).

mod admin;
mod api_keys;
mod chat;
mod connections;
mod dashboard;
mod download;
mod fleet;
mod served_routes;
mod startup;
mod two_processes;
