//! Sites: the Kubernetes clusters krayne fronts (docs/sites.md), as the
//! sites file names them, and where a new Ray cluster goes.
//!
//! Kubernetes in each site schedules; krayne only chooses the site: an
//! explicit one if the team may use it, otherwise the first, by weight,
//! that the team may use, where the namespace exists and whose labels
//! offer the GPU types asked for.

use std::{collections::BTreeMap, path::PathBuf};

use serde::Deserialize;

use super::{Error, Site, check_dns1123_label};

/// Most sites a file may name.
pub const MAX_SITES: usize = 64;

/// What krayne knows of a site for placement: its name, weight and labels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SiteSpec {
    /// The site's name (a DNS-1123 label).
    pub name: Site,
    /// Higher first when a create names no site; ties in file order.
    pub weight: u32,
    /// Where it is (free text, shown to people).
    pub region: Option<String>,
    /// The GPU types its nodes offer (`a100`, `h100`), matched against a
    /// worker group's `gpu_type`.
    pub gpu_types: Vec<String>,
    /// Other labels, free text.
    pub labels: BTreeMap<String, String>,
}

/// One site of the sites file: its spec and how to reach its API server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SiteEntry {
    /// Name, weight and labels.
    pub spec: SiteSpec,
    /// A kubeconfig file (a Secret mounted in the chart); `None` is the
    /// Kubernetes krayne itself runs in (or `--kubeconfig`).
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig's context; its current one when `None`.
    pub context: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    sites: Vec<RawSite>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSite {
    name: String,
    #[serde(default)]
    kubeconfig: Option<PathBuf>,
    #[serde(default)]
    context: Option<String>,
    #[serde(default = "one")]
    weight: u32,
    #[serde(default)]
    labels: RawLabels,
}

#[derive(Default, Deserialize)]
struct RawLabels {
    #[serde(default)]
    region: Option<String>,
    #[serde(default, rename = "gpu-types")]
    gpu_types: Vec<String>,
    #[serde(flatten)]
    other: BTreeMap<String, String>,
}

fn one() -> u32 {
    1
}

/// Parses and checks a sites file; the error names the site and field.
pub fn parse_sites(text: &str) -> Result<Vec<SiteEntry>, String> {
    let file: File = serde_saphyr::from_str(text).map_err(|e| e.to_string())?;
    if file.sites.is_empty() {
        return Err("sites: name at least one site".into());
    }
    if file.sites.len() > MAX_SITES {
        return Err(format!("sites: at most {MAX_SITES} sites"));
    }
    let mut entries: Vec<SiteEntry> = Vec::with_capacity(file.sites.len());
    for (i, raw) in file.sites.into_iter().enumerate() {
        check_dns1123_label(&raw.name).map_err(|why| format!("sites[{i}].name: {:?}: {why}", raw.name))?;
        if raw.name == Site::LOCAL {
            // `local` is the one site of a server without a sites file:
            // in a fleet it would read as that (and metrics leave it
            // unlabelled).
            return Err(format!(
                "sites[{i}].name: \"local\" names the one site of a server without a sites file; \
                 name each site after where it is (eu-1, us-2)"
            ));
        }
        if entries.iter().any(|e| e.spec.name.name() == raw.name) {
            return Err(format!("sites[{i}].name: duplicate site {:?}", raw.name));
        }
        if raw.kubeconfig.is_none() && entries.iter().any(|e| e.kubeconfig.is_none()) {
            return Err(format!(
                "sites[{i}] ({}): only one site may omit `kubeconfig` (the Kubernetes krayne runs in)",
                raw.name
            ));
        }
        let mut gpu_types = Vec::new();
        for t in raw.labels.gpu_types {
            check_gpu_type(&t).map_err(|why| format!("sites[{i}].labels.gpu-types: {t:?}: {why}"))?;
            if !gpu_types.contains(&t) {
                gpu_types.push(t);
            }
        }
        entries.push(SiteEntry {
            spec: SiteSpec {
                name: Site::new(&raw.name),
                weight: raw.weight,
                region: raw.labels.region,
                gpu_types,
                labels: raw.labels.other,
            },
            kubeconfig: raw.kubeconfig,
            context: raw.context,
        });
    }
    Ok(entries)
}

/// A GPU type is a DNS-1123 label (`a100`, `h100`, `l4`).
pub fn check_gpu_type(gpu_type: &str) -> Result<(), String> {
    check_dns1123_label(gpu_type)
}

/// What a create asks of its site.
#[derive(Debug, Clone, Default)]
pub struct PlacementAsk {
    /// The site the caller named (`site:`, `--site`).
    pub site: Option<String>,
    /// The GPU types its worker groups ask for, each once.
    pub gpu_types: Vec<String>,
    /// The sites the caller's team may use; `None` is every site.
    pub allowed: Option<Vec<String>>,
    /// The sites whose quota cap for the namespace cannot take the
    /// cluster now, each with why.
    pub caps_full: BTreeMap<String, CapFull>,
}

/// Why a site's quota cap for the namespace cannot take a cluster now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapFull {
    /// What is short (`gpus: needs 4, 1 of 2 free`).
    pub why: String,
    /// Whether the cap could not hold it even empty.
    pub never: bool,
}

/// What krayne found of one site just now, for placement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SiteFacts {
    /// Whether its API server answers.
    pub up: bool,
    /// Whether the namespace exists there.
    pub namespace_exists: bool,
}

/// Where a cluster goes, and why there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// The site.
    pub site: Site,
    /// Why, in a sentence (`create --dry-run` shows it).
    pub why: String,
}

impl SiteSpec {
    /// Why this site cannot take a cluster asking `ask`, with `facts`;
    /// `None` when it can.
    fn refuses(&self, ask: &PlacementAsk, facts: SiteFacts) -> Option<String> {
        if let Some(allowed) = &ask.allowed
            && !allowed.iter().any(|s| s == self.name.name())
        {
            return Some("your team may not use this site".into());
        }
        if !facts.up {
            return Some("site unavailable: its Kubernetes API does not answer".into());
        }
        if !facts.namespace_exists {
            return Some("the namespace does not exist here".into());
        }
        let missing: Vec<&str> = ask
            .gpu_types
            .iter()
            .filter(|t| !self.gpu_types.contains(t))
            .map(String::as_str)
            .collect();
        if !missing.is_empty() {
            let offered = if self.gpu_types.is_empty() {
                "none".to_owned()
            } else {
                self.gpu_types.join(", ")
            };
            return Some(format!("offers no {} GPUs (offers: {offered})", missing.join(", ")));
        }
        None
    }

    /// Why this site's quota cap cannot take the cluster now, if it
    /// cannot, and whether it never could.
    fn cap_refuses(&self, ask: &PlacementAsk) -> Option<(String, bool)> {
        ask.caps_full.get(self.name.name()).map(|cap| {
            let why = if cap.never {
                format!("the namespace's cap here could never hold it ({})", cap.why)
            } else {
                format!("the namespace's cap here is full ({})", cap.why)
            };
            (why, cap.never)
        })
    }
}

/// Chooses the site of a new cluster among `sites` (in file order),
/// given what `facts` says of each. An explicit site must exist (else a
/// 400 naming `site`) and be the team's (else 403); otherwise the first
/// site by weight that takes it. A cluster that fits nowhere is refused
/// with each site's reason.
pub fn place(sites: &[SiteSpec], ask: &PlacementAsk, facts: impl Fn(&Site) -> SiteFacts) -> Result<Placement, Error> {
    if let Some(wanted) = &ask.site {
        let Some(site) = sites.iter().find(|s| s.name.name() == wanted) else {
            let known: Vec<&str> = sites.iter().map(|s| s.name.name()).collect();
            return Err(Error::invalid(
                "site",
                format!("no site {wanted:?}; the sites are: {}", known.join(", ")),
            ));
        };
        if let Some(allowed) = &ask.allowed
            && !allowed.iter().any(|s| s == wanted)
        {
            let may = if allowed.is_empty() {
                "none".to_owned()
            } else {
                allowed.join(", ")
            };
            return Err(Error::PermissionDenied(format!(
                "your team may not use site {wanted:?} (it may use: {may})"
            )));
        }
        let known = facts(&site.name);
        if !known.up {
            return Err(Error::Unavailable(format!(
                "site unavailable: site {wanted:?} does not answer; name another site or none"
            )));
        }
        return match site.refuses(ask, known) {
            None => Ok(Placement {
                site: site.name.clone(),
                why: "the site asked for".into(),
            }),
            Some(why) => Err(Error::FailedPrecondition(format!(
                "cannot place the cluster in site {wanted:?}: {why}"
            ))),
        };
    }
    let mut by_weight: Vec<&SiteSpec> = sites.iter().collect();
    by_weight.sort_by_key(|s| std::cmp::Reverse(s.weight));
    let mut refusals = Vec::new();
    let mut full = None;
    for site in by_weight {
        let refused = match site.refuses(ask, facts(&site.name)) {
            Some(why) => Some(why),
            None => site.cap_refuses(ask).map(|(why, never)| {
                if !never && full.is_none() {
                    full = Some(site);
                }
                why
            }),
        };
        match refused {
            None => {
                let why = if refusals.is_empty() {
                    format!("the first site by weight ({})", site.weight)
                } else {
                    format!(
                        "the first site by weight ({}) that takes it; {}",
                        site.weight,
                        refusals.join("; ")
                    )
                };
                return Ok(Placement {
                    site: site.name.clone(),
                    why,
                });
            }
            Some(why) => refusals.push(format!("{}: {why}", site.name)),
        }
    }
    // No cap has room now: the first site that takes it but for its cap
    // is where admission judges it, with the numbers (it waits in the
    // namespace's line there, or is refused as over quota).
    if let Some(site) = full {
        return Ok(Placement {
            site: site.name.clone(),
            why: format!(
                "the first site by weight ({}) that takes it but for its cap; {}",
                site.weight,
                refusals.join("; ")
            ),
        });
    }
    Err(Error::FailedPrecondition(format!(
        "no site can take this cluster: {}",
        refusals.join("; ")
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r"
sites:
  - name: eu-1
    weight: 10
    labels: { region: eu-west, gpu-types: [a100], tier: prod }
  - name: us-2
    kubeconfig: /etc/krayne/sites/us-2/kubeconfig
    weight: 50
    labels: { region: us-east, gpu-types: [h100, a100] }
  - name: lab
    kubeconfig: /k/lab
    context: lab
";

    fn sites() -> Vec<SiteSpec> {
        parse_sites(FILE).unwrap().into_iter().map(|e| e.spec).collect()
    }

    fn all_up(_: &Site) -> SiteFacts {
        SiteFacts {
            up: true,
            namespace_exists: true,
        }
    }

    #[test]
    fn a_file_names_each_sites_reach_weight_and_labels() {
        let entries = parse_sites(FILE).unwrap();
        assert_eq!(entries.len(), 3);
        assert_eq!(entries[0].kubeconfig, None);
        assert_eq!(entries[0].spec.labels.get("tier").map(String::as_str), Some("prod"));
        assert_eq!(entries[1].spec.gpu_types, ["h100", "a100"]);
        assert_eq!(
            (entries[2].spec.weight, entries[2].context.as_deref()),
            (1, Some("lab"))
        );
    }

    #[test]
    fn the_charts_rendering_is_read() {
        let rendered = r#"sites:
  - name: "eu-1"
    weight: 100
    labels: {"gpu-types":["a100"],"region":"eu-west"}
  - name: "us-2"
    weight: 50
    kubeconfig: "/etc/krayne/sites/us-2/kubeconfig"
    context: "us-2"
    labels: {"gpu-types":["h100","a100"],"region":"us-east","tier":"burst"}
"#;
        let entries = parse_sites(rendered).unwrap();
        assert_eq!(entries[1].spec.gpu_types, ["h100", "a100"]);
        assert_eq!(entries[1].spec.labels.get("tier").map(String::as_str), Some("burst"));
        assert_eq!(entries[0].spec.region.as_deref(), Some("eu-west"));
    }

    #[test]
    fn bad_files_are_refused_naming_the_site() {
        for (text, says) in [
            ("sites: []", "at least one"),
            ("sites: [{name: Eu}]", "sites[0].name"),
            ("sites: [{name: a}, {name: a, kubeconfig: /k}]", "duplicate"),
            ("sites: [{name: a}, {name: b}]", "only one site may omit"),
            ("sites: [{name: a, labels: {gpu-types: [A 100]}}]", "gpu-types"),
            ("sites: [{name: a, colour: red}]", "colour"),
            ("sites: [{name: local}]", "sites[0].name: \"local\""),
        ] {
            let err = parse_sites(text).unwrap_err();
            assert!(err.contains(says), "{text}: {err}");
        }
    }

    #[test]
    fn without_a_site_the_heaviest_that_takes_it_is_chosen() {
        let placed = place(&sites(), &PlacementAsk::default(), all_up).unwrap();
        assert_eq!(placed.site.name(), "us-2");
        let ask = PlacementAsk {
            allowed: Some(vec!["eu-1".into(), "lab".into()]),
            ..PlacementAsk::default()
        };
        assert_eq!(place(&sites(), &ask, all_up).unwrap().site.name(), "eu-1");
    }

    #[test]
    fn a_gpu_type_goes_where_it_is_offered_and_each_refusal_is_said() {
        let h100 = PlacementAsk {
            gpu_types: vec!["h100".into()],
            allowed: Some(vec!["eu-1".into(), "lab".into()]),
            ..PlacementAsk::default()
        };
        let err = place(&sites(), &h100, all_up).unwrap_err().to_string();
        assert!(err.contains("us-2: your team may not use this site"), "{err}");
        assert!(err.contains("eu-1: offers no h100 GPUs (offers: a100)"), "{err}");
        assert!(err.contains("lab: offers no h100 GPUs (offers: none)"), "{err}");
        let a100_us_down = PlacementAsk {
            gpu_types: vec!["a100".into()],
            ..PlacementAsk::default()
        };
        let facts = |s: &Site| SiteFacts {
            up: s.name() != "us-2",
            namespace_exists: true,
        };
        let placed = place(&sites(), &a100_us_down, facts).unwrap();
        assert_eq!(placed.site.name(), "eu-1");
        assert!(placed.why.contains("us-2: site unavailable"), "{}", placed.why);
    }

    #[test]
    fn an_explicit_site_must_exist_be_the_teams_and_take_it() {
        let ask = |site: &str| PlacementAsk {
            site: Some(site.into()),
            allowed: Some(vec!["eu-1".into(), "lab".into()]),
            ..PlacementAsk::default()
        };
        assert_eq!(place(&sites(), &ask("lab"), all_up).unwrap().site.name(), "lab");
        assert!(matches!(
            place(&sites(), &ask("mars"), all_up),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            place(&sites(), &ask("us-2"), all_up),
            Err(Error::PermissionDenied(_))
        ));
        let no_namespace = |_: &Site| SiteFacts {
            up: true,
            namespace_exists: false,
        };
        let err = place(&sites(), &ask("eu-1"), no_namespace).unwrap_err();
        assert!(err.to_string().contains("namespace does not exist"), "{err}");
        // A full cap at the site asked for is admission's to judge (it
        // refuses with the numbers, or the cluster waits there).
        let capped = PlacementAsk {
            caps_full: [("lab".to_owned(), full_now())].into(),
            ..ask("lab")
        };
        assert_eq!(place(&sites(), &capped, all_up).unwrap().site.name(), "lab");
    }

    fn full_now() -> CapFull {
        CapFull {
            why: "gpus: needs 2, 0 of 2 free".into(),
            never: false,
        }
    }

    #[test]
    fn a_full_cap_sends_a_cluster_on_or_admission_judges_it_where_it_would_go() {
        let full = |sites: &[&str]| -> BTreeMap<String, CapFull> {
            sites.iter().map(|s| ((*s).to_owned(), full_now())).collect()
        };
        let ask = PlacementAsk {
            caps_full: full(&["us-2"]),
            ..PlacementAsk::default()
        };
        let placed = place(&sites(), &ask, all_up).unwrap();
        assert_eq!(placed.site.name(), "eu-1");
        assert!(
            placed
                .why
                .contains("us-2: the namespace's cap here is full (gpus: needs 2, 0 of 2 free)"),
            "{}",
            placed.why
        );
        // No cap has room: the heaviest, where admission refuses it with
        // the numbers or it waits in line…
        let nowhere = PlacementAsk {
            caps_full: full(&["us-2", "eu-1", "lab"]),
            ..PlacementAsk::default()
        };
        let placed = place(&sites(), &nowhere, all_up).unwrap();
        assert_eq!(placed.site.name(), "us-2");
        assert!(placed.why.contains("but for its cap"), "{}", placed.why);
        // …unless its cap could never hold it: the next whose cap is only
        // full now.
        let mut caps = full(&["eu-1", "lab"]);
        caps.insert(
            "us-2".into(),
            CapFull {
                why: "gpus: needs 4, 2 of 2 free".into(),
                never: true,
            },
        );
        let never_here = PlacementAsk {
            caps_full: caps,
            ..PlacementAsk::default()
        };
        let placed = place(&sites(), &never_here, all_up).unwrap();
        assert_eq!(placed.site.name(), "eu-1", "{}", placed.why);
        assert!(
            placed
                .why
                .contains("us-2: the namespace's cap here could never hold it"),
            "{}",
            placed.why
        );
        let only_never = PlacementAsk {
            caps_full: [("us-2".to_owned(), never_here.caps_full["us-2"].clone())].into(),
            allowed: Some(vec!["us-2".into()]),
            ..PlacementAsk::default()
        };
        let err = place(&sites(), &only_never, all_up).unwrap_err().to_string();
        assert!(err.contains("could never hold it"), "{err}");
    }
}
