//! `envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit`: Envoy's rate limit protocol.

use crate::check::{check_all, Hit, Outcome, Status};
use crate::headers::{fields, refusal_wait};
use crate::rls_server::RlsServer;
use crate::state::State;
use crate::unit::{rls_rate, RlsUnit};
use envoy_types::pb::envoy::config::core::v3::HeaderValue;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{
    rate_limit::Unit, Code, DescriptorStatus, RateLimit,
};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::RateLimitService;
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use envoy_types::pb::google::protobuf::Duration as PbDuration;
use std::sync::Arc;
use std::time::Duration;

/// The RLS service over the server's state.
///
/// ```
/// use ratelimit_server::{grpc::Rls, Config, State};
/// use std::sync::Arc;
///
/// let state = Arc::new(State::new(&Config::parse("", "inline", |_| None).unwrap()).unwrap());
/// let _service = Rls::new(state).into_server();
/// ```
#[derive(Debug, Clone)]
pub struct Rls {
    state: Arc<State>,
}

impl Rls {
    /// The service over `state`.
    pub fn new(state: Arc<State>) -> Self {
        Self { state }
    }

    /// The tonic service to serve.
    pub fn into_server(self) -> RlsServer {
        RlsServer::new(self)
    }
}

#[tonic::async_trait]
impl RateLimitService for Rls {
    async fn should_rate_limit(
        &self,
        request: tonic::Request<RateLimitRequest>,
    ) -> Result<tonic::Response<RateLimitResponse>, tonic::Status> {
        let request = request.into_inner();
        let started = std::time::Instant::now();
        let hits = hits_of(&self.state, &request)?;
        let outcome = check_all(&hits, self.state.now())
            .await
            .map_err(|e| tonic::Status::unavailable(format!("the store failed: {e}")))?;
        crate::metrics::check_took("grpc", started.elapsed());
        Ok(tonic::Response::new(response(
            &outcome,
            self.state.settings().headers,
        )))
    }
}

/// The request's descriptors as hits, or why the request is refused.
fn hits_of(state: &State, request: &RateLimitRequest) -> Result<Vec<Hit>, tonic::Status> {
    let bad = |m: String| Err(tonic::Status::invalid_argument(m));
    if request.domain.is_empty() {
        return bad("domain is empty".into());
    }
    let sizes = request.descriptors.iter().map(|d| d.entries.len());
    if let Some(why) = crate::request_bounds::refused(sizes) {
        return bad(why);
    }
    // Proto3 cannot tell 0 from unset: both mean 1, as in the protocol.
    let default_cost = u64::from(request.hits_addend.max(1));
    let limits = state.limits();
    let plan = state.request_plan(|| {
        let entries = request.descriptors.iter().flat_map(|d| &d.entries);
        entries.map(|e| (e.key.as_str(), e.value.as_str()))
    });
    let mut hits = Vec::with_capacity(request.descriptors.len());
    for (i, d) in request.descriptors.iter().enumerate() {
        check_descriptor(i, d)?;
        let entries: Vec<(&str, &str)> = d
            .entries
            .iter()
            .map(|e| (e.key.as_str(), e.value.as_str()))
            .collect();
        let cost = d.hits_addend.as_ref().map_or(default_cost, |h| h.value);
        let hit = Hit::resolve(&limits, &request.domain, &entries, cost, plan)
            .map_err(|e| tonic::Status::invalid_argument(format!("descriptors[{i}]: {e}")))?;
        hits.push(hit);
    }
    Ok(hits)
}

/// Refuses what this server cannot honour, naming the field.
fn check_descriptor(i: usize, d: &RateLimitDescriptor) -> Result<(), tonic::Status> {
    let bad = |m: String| {
        Err(tonic::Status::invalid_argument(format!(
            "descriptors[{i}]: {m}"
        )))
    };
    if d.limit.is_some() {
        return bad(
            "a limit override (limit) is not supported: limits come from the configuration".into(),
        );
    }
    if d.is_negative_hits {
        return bad("is_negative_hits is not supported".into());
    }
    Ok(())
}

fn pb_duration(d: Duration) -> PbDuration {
    PbDuration {
        seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        nanos: i32::try_from(d.subsec_nanos()).unwrap_or(0),
    }
}

fn unit_code(unit: RlsUnit) -> Unit {
    match unit {
        RlsUnit::Second => Unit::Second,
        RlsUnit::Minute => Unit::Minute,
        RlsUnit::Hour => Unit::Hour,
        RlsUnit::Day => Unit::Day,
        RlsUnit::Week => Unit::Week,
        RlsUnit::Month => Unit::Month,
        RlsUnit::Year => Unit::Year,
    }
}

fn descriptor_status(status: &Status) -> DescriptorStatus {
    let code = if status.over {
        Code::OverLimit
    } else {
        Code::Ok
    };
    let mut out = DescriptorStatus {
        code: code as i32,
        ..DescriptorStatus::default()
    };
    let Some(rule) = &status.rule else {
        return out;
    };
    let (Some(algorithm), Some(d)) = (&rule.config.algorithm, status.decision) else {
        // Unlimited, as envoyproxy/ratelimit answers it.
        out.limit_remaining = u32::MAX;
        return out;
    };
    let (requests_per_unit, unit) = rls_rate(algorithm);
    out.current_limit = Some(RateLimit {
        name: rule.config.name.clone(),
        requests_per_unit,
        unit: unit_code(unit) as i32,
    });
    out.limit_remaining = u32::try_from(d.remaining).unwrap_or(u32::MAX);
    let until = if status.over {
        refusal_wait(&d)
    } else {
        d.reset
    };
    out.duration_until_reset = Some(pb_duration(until));
    out
}

/// The response of `outcome`, with the header fields when `headers`.
fn response(outcome: &Outcome, headers: bool) -> RateLimitResponse {
    let code = if outcome.over {
        Code::OverLimit
    } else {
        Code::Ok
    };
    let response_headers_to_add = if headers {
        fields(outcome)
            .into_iter()
            .map(|(key, value)| HeaderValue {
                key: key.to_owned(),
                value,
                raw_value: Vec::new(),
            })
            .collect()
    } else {
        Vec::new()
    };
    RateLimitResponse {
        overall_code: code as i32,
        statuses: outcome.statuses.iter().map(descriptor_status).collect(),
        response_headers_to_add,
        ..RateLimitResponse::default()
    }
}
