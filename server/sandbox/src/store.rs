//! The simulated API server's storage: objects, a global resourceVersion,
//! and a bounded history of changes that watches replay and resume from.

use std::{
    collections::{BTreeMap, VecDeque},
    sync::{Arc, Mutex, MutexGuard},
};

use serde_json::{Value, json};
use tokio::sync::broadcast;

use super::{ApiError, Resource, validate};

/// What happened to an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ChangeKind {
    /// Created (or listed at the start of a watch).
    Added,
    /// Updated.
    Modified,
    /// Deleted; the object is its last state.
    Deleted,
}

impl ChangeKind {
    /// The watch event `type`.
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Self::Added => "ADDED",
            Self::Modified => "MODIFIED",
            Self::Deleted => "DELETED",
        }
    }
}

/// One change, as watches see it.
#[derive(Debug, Clone)]
pub(super) struct Change {
    /// Resource type.
    pub resource: Resource,
    /// What happened.
    pub kind: ChangeKind,
    /// The object after the change.
    pub object: Arc<Value>,
    /// The resourceVersion the change made.
    pub rv: u64,
}

impl Change {
    /// The object's namespace ("" when cluster-scoped).
    pub(super) fn namespace(&self) -> &str {
        meta_str(&self.object, "namespace")
    }
}

/// How a write treats its body.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct WriteOpts {
    /// Validate and answer, but store nothing (`dryRun=All`).
    pub dry_run: bool,
    /// Keep `status` from the body (the operator's own writes); API writes to
    /// resources with a status subresource ignore it, as Kubernetes does.
    pub keep_status: bool,
    /// Keep the object encoded (see [`pack`]): for bulk loads.
    pub packed: bool,
}

/// The key of a packed object's encoding. No Kubernetes field starts with
/// a NUL, so no client can write or select it.
const PACKED: &str = "\u{0}packed";

/// `object` kept as its JSON text beside a skeleton of what the store
/// itself reads (metadata without `managedFields`, the fields selectors
/// match): a pod of 15 KB of JSON costs about 20 KB rather than the
/// 150 KB of its parsed tree, so a benchmark can hold 200 000 of them.
/// Reads that answer the object ([`Store::get`], writes, list and watch
/// bodies) use the text; see [`unpacked`] and [`packed_text`].
fn pack(object: &Value) -> Value {
    let mut metadata = object["metadata"].clone();
    if let Some(m) = metadata.as_object_mut() {
        m.remove("managedFields");
    }
    let mut skeleton = json!({"apiVersion": object["apiVersion"], "kind": object["kind"], "metadata": metadata});
    for (part, field) in [("spec", "nodeName"), ("status", "phase"), ("status", "podIP")] {
        if let Some(v) = object[part].get(field) {
            skeleton[part][field] = v.clone();
        }
    }
    skeleton[PACKED] = json!(serde_json::to_string(object).unwrap_or_default());
    skeleton
}

/// A packed object's JSON text.
pub(super) fn packed_text(object: &Value) -> Option<&str> {
    object.get(PACKED).and_then(Value::as_str)
}

/// The whole object, parsed again when it was packed.
pub(super) fn unpacked(object: &Arc<Value>) -> Arc<Value> {
    match packed_text(object).map(serde_json::from_str::<Value>) {
        Some(Ok(full)) => Arc::new(full),
        _ => object.clone(),
    }
}

type Key = (Resource, String, String);

/// One page of a list.
pub(super) struct Page {
    /// The objects.
    pub items: Vec<Arc<Value>>,
    /// The store's version.
    pub rv: u64,
    /// The last object's place when more follow.
    pub more: Option<(String, String)>,
    /// How many follow, when counted.
    pub remaining: Option<u64>,
}

struct Inner {
    rv: u64,
    objects: BTreeMap<Key, Arc<Value>>,
    history: VecDeque<Arc<Change>>,
}

impl Inner {
    /// Objects of `r`, in one namespace or all, by key range (as etcd
    /// keys `/registry/<resource>/<namespace>/<name>`), not by a scan of
    /// every object.
    fn of<'a>(&'a self, r: Resource, ns: Option<&'a str>) -> impl Iterator<Item = (&'a Key, &'a Arc<Value>)> + 'a {
        self.after(r, ns, None)
    }

    /// As [`Self::of`], from after `after` (a page's last object): a page
    /// is found by range, as etcd's are, so paging a list costs what it
    /// returns.
    fn after<'a>(
        &'a self,
        r: Resource,
        ns: Option<&'a str>,
        after: Option<(&str, &str)>,
    ) -> impl Iterator<Item = (&'a Key, &'a Arc<Value>)> + 'a {
        use std::ops::Bound;
        let from = match after {
            Some((namespace, name)) if ns.is_none_or(|ns| ns == namespace) => {
                Bound::Excluded((r, namespace.to_owned(), name.to_owned()))
            }
            _ => Bound::Included((r, ns.unwrap_or_default().to_owned(), String::new())),
        };
        self.objects
            .range((from, Bound::Unbounded))
            .take_while(move |((res, n, _), _)| *res == r && ns.is_none_or(|ns| ns == n))
    }
}

/// All objects of the simulated cluster.
pub(super) struct Store {
    inner: Mutex<Inner>,
    changes: broadcast::Sender<Arc<Change>>,
    history_limit: usize,
}

/// `metadata.<field>` as a string, or "".
pub(super) fn meta_str<'a>(object: &'a Value, field: &str) -> &'a str {
    object["metadata"][field].as_str().unwrap_or("")
}

/// Now, as Kubernetes writes timestamps.
pub(super) fn now() -> String {
    jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

impl Store {
    /// An empty store keeping the last `history_limit` changes for watches.
    pub(super) fn new(history_limit: usize) -> Self {
        let (changes, _) = broadcast::channel(16_384);
        Self {
            inner: Mutex::new(Inner {
                rv: 1,
                objects: BTreeMap::new(),
                history: VecDeque::new(),
            }),
            changes,
            history_limit,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave an object half-written
        // (each write is one insert), so the data is still consistent.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Receives every change from now on.
    pub(super) fn subscribe(&self) -> broadcast::Receiver<Arc<Change>> {
        self.changes.subscribe()
    }

    /// The current resourceVersion.
    pub(super) fn resource_version(&self) -> u64 {
        self.lock().rv
    }

    /// Drops the kept changes and moves the resourceVersion on, so no
    /// earlier version can be resumed from.
    pub(super) fn compact(&self) {
        let mut inner = self.lock();
        inner.history.clear();
        inner.rv += 1;
    }

    fn commit(&self, inner: &mut Inner, key: Key, object: Value, kind: ChangeKind) -> Arc<Value> {
        self.commit_as(inner, key, object, kind, false)
    }

    fn commit_as(&self, inner: &mut Inner, key: Key, mut object: Value, kind: ChangeKind, packed: bool) -> Arc<Value> {
        inner.rv += 1;
        object["metadata"]["resourceVersion"] = json!(inner.rv.to_string());
        let object = Arc::new(if packed { pack(&object) } else { object });
        if kind == ChangeKind::Deleted {
            inner.objects.remove(&key);
        } else {
            inner.objects.insert(key.clone(), object.clone());
        }
        let change = Arc::new(Change {
            resource: key.0,
            kind,
            object: object.clone(),
            rv: inner.rv,
        });
        inner.history.push_back(change.clone());
        while inner.history.len() > self.history_limit {
            inner.history.pop_front();
        }
        // Sent under the lock, so a watch that subscribes under the lock
        // sees every change after its snapshot exactly once.
        let _ = self.changes.send(change);
        object
    }

    /// Creates an object in `ns` ("" for cluster-scoped resources).
    pub(super) fn create(
        &self,
        r: Resource,
        ns: &str,
        mut object: Value,
        opts: WriteOpts,
    ) -> Result<Arc<Value>, ApiError> {
        if !object.is_object() {
            return Err(ApiError::bad_request("the body must be a JSON object"));
        }
        let body_ns = meta_str(&object, "namespace");
        if r.namespaced() && !body_ns.is_empty() && body_ns != ns {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        let unnamed = object["metadata"]["name"].as_str().is_none_or(str::is_empty);
        if let Some(prefix) = object["metadata"]["generateName"].as_str().filter(|_| unnamed) {
            let name = format!("{prefix}{}", random_suffix());
            object["metadata"]["name"] = json!(name);
        }
        let name = meta_str(&object, "name").to_owned();
        validate::object(r, &name, &object)?;
        let mut inner = self.lock();
        if r.namespaced()
            && !inner
                .objects
                .contains_key(&(Resource::Namespace, String::new(), ns.to_owned()))
        {
            return Err(ApiError::not_found(Resource::Namespace, ns));
        }
        let key = (
            r,
            if r.namespaced() { ns.to_owned() } else { String::new() },
            name.clone(),
        );
        if inner.objects.contains_key(&key) {
            return Err(ApiError::already_exists(r, &name));
        }
        object["apiVersion"] = json!(r.api_version());
        object["kind"] = json!(r.kind());
        let meta = &mut object["metadata"];
        if r.namespaced() {
            meta["namespace"] = json!(ns);
        }
        meta["uid"] = json!(uuid::Uuid::new_v4().to_string());
        meta["creationTimestamp"] = json!(now());
        meta["generation"] = json!(1);
        if let Some(o) = object
            .as_object_mut()
            .filter(|_| r.has_status_subresource() && !opts.keep_status)
        {
            o.remove("status");
        }
        if r == Resource::Namespace {
            object["status"] = json!({"phase": "Active"});
        }
        if opts.dry_run {
            return Ok(Arc::new(object));
        }
        Ok(self.commit_as(&mut inner, key, object, ChangeKind::Added, opts.packed))
    }

    /// One object.
    pub(super) fn get(&self, r: Resource, ns: &str, name: &str) -> Result<Arc<Value>, ApiError> {
        self.lock()
            .objects
            .get(&(r, ns.to_owned(), name.to_owned()))
            .map(unpacked)
            .ok_or_else(|| ApiError::not_found(r, name))
    }

    /// Objects of `r` (in `ns`, or all namespaces) that `keep` accepts, and
    /// the resourceVersion of the snapshot.
    pub(super) fn list(&self, r: Resource, ns: Option<&str>, keep: impl Fn(&Value) -> bool) -> (Vec<Arc<Value>>, u64) {
        let page = self.page(r, ns, keep, None, None, false);
        (page.items, page.rv)
    }

    /// A page of a list, as `limit` and `continue` ask: the objects after
    /// `after` (namespace, name) in key order, at most `limit` of them, the
    /// current version, the last one's key when more follow and, with
    /// `count_rest`, how many follow (`remainingItemCount`, which
    /// kube-apiserver gives only for a list without selectors).
    pub(super) fn page(
        &self,
        r: Resource,
        ns: Option<&str>,
        keep: impl Fn(&Value) -> bool,
        after: Option<(&str, &str)>,
        limit: Option<usize>,
        count_rest: bool,
    ) -> Page {
        let inner = self.lock();
        let mut items = Vec::new();
        let mut last: Option<(&str, &str)> = None;
        let mut rest = inner.after(r, ns, after).filter(|(_, o)| keep(o));
        for ((_, namespace, name), o) in rest.by_ref() {
            items.push(o.clone());
            last = Some((namespace.as_str(), name.as_str()));
            if limit.is_some_and(|l| items.len() >= l) {
                break;
            }
        }
        let mut remaining = None;
        let more = if limit.is_some_and(|l| items.len() >= l) {
            let mut rest = rest.peekable();
            let more = rest.peek().is_some();
            if more && count_rest {
                remaining = Some(rest.count() as u64);
            }
            more.then(|| last.map(|(n, m)| (n.to_owned(), m.to_owned()))).flatten()
        } else {
            None
        };
        Page {
            items,
            rv: inner.rv,
            more,
            remaining,
        }
    }

    /// Replaces an object (PUT). With `status_only`, only `status` changes
    /// (the status subresource); otherwise `status` is kept as it was.
    pub(super) fn replace(
        &self,
        r: Resource,
        ns: &str,
        name: &str,
        object: Value,
        status_only: bool,
    ) -> Result<Arc<Value>, ApiError> {
        self.write(r, ns, name, status_only, |_| Ok(object))
    }

    /// Applies a JSON merge patch or JSON patch to an object.
    pub(super) fn patch(
        &self,
        r: Resource,
        ns: &str,
        name: &str,
        patch: &Patch,
        status_only: bool,
    ) -> Result<Arc<Value>, ApiError> {
        // Server-side apply creates what is not there yet.
        if let Patch::Apply { patch, manager, .. } = patch
            && !status_only
            && self.get(r, ns, name).is_err_and(|e| e.code == 404)
        {
            if !patch.is_object() || !(patch["metadata"].is_object() || patch["metadata"].is_null()) {
                return Err(ApiError::bad_request("an apply must be an object with object metadata"));
            }
            let mut object = json!({});
            json_patch::merge(&mut object, patch);
            object["metadata"]["name"] = json!(name);
            super::field_managers::record(&json!({}), &mut object, patch, manager, "Apply");
            return self.create(r, ns, object, WriteOpts::default());
        }
        self.write(r, ns, name, status_only, |current| {
            let mut doc = current.clone();
            match patch {
                Patch::Merge(p) => json_patch::merge(&mut doc, p),
                Patch::MergeBy { patch, manager } => {
                    json_patch::merge(&mut doc, patch);
                    super::field_managers::record(current, &mut doc, patch, manager, "Update");
                }
                Patch::Apply { patch, manager, force } => {
                    let conflicts = super::field_managers::conflicts(current, patch, manager);
                    if !conflicts.is_empty() && !force {
                        return Err(ApiError::apply_conflicts(r, name, &conflicts));
                    }
                    json_patch::merge(&mut doc, patch);
                    super::field_managers::record(current, &mut doc, patch, manager, "Apply");
                }
                Patch::Json(ops) => json_patch::patch(&mut doc, ops)
                    .map_err(|e| ApiError::invalid(r, name, &[(String::new(), e.to_string())]))?,
            }
            // A merge patch without a resourceVersion is unconditional.
            if !patch_sets_rv(patch) {
                doc["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"].clone();
            }
            Ok(doc)
        })
    }

    fn write(
        &self,
        r: Resource,
        ns: &str,
        name: &str,
        status_only: bool,
        make: impl FnOnce(&Value) -> Result<Value, ApiError>,
    ) -> Result<Arc<Value>, ApiError> {
        let mut inner = self.lock();
        let key = (r, ns.to_owned(), name.to_owned());
        let current = inner
            .objects
            .get(&key)
            .map(unpacked)
            .ok_or_else(|| ApiError::not_found(r, name))?;
        let mut next = make(&current)?;
        if !next.is_object() {
            return Err(ApiError::bad_request("the body must be a JSON object"));
        }
        if meta_str(&next, "name") != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({}) does not match the name on the URL ({name})",
                meta_str(&next, "name")
            )));
        }
        match next["metadata"]["resourceVersion"].as_str() {
            Some(rv) if rv != meta_str(&current, "resourceVersion") => {
                return Err(ApiError::conflict(r, name));
            }
            None if r.is_custom() => {
                return Err(ApiError::invalid(
                    r,
                    name,
                    &[(
                        "metadata.resourceVersion".into(),
                        "Invalid value: 0x0: must be specified for an update".into(),
                    )],
                ));
            }
            _ => {}
        }
        if status_only {
            let status = next["status"].take();
            next = (*current).clone();
            set_or_remove(&mut next, "status", status);
        } else if r.has_status_subresource() {
            set_or_remove(&mut next, "status", current["status"].clone());
        }
        for field in ["uid", "creationTimestamp", "namespace", "generation"] {
            next["metadata"][field] = current["metadata"][field].clone();
        }
        next["apiVersion"] = json!(r.api_version());
        next["kind"] = json!(r.kind());
        if next["spec"] != current["spec"] {
            let generation = current["metadata"]["generation"].as_u64().unwrap_or(1);
            next["metadata"]["generation"] = json!(generation + 1);
        }
        validate::object(r, name, &next)?;
        Ok(self.commit(&mut inner, key, next, ChangeKind::Modified))
    }

    /// Read-modify-write by the simulated controllers: no preconditions.
    /// Returns `None` when the object is gone or `f` changed nothing.
    pub(super) fn update(&self, r: Resource, ns: &str, name: &str, f: impl FnOnce(&mut Value)) -> Option<Arc<Value>> {
        let mut inner = self.lock();
        let key = (r, ns.to_owned(), name.to_owned());
        let current = unpacked(inner.objects.get(&key)?);
        let mut next = (*current).clone();
        f(&mut next);
        if next == *current {
            return None;
        }
        Some(self.commit(&mut inner, key, next, ChangeKind::Modified))
    }

    /// Deletes an object and, as the garbage collector would, everything it
    /// owns (and, for a namespace, everything in it).
    pub(super) fn delete(&self, r: Resource, ns: &str, name: &str) -> Result<Arc<Value>, ApiError> {
        self.delete_if(r, ns, name, &Value::Null)
    }

    /// [`Store::delete`] only if the object still is the one `options`'
    /// `preconditions` name (`uid`, `resourceVersion`: a `DeleteOptions`
    /// body), else 409 as the API server answers.
    pub(super) fn delete_if(&self, r: Resource, ns: &str, name: &str, options: &Value) -> Result<Arc<Value>, ApiError> {
        let mut inner = self.lock();
        let key = (r, ns.to_owned(), name.to_owned());
        let object = inner
            .objects
            .get(&key)
            .map(unpacked)
            .ok_or_else(|| ApiError::not_found(r, name))?;
        for (field, wanted) in [
            ("UID", &options["preconditions"]["uid"]),
            ("ResourceVersion", &options["preconditions"]["resourceVersion"]),
        ] {
            let Some(wanted) = wanted.as_str() else { continue };
            let actual = meta_str(&object, if field == "UID" { "uid" } else { "resourceVersion" });
            if wanted != actual {
                return Err(ApiError::precondition_failed(r, name, field, wanted, actual));
            }
        }
        let mut doomed = vec![key];
        let mut i = 0;
        while let Some(k) = doomed.get(i).cloned() {
            i += 1;
            let Some(o) = inner.objects.get(&k) else {
                continue;
            };
            let uid = meta_str(o, "uid").to_owned();
            let is_namespace = k.0 == Resource::Namespace;
            // Owners and dependents share a namespace; a namespace owns all in it.
            let ns = if is_namespace { &k.2 } else { &k.1 };
            let candidates = Resource::ALL
                .into_iter()
                .filter(|r| *r != Resource::Namespace)
                .flat_map(|r| inner.of(r, Some(ns)));
            for (dk, dependent) in candidates {
                let owned = dependent["metadata"]["ownerReferences"]
                    .as_array()
                    .is_some_and(|refs| refs.iter().any(|r| r["uid"] == uid.as_str()));
                if (owned || is_namespace) && !doomed.contains(dk) {
                    doomed.push(dk.clone());
                }
            }
        }
        // Dependents go first, so watchers never see an orphan.
        for k in doomed.into_iter().rev() {
            if let Some(o) = inner.objects.get(&k).map(unpacked) {
                let mut last = (*o).clone();
                last["metadata"]["deletionTimestamp"] = json!(now());
                self.commit(&mut inner, k, last, ChangeKind::Deleted);
            }
        }
        Ok(object)
    }

    /// Starts a watch of `r`: the changes a watcher must see first, and a
    /// receiver for the rest. From `None` (or 0) the first changes are the
    /// current objects as `ADDED`; from a resourceVersion, the kept changes
    /// after it, or 410 Gone when they are no longer kept.
    pub(super) fn watch(&self, r: Resource, from: Option<u64>) -> Result<WatchStart, ApiError> {
        let inner = self.lock();
        let receiver = self.changes.subscribe();
        let first = match from.filter(|rv| *rv > 0) {
            None => inner
                .of(r, None)
                .map(|(_, o)| {
                    Arc::new(Change {
                        resource: r,
                        kind: ChangeKind::Added,
                        rv: o["metadata"]["resourceVersion"]
                            .as_str()
                            .and_then(|v| v.parse().ok())
                            .unwrap_or(0),
                        object: o.clone(),
                    })
                })
                .collect(),
            Some(rv) => {
                let first_kept = inner.history.front().map_or(inner.rv + 1, |c| c.rv);
                if rv + 1 < first_kept {
                    return Err(ApiError::gone(rv));
                }
                inner
                    .history
                    .iter()
                    .filter(|c| c.rv > rv && c.resource == r)
                    .cloned()
                    .collect()
            }
        };
        Ok((first, receiver))
    }
}

/// Sets `object[key]`, or removes the key when `value` is null.
fn set_or_remove(object: &mut Value, key: &str, value: Value) {
    if let Some(map) = object.as_object_mut() {
        if value.is_null() {
            map.remove(key);
        } else {
            map.insert(key.to_owned(), value);
        }
    }
}

/// The changes a new watch sees first, and a receiver for the rest.
pub(super) type WatchStart = (Vec<Arc<Change>>, broadcast::Receiver<Arc<Change>>);

/// A patch body by its content type.
#[derive(Debug, Clone)]
pub(super) enum Patch {
    /// `application/merge-patch+json` (RFC 7386).
    Merge(Value),
    /// A merge (or, for built-in types, strategic merge) patch naming its
    /// `fieldManager`, who then owns what it sets.
    MergeBy { patch: Value, manager: String },
    /// `application/apply-patch+yaml` (server-side apply), refused with
    /// 409 when it would change another manager's fields, unless forced.
    Apply { patch: Value, manager: String, force: bool },
    /// `application/json-patch+json` (RFC 6902).
    Json(json_patch::Patch),
}

fn patch_sets_rv(patch: &Patch) -> bool {
    match patch {
        Patch::Merge(p) | Patch::MergeBy { patch: p, .. } | Patch::Apply { patch: p, .. } => {
            p["metadata"]["resourceVersion"].is_string()
        }
        Patch::Json(ops) => ops.0.iter().any(|op| {
            let path = match op {
                json_patch::PatchOperation::Add(o) => o.path.to_string(),
                json_patch::PatchOperation::Replace(o) => o.path.to_string(),
                _ => String::new(),
            };
            path == "/metadata/resourceVersion"
        }),
    }
}

/// Five characters of `[a-z0-9]`, as Kubernetes' name generator uses.
pub(super) fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    (0..5)
        .map(|_| char::from(ALPHABET[fastrand::usize(..ALPHABET.len())]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_packed_object_reads_and_writes_whole() {
        let store = Store::new(100);
        let ns = json!({"metadata": {"name": "ns"}});
        assert!(store.create(Resource::Namespace, "", ns, WriteOpts::default()).is_ok());
        let pod = json!({"metadata": {"name": "p", "labels": {"ray.io/cluster": "c"},
                                      "managedFields": [{"manager": "kubelet"}]},
                         "spec": {"nodeName": "n1", "containers": [{"name": "ray", "image": "ray"}]},
                         "status": {"phase": "Running", "podIP": "10.0.0.1"}});
        let opts = WriteOpts {
            keep_status: true,
            packed: true,
            ..WriteOpts::default()
        };
        let Ok(stored) = store.create(Resource::Pod, "ns", pod, opts) else {
            panic!("not stored");
        };
        assert!(stored["spec"].get("containers").is_none(), "kept parsed: {stored}");
        assert_eq!(stored["spec"]["nodeName"], "n1");
        let text = packed_text(&stored).unwrap_or_default();
        let whole: Value = serde_json::from_str(text).unwrap_or_default();
        assert_eq!(whole["spec"]["containers"][0]["image"], "ray");
        assert_eq!(
            whole["metadata"]["resourceVersion"],
            stored["metadata"]["resourceVersion"]
        );
        let got = store.get(Resource::Pod, "ns", "p").ok();
        assert_eq!(got.as_deref(), Some(&whole));
        let updated = store.update(Resource::Pod, "ns", "p", |p| p["status"]["phase"] = json!("Failed"));
        let updated = updated.map(|u| (*u).clone()).unwrap_or_default();
        assert_eq!(updated["spec"]["containers"][0]["image"], "ray");
        assert_eq!(updated["metadata"]["managedFields"][0]["manager"], "kubelet");
        assert!(packed_text(&updated).is_none());
    }
}
