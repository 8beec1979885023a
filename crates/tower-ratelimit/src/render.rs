//! The response to a refused request: the rejection's response, with the `Limited` marker and the rate-limit fields.

use crate::decide::Refusal;
use crate::info::{Limited, RateLimitInfo};
use crate::key::KeyExtractor;
use crate::response::{Rejection, ResponseBuilder};
use crate::shared::Shared;
use http::request::Parts;
use http::Response;
use ratelimit_core::Decision;

/// The response to `refusal`, for the request whose limits in `checked`
/// (limit index, decision) decided it.
#[inline]
pub(crate) fn render<X, St, R, B>(
    shared: &Shared<X, St, R>,
    parts: &Parts,
    checked: &[(usize, Decision)],
    refusal: &Refusal,
) -> Response<B>
where
    X: KeyExtractor,
    R: ResponseBuilder<B>,
{
    let info = match refusal {
        Refusal::Limited(info) => info,
        Refusal::Unavailable(e) => return shared.response.build(Rejection::Unavailable(e)),
    };
    let mut res = shared.response.build(Rejection::Limited(info));
    if parts.extensions.get::<RateLimitInfo>().is_some() {
        // An outer rate-limit layer ran: tell it (only then, as the marker
        // costs an allocation).
        res.extensions_mut().insert(Limited);
    }
    shared.fields.write(res.headers_mut(), checked, info.denied);
    res
}
