//! `ShouldRateLimit`'s wire format: prost's, except that a request that cannot be decoded is `INVALID_ARGUMENT` naming what is wrong (an entry that is not UTF-8 by its key), not `INTERNAL`.

use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use prost::bytes::Buf;
use prost::Message;
use tonic::codec::{Codec, DecodeBuf, Decoder};
use tonic_prost::ProstEncoder;

/// Encodes answers as prost does; decodes requests with [`RlsDecoder`].
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct RlsCodec;

impl Codec for RlsCodec {
    type Encode = RateLimitResponse;
    type Decode = RateLimitRequest;
    type Encoder = ProstEncoder<RateLimitResponse>;
    type Decoder = RlsDecoder;

    fn encoder(&mut self) -> Self::Encoder {
        ProstEncoder::default()
    }

    fn decoder(&mut self) -> Self::Decoder {
        RlsDecoder
    }
}

/// Decodes a `RateLimitRequest`; a message that is not one is refused
/// with `INVALID_ARGUMENT`, naming the field.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct RlsDecoder;

impl Decoder for RlsDecoder {
    type Item = RateLimitRequest;
    type Error = tonic::Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<Self::Item>, Self::Error> {
        let bytes = buf.copy_to_bytes(buf.remaining());
        match RateLimitRequest::decode(bytes.clone()) {
            Ok(request) => Ok(Some(request)),
            Err(e) => Err(tonic::Status::invalid_argument(undecodable(&bytes, &e))),
        }
    }
}

/// The request's fields with text as bytes: enough to find which one is
/// not UTF-8.
#[derive(Clone, PartialEq, Message)]
struct RawRequest {
    #[prost(bytes = "vec", tag = "1")]
    domain: Vec<u8>,
    #[prost(message, repeated, tag = "2")]
    descriptors: Vec<RawDescriptor>,
}

#[derive(Clone, PartialEq, Message)]
struct RawDescriptor {
    #[prost(message, repeated, tag = "1")]
    entries: Vec<RawEntry>,
}

#[derive(Clone, PartialEq, Message)]
struct RawEntry {
    #[prost(bytes = "vec", tag = "1")]
    key: Vec<u8>,
    #[prost(bytes = "vec", tag = "2")]
    value: Vec<u8>,
}

/// Why `bytes` is not a `RateLimitRequest` (`error`, prost's): the first
/// text that is not UTF-8, named by its place and, for a value, its
/// entry's key; else prost's error.
pub(crate) fn undecodable(bytes: &[u8], error: &prost::DecodeError) -> String {
    let Ok(raw) = RawRequest::decode(bytes) else {
        return format!("not a RateLimitRequest: {error}");
    };
    if std::str::from_utf8(&raw.domain).is_err() {
        return "domain is not UTF-8".into();
    }
    for (i, d) in raw.descriptors.iter().enumerate() {
        for (j, e) in d.entries.iter().enumerate() {
            let Ok(key) = std::str::from_utf8(&e.key) else {
                return format!("descriptors[{i}].entries[{j}]: the key is not UTF-8");
            };
            if std::str::from_utf8(&e.value).is_err() {
                return format!("descriptors[{i}]: entry {key:?}: the value is not UTF-8");
            }
        }
    }
    format!("not a RateLimitRequest: {error}")
}
