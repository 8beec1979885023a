//! A Redis Cluster as a store reaches it: its client, and the nodes its
//! pub/sub subscriber connects to.

/// A Redis Cluster: its client, and the nodes a pub/sub subscriber may
/// connect to (a `PUBLISH` on any node reaches every node, so one
/// subscription to any of them hears every instance's changes).
///
/// Parsed from a list of node URLs ([`Target::parse`](crate::Target::parse)), it subscribes
/// through those nodes, with the same TLS settings. Made from a
/// `ClusterClient` the app built (`Target::from`), it knows no node
/// addresses and does not subscribe: there, another instance's reset, ban
/// or shared entry is seen within the deny cache's second, a lease's ttl
/// and the entries' refresh. [`ClusterTarget::subscribe_through`] gives
/// it the nodes.
#[derive(Clone)]
pub struct ClusterTarget {
    pub(crate) client: redis::cluster::ClusterClient,
    pub(crate) nodes: Vec<redis::Client>,
}

impl ClusterTarget {
    /// A Cluster reached through `client`, with no subscriber.
    pub fn new(client: redis::cluster::ClusterClient) -> Self {
        Self {
            client,
            nodes: Vec::new(),
        }
    }

    /// Subscribes to pub/sub invalidation through `nodes` (clients of the
    /// Cluster's nodes: the next is tried when one fails).
    #[must_use]
    pub fn subscribe_through(mut self, nodes: Vec<redis::Client>) -> Self {
        self.nodes = nodes;
        self
    }
}
