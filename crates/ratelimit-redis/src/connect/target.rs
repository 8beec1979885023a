//! Where a store connects: one server (plain or TLS), a Sentinel's master
//! or a Cluster, parsed from one URL form in one place.

#[cfg(feature = "cluster")]
use crate::connect::cluster_target::ClusterTarget;
use crate::connect::conn::Backend;
use crate::RedisBuildError;
use std::fmt;
use std::path::Path;

/// Where a store connects. Build it with [`Target::parse`] (which takes a
/// private CA for TLS), or give the builder a URL (`Target::Url`, parsed
/// the same way, with the system's web roots for TLS), a client or a
/// Cluster client.
///
/// The URL forms:
///
/// | form | topology | feature |
/// |---|---|---|
/// | `redis://[user:password@]host:port/db` | one server (or a proxy) | |
/// | `rediss://[user:password@]host:port/db` | one server over TLS | `tls` |
/// | `redis+sentinel://[user:password@]host:port[,host:port...]/service[/db]` | the master the Sentinels name for `service`: asked at every connect, and every second (a change reconnects); the user and password are the master's | `sentinel` |
/// | `redis://host:port/,redis://host:port/,...` (two or more, commas; or `rediss://`) | a Redis Cluster: each check goes to the node owning its key's slot | `cluster` |
///
/// A password in a URL is never shown: `Debug`, `Display` and every
/// error print `***` in its place.
#[derive(Clone)]
#[non_exhaustive]
pub enum Target {
    /// A connection URL in one of the forms above, parsed when the store
    /// is built (TLS then trusts the web roots only: for a private CA, use
    /// [`Target::parse`]).
    Url(String),
    /// A configured client (boxed: with TLS it is large).
    Client(Box<redis::Client>),
    /// A Redis Cluster (feature `cluster`). Every check touches one key,
    /// whose hash tag is the caller's key, so it goes to one node.
    #[cfg(feature = "cluster")]
    Cluster(Box<ClusterTarget>),
    /// The master of a Sentinel-monitored service (feature `sentinel`).
    #[cfg(feature = "sentinel")]
    Sentinel(Box<SentinelTarget>),
}

/// A Sentinel-monitored service: the Sentinels to ask, the service's
/// name, and how to log in to its master (from a `redis+sentinel://` URL).
#[cfg(feature = "sentinel")]
#[derive(Clone)]
pub struct SentinelTarget {
    sentinels: Vec<(String, u16)>,
    service: String,
    username: Option<String>,
    password: Option<String>,
    db: i64,
}

impl Target {
    /// Parses `url` (see the forms above); `tls_ca` names a PEM file of
    /// the CA certificates that a TLS server's certificate must chain to
    /// (instead of the web roots): for `rediss://` URLs only.
    ///
    /// Fails, naming the bad value (passwords masked), on an unknown
    /// scheme, a malformed URL or list, a form whose feature is off, an
    /// unreadable CA file or one without a certificate, or a CA with a
    /// URL that is not TLS.
    ///
    /// ```
    /// use ratelimit_redis::Target;
    ///
    /// let single = Target::parse("redis://:hunter2@127.0.0.1:6379/0", None)?;
    /// assert_eq!(single.to_string(), "redis://:***@127.0.0.1:6379/0");
    /// let err = Target::parse("http://127.0.0.1/", None).unwrap_err();
    /// assert!(err.to_string().contains("http://127.0.0.1/"));
    /// # Ok::<(), ratelimit_redis::RedisBuildError>(())
    /// ```
    pub fn parse(url: &str, tls_ca: Option<&Path>) -> Result<Self, RedisBuildError> {
        let url = url.trim();
        let bad = |why: &str| RedisBuildError::Url(format!("{}: {why}", redact(url)));
        if url.is_empty() {
            return Err(RedisBuildError::Url("(empty): no url".to_owned()));
        }
        if let Some(rest) = url.strip_prefix("redis+sentinel://") {
            if tls_ca.is_some() {
                return Err(bad(
                    "a TLS CA is for rediss:// urls; Sentinel is plain here",
                ));
            }
            return sentinel(url, rest);
        }
        if url.starts_with("rediss+sentinel://") {
            return Err(bad(
                "Sentinel over TLS is not supported; use redis+sentinel://",
            ));
        }
        let ca = tls_ca.map(read_ca).transpose()?;
        if url.contains(',') {
            return cluster(url, ca);
        }
        if url.starts_with("rediss://") {
            return tls_client(url, ca);
        }
        if ca.is_some() {
            return Err(bad("a TLS CA is set but the url is not rediss://"));
        }
        if !(url.starts_with("redis://")
            || url.starts_with("unix://")
            || url.starts_with("redis+unix://"))
        {
            return Err(bad(
                "expected redis://, rediss://, redis+sentinel://host:port[,host:port...]/service, \
                 or a comma-separated list of redis:// cluster node urls",
            ));
        }
        redis::Client::open(url)
            .map(|c| Self::Client(Box::new(c)))
            .map_err(|e| bad(&e.to_string()))
    }

    /// The connection it stands for, without connecting.
    pub(crate) fn into_backend(self) -> Result<Backend, RedisBuildError> {
        Ok(match self {
            Self::Url(url) => return Self::parse(&url, None)?.into_backend(),
            Self::Client(c) => Backend::Single(*c),
            #[cfg(feature = "cluster")]
            Self::Cluster(c) => {
                Backend::Cluster(Box::new(crate::connect::conn::ClusterBackend::new(*c)))
            }
            #[cfg(feature = "sentinel")]
            Self::Sentinel(s) => {
                Backend::Sentinel(Box::new(crate::connect::sentinel::SentinelBackend::new(
                    s.client()?,
                    s.sentinels.clone(),
                    s.service.clone(),
                )))
            }
        })
    }

    /// A new connection to it, whatever the topology (a Cluster's routes
    /// each command by its key), for commands of the app's own; the
    /// stores open theirs.
    pub async fn connect(&self) -> Result<crate::Connection, redis::RedisError> {
        let backend = self.clone().into_backend().map_err(|e| {
            redis::RedisError::from((
                redis::ErrorKind::InvalidClientConfig,
                "bad target",
                e.to_string(),
            ))
        })?;
        backend
            .open(&redis::AsyncConnectionConfig::new())
            .await
            .map(crate::Connection)
    }
}

/// A client for one TLS server, trusting `ca` if given, else the web roots.
#[cfg(feature = "tls")]
fn tls_client(url: &str, ca: Option<Vec<u8>>) -> Result<Target, RedisBuildError> {
    install_crypto();
    let client = match ca {
        Some(pem) => redis::Client::build_with_tls(url, certificates(pem)),
        None => redis::Client::open(url),
    };
    client
        .map(|c| Target::Client(Box::new(c)))
        .map_err(|e| bad(url, e))
}

#[cfg(not(feature = "tls"))]
fn tls_client(url: &str, _ca: Option<Vec<u8>>) -> Result<Target, RedisBuildError> {
    Err(needs(url, "rediss://", "tls"))
}

#[cfg(feature = "tls")]
fn certificates(pem: Vec<u8>) -> redis::TlsCertificates {
    redis::TlsCertificates {
        client_tls: None,
        root_cert: Some(pem),
    }
}

/// rustls's ring provider as the process default, unless one is set.
#[cfg(feature = "tls")]
fn install_crypto() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Another thread may have installed one meanwhile: either serves.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

/// The PEM file `path`, which must hold a certificate.
fn read_ca(path: &Path) -> Result<Vec<u8>, RedisBuildError> {
    let why = |why: String| RedisBuildError::TlsCa(format!("{}: {why}", path.display()));
    let pem = std::fs::read(path).map_err(|e| why(e.to_string()))?;
    if !pem.windows(27).any(|w| w == b"-----BEGIN CERTIFICATE-----") {
        return Err(why("no PEM certificate in it".to_owned()));
    }
    Ok(pem)
}

/// A Cluster from a comma-separated list of node URLs.
#[cfg(feature = "cluster")]
fn cluster(url: &str, ca: Option<Vec<u8>>) -> Result<Target, RedisBuildError> {
    let nodes: Vec<&str> = url.split(',').map(str::trim).collect();
    let tls = nodes.first().is_some_and(|n| n.starts_with("rediss://"));
    for node in &nodes {
        let ok = if tls {
            node.starts_with("rediss://")
        } else {
            node.starts_with("redis://")
        };
        if !ok {
            return Err(RedisBuildError::Url(format!(
                "{}: cluster node {:?} must be a {} url like the first",
                redact(url),
                redact(node),
                if tls { "rediss://" } else { "redis://" }
            )));
        }
    }
    if !tls && ca.is_some() {
        return Err(RedisBuildError::Url(format!(
            "{}: a TLS CA is set but the urls are not rediss://",
            redact(url)
        )));
    }
    #[cfg(feature = "tls")]
    if tls {
        install_crypto();
    }
    #[cfg(not(feature = "tls"))]
    if tls {
        let _ = ca;
        return Err(needs(url, "rediss://", "tls"));
    }
    let builder = redis::cluster::ClusterClientBuilder::new(nodes.clone());
    #[cfg(feature = "tls")]
    let builder = match &ca {
        Some(pem) => builder.certs(certificates(pem.clone())),
        None => builder,
    };
    let client = builder.build().map_err(|e| bad(url, e))?;
    let subscribers = nodes
        .iter()
        .map(|node| node_client(node, ca.as_ref()).map_err(|e| bad(node, e)))
        .collect::<Result<_, _>>()?;
    Ok(Target::Cluster(Box::new(
        ClusterTarget::new(client).subscribe_through(subscribers),
    )))
}

/// A plain client of one Cluster node (its pub/sub subscriber), trusting
/// `ca` for TLS if given.
#[cfg(feature = "cluster")]
fn node_client(node: &str, ca: Option<&Vec<u8>>) -> redis::RedisResult<redis::Client> {
    #[cfg(feature = "tls")]
    if let Some(pem) = ca {
        return redis::Client::build_with_tls(node, certificates(pem.clone()));
    }
    let _ = ca;
    redis::Client::open(node)
}

#[cfg(not(feature = "cluster"))]
fn cluster(url: &str, _ca: Option<Vec<u8>>) -> Result<Target, RedisBuildError> {
    Err(needs(url, "a list of cluster node urls", "cluster"))
}

/// `rest`: `[user:password@]host:port[,host:port...]/service[/db]`.
#[cfg(feature = "sentinel")]
fn sentinel(url: &str, rest: &str) -> Result<Target, RedisBuildError> {
    let bad = |why: String| RedisBuildError::Url(format!("{}: {why}", redact(url)));
    let (auth, rest) = match rest.rsplit_once('@') {
        Some((auth, rest)) => (Some(auth), rest),
        None => (None, rest),
    };
    let (hosts, path) = rest
        .split_once('/')
        .ok_or_else(|| bad("no /service_name after the sentinels".to_owned()))?;
    let mut path = path.trim_end_matches('/').split('/');
    let service = path.next().unwrap_or_default();
    if service.is_empty() {
        return Err(bad("no service name after the sentinels".to_owned()));
    }
    let db = match path.next() {
        None => 0,
        Some(db) => db
            .parse::<i64>()
            .map_err(|_| bad(format!("database {db:?} is not a number")))?,
    };
    if path.next().is_some() {
        return Err(bad(
            "expected /service_name[/db] after the sentinels".to_owned()
        ));
    }
    let mut sentinels = Vec::new();
    for node in hosts.split(',') {
        let (host, port) = node
            .trim()
            .rsplit_once(':')
            .ok_or_else(|| bad(format!("sentinel {node:?} is not host:port")))?;
        let port = port
            .parse::<u16>()
            .map_err(|_| bad(format!("sentinel {node:?} has no valid port")))?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() {
            return Err(bad(format!("sentinel {node:?} has no host")));
        }
        sentinels.push((host.to_owned(), port));
    }
    let (username, password) = match auth.map(|a| a.split_once(':').unwrap_or((a, ""))) {
        None => (None, None),
        Some((user, pass)) => (
            (!user.is_empty()).then(|| percent_decoded(user)),
            (!pass.is_empty()).then(|| percent_decoded(pass)),
        ),
    };
    let target = SentinelTarget {
        sentinels,
        service: service.to_owned(),
        username,
        password,
        db,
    };
    // Checked now, so that a bad one fails at construction.
    target.client()?;
    Ok(Target::Sentinel(Box::new(target)))
}

/// `text` with its `%XX` escapes decoded (as in `redis://` URLs).
#[cfg(feature = "sentinel")]
fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(not(feature = "sentinel"))]
fn sentinel(url: &str, _rest: &str) -> Result<Target, RedisBuildError> {
    Err(needs(url, "redis+sentinel://", "sentinel"))
}

#[cfg(feature = "sentinel")]
impl SentinelTarget {
    /// A client asking the Sentinels for the service's master.
    fn client(&self) -> Result<redis::sentinel::SentinelClient, RedisBuildError> {
        let addrs = self
            .sentinels
            .iter()
            .map(|(h, p)| redis::ConnectionAddr::Tcp(h.clone(), *p));
        let mut builder = redis::sentinel::SentinelClientBuilder::new(
            addrs,
            self.service.clone(),
            redis::sentinel::SentinelServerType::Master,
        )
        .map(|b| b.set_client_to_redis_db(self.db))
        .map_err(|e| RedisBuildError::Url(format!("{self}: {e}")))?;
        if let Some(user) = &self.username {
            builder = builder.set_client_to_redis_username(user);
        }
        if let Some(pass) = &self.password {
            builder = builder.set_client_to_redis_password(pass);
        }
        builder
            .build()
            .map_err(|e| RedisBuildError::Url(format!("{self}: {e}")))
    }
}

#[cfg(feature = "sentinel")]
impl fmt::Display for SentinelTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("redis+sentinel://")?;
        match (&self.username, &self.password) {
            (None, None) => {}
            (user, pass) => write!(
                f,
                "{}{}@",
                user.as_deref().unwrap_or(""),
                if pass.is_some() { ":***" } else { "" }
            )?,
        }
        for (i, (h, p)) in self.sentinels.iter().enumerate() {
            let sep = if i == 0 { "" } else { "," };
            write!(f, "{sep}{h}:{p}")?;
        }
        write!(f, "/{}/{}", self.service, self.db)
    }
}

#[cfg(feature = "sentinel")]
impl fmt::Debug for SentinelTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SentinelTarget({self})")
    }
}

/// What it stands for, passwords masked.
impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Url(url) => f.write_str(&redact(url)),
            Self::Client(c) => write!(f, "{}", address(c.get_connection_info())),
            #[cfg(feature = "cluster")]
            Self::Cluster(_) => f.write_str("a Redis Cluster"),
            #[cfg(feature = "sentinel")]
            Self::Sentinel(s) => write!(f, "{s}"),
        }
    }
}

impl fmt::Debug for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Target({self})")
    }
}

/// A client's address with its password masked, as a URL.
fn address(info: &redis::ConnectionInfo) -> String {
    let redis = info.redis_settings();
    let auth = match (redis.username(), redis.password()) {
        (None, None) => String::new(),
        (user, pass) => format!(
            "{}{}@",
            user.unwrap_or(""),
            if pass.is_some() { ":***" } else { "" }
        ),
    };
    match info.addr() {
        redis::ConnectionAddr::Tcp(h, p) => format!("redis://{auth}{h}:{p}/{}", redis.db()),
        redis::ConnectionAddr::TcpTls { host, port, .. } => {
            format!("rediss://{auth}{host}:{port}/{}", redis.db())
        }
        redis::ConnectionAddr::Unix(path) => format!("unix://{}", path.display()),
        _ => "a redis server".to_owned(),
    }
}

/// A bad `url`: its text (passwords masked), and why.
fn bad(url: &str, why: impl fmt::Display) -> RedisBuildError {
    RedisBuildError::Url(format!("{}: {why}", redact(url)))
}

/// A `url` of a form whose feature is off.
#[cfg(any(
    not(feature = "tls"),
    not(feature = "cluster"),
    not(feature = "sentinel")
))]
fn needs(url: &str, form: &str, feature: &str) -> RedisBuildError {
    bad(
        url,
        format_args!("{form} needs ratelimit-redis's `{feature}` feature"),
    )
}

/// `url` with the password of each URL in it (a comma-separated list
/// too) replaced by `***`: `redis://user:***@host/`, `redis://:***@host/`.
pub(crate) fn redact(url: &str) -> String {
    url.split(',')
        .map(|part| {
            let Some((scheme, rest)) = part.split_once("://") else {
                return part.to_owned();
            };
            let end = rest.find('/').unwrap_or(rest.len());
            match rest[..end].rfind('@') {
                Some(at) => {
                    let user = rest[..at].split(':').next().unwrap_or("");
                    let masked = if rest[..at].contains(':') {
                        format!("{user}:***")
                    } else {
                        // Some clients read `redis://secret@host` as a
                        // password alone: masked too.
                        "***".to_owned()
                    };
                    format!("{scheme}://{masked}{}", &rest[at..])
                }
                None => part.to_owned(),
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(feature = "cluster")]
impl From<redis::cluster::ClusterClient> for Target {
    /// A Cluster with no pub/sub subscriber (see [`ClusterTarget`]).
    fn from(client: redis::cluster::ClusterClient) -> Self {
        Self::Cluster(Box::new(ClusterTarget::new(client)))
    }
}

#[cfg(feature = "cluster")]
impl From<ClusterTarget> for Target {
    fn from(cluster: ClusterTarget) -> Self {
        Self::Cluster(Box::new(cluster))
    }
}

impl From<&str> for Target {
    fn from(url: &str) -> Self {
        Self::Url(url.to_owned())
    }
}

impl From<String> for Target {
    fn from(url: String) -> Self {
        Self::Url(url)
    }
}

impl From<redis::Client> for Target {
    fn from(client: redis::Client) -> Self {
        Self::Client(Box::new(client))
    }
}
