//! A second gRPC implementation: Python's grpcio calling `ShouldRateLimit`
//! with hand-encoded protobuf bytes (`tests/python/should_rate_limit.py`).
//! Without python3 or grpcio the test is skipped, loudly; under `CI=true`
//! it fails (CI installs a pinned grpcio).

use crate::grpc::LIMITS;
use crate::harness::Harness;
use serde_json::Value;
use std::process::Command;

/// The script's JSON lines for `calls` calls of `descriptors` in
/// `domain`, or `None` after saying why the test is skipped.
fn python_calls(addr: &str, domain: &str, calls: u32, descriptors: &[&str]) -> Option<Vec<Value>> {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/python/should_rate_limit.py"
    );
    let out = Command::new("python3")
        .arg(script)
        .args([addr, domain, &calls.to_string()])
        .args(descriptors)
        .output();
    let skip = |why: &str| {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "python_grpcio: {why} (CI installs python3's grpcio)"
        );
        eprintln!("SKIPPED python_grpcio: {why} (pip install grpcio)");
        None
    };
    let out = match out {
        Ok(out) => out,
        Err(e) => return skip(&format!("no python3: {e}")),
    };
    if out.status.code() == Some(2) {
        return skip("grpcio is not installed");
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the script failed: {stderr}");
    let lines = String::from_utf8(out.stdout).unwrap();
    Some(
        lines
            .lines()
            .map(|l| serde_json::from_str(l).expect("a JSON line"))
            .collect(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_grpcio_calls_should_rate_limit_with_raw_protobuf() {
    let h = Harness::start(LIMITS).await;
    let addr = h.running.grpc_addr.to_string();
    let calls = tokio::task::spawn_blocking(move || {
        let over = python_calls(&addr, "edge", 11, &["remote_address=10.3.0.1"])?;
        let bad = python_calls(&addr, "", 1, &["remote_address=10.3.0.1"])?;
        Some((over, bad))
    })
    .await
    .unwrap();
    let Some((over, bad)) = calls else {
        h.running.stop().await;
        return;
    };
    // Codes: OK = 1, OVER_LIMIT = 2; unit MINUTE = 2.
    for (i, answer) in over.iter().enumerate() {
        let status = &answer["statuses"][0];
        assert_eq!(status["name"], "per-ip", "{answer}");
        assert_eq!(status["requests_per_unit"], 10, "{answer}");
        assert_eq!(status["unit"], 2, "{answer}");
        let reset = status["reset_secs"].as_u64().unwrap();
        assert!((1..=60).contains(&reset), "{answer}");
        if i < 10 {
            assert_eq!(answer["overall_code"], 1, "{answer}");
            assert_eq!(status["remaining"], 9 - i, "{answer}");
        } else {
            assert_eq!(answer["overall_code"], 2, "{answer}");
            assert_eq!(status["code"], 2, "{answer}");
            assert!(answer["headers"]["retry-after"].is_string(), "{answer}");
        }
    }
    assert_eq!(over.len(), 11);
    assert_eq!(bad[0]["error"], "INVALID_ARGUMENT", "{}", bad[0]);
    h.running.stop().await;
}
