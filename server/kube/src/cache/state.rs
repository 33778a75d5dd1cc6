//! What the cache holds: lean views of RayClusters, their pods, events and
//! namespaces, indexed the way reads ask for them.

use std::{
    collections::{BTreeMap, HashMap},
    sync::Arc,
};

use crate::domain::{Atom, ObjectMeta, ObservedCluster, ObservedEvent, ObservedPod};

/// An object the cache can index.
pub(crate) trait Indexed {
    /// Its metadata.
    fn meta(&self) -> &ObjectMeta;
    /// The bucket within its namespace: the cluster of a pod, the object
    /// an event is about; none (the `""` bucket) otherwise.
    fn bucket(&self) -> Option<&Atom> {
        None
    }
}

impl Indexed for ObservedCluster {
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
}

impl Indexed for crate::domain::ObservedRayJob {
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
}

impl Indexed for ObservedPod {
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn bucket(&self) -> Option<&Atom> {
        self.metadata.labels.get(crate::manifest::LABEL_CLUSTER)
    }
}

impl Indexed for ObservedEvent {
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    /// Describe asks for the events of a cluster and of each of its pods
    /// by name: a lookup per object, never a scan of the namespace.
    fn bucket(&self) -> Option<&Atom> {
        self.involved_object.name.as_ref()
    }
}

/// A quick hasher for the index: its keys are namespace and cluster
/// names, and every list looks them up once per cluster.
type Quick = foldhash::fast::RandomState;

/// One namespace's objects: bucket → name → object.
type Buckets<T> = HashMap<Atom, BTreeMap<Atom, Arc<T>>, Quick>;

/// One kind of object: namespace → bucket → name → object. The keys are
/// the objects' own atoms, so indexing copies no text.
pub(crate) struct Collection<T> {
    by_namespace: HashMap<Atom, Buckets<T>, Quick>,
    len: usize,
}

impl<T> Default for Collection<T> {
    fn default() -> Self {
        Self {
            by_namespace: HashMap::default(),
            len: 0,
        }
    }
}

impl<T: Indexed> Collection<T> {
    /// Adds or replaces `object`.
    pub(crate) fn apply(&mut self, object: Arc<T>) {
        let meta = object.meta();
        let bucket = object.bucket().cloned().unwrap_or_default();
        let (namespace, name) = (meta.namespace.clone(), meta.name.clone());
        let slot = self
            .by_namespace
            .entry(namespace)
            .or_default()
            .entry(bucket)
            .or_default();
        if slot.insert(name, object).is_none() {
            self.len += 1;
        }
    }

    /// Removes `object` (by namespace, bucket and name).
    pub(crate) fn delete(&mut self, object: &T) {
        let meta = object.meta();
        let Some(buckets) = self.by_namespace.get_mut(meta.namespace.as_str()) else {
            return;
        };
        let bucket = object.bucket().map_or("", Atom::as_str);
        if let Some(names) = buckets.get_mut(bucket) {
            if names.remove(meta.name.as_str()).is_some() {
                self.len -= 1;
            }
            if names.is_empty() {
                buckets.remove(bucket);
            }
        }
        if buckets.is_empty() {
            self.by_namespace.remove(meta.namespace.as_str());
        }
    }

    /// Replaces everything in `namespace` (everything at all when `None`)
    /// with `objects`: a relist.
    pub(crate) fn replace(&mut self, namespace: Option<&str>, objects: Vec<Arc<T>>) {
        match namespace {
            Some(ns) => {
                if let Some(old) = self.by_namespace.remove(ns) {
                    self.len -= old.values().map(BTreeMap::len).sum::<usize>();
                }
            }
            None => {
                self.by_namespace.clear();
                self.len = 0;
            }
        }
        for object in objects {
            self.apply(object);
        }
    }

    /// One object.
    pub(crate) fn get(&self, namespace: &str, bucket: &str, name: &str) -> Option<Arc<T>> {
        self.by_namespace.get(namespace)?.get(bucket)?.get(name).cloned()
    }

    /// The objects of one bucket, by name.
    pub(crate) fn bucket(&self, namespace: &str, bucket: &str) -> Vec<Arc<T>> {
        self.in_bucket(namespace, bucket).cloned().collect()
    }

    /// The objects of one bucket, by name, borrowed.
    pub(crate) fn in_bucket(&self, namespace: &str, bucket: &str) -> impl Iterator<Item = &Arc<T>> {
        self.by_namespace
            .get(namespace)
            .and_then(|b| b.get(bucket))
            .into_iter()
            .flat_map(BTreeMap::values)
    }

    /// Up to `limit` objects of one bucket whose names come after
    /// `after`, by name: a seek, not a scan.
    pub(crate) fn bucket_after(&self, namespace: &str, bucket: &str, after: Option<&str>, limit: usize) -> Vec<Arc<T>> {
        use std::ops::Bound::{Excluded, Unbounded};
        let Some(names) = self.by_namespace.get(namespace).and_then(|b| b.get(bucket)) else {
            return Vec::new();
        };
        let from = after.map_or(Unbounded, Excluded);
        names
            .range::<str, _>((from, Unbounded))
            .take(limit)
            .map(|(_, o)| o.clone())
            .collect()
    }

    /// The names in one bucket that begin with `prefix`, in order: a seek
    /// and as many steps as there are such names.
    pub(crate) fn names_with_prefix<'a>(
        &'a self,
        namespace: &str,
        bucket: &str,
        prefix: &'a str,
    ) -> impl Iterator<Item = &'a Atom> + 'a {
        use std::ops::Bound::{Included, Unbounded};
        self.by_namespace
            .get(namespace)
            .and_then(|b| b.get(bucket))
            .into_iter()
            .flat_map(move |names| {
                names
                    .range::<str, _>((Included(prefix), Unbounded))
                    .map(|(name, _)| name)
                    .take_while(move |name| name.starts_with(prefix))
            })
    }

    /// The objects of a namespace, every bucket.
    pub(crate) fn namespace(&self, namespace: &str) -> Vec<Arc<T>> {
        self.by_namespace
            .get(namespace)
            .map(|b| b.values().flat_map(|names| names.values().cloned()).collect())
            .unwrap_or_default()
    }

    /// Every object.
    pub(crate) fn all(&self) -> Vec<Arc<T>> {
        self.by_namespace
            .values()
            .flat_map(|b| b.values().flat_map(|names| names.values().cloned()))
            .collect()
    }

    /// How many objects it holds.
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

/// Whether an object at `have` includes a write that returned `want`.
/// resourceVersions are opaque to clients, but every API server (and the
/// sandbox) hands out increasing integers; when either does not parse,
/// only equality counts.
pub(crate) fn reached(have: Option<&str>, want: &str) -> bool {
    match (have.map(str::parse::<u64>), want.parse::<u64>()) {
        (Some(Ok(have)), Ok(want)) => have >= want,
        _ => have == Some(want),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(ns: &str, cluster: &str, name: &str) -> Arc<ObservedPod> {
        let mut p = ObservedPod::default();
        p.metadata.namespace = ns.into();
        p.metadata.name = name.into();
        p.metadata
            .labels
            .edit(|l| _ = l.insert(crate::manifest::LABEL_CLUSTER, cluster.into()));
        Arc::new(p)
    }

    fn names(objects: &[Arc<ObservedPod>]) -> Vec<&str> {
        objects.iter().map(|p| p.metadata.name.as_str()).collect()
    }

    #[test]
    fn pods_are_found_by_cluster_and_namespace() {
        let mut c = Collection::default();
        c.apply(pod("a", "x", "x-head"));
        c.apply(pod("a", "x", "x-w-2"));
        c.apply(pod("a", "x", "x-w-1"));
        c.apply(pod("a", "y", "y-head"));
        c.apply(pod("b", "x", "x-head"));
        c.apply(pod("a", "x", "x-head"));
        assert_eq!(c.len(), 5);
        assert_eq!(names(&c.bucket("a", "x")), ["x-head", "x-w-1", "x-w-2"]);
        assert_eq!(c.namespace("a").len(), 4);
        assert!(c.get("b", "x", "x-head").is_some());
        c.delete(&pod("a", "x", "x-w-1"));
        c.delete(&pod("a", "x", "never-there"));
        assert_eq!(c.len(), 4);
        assert_eq!(names(&c.bucket("a", "x")), ["x-head", "x-w-2"]);
    }

    #[test]
    fn names_with_a_prefix_are_found_by_seeking_to_it() {
        let mut c = Collection::default();
        for n in ["ml-a", "ml", "mlx", "ml-b", "web", "ml-"] {
            c.apply(pod("ns", "x", n));
        }
        let found = |prefix: &'static str| -> Vec<String> {
            c.names_with_prefix("ns", "x", prefix)
                .map(ToString::to_string)
                .collect()
        };
        assert_eq!(found("ml-"), ["ml-", "ml-a", "ml-b"]);
        assert_eq!(found("ml"), ["ml", "ml-", "ml-a", "ml-b", "mlx"]);
        assert_eq!(found(""), ["ml", "ml-", "ml-a", "ml-b", "mlx", "web"]);
        assert!(found("zz").is_empty());
        assert!(c.names_with_prefix("other", "x", "ml").next().is_none());
    }

    #[test]
    fn a_bucket_pages_by_seeking_past_a_name() {
        let mut c = Collection::default();
        for n in ["c", "a", "e", "b", "d"] {
            c.apply(pod("ns", "x", n));
        }
        assert_eq!(names(&c.bucket_after("ns", "x", None, 2)), ["a", "b"]);
        assert_eq!(names(&c.bucket_after("ns", "x", Some("b"), 2)), ["c", "d"]);
        assert_eq!(names(&c.bucket_after("ns", "x", Some("bb"), 9)), ["c", "d", "e"]);
        assert!(c.bucket_after("ns", "x", Some("e"), 9).is_empty());
        assert!(c.bucket_after("other", "x", None, 9).is_empty());
    }

    #[test]
    fn a_relist_replaces_one_namespace_or_everything() {
        let mut c = Collection::default();
        c.apply(pod("a", "x", "1"));
        c.apply(pod("a", "x", "2"));
        c.apply(pod("b", "x", "3"));
        c.replace(Some("a"), vec![pod("a", "y", "4")]);
        assert_eq!(c.len(), 2);
        assert!(c.get("a", "x", "1").is_none());
        assert!(c.get("b", "x", "3").is_some());
        c.replace(None, vec![pod("c", "z", "5")]);
        assert_eq!(c.len(), 1);
        assert_eq!(names(&c.all()), ["5"]);
    }

    #[test]
    fn resource_versions_compare_as_numbers_when_they_are() {
        assert!(reached(Some("10"), "9"));
        assert!(reached(Some("10"), "10"));
        assert!(!reached(Some("9"), "10"));
        assert!(!reached(None, "10"));
        assert!(reached(Some("abc"), "abc"));
        assert!(!reached(Some("abd"), "abc"));
    }
}
