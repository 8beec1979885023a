//! Which plan a request is in (`PlanBook`): the members the plans' sources
//! list, and the keys moved between plans while the limits run, each an
//! in-memory snapshot swapped whole; a request costs one extraction of
//! the plans' key and one hash lookup (two while keys moved by another
//! instance are known by digest), whatever the number of members.

use super::error::PolicyError;
use super::key::{KeySpec, PolicyKey};
use super::plan::{Plan, NO_PLAN};
use super::plan_sources::{Listed, PlanKeys, Source, MAX_PLAN_KEYS};
use crate::access_list::MAX_RUNTIME_ENTRIES;
use crate::key::KeyError;
use crate::limit_handle::{key_of_text, TextPart};
use arc_swap::ArcSwap;
use http::request::Parts;
use ratelimit_core::plumbing::{EntryDigest, EntryTable, SharedEntry};
use std::collections::HashMap;
use std::sync::Arc;

/// A plan's index, or [`NONE`].
pub(crate) type PlanId = u16;

/// The plan of requests in no plan.
pub(crate) const NONE: PlanId = PlanId::MAX;

/// A request's plan, as the table's plan layer found it (an extension).
#[derive(Debug, Clone, Copy)]
pub(crate) struct RequestPlan(pub(crate) PlanId);

/// A key as a request gives it.
pub(crate) type Extract = Arc<dyn Fn(&Parts) -> Result<PolicyKey, KeyError> + Send + Sync>;

/// The plans that share one key spec: the key, extracted and written.
pub(crate) struct Group {
    spec: KeySpec,
    /// How an HTTP request gives it (`None`: keys given as values, see
    /// [`PlanBook::plan_of_key`]).
    extract: Option<Extract>,
    parts: Box<[TextPart]>,
}

/// Members by the key's text (as the extractor writes it), per group.
#[derive(Default)]
pub(crate) struct Fixed(Vec<HashMap<String, PlanId>>);

/// Keys moved at run time, per group: by text (moved through this
/// instance, until the shared copy comes back), and by digest (the shared
/// copy), with the digest that wrote them.
#[derive(Default, Clone)]
struct Moved {
    text: Vec<HashMap<String, PlanId>>,
    digests: Vec<HashMap<String, PlanId>>,
    digest: Option<EntryDigest>,
}

impl Moved {
    fn len(&self) -> usize {
        let all = self.text.iter().chain(&self.digests);
        all.map(HashMap::len).sum()
    }

    /// The plan `text` of group `g` was moved to, if it was.
    fn find(&self, g: usize, text: &str) -> Option<PlanId> {
        if let Some(p) = self.text.get(g).and_then(|m| m.get(text)) {
            return Some(*p);
        }
        let digests = self.digests.get(g).filter(|m| !m.is_empty())?;
        digests.get(&self.digest.as_ref()?.of(text)).copied()
    }
}

/// One plan's members, counted (the admin API's list: no key is shown;
/// its JSON is these fields).
///
/// ```
/// use axum::Router;
/// use tower_ratelimit::policy::{PolicyOptions, PolicyTable};
///
/// let text = "[[plan]]\nname = \"pro\"\nkey = \"api-key\"\nshared = true\n";
/// let table = PolicyTable::from_toml(text, None).unwrap();
/// let (_app, limits) = table.apply_in_memory(Router::new(), &PolicyOptions::default(), None).unwrap();
/// let pro = &limits.plans().members()[0]; // a PlanMembers
/// assert_eq!((pro.name.as_str(), pro.listed, pro.moved_in), ("pro", 0, 0));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PlanMembers {
    /// The plan's name.
    pub name: String,
    /// Its key, as the file writes it.
    pub key: String,
    /// Whether its moves must be shared (`shared = true`).
    pub shared: bool,
    /// The keys its sources list (file, environment, app), moved or not.
    pub listed: usize,
    /// The keys moved into it at run time, as this instance knows them.
    pub moved_in: usize,
}

/// The plans of an applied table, and which one each key is in.
pub(crate) struct PlanBook {
    plans: Box<[Plan]>,
    /// The names, as the metrics' labels.
    names: Box<[&'static str]>,
    group_of: Box<[usize]>,
    groups: Box<[Group]>,
    apps: Box<[Option<PlanKeys>]>,
    fixed: ArcSwap<Fixed>,
    moved: ArcSwap<Moved>,
}

impl PlanBook {
    /// The book of `plans`, each key spec made into a group by `make`,
    /// the apps' lists from `apps`; members not read yet.
    pub(crate) fn new(
        plans: &[Plan],
        apps: &std::collections::BTreeMap<String, PlanKeys>,
        make: impl Fn(&KeySpec) -> Result<(Option<Extract>, Vec<TextPart>), String>,
    ) -> Result<Self, PolicyError> {
        let mut groups: Vec<Group> = Vec::new();
        let mut group_of = Vec::with_capacity(plans.len());
        let mut plan_apps = Vec::with_capacity(plans.len());
        for plan in plans {
            let fail = |m: String| plan_error(plan, None, None, m);
            let g = match groups.iter().position(|g| g.spec == plan.key) {
                Some(g) => g,
                None => {
                    let (extract, parts) = make(&plan.key).map_err(fail)?;
                    let parts = parts.into();
                    let spec = plan.key.clone();
                    groups.push(Group {
                        spec,
                        extract,
                        parts,
                    });
                    groups.len() - 1
                }
            };
            group_of.push(g);
            let app = match &plan.keys_app {
                Some(name) => Some(Arc::clone(apps.get(name).ok_or_else(|| {
                    fail(format!(
                        "keys-app {name:?}: the app gives no such list (PolicyOptions::plan_keys)"
                    ))
                })?)),
                None => None,
            };
            plan_apps.push(app);
        }
        let names = plans
            .iter()
            .map(|p| &*Box::leak(p.name.clone().into_boxed_str()))
            .collect();
        let empty = Moved {
            text: vec![HashMap::new(); groups.len()],
            digests: vec![HashMap::new(); groups.len()],
            digest: None,
        };
        Ok(Self {
            plans: plans.into(),
            names,
            group_of: group_of.into(),
            groups: groups.into(),
            apps: plan_apps.into(),
            fixed: ArcSwap::from_pointee(Fixed::default()),
            moved: ArcSwap::from_pointee(empty),
        })
    }

    /// Whether the table has plans.
    pub(crate) fn is_empty(&self) -> bool {
        self.plans.is_empty()
    }

    /// The plans, in the file's order.
    pub(crate) fn plans(&self) -> &[Plan] {
        &self.plans
    }

    /// The index of the plan `name`; `"none"` is [`NONE`].
    pub(crate) fn index(&self, name: &str) -> Option<PlanId> {
        if name == NO_PLAN {
            return Some(NONE);
        }
        let i = self.plans.iter().position(|p| p.name == name)?;
        PlanId::try_from(i).ok()
    }

    /// The name of plan `p` (`"none"` for [`NONE`]), a metrics label.
    pub(crate) fn name(&self, p: PlanId) -> &'static str {
        self.names.get(usize::from(p)).copied().unwrap_or(NO_PLAN)
    }

    /// Whether plan `p` must share its moves (`shared = true`).
    pub(crate) fn is_shared(&self, p: PlanId) -> bool {
        self.plans.get(usize::from(p)).is_some_and(|p| p.shared)
    }

    /// The key spec of group `g`, as the file writes it (the scope of its
    /// shared moves).
    pub(crate) fn scope(&self, g: usize) -> String {
        self.groups[g].spec.to_string()
    }

    /// The plan `req` is in: its extension's, else looked up.
    pub(crate) fn request_plan(&self, req: &Parts) -> PlanId {
        match req.extensions.get::<RequestPlan>() {
            Some(p) => p.0,
            None => self.plan_of(req),
        }
    }

    /// The plan `req` is in: the first group whose key it has and lists
    /// (a move first, then the sources), else [`NONE`].
    pub(crate) fn plan_of(&self, req: &Parts) -> PlanId {
        if self.groups.is_empty() {
            return NONE;
        }
        self.plan_of_groups(|group| (group.extract.as_ref()?)(req).ok())
    }

    /// The plan of a request whose key for a plan key is `key(spec)`
    /// (`None`: it has none): the first group whose key it has and lists,
    /// else [`NONE`].
    pub(crate) fn plan_of_key(&self, key: impl Fn(&KeySpec) -> Option<PolicyKey>) -> PlanId {
        self.plan_of_groups(|group| key(&group.spec))
    }

    /// The plan of the first group whose key `key` gives and lists.
    fn plan_of_groups(&self, key: impl Fn(&Group) -> Option<PolicyKey>) -> PlanId {
        let (fixed, moved) = (self.fixed.load(), self.moved.load());
        for (g, group) in self.groups.iter().enumerate() {
            let Some(key) = key(group) else {
                continue;
            };
            let text = key.to_string();
            let p = match moved.find(g, &text) {
                Some(p) => p,
                None => fixed
                    .0
                    .get(g)
                    .and_then(|m| m.get(&text))
                    .copied()
                    .unwrap_or(NONE),
            };
            if p != NONE {
                return p;
            }
        }
        NONE
    }

    /// The plan `p` named `plan`, its group and `key` as the group's key
    /// writes it; else why not (no such plan, a key it cannot have).
    pub(crate) fn member(&self, plan: &str, key: &str) -> Result<(PlanId, usize, String), String> {
        let p = self
            .index(plan)
            .filter(|p| *p != NONE)
            .ok_or_else(|| format!("no plan named {plan:?}"))?;
        let g = self.group_of[usize::from(p)];
        let what = format!("plan {plan:?}");
        let key = key_of_text(&what, &self.groups[g].parts, key)?;
        Ok((p, g, key.to_string()))
    }

    /// The plan of the key written `text` in group `g` now, and the one
    /// its sources give it.
    pub(crate) fn plan_of_text(&self, g: usize, text: &str) -> (PlanId, PlanId) {
        let fixed = self
            .fixed
            .load()
            .0
            .get(g)
            .and_then(|m| m.get(text))
            .copied();
        let fixed = fixed.unwrap_or(NONE);
        (self.moved.load().find(g, text).unwrap_or(fixed), fixed)
    }

    /// Moves the key written `text` of group `g` to plan `p` here (or out
    /// of its plan, with [`NONE`]); `None`: back to its sources' plan (its
    /// digest `hash` forgotten too). At most
    /// [`MAX_RUNTIME_ENTRIES`] moves.
    pub(crate) fn move_here(
        &self,
        g: usize,
        text: &str,
        p: Option<PlanId>,
        hash: Option<&str>,
    ) -> Result<(), String> {
        let mut full = false;
        self.moved.rcu(|moved| {
            let mut moved = Moved::clone(moved);
            full = false;
            match p {
                Some(p) => {
                    let new = !moved.text[g].contains_key(text);
                    if new && moved.len() >= MAX_RUNTIME_ENTRIES {
                        full = true;
                    } else {
                        moved.text[g].insert(text.to_owned(), p);
                    }
                }
                None => {
                    moved.text[g].remove(text);
                    if let Some(hash) = hash {
                        moved.digests[g].remove(hash);
                    }
                }
            }
            moved
        });
        if full {
            return Err(format!(
                "at most {MAX_RUNTIME_ENTRIES} keys moved between plans at run time"
            ));
        }
        Ok(())
    }

    /// Makes the moves those of the shared copy `entries` (its plan
    /// entries; digests by `digest`): what a shared copy hands over.
    pub(crate) fn replace_moved(&self, entries: &[SharedEntry], digest: &EntryDigest) {
        let groups = self.groups.len();
        let mut moved = Moved {
            text: vec![HashMap::new(); groups],
            digests: vec![HashMap::new(); groups],
            digest: Some(digest.clone()),
        };
        let scopes: Vec<String> = (0..groups).map(|g| self.scope(g)).collect();
        let plan_entries = entries.iter().filter(|e| e.table == EntryTable::Plan);
        for e in plan_entries.take(MAX_RUNTIME_ENTRIES) {
            let (Some(g), Some(p)) = (
                scopes.iter().position(|s| *s == e.scope),
                self.index(&e.value),
            ) else {
                continue;
            };
            let into = if EntryDigest::is_digest(&e.name) {
                &mut moved.digests[g]
            } else {
                &mut moved.text[g]
            };
            into.insert(e.name.clone(), p);
        }
        self.moved.store(Arc::new(moved));
    }

    /// Reads every plan's members from `listed` (each plan's file and
    /// environment) and the apps' lists, all or nothing; a key listed in
    /// two plans is refused.
    pub(crate) fn read(&self, listed: &[Listed]) -> Result<Fixed, PolicyError> {
        let mut fixed = Fixed(vec![HashMap::new(); self.groups.len()]);
        let mut count = 0;
        for (i, plan) in self.plans.iter().enumerate() {
            let mut sources: Vec<Source> = listed.get(i).map(|l| l.0.clone()).unwrap_or_default();
            if let (Some(app), Some(name)) = (&self.apps[i], &plan.keys_app) {
                sources.push(Listed::from_app(name, app()));
            }
            let g = self.group_of[i];
            let p = PlanId::try_from(i).unwrap_or(NONE);
            for source in &sources {
                count += source.keys.len();
                if count > MAX_PLAN_KEYS {
                    let m = format!("more than {MAX_PLAN_KEYS} keys in all plans");
                    return Err(plan_error(plan, None, None, m));
                }
                self.read_source(plan, (g, p), source, &mut fixed.0[g])?;
            }
        }
        Ok(fixed)
    }

    /// Adds the keys of `source` to `members` as plan `p` of group `g`.
    fn read_source(
        &self,
        plan: &Plan,
        (g, p): (usize, PlanId),
        source: &Source,
        members: &mut HashMap<String, PlanId>,
    ) -> Result<(), PolicyError> {
        let what = format!("plan {:?}", plan.name);
        let spec = self.groups[g].spec.to_string();
        for (n, text) in &source.keys {
            let fail = |m: String| {
                let file = source.origin.file();
                let at = if file.is_some() {
                    String::new()
                } else {
                    format!("{}: ", source.origin.at(*n))
                };
                plan_error(plan, file, file.map(|_| *n), format!("{at}{m}"))
            };
            let key = key_of_text(&what, &self.groups[g].parts, text).map_err(|_| {
                fail(format!(
                    "not a key as {spec:?} writes it (a key of {} characters, not shown)",
                    text.len()
                ))
            })?;
            let other = *members.entry(key.to_string()).or_insert(p);
            if other != p {
                return Err(fail(format!(
                    "a key listed in plan {:?} too: a key is in one plan",
                    self.name(other)
                )));
            }
        }
        Ok(())
    }

    /// Makes `fixed` the members the sources list.
    pub(crate) fn refix(&self, fixed: Fixed) {
        self.fixed.store(Arc::new(fixed));
    }

    /// Each plan's members, counted.
    pub(crate) fn counts(&self) -> Vec<PlanMembers> {
        let (fixed, moved) = (self.fixed.load(), self.moved.load());
        let count = |maps: &[HashMap<String, PlanId>], g: usize, p: PlanId| {
            maps.get(g)
                .map_or(0, |m| m.values().filter(|v| **v == p).count())
        };
        self.plans
            .iter()
            .enumerate()
            .map(|(i, plan)| {
                let (g, p) = (self.group_of[i], PlanId::try_from(i).unwrap_or(NONE));
                PlanMembers {
                    name: plan.name.clone(),
                    key: plan.key.to_string(),
                    shared: plan.shared,
                    listed: count(&fixed.0, g, p),
                    moved_in: count(&moved.text, g, p) + count(&moved.digests, g, p),
                }
            })
            .collect()
    }
}

/// An error about `plan`, at `line` of `file` when known.
fn plan_error(
    plan: &Plan,
    file: Option<&std::path::Path>,
    line: Option<usize>,
    message: String,
) -> PolicyError {
    PolicyError {
        file: file.map(std::path::Path::to_path_buf),
        line,
        entry: None,
        message: format!("plan {:?}: {message}", plan.name),
    }
}
