//! A user id that authentication middleware put in the request extensions.

use super::{KeyError, KeyExtractor};
use http::request::Parts;
use http::StatusCode;
use std::fmt;
use std::marker::PhantomData;

const MISSING: KeyError =
    KeyError::missing("authenticated user").with_status(StatusCode::UNAUTHORIZED);

/// Keys by a value of type `T` found in the request extensions, such as the
/// user id your authentication layer inserted (place it outside the rate
/// limit). Absent: a missing key (401 when rejected).
///
/// The key is a clone of `T` and lives as long as its limit's state: let
/// `T` own small data (an id, a [`HeaderKey`](super::HeaderKey)), never a
/// `HeaderValue` or `Bytes` taken from the request, which would keep the
/// request's whole head alive.
///
/// ```
/// use tower_ratelimit::key::{FromExtension, KeyExtractor};
///
/// #[derive(Clone, PartialEq, Eq, Hash, Debug)]
/// struct UserId(u64);
///
/// let mut req = http::Request::new(()).into_parts().0;
/// req.extensions.insert(UserId(7));
/// assert_eq!(FromExtension::<UserId>::new().extract(&req).unwrap(), UserId(7));
/// ```
pub struct FromExtension<T> {
    _marker: PhantomData<fn() -> T>,
}

impl<T> FromExtension<T> {
    /// Reads `T` from the extensions.
    pub const fn new() -> Self {
        Self {
            _marker: PhantomData,
        }
    }
}

impl<T> Default for FromExtension<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Clone for FromExtension<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for FromExtension<T> {}

impl<T> fmt::Debug for FromExtension<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FromExtension<{}>", std::any::type_name::<T>())
    }
}

impl<T> KeyExtractor for FromExtension<T>
where
    T: Clone + Send + Sync + 'static,
{
    type Key = T;

    #[inline]
    fn extract(&self, req: &Parts) -> Result<T, KeyError> {
        req.extensions.get::<T>().cloned().ok_or(MISSING)
    }
}
