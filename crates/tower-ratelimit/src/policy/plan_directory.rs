//! The plans a table or a server runs (`PlanDirectory`): which plan a
//! request is in, each plan's members counted, keys moved between plans
//! at run time (kept across reloads, and shared by every instance through
//! the run-time entries, each key written there as its digest only), and
//! the lists read again at a reload, all or nothing.

use super::error::PolicyError;
use super::key::{KeyPart, KeySpec, PolicyKey};
use super::plan::{Plan, NO_PLAN};
use super::plan_book::{Fixed, PlanBook, PlanMembers, NONE};
use super::plan_list::PlanList;
use crate::access_list::MAX_RUNTIME_ENTRIES;
use crate::key::HeaderKey;
use crate::limit_handle::TextPart;
use ratelimit_core::plumbing::{EntryTable, SharedEntries, SharedEntry};
use std::sync::{Arc, OnceLock};

/// The plans in force and their members: the table's
/// ([`PolicyHandle::plans`](super::PolicyHandle::plans)), or those of a
/// server whose requests carry their keys as named values
/// ([`of_descriptors`](Self::of_descriptors): `ratelimitd`'s
/// `key = "descriptor:NAME"`).
///
/// ```
/// use tower_ratelimit::policy::{PlanDirectory, PlanList};
///
/// let text = "[[plan]]\nname = \"pro\"\nkey = \"descriptor:api_key\"\nkeys-env = \"PRO\"\n";
/// let list = PlanList::from_toml(text, None, &|_: &str| Some("k-1".to_owned())).unwrap();
/// let plans = PlanDirectory::of_descriptors(&list).unwrap();
/// let entry = |value: &'static str| move |name: &str| (name == "api_key").then_some(value);
/// assert_eq!(plans.plan_of_values(entry("k-1")), "pro");
/// assert_eq!(plans.plan_of_values(entry("k-2")), "none");
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// plans.move_to_plan("pro", "k-2").await.unwrap(); // in this process: nothing shares them
/// assert_eq!(plans.plan_of_values(entry("k-2")), "pro");
/// assert_eq!(plans.members()[0].moved_in, 1);
/// # });
/// ```
pub struct PlanDirectory {
    pub(super) book: Arc<PlanBook>,
    /// Where the moves are shared, if they are.
    shared: OnceLock<Arc<dyn SharedEntries>>,
}

impl std::fmt::Debug for PlanDirectory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlanDirectory")
            .field("plans", &self.book.counts())
            .finish_non_exhaustive()
    }
}

impl PlanDirectory {
    /// The directory over `book` (its members read).
    pub(super) fn new(book: PlanBook) -> Self {
        Self {
            book: Arc::new(book),
            shared: OnceLock::new(),
        }
    }

    /// The plans of `list`, each keyed on named values of a request
    /// (`key = "descriptor:NAME"`, parts joined by `+`), their members
    /// read; refused, naming the file, the line and the plan: another
    /// key, and `keys-app` (no app gives lists here).
    pub fn of_descriptors(list: &PlanList) -> Result<Self, PolicyError> {
        for (i, plan) in list.plans.iter().enumerate() {
            if let Some(part) = plan
                .key
                .0
                .iter()
                .find(|p| !matches!(p, KeyPart::Descriptor(_)))
            {
                return Err(list.error(
                    i,
                    format!(
                        "key {:?}: a plan here keys on a descriptor entry's value, as \
                         key = \"descriptor:NAME\" ({part} is an HTTP request's)",
                        plan.key.to_string()
                    ),
                ));
            }
            if plan.keys_app.is_some() {
                return Err(list.error(
                    i,
                    "keys-app: no app gives lists here; give keys-file, keys-env or shared = true"
                        .to_owned(),
                ));
            }
        }
        let make = |spec: &KeySpec| {
            let parts = spec.0.iter().map(|_| TextPart::Text { secret: true });
            Ok((None, parts.collect()))
        };
        let book = PlanBook::new(&list.plans, &Default::default(), make)?;
        book.refix(book.read(&list.listed)?);
        Ok(Self::new(book))
    }

    /// The plans, in the file's order.
    pub fn plans(&self) -> &[Plan] {
        self.book.plans()
    }

    /// Each plan with its members counted (no key is shown).
    pub fn members(&self) -> Vec<PlanMembers> {
        self.book.counts()
    }

    /// The plan of an HTTP request (`"none"`: no plan), as the table's
    /// plan layer finds it: what tools replaying requests ask
    /// (`ratelimit-sim what-if`).
    pub fn plan_of(&self, req: &http::request::Parts) -> &'static str {
        self.book.name(self.book.request_plan(req))
    }

    /// The plan of a request whose named values `value` gives (a
    /// descriptor entry's value by its key; `None`: the request has none),
    /// for plans of [`of_descriptors`](Self::of_descriptors): the first
    /// plan key, in the file's order, whose values the request has and a
    /// plan lists (a move first, then the lists); else `"none"`.
    pub fn plan_of_values<'a>(&self, value: impl Fn(&str) -> Option<&'a str>) -> &'static str {
        let p = self.book.plan_of_key(|spec| {
            let parts = spec.0.iter().map(|part| match part {
                KeyPart::Descriptor(name) => {
                    let text = value(name)?.trim();
                    (!text.is_empty()).then(|| PolicyKey::Text(HeaderKey::secret(text.as_bytes())))
                }
                _ => None,
            });
            let keys = parts.collect::<Option<Vec<_>>>()?;
            Some(match <[PolicyKey; 1]>::try_from(keys) {
                Ok([one]) => one,
                Err(keys) => PolicyKey::Composite(keys.into()),
            })
        });
        self.book.name(p)
    }

    /// Shares the moves with every instance through `shared` (a Redis
    /// one: `ratelimit_redis::RedisEntries`, the hash the library's
    /// run-time entries use): [`move_to_plan`](Self::move_to_plan) and
    /// [`remove_from_plan`](Self::remove_from_plan) write there first, and
    /// every instance's moves are applied here whenever `shared` hands
    /// them over. Once; a second call is refused. Needs a tokio runtime.
    pub fn share(self: &Arc<Self>, shared: Arc<dyn SharedEntries>) -> Result<(), String> {
        self.use_shared(Arc::clone(&shared))?;
        let book = Arc::downgrade(&self.book);
        shared.follow(Arc::new(move |entries, digest| {
            if let Some(book) = book.upgrade() {
                book.replace_moved(&entries, &digest);
            }
        }));
        Ok(())
    }

    /// Writes the moves through `shared` (whose copies the caller
    /// applies).
    pub(super) fn use_shared(&self, shared: Arc<dyn SharedEntries>) -> Result<(), String> {
        self.shared
            .set(shared)
            .map_err(|_| "the plans' moves are shared already".to_owned())
    }

    /// Reads the lists of `list` again and puts them in force, all or
    /// nothing: the plans must be the running ones, changed in nothing
    /// but their `keys-file` and `keys-env` (anything else needs a
    /// restart); an error leaves the running members.
    pub fn reload(&self, list: &PlanList) -> Result<(), PolicyError> {
        let members = self.reread(list)?;
        self.book.refix(members);
        Ok(())
    }

    /// The members `list` gives the running plans (the apps' lists read
    /// now), to put in force with `refix`; else why not.
    pub(super) fn reread(&self, list: &PlanList) -> Result<Fixed, PolicyError> {
        let running = self.book.plans();
        if list.plans.len() != running.len() {
            return Err(PolicyError {
                file: list.file.clone(),
                line: None,
                entry: None,
                message: format!(
                    "{} plans where {} run: adding or removing a plan needs a restart",
                    list.plans.len(),
                    running.len()
                ),
            });
        }
        for (i, (new, old)) in list.plans.iter().zip(running).enumerate() {
            new.unchanged_but_lists(old)
                .map_err(|field| list.error(i, format!("changing its {field} needs a restart")))?;
        }
        self.book.read(&list.listed)
    }

    /// Moves `key` (written as the plan's key writes it: an API key, an
    /// address) into the plan `plan`, out of any other, now and across
    /// reloads (a move wins over the plans' lists), on every instance
    /// sharing the moves (see [`share`](Self::share)): written there
    /// first. Its requests then count on `plan`'s limits, each from its own
    /// count: what the key used on its former plan's limits stays there.
    /// Refused: an unknown plan, a key the plan's key cannot be, more than
    /// [`MAX_RUNTIME_ENTRIES`](super::MAX_RUNTIME_ENTRIES) moves, and a
    /// move into a plan with `shared = true` while nothing shares them.
    pub async fn move_to_plan(&self, plan: &str, key: &str) -> Result<(), String> {
        let (p, g, text) = self.book.member(plan, key)?;
        match self.shared.get() {
            Some(shared) => {
                let entry = SharedEntry {
                    table: EntryTable::Plan,
                    scope: self.book.scope(g),
                    name: shared.digest().await?.of(&text),
                    value: plan.to_owned(),
                    left: None,
                };
                shared.put(entry, MAX_RUNTIME_ENTRIES).await?;
            }
            None if self.book.is_shared(p) => {
                return Err(format!(
                    "plan {plan:?} has shared = true, but nothing shares the run-time \
                     entries (no store in Redis)"
                ));
            }
            None => {}
        }
        self.book.move_here(g, &text, Some(p), None)
    }

    /// Takes `key` out of the plan `plan`, on every instance sharing the
    /// moves: it goes back to the plan its plan's lists give it, or to no
    /// plan when that is `plan`. The key's plan now (`"none"`: no plan),
    /// or `None` when the key was not in `plan`.
    pub async fn remove_from_plan(&self, plan: &str, key: &str) -> Result<Option<String>, String> {
        let (p, g, text) = self.book.member(plan, key)?;
        let (now, listed) = self.book.plan_of_text(g, &text);
        if now != p {
            return Ok(None);
        }
        // Out of a plan its lists give it: moved to none.
        let back = if listed == p { NONE } else { listed };
        let mut hash = None;
        if let Some(shared) = self.shared.get() {
            let name = shared.digest().await?.of(&text);
            let scope = self.book.scope(g);
            if back == listed {
                shared.remove(EntryTable::Plan, &scope, &name).await?;
            } else {
                let entry = SharedEntry {
                    table: EntryTable::Plan,
                    scope,
                    name: name.clone(),
                    value: NO_PLAN.to_owned(),
                    left: None,
                };
                shared.put(entry, MAX_RUNTIME_ENTRIES).await?;
            }
            hash = Some(name);
        }
        if back == listed {
            self.book.move_here(g, &text, None, hash.as_deref())?;
        } else {
            self.book.move_here(g, &text, Some(NONE), None)?;
        }
        Ok(Some(self.book.name(back).to_owned()))
    }
}
