//! The client's IP address behind trusted proxies (`X-Forwarded-For`, `Forwarded`, `X-Real-IP`...).

use super::forwarded::{forwarded_for, parse_node, RSplit};
use super::header::trim;
use super::ip::{normalize, IpKey, IpPrefixes};
use super::peer_ip::{peer_addr, NO_PEER};
use super::proxy_header::{ProxyHeader, X_FORWARDED_FOR};
use super::proxy_watch::{is_private, ProxyWatch, Untrusted};
use super::{KeyError, KeyExtractor};
use crate::LayerBuildError;
use http::header::{HeaderName, HeaderValue, FORWARDED};
use http::request::Parts;
use ipnet::IpNet;
use std::net::IpAddr;
use std::sync::Arc;

const BAD_XFF: KeyError = KeyError::malformed("X-Forwarded-For header");
const BAD_FORWARDED: KeyError = KeyError::malformed("Forwarded header");
const BAD_SINGLE: KeyError = KeyError::malformed("client address header");

/// Keys by the client's IP address as reported by trusted proxies.
///
/// ```
/// use tower_ratelimit::key::{ClientIp, IpPrefixes, KeyExtractor, PeerAddr};
///
/// let per_host = ClientIp::new(["10.0.0.0/8"]).unwrap(); // v4/32, v6/64
/// let per_site = per_host.clone().prefixes(IpPrefixes::SITE); // v4/24, v6/48
/// let mut req = http::Request::builder()
///     .header("x-forwarded-for", "2001:db8:7:1::9")
///     .body(())
///     .unwrap()
///     .into_parts()
///     .0;
/// req.extensions.insert(PeerAddr("10.0.0.1:5000".parse().unwrap()));
/// assert_eq!(per_host.extract(&req).unwrap().to_string(), "2001:db8:7:1::/64");
/// assert_eq!(per_site.extract(&req).unwrap().to_string(), "2001:db8:7::/48");
/// ```
///
/// - A request whose peer is not a trusted proxy is keyed by the peer's
///   address: its forwarding headers are ignored, so clients cannot forge
///   them.
/// - Otherwise the configured header ([`ProxyHeader`]) is read **from the
///   right**, skipping addresses of trusted proxies; the first untrusted
///   address is the client. Entries left of it were written by the client
///   and are never read, so a forged leftmost entry changes nothing.
/// - When every hop is trusted, the leftmost address is used; with no
///   address at all (no header, or only empty list elements, which are
///   skipped as HTTP lists require), the peer's.
/// - A hop that does not name the client (RFC 7239's `unknown`, an
///   obfuscated identifier like `_hidden`, a `Forwarded` element without
///   `for=`) ends the walk: the request is keyed by the last address
///   known, that of the trusted proxy that wrote the hop (or the peer).
///   Every client such a proxy hides shares its key, which errs on the
///   side of limiting.
/// - A malformed entry reached in that walk (non-ASCII bytes, garbage,
///   a port-only value) is a [`KeyError`] (400); several header lines
///   are read as one list. The walk works on bytes, as nginx's realip
///   does: what the client wrote left of its own address (non-ASCII
///   bytes, a stray quote) is never read and cannot fail the request.
/// - A single-value header ([`ProxyHeader::Single`], like `X-Real-IP`) is
///   the client's address as the trusted proxy saw it; see its variant.
///
/// Addresses are keyed like [`PeerIp`](super::PeerIp): IPv6 by /64,
/// IPv4-mapped addresses as IPv4, unless [`prefixes`](Self::prefixes)
/// says otherwise. To limit a client's /64 and its /48 at once, give each
/// limit its own extractor:
///
/// ```
/// use tower_ratelimit::key::{ClientIp, KeyExtractor, PeerAddr};
///
/// let client_ip = ClientIp::new(["10.0.0.0/8"]).unwrap();
/// let mut req = http::Request::builder()
///     .header("x-forwarded-for", "6.6.6.6, 203.0.113.9, 10.0.0.2")
///     .body(())
///     .unwrap()
///     .into_parts()
///     .0;
/// req.extensions.insert(PeerAddr("10.0.0.1:5000".parse().unwrap()));
/// assert_eq!(client_ip.extract(&req).unwrap().to_string(), "203.0.113.9");
/// ```
#[derive(Debug, Clone)]
pub struct ClientIp {
    trusted: Arc<[IpNet]>,
    prefixes: IpPrefixes,
    header: ProxyHeader,
    /// Warnings for settings that look wrong, from the first requests.
    watch: Arc<ProxyWatch>,
}

impl Default for ClientIp {
    /// Trusts nobody: the key is the peer's address.
    fn default() -> Self {
        Self {
            trusted: Arc::new([]),
            prefixes: IpPrefixes::DEFAULT,
            header: ProxyHeader::XForwardedFor,
            watch: Arc::default(),
        }
    }
}

impl std::str::FromStr for ClientIp {
    type Err = LayerBuildError;

    /// Trusts the comma-separated CIDRs of `list` (as in a
    /// `TRUSTED_PROXIES` variable); blank entries are skipped, so `""`
    /// trusts nobody.
    fn from_str(list: &str) -> Result<Self, LayerBuildError> {
        Self::new(list.split(',').map(str::trim).filter(|s| !s.is_empty()))
    }
}

impl ClientIp {
    /// Trusts the proxies in `cidrs` (`"10.0.0.0/8"`, `"2001:db8::/32"`, or
    /// a bare address). Fails on the first one that does not parse. A
    /// comma-separated list (as in a `TRUSTED_PROXIES` variable) parses
    /// with [`str::parse`]; [`ClientIp::default`] trusts nobody.
    pub fn new<I>(cidrs: I) -> Result<Self, LayerBuildError>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        let trusted = cidrs
            .into_iter()
            .map(|c| parse_cidr(c.as_ref()).map(|n| n.trunc()))
            .collect::<Result<_, _>>()?;
        Ok(Self {
            trusted,
            ..Self::default()
        })
    }

    /// Reads this header instead of `X-Forwarded-For`. Pick the one your
    /// proxies write: the other is client-controlled.
    pub fn header(mut self, header: ProxyHeader) -> Self {
        self.header = header;
        self
    }

    /// How much of an address forms the key ([`IpPrefixes::DEFAULT`]
    /// unless set): give a second limit [`IpPrefixes::SITE`] to hold a
    /// client's whole network too.
    pub fn prefixes(mut self, prefixes: IpPrefixes) -> Self {
        self.prefixes = prefixes;
        self
    }

    /// Keys IPv4 addresses by a prefix of `prefix` bits (1..=32).
    pub fn ipv4_prefix(self, prefix: u8) -> Result<Self, LayerBuildError> {
        let prefixes = IpPrefixes::new(prefix, self.prefixes.v6())?;
        Ok(self.prefixes(prefixes))
    }

    /// Keys IPv6 addresses by a prefix of `prefix` bits (1..=128).
    pub fn ipv6_prefix(self, prefix: u8) -> Result<Self, LayerBuildError> {
        let prefixes = IpPrefixes::new(self.prefixes.v4(), prefix)?;
        Ok(self.prefixes(prefixes))
    }

    /// How much of an address forms the key.
    pub fn key_prefixes(&self) -> IpPrefixes {
        self.prefixes
    }

    /// The trusted networks.
    pub fn trusted(&self) -> &[IpNet] {
        &self.trusted
    }

    /// The header read from trusted proxies.
    pub fn proxy_header(&self) -> &ProxyHeader {
        &self.header
    }

    /// Whether `ip` is a trusted proxy.
    pub fn is_trusted(&self, ip: IpAddr) -> bool {
        let ip = normalize(ip);
        self.trusted.iter().any(|n| n.contains(&ip))
    }

    /// The trusted networks that hold public addresses (not loopback,
    /// private, link-local or shared ones): a client there can write the
    /// forwarding header. Right for a CDN's or a load balancer's published
    /// ranges; anything wider (`0.0.0.0/0`) lets every client choose its
    /// own key. Apps log these at startup.
    pub fn public_trusted(&self) -> Vec<IpNet> {
        self.trusted
            .iter()
            .filter(|net| !(is_private(net.network()) && is_private(net.broadcast())))
            .copied()
            .collect()
    }

    /// The client's address (not reduced to a prefix), for handlers and
    /// logs.
    ///
    /// The first requests from peers that are not trusted proxies are
    /// watched for settings that look wrong, each warned of once (a
    /// forwarding header with no proxy trusted, or from a peer missing
    /// from the list; every request from one private address with no
    /// proxy trusted).
    pub fn client_addr(&self, req: &Parts) -> Result<IpAddr, KeyError> {
        let peer = normalize(peer_addr(req).ok_or(NO_PEER)?);
        if !self.is_trusted(peer) {
            if !self.watch.is_done() {
                self.watch.untrusted(Untrusted {
                    peer,
                    header_present: self.header.is_in(req),
                    header: self.header.name(),
                    none_trusted: self.trusted.is_empty(),
                });
            }
            return Ok(peer);
        }
        match &self.header {
            ProxyHeader::XForwardedFor => self.walk_xff(req, peer),
            ProxyHeader::Forwarded => self.walk_forwarded(req, peer),
            ProxyHeader::Either if req.headers.contains_key(X_FORWARDED_FOR) => {
                self.walk_xff(req, peer)
            }
            ProxyHeader::Either => self.walk_forwarded(req, peer),
            ProxyHeader::Single(name) => self.single(req, name, peer),
        }
    }

    /// Each of `values`, last line first, split at commas (outside quoted
    /// strings when `quotes`) from the right; the first untrusted address
    /// is the client.
    fn walk<'r>(
        &self,
        values: impl DoubleEndedIterator<Item = &'r HeaderValue>,
        peer: IpAddr,
        bad: KeyError,
        node: fn(&[u8]) -> Option<Option<IpAddr>>,
        quotes: bool,
    ) -> Result<IpAddr, KeyError> {
        let mut client = peer;
        for value in values.rev() {
            for entry in RSplit::new(value.as_bytes(), quotes) {
                let entry = trim(entry.ok_or(bad)?);
                if entry.is_empty() {
                    continue; // An empty list element (RFC 9110, 5.6.1).
                }
                let Some(ip) = node(entry).ok_or(bad)? else {
                    return Ok(client); // A hidden hop: its proxy's address.
                };
                client = normalize(ip);
                if !self.is_trusted(client) {
                    return Ok(client);
                }
            }
        }
        Ok(client)
    }

    fn walk_xff(&self, req: &Parts, peer: IpAddr) -> Result<IpAddr, KeyError> {
        let values = req.headers.get_all(X_FORWARDED_FOR).into_iter();
        self.walk(values, peer, BAD_XFF, parse_node, false)
    }

    fn walk_forwarded(&self, req: &Parts, peer: IpAddr) -> Result<IpAddr, KeyError> {
        let values = req.headers.get_all(FORWARDED).into_iter();
        let node = |element: &[u8]| forwarded_for(element)?.map_or(Some(None), parse_node);
        self.walk(values, peer, BAD_FORWARDED, node, true)
    }

    fn single(&self, req: &Parts, name: &HeaderName, peer: IpAddr) -> Result<IpAddr, KeyError> {
        let Some(value) = req.headers.get_all(name).iter().next_back() else {
            return Ok(peer);
        };
        let value = trim(value.as_bytes());
        if value.is_empty() {
            return Ok(peer);
        }
        match parse_node(value).ok_or(BAD_SINGLE)? {
            Some(ip) => Ok(normalize(ip)),
            None => Ok(peer),
        }
    }
}

impl KeyExtractor for ClientIp {
    type Key = IpKey;

    #[inline]
    fn extract(&self, req: &Parts) -> Result<IpKey, KeyError> {
        self.client_addr(req).map(|ip| self.prefixes.key(ip))
    }
}

fn parse_cidr(s: &str) -> Result<IpNet, LayerBuildError> {
    let s = s.trim();
    if let Ok(net) = s.parse::<IpNet>() {
        return Ok(net);
    }
    s.parse::<IpAddr>()
        .map(IpNet::from)
        .map_err(|_| LayerBuildError::BadCidr(s.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::PeerAddr;

    fn req(peer: &str, headers: &[(&str, &[u8])]) -> Parts {
        let mut b = http::Request::builder();
        for (n, v) in headers {
            b = b.header(*n, http::HeaderValue::from_bytes(v).unwrap());
        }
        let mut p = b.body(()).unwrap().into_parts().0;
        p.extensions.insert(PeerAddr(peer.parse().unwrap()));
        p
    }

    fn ip(c: &ClientIp, r: &Parts) -> Result<String, KeyError> {
        c.extract(r).map(|k| k.to_string())
    }

    /// Each `(value of header, expected key)`, from the proxy 10.0.0.1.
    fn keyed(c: &ClientIp, header: &str, cases: &[(&[u8], &str)]) {
        for &(value, client) in cases {
            let r = req("10.0.0.1:1", &[(header, value)]);
            assert_eq!(ip(c, &r).unwrap(), client, "{value:?}");
        }
    }

    #[test]
    fn untrusted_peer_headers_ignored() {
        let c = ClientIp::new(["10.0.0.0/8"]).unwrap();
        let r = req("198.51.100.7:1", &[("x-forwarded-for", b"1.1.1.1")]);
        assert_eq!(ip(&c, &r).unwrap(), "198.51.100.7");
        let r = req("198.51.100.7:1", &[("x-forwarded-for", b"\xff garbage")]);
        assert_eq!(ip(&c, &r).unwrap(), "198.51.100.7");
    }

    #[test]
    fn xff_read_from_the_right() {
        let c = ClientIp::new(["10.0.0.0/8", "192.168.0.1"]).unwrap();
        let r = req(
            "10.0.0.1:1",
            &[("x-forwarded-for", b"9.9.9.9, 203.0.113.5, 192.168.0.1")],
        );
        assert_eq!(ip(&c, &r).unwrap(), "203.0.113.5");
        // Several lines form one list.
        let r = req(
            "10.0.0.1:1",
            &[
                ("x-forwarded-for", b"9.9.9.9"),
                ("x-forwarded-for", b"10.1.1.1"),
            ],
        );
        assert_eq!(ip(&c, &r).unwrap(), "9.9.9.9");
        // All trusted: the leftmost.
        let r = req("10.0.0.1:1", &[("x-forwarded-for", b"10.2.2.2, 10.1.1.1")]);
        assert_eq!(ip(&c, &r).unwrap(), "10.2.2.2");
        // No header: the proxy itself.
        let r = req("10.0.0.1:1", &[]);
        assert_eq!(ip(&c, &r).unwrap(), "10.0.0.1");
        // Ports, brackets and mapped addresses.
        let r = req("10.0.0.1:1", &[("x-forwarded-for", b"[2001:db8::1]:80")]);
        assert_eq!(ip(&c, &r).unwrap(), "2001:db8::/64");
        let r = req(
            "[::ffff:10.0.0.1]:1",
            &[("x-forwarded-for", b"::ffff:8.8.8.8")],
        );
        assert_eq!(ip(&c, &r).unwrap(), "8.8.8.8");
        // The proxy's own address, as handlers see it, is normalised too.
        let r = req("[::ffff:10.0.0.1]:1", &[("x-forwarded-for", b"unknown")]);
        assert_eq!(c.client_addr(&r).unwrap().to_string(), "10.0.0.1");
    }

    #[test]
    fn malformed_xff_is_a_4xx() {
        let c = ClientIp::new(["10.0.0.0/8"]).unwrap();
        for bad in [
            &b"garbage"[..],
            b"\xff\xfe",
            b"1.2.3.4.5",
            b":80",
            b"1.2.3.4:",
            b"1.2.3.4:123456",
            b"[::1]x",
            b"_",
            b"unknown2",
        ] {
            let r = req("10.0.0.1:1", &[("x-forwarded-for", bad)]);
            let e = c.extract(&r).unwrap_err();
            assert_eq!(e.status(), 400, "{bad:?}");
        }
        // Empty list elements are skipped; none at all is no header.
        // `unknown` (as some proxies write it) hides the client: keyed by
        // the proxy that wrote it.
        keyed(
            &c,
            "x-forwarded-for",
            &[
                (b"1.1.1.1,,, ", "1.1.1.1"),
                (b" ,1.1.1.1 , ,10.0.0.7", "1.1.1.1"),
                (b"", "10.0.0.1"),
                (b" , ", "10.0.0.1"),
                (b"unknown", "10.0.0.1"),
                (b"1.1.1.1, unknown, 10.0.0.9", "10.0.0.9"),
                (b"unknown, 1.1.1.1:443", "1.1.1.1"),
            ],
        );
        // Garbage left of the client is never read.
        let r = req("10.0.0.1:1", &[("x-forwarded-for", b"garbage, 5.5.5.5")]);
        assert_eq!(ip(&c, &r).unwrap(), "5.5.5.5");
    }

    #[test]
    fn forwarded_header() {
        let c = ClientIp::new(["10.0.0.0/8"])
            .unwrap()
            .header(ProxyHeader::Forwarded);
        let r = req(
            "10.0.0.1:1",
            &[(
                "forwarded",
                b"for=6.6.6.6, for=\"[2001:db8:cafe::17]:4711\";proto=https, For=10.0.0.3;by=10.0.0.1",
            )],
        );
        assert_eq!(ip(&c, &r).unwrap(), "2001:db8:cafe::/64");
        let r = req("10.0.0.1:1", &[("forwarded", b"for=1.2.3.4, , ,")]);
        assert_eq!(ip(&c, &r).unwrap(), "1.2.3.4");
        for bad in [
            &b"for=\"[::1]"[..],
            b"for",
            b"for=\"a\\\"b\"",
            b"for=\"\"",
            b"for=_",
            b"for=1.2.3.4:x",
        ] {
            let r = req("10.0.0.1:1", &[("forwarded", bad)]);
            assert!(c.extract(&r).is_err(), "{bad:?}");
        }
        // A hop that hides the client: keyed by the proxy that wrote it.
        keyed(
            &c,
            "forwarded",
            &[
                (b"for=unknown", "10.0.0.1"),
                (b"for=1.1.1.1, for=_hidden, for=10.0.0.3", "10.0.0.3"),
                (b"for=\"_Obf.1-x:_p0rt\", for=10.0.0.4", "10.0.0.4"),
                (b"for=1.1.1.1, proto=https;by=10.0.0.1", "10.0.0.1"),
                (b"for=\"UNKNOWN:8080\"", "10.0.0.1"),
                (b"for=_hidden, for=\"[2001:db8::1]:_p\"", "2001:db8::/64"),
            ],
        );
        // X-Forwarded-For is ignored when Forwarded is configured.
        let r = req("10.0.0.1:1", &[("x-forwarded-for", b"1.2.3.4")]);
        assert_eq!(ip(&c, &r).unwrap(), "10.0.0.1");
    }

    #[test]
    fn either_header() {
        let c = ClientIp::new(["10.0.0.0/8"])
            .unwrap()
            .header(ProxyHeader::Either);
        let r = req("10.0.0.1:1", &[("forwarded", b"for=7.7.7.7")]);
        assert_eq!(ip(&c, &r).unwrap(), "7.7.7.7");
        let r = req(
            "10.0.0.1:1",
            &[
                ("forwarded", b"for=7.7.7.7"),
                ("x-forwarded-for", b"8.8.8.8"),
            ],
        );
        assert_eq!(ip(&c, &r).unwrap(), "8.8.8.8");
    }

    #[test]
    fn client_written_bytes_are_never_read() {
        let c = ClientIp::new(["10.0.0.0/8"]).unwrap();
        // Non-ASCII bytes, garbage and a stray quote left of the client.
        keyed(
            &c,
            "x-forwarded-for",
            &[
                (
                    b"caf\xc3\xa9, \xff\xfe, 203.0.113.9, 10.0.0.2",
                    "203.0.113.9",
                ),
                (b"\x80\x81,203.0.113.9", "203.0.113.9"),
            ],
        );
        let r = req(
            "10.0.0.1:1",
            &[
                ("x-forwarded-for", b"\xff garbage"),
                ("x-forwarded-for", b"198.51.100.4"),
            ],
        );
        assert_eq!(ip(&c, &r).unwrap(), "198.51.100.4");
        let f = c.clone().header(ProxyHeader::Forwarded);
        keyed(
            &f,
            "forwarded",
            &[
                (b"for=\"\xff, for=\"_x, for=198.51.100.4", "198.51.100.4"),
                (
                    b"for=\xc3\xa9;by=\", for=\"[2001:db8::1]:80\"",
                    "2001:db8::/64",
                ),
                (
                    b"for=\"a\\\"b, c\", for=10.0.0.2, for=198.51.100.4",
                    "198.51.100.4",
                ),
            ],
        );
        // Quoted commas and escaped quotes in reached elements, from the right.
        keyed(
            &f,
            "forwarded",
            &[
                (br#"for=10.0.0.2;by="a\"b, c", for=10.0.0.3"#, "10.0.0.2"),
                (
                    br#"for=1.1.1.1, for=10.0.0.2;by="\\", for=10.0.0.3"#,
                    "1.1.1.1",
                ),
            ],
        );
        // Reached, the same bytes are an error.
        for (h, v) in [
            ("x-forwarded-for", &b"\xff, 10.0.0.2"[..]),
            ("forwarded", b"for=\"\xff\", for=10.0.0.2"),
        ] {
            let r = req("10.0.0.1:1", &[(h, v)]);
            let c = if h == "forwarded" { &f } else { &c };
            assert_eq!(c.extract(&r).unwrap_err().status(), 400, "{v:?}");
        }
    }

    #[test]
    fn single_value_headers() {
        for header in [
            ProxyHeader::X_REAL_IP,
            ProxyHeader::CF_CONNECTING_IP,
            ProxyHeader::TRUE_CLIENT_IP,
            ProxyHeader::FLY_CLIENT_IP,
            "X-Client".parse().unwrap(),
        ] {
            let ProxyHeader::Single(name) = header.clone() else {
                panic!("{header:?}");
            };
            let c = ClientIp::new(["10.0.0.0/8"]).unwrap().header(header);
            keyed(
                &c,
                name.as_str(),
                &[
                    (b"203.0.113.9", "203.0.113.9"),
                    (b" 203.0.113.9:443\t", "203.0.113.9"),
                    (b"2001:db8::1", "2001:db8::/64"),
                    (b"[2001:db8::1]:80", "2001:db8::/64"),
                    (b"::ffff:8.8.8.8", "8.8.8.8"),
                    // The proxy is trusted, its value too.
                    (b"10.0.0.7", "10.0.0.7"),
                    (b"", "10.0.0.1"),
                    (b"unknown", "10.0.0.1"),
                ],
            );
            // Absent: the proxy. Repeated: the last line.
            assert_eq!(ip(&c, &req("10.0.0.1:1", &[])).unwrap(), "10.0.0.1");
            let r = req(
                "10.0.0.1:1",
                &[(name.as_str(), b"6.6.6.6"), (name.as_str(), b"203.0.113.9")],
            );
            assert_eq!(ip(&c, &r).unwrap(), "203.0.113.9");
            // Garbage from the trusted proxy: 400.
            for bad in [&b"1.1.1.1, 2.2.2.2"[..], b"garbage", b"\xff", b"1.2.3.4:x"] {
                let r = req("10.0.0.1:1", &[(name.as_str(), bad)]);
                assert_eq!(c.extract(&r).unwrap_err().status(), 400, "{bad:?}");
            }
            // A forged X-Forwarded-For or Forwarded is ignored.
            let r = req(
                "10.0.0.1:1",
                &[
                    ("x-forwarded-for", b"6.6.6.6"),
                    ("forwarded", b"for=6.6.6.6"),
                    (name.as_str(), b"203.0.113.9"),
                ],
            );
            assert_eq!(ip(&c, &r).unwrap(), "203.0.113.9");
            let r = req("10.0.0.1:1", &[("x-forwarded-for", b"6.6.6.6")]);
            assert_eq!(ip(&c, &r).unwrap(), "10.0.0.1");
            // From an untrusted peer, the header itself is ignored.
            let r = req("198.51.100.7:1", &[(name.as_str(), b"6.6.6.6")]);
            assert_eq!(ip(&c, &r).unwrap(), "198.51.100.7");
        }
    }

    #[test]
    fn proxy_header_from_str() {
        for (text, header) in [
            ("x-forwarded-for", ProxyHeader::XForwardedFor),
            (" X-Forwarded-For ", ProxyHeader::XForwardedFor),
            ("FORWARDED", ProxyHeader::Forwarded),
            ("Either", ProxyHeader::Either),
            ("x-real-ip", ProxyHeader::X_REAL_IP),
            ("CF-Connecting-IP", ProxyHeader::CF_CONNECTING_IP),
            ("True-Client-IP", ProxyHeader::TRUE_CLIENT_IP),
            ("fly-client-ip", ProxyHeader::FLY_CLIENT_IP),
        ] {
            assert_eq!(text.parse::<ProxyHeader>(), Ok(header), "{text}");
        }
        for bad in ["", "x real ip", "x-real-ip:", "caf\u{e9}"] {
            assert_eq!(
                bad.parse::<ProxyHeader>(),
                Err(LayerBuildError::BadProxyHeader(bad.to_owned()))
            );
        }
        let e = "x y".parse::<ProxyHeader>().unwrap_err().to_string();
        assert!(e.contains("\"x y\""), "{e}");
    }

    #[test]
    fn bad_cidrs_are_errors() {
        assert!(ClientIp::new(["10.0.0.0/33"]).is_err());
        assert!(ClientIp::new(["nope"]).is_err());
        assert!("10.0.0.0/8, ,::1".parse::<ClientIp>().is_ok());
        assert_eq!("".parse::<ClientIp>().unwrap().trusted().len(), 0);
        assert_eq!(ClientIp::default().trusted().len(), 0);
        assert!("10.0.0.0/8,x".parse::<ClientIp>().is_err());
    }
}
