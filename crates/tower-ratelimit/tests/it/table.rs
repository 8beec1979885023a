//! The policy table: a TOML file turned into layers of a router, and every
//! validation error naming the file, the line and the entry.

use crate::common::get_from;
use axum::http::{Method, Request, StatusCode};
use axum::routing::{get, post};
use axum::Router;
use ratelimit_core::{AnyAlgorithm, ManualClock, MemoryStore};
use std::convert::Infallible;
use std::path::Path;
use std::sync::Arc;
use tower::ServiceExt;
use tower_ratelimit::table::{PolicyKey, PolicyOptions, PolicyTable};

const TABLE: &str = r#"
[[limit]]
name = "tickets"
algorithm = "gcra 1/5m"
key = "bearer"
routes = ["POST /tickets"]

[[limit]]
name = "login-failures"
algorithm = { algorithm = "sliding-log", limit = 2, period = "1h" }
key = "peer-ip"
routes = ["POST /login"]
count = [401]

[[limit]]
name = "items"
algorithm = "fixed-window 3/1m"
key = "peer-ip+route"
routes = ["/items/{id}"]
cost = 1
headers = "none"

[[limit]]
name = "everyone"
algorithm = "gcra 100/1s"
key = "global"
mode = "dry-run"
"#;

fn app(table: &PolicyTable, clock: &ManualClock) -> Router {
    let router = Router::new()
        .route(
            "/tickets",
            post(|| async { "ticket" }).get(|| async { "list" }),
        )
        .route("/login", post(|| async { StatusCode::UNAUTHORIZED }))
        .route("/items/{id}", get(|| async { "item" }))
        .route("/other", get(|| async { "other" }));
    let options = PolicyOptions {
        clock: Some(Arc::new(clock.clone())),
        ..PolicyOptions::default()
    };
    table
        .apply(router, &options, |_, a: AnyAlgorithm| {
            Ok::<_, Infallible>(MemoryStore::<AnyAlgorithm, PolicyKey>::new(a))
        })
        .unwrap()
}

async fn status(app: &Router, method: Method, uri: &str, headers: &[(&str, &[u8])]) -> StatusCode {
    let mut req: Request<_> = get_from("10.0.0.1:1", uri, headers);
    *req.method_mut() = method;
    app.clone().oneshot(req).await.unwrap().status()
}

#[tokio::test]
async fn a_table_limits_each_route_as_written() {
    let table = PolicyTable::from_toml(TABLE, None).unwrap();
    let names: Vec<_> = table.entries().iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["tickets", "login-failures", "items", "everyone"]);
    let clock = ManualClock::new();
    let app = app(&table, &clock);
    let alice: &[(&str, &[u8])] = &[("authorization", b"Bearer alice")];
    // 1 ticket per 5 minutes per bearer; none: 401; GET is not limited.
    assert_eq!(
        status(&app, Method::POST, "/tickets", alice).await,
        StatusCode::OK
    );
    assert_eq!(
        status(&app, Method::POST, "/tickets", alice).await,
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(
        status(&app, Method::POST, "/tickets", &[]).await,
        StatusCode::UNAUTHORIZED
    );
    for _ in 0..3 {
        assert_eq!(
            status(&app, Method::GET, "/tickets", &[]).await,
            StatusCode::OK
        );
    }
    // 2 failed logins (401 counts) per hour.
    for _ in 0..2 {
        assert_eq!(
            status(&app, Method::POST, "/login", &[]).await,
            StatusCode::UNAUTHORIZED
        );
    }
    assert_eq!(
        status(&app, Method::POST, "/login", &[]).await,
        StatusCode::TOO_MANY_REQUESTS
    );
    // 3 per minute per (peer, route): /items/1 and /items/2 share the route.
    for uri in ["/items/1", "/items/2", "/items/3"] {
        assert_eq!(status(&app, Method::GET, uri, &[]).await, StatusCode::OK);
    }
    assert_eq!(
        status(&app, Method::GET, "/items/4", &[]).await,
        StatusCode::TOO_MANY_REQUESTS
    );
    // The dry-run global limit never rejects; unlisted routes pass.
    for _ in 0..150 {
        assert_eq!(
            status(&app, Method::GET, "/other", &[]).await,
            StatusCode::OK
        );
    }
    clock.advance(std::time::Duration::from_secs(300));
    assert_eq!(
        status(&app, Method::POST, "/tickets", alice).await,
        StatusCode::OK
    );
}

#[test]
fn every_validation_error_names_file_line_and_entry() {
    let file = Some(Path::new("limits.toml"));
    let entry =
        |name: &str, body: &str| format!("# a comment\n[[limit]]\nname = \"{name}\"\n{body}\n");
    let base = "algorithm = \"gcra 1/1s\"\nkey = \"global\"";
    let cases: Vec<(String, &str)> = vec![
        (
            entry("a", "algorithm = \"gcra 1/1s brust 2\"\nkey = \"global\""),
            "limits.toml:4: limit \"a\": gcra has no option \"brust\"",
        ),
        (
            entry("b", "algorithm = \"gcra 0/1s\"\nkey = \"global\""),
            "limits.toml:4: limit \"b\": limit must be at least 1",
        ),
        (
            entry("c", "algorithm = \"gcra 1/1s\"\nkey = \"baerer\""),
            "limits.toml:5: limit \"c\": unknown key \"baerer\"",
        ),
        (
            entry("d", "algorithm = \"gcra 1/1s\"\nkey = \"header:bad name\""),
            "limits.toml:5: limit \"d\": bad header name \"bad name\"",
        ),
        (
            entry("e", &format!("{base}\nroutes = [\"tickets\"]")),
            "limits.toml:6: limit \"e\": bad route \"tickets\"",
        ),
        (
            entry("f", &format!("{base}\nroutes = [\"P@ST /x\"]")),
            "limits.toml:6: limit \"f\": bad method \"P@ST\"",
        ),
        (
            entry("g", &format!("{base}\ncount = [42]")),
            "limits.toml:6: limit \"g\": bad status 42",
        ),
        (
            entry("h", &format!("{base}\nmode = \"enforced\"")),
            "limits.toml:6: limit \"h\": bad mode \"enforced\"",
        ),
        (
            entry("i", &format!("{base}\nmode = \"shape\"")),
            "limits.toml:2: limit \"i\": mode \"shape\" needs a leaky-bucket",
        ),
        (
            entry("j", &format!("{base}\nheaders = \"all\"")),
            "limits.toml:6: limit \"j\": bad headers \"all\"",
        ),
        (
            entry("k", &format!("{base}\non-key-error = \"ignore\"")),
            "limits.toml:6: limit \"k\": bad on-key-error \"ignore\"",
        ),
        (
            entry("l", &format!("{base}\ncots = 2")),
            "limits.toml:6: limit \"l\": unknown field `cots`",
        ),
        (
            entry("m", &format!("{base}\ncost = -1")),
            "limits.toml:6: limit \"m\": invalid value",
        ),
        (
            entry("n", "key = \"global\""),
            "limits.toml:2: limit \"n\": missing field `algorithm`",
        ),
        (
            entry("bad name", base),
            "limits.toml:2: limit \"bad name\": a name is 1 to 64",
        ),
        (
            format!("{}{}", entry("o", base), entry("o", base)),
            "limits.toml:7: limit \"o\": the name is used twice",
        ),
        (
            "[[limits]]\nname = \"p\"\n".to_owned(),
            "limits.toml:1: unknown field `limits`",
        ),
        (
            "[[limit]]\nname = \"q\"\nalgorithm = \"gcra 1/1s\"\nkey = \"global\"\ncost = \n"
                .to_owned(),
            "limits.toml:5: limit \"q\": ",
        ),
    ];
    for (text, want) in cases {
        let err = PolicyTable::from_toml(&text, file).unwrap_err().to_string();
        assert!(err.starts_with(want), "{text}\n=> {err}\n(wanted {want})");
    }
}

#[test]
fn an_unreadable_file_is_named() {
    let err = PolicyTable::load("/nonexistent/limits.toml").unwrap_err();
    assert!(
        err.to_string()
            .starts_with("/nonexistent/limits.toml: cannot read"),
        "{err}"
    );
}
