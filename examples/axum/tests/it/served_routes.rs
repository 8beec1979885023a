//! A policy limit on a route the app does not serve (a typo: `POST /login/`, `POST /Login`, `GET /login`) is refused naming the limit and the route, and every route in `SERVED` is served.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum_example::{app_on, Config, SERVED};
use tower::ServiceExt;
use tower_ratelimit::deploy::Limits;

fn policy(routes: &str) -> Limits {
    let text = format!(
        "[[limit]]\nname = \"typo\"\nalgorithm = \"gcra 5/1m\"\nkey = \"client-ip\"\nroutes = [{routes}]\n"
    );
    Limits::from_toml(&text, None, |_| None).unwrap()
}

fn applied(routes: &str) -> Result<(), String> {
    app_on(&policy(routes), &Config::default())
        .map(|_| ())
        .map_err(|e| e.to_string())
}

#[test]
fn a_limit_on_a_route_the_app_does_not_serve_is_refused() {
    for route in [
        "POST /login/",
        "POST /Login",
        "GET /login",
        "POST /nope",
        "/nope",
    ] {
        let err = applied(&format!("{route:?}")).expect_err(route);
        assert!(err.contains("limit \"typo\""), "{err}");
        assert!(
            err.contains(&format!("route {route:?} is not served")),
            "{err}"
        );
    }
    for ok in [
        r#""POST /login""#,
        r#""/login""#,
        r#""HEAD /health""#,
        r#""GET /download", "POST /v1/chat""#,
    ] {
        assert_eq!(applied(ok), Ok(()), "{ok}");
    }
}

#[tokio::test]
async fn every_listed_route_is_served() {
    let app = app_on(&crate::startup::limits(|_| None), &Config::default()).unwrap();
    for &(method, path) in SERVED {
        let req = Request::builder()
            .method(method)
            .uri(path)
            .body(Body::empty())
            .unwrap();
        let status = app.clone().oneshot(req).await.unwrap().status();
        assert!(
            ![StatusCode::NOT_FOUND, StatusCode::METHOD_NOT_ALLOWED].contains(&status),
            "{method} {path}: {status}"
        );
    }
}
