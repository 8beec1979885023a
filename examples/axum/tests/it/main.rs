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

/// The example's policy file with a Redis store that waits up to 2 s for
/// an answer (`REDIS_URL` gives its address), in a file of this test
/// process: on a busy machine a slow answer is then not taken for an
/// outage, decided in the fallback's fresh memory, so the tests' counts
/// stay exact. An outage (a killed server) still fails fast.
fn patient_redis_config() -> &'static str {
    static PATH: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PATH.get_or_init(|| {
        const MEMORY: &str = "[store]\nkind = \"memory\"\nmax-keys = 1000000";
        let text = axum_example::DEFAULT_POLICY;
        assert!(text.contains(MEMORY), "the example's [store] changed");
        let patient = "[store]\nkind = \"redis\"\nurl = \"redis://127.0.0.1:1/\"\n\
                       timeout = \"2s\"\nfallback-max-keys = 1000000";
        let path =
            std::env::temp_dir().join(format!("axum-example-patient-{}.toml", std::process::id()));
        std::fs::write(&path, text.replace(MEMORY, patient)).expect("write the policy");
        path.to_str().expect("a UTF-8 path").to_owned()
    })
}
