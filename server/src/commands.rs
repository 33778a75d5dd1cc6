//! What each `krayne-server` subcommand does.

use std::{process::ExitCode, time::Duration};

use jsonwebtoken::Algorithm;

use crate::{
    app::{self, Parts},
    auth::{
        Authenticator, Issuer, IssuerKind, JwksOptions, JwksSource, KeyRefresh, MintRequest, SessionKeys, TokenRules,
        Verifier, VerifyingKey, asymmetric_algorithms, load_mapping, mint, parse_issuers, watch_mapping,
    },
    config::{
        AuditCommand, CacheArgs, Cli, ClusterPodSecurity, Command, DatabaseArgs, HttpArgs, JwtArgs, MigrateArgs,
        MintArgs, PruneArgs, ServeArgs, TokenCommand, UpstreamMode,
    },
    control::{
        ControlSettings, DenialSettings, LifecycleMode, RateLimit, SessionSettings, TunnelSettings, WatchSettings,
    },
    domain::{AppsDomain, LoginSettings, PublicUrl, VersionInfo, ray_auth::RayAuthKey},
    edge::TrustedProxies,
    k8s::{self, CacheOptions},
    manifest::{ManifestSettings, PodSecurity, PolicyPeers},
    rest::RestSettings,
    serve::ConnectionLimits,
    store::{self, DatabaseOptions, QueueOptions, Upkeep},
};

#[cfg(feature = "sandbox")]
mod sandbox_cmd;
mod sites;

/// Runs the parsed command line.
pub fn run(cli: Cli) -> ExitCode {
    init_tracing(&cli.log, cli.log_json);
    // Before anything records: the watch cache starts counting before the
    // ops listener exists, and metrics without a recorder are lost.
    let _ = crate::ops::metrics_handle();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => return fail(&format!("cannot start the async runtime: {e}")),
    };
    let result = runtime.block_on(async move {
        match cli.command {
            Command::Serve(args) => serve(*args).await,
            #[cfg(feature = "sandbox")]
            Command::Sandbox(args) => sandbox_cmd::run(args).await,
            Command::Openapi => openapi(),
            Command::Token(TokenCommand::Mint(args)) => mint_token(&args),
            Command::Migrate(args) => migrate(&args).await,
            Command::Audit(AuditCommand::Prune(args)) => prune(&args).await,
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e),
    }
}

#[expect(clippy::print_stderr)]
fn fail(message: &str) -> ExitCode {
    eprintln!("krayne-server: {message}");
    ExitCode::FAILURE
}

fn init_tracing(filter: &str, json: bool) {
    let filter =
        tracing_subscriber::EnvFilter::try_new(filter).unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi);
    let _ = if json {
        builder.json().try_init()
    } else {
        builder.fmt_fields(escaped_fields()).try_init()
    };
}

/// Text-log fields with control characters escaped: JSON logs escape
/// them by JSON's rules, but tracing's text format writes a value as it
/// is (it escapes ESC, not newlines), so a newline in any value taken
/// from a request would start a forged log line.
fn escaped_fields() -> impl for<'w> tracing_subscriber::fmt::FormatFields<'w> + Send + Sync + 'static {
    use tracing_subscriber::field::MakeExt as _;

    tracing_subscriber::fmt::format::debug_fn(|writer, field, value| {
        let text = format!("{value:?}");
        let text = crate::domain::text::escape_controls(&text);
        if field.name() == "message" {
            writer.write_str(&text)
        } else {
            write!(writer, "{field}={text}")
        }
    })
    .delimited(" ")
}

/// Reads the JWT flags into a verifier: the flags' issuer and those of
/// `--issuers-file`. Kubernetes' service-account issuer, which needs the
/// Kubernetes connection, is added by [`with_service_accounts`].
pub(crate) fn verifier(jwt: &JwtArgs) -> Result<Verifier, String> {
    let mut keys = Vec::new();
    for spec in &jwt.jwt_public_keys {
        let (alg, path) = spec
            .split_once(':')
            .ok_or_else(|| format!("--jwt-public-key {spec:?}: expected ALG:PATH"))?;
        let alg: Algorithm = alg
            .parse()
            .map_err(|_| format!("--jwt-public-key: unknown algorithm {alg:?}"))?;
        let pem = std::fs::read(path).map_err(|e| format!("--jwt-public-key {path}: {e}"))?;
        keys.push(VerifyingKey::from_pem(alg, &pem).map_err(|e| format!("--jwt-public-key {path}: {e}"))?);
    }
    if let Some(path) = &jwt.jwt_hs256_secret_file {
        let secret = std::fs::read(path).map_err(|e| format!("--jwt-hs256-secret-file {}: {e}", path.display()))?;
        if secret.len() < 32 {
            return Err("--jwt-hs256-secret-file: the secret must be at least 32 bytes".into());
        }
        tracing::warn!("accepting HS256 tokens: for development only");
        keys.push(VerifyingKey::hs256(&secret));
    }
    let jwks = match (&jwt.jwks_url, &jwt.oidc_issuer_url) {
        (Some(url), _) => Some((url.clone(), false)),
        (None, Some(issuer)) => Some((issuer.clone(), true)),
        (None, None) => None,
    };
    let more = match &jwt.issuers_file {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| format!("--issuers-file {}: {e}", path.display()))?;
            parse_issuers(&text).map_err(|e| format!("--issuers-file {}: {e}", path.display()))?
        }
        None => Vec::new(),
    };
    let others = jwks.is_some() || !more.is_empty() || jwt.service_account_tokens;
    if jwt.jwt_hs256_secret_file.is_some() && others && !jwt.allow_hs256_with_jwks {
        return Err(
            "--jwt-hs256-secret-file beside another issuer (--jwks-url, --oidc-issuer-url, --issuers-file or \
                    --service-account-tokens): the development secret would let whoever holds it sign in as \
                    anyone; drop it, or give --allow-hs256-with-jwks if this is meant"
                .into(),
        );
    }
    let flags_issuer = !keys.is_empty() || jwks.is_some();
    if !flags_issuer && more.is_empty() && !jwt.service_account_tokens {
        return Err(
            "no token keys: give --jwks-url, --oidc-issuer-url, --jwt-public-key ALG:PATH, --issuers-file or \
                    --service-account-tokens (or, for development, --jwt-hs256-secret-file)"
                .into(),
        );
    }
    let (refresh, algorithms) = key_sources(jwt)?;
    let mut issuers = Vec::new();
    if flags_issuer {
        let rules = TokenRules {
            issuer: jwt.jwt_issuer.clone(),
            audience: jwt.jwt_audience.clone(),
            leeway_seconds: jwt.jwt_leeway_seconds.min(60),
            subject_claim: jwt.jwt_subject_claim.clone(),
            email_claim: jwt.jwt_email_claim.clone(),
            groups_claim: jwt.jwt_groups_claim.clone(),
            assume_email_verified: jwt.jwt_assume_email_verified,
            max_lifetime_seconds: None,
        };
        let mut issuer = Issuer::new(IssuerKind::Accounts, keys, rules);
        if let Some((url, discover)) = jwks {
            issuer = issuer.with_jwks(JwksSource::new(JwksOptions {
                url,
                discover,
                algorithms: algorithms.clone(),
                ttl: refresh.ttl,
                cooldown: refresh.cooldown,
                timeout: refresh.timeout,
            })?);
        }
        issuers.push(issuer);
    }
    for spec in &more {
        issuers.push(spec.build(refresh).map_err(|e| format!("--issuers-file: {e}"))?);
    }
    let mut names = std::collections::HashSet::new();
    for name in issuers.iter().filter_map(Issuer::named) {
        if !names.insert(name.to_owned()) {
            return Err(format!("the issuer {name} is configured twice"));
        }
    }
    Ok(Verifier::with_issuers(issuers))
}

/// How often key sets are fetched, and the algorithms taken from them.
fn key_sources(jwt: &JwtArgs) -> Result<(KeyRefresh, Vec<Algorithm>), String> {
    let refresh = KeyRefresh {
        ttl: Duration::from_secs(jwt.jwks_ttl_seconds),
        cooldown: Duration::from_secs(jwt.jwks_cooldown_seconds),
        timeout: Duration::from_secs(5),
    };
    let algorithms = asymmetric_algorithms(&jwt.jwt_algorithms).map_err(|e| format!("--jwt-algorithms: {e}"))?;
    Ok((refresh, algorithms))
}

/// `verifier`, also trusting Kubernetes' service-account issuer (through
/// `kube`) when `--service-account-tokens` is set.
pub(crate) fn with_service_accounts(verifier: Verifier, jwt: &JwtArgs, kube: &k8s::Client) -> Result<Verifier, String> {
    if !jwt.service_account_tokens {
        return Ok(verifier);
    }
    let (refresh, algorithms) = key_sources(jwt)?;
    let mut issuer = service_account_issuer(
        jwt.service_account_issuer.clone(),
        &jwt.service_account_audience,
        kube,
        refresh,
        algorithms,
        jwt.service_account_max_token_seconds,
    );
    if jwt.service_account_token_review {
        issuer = issuer.with_reviewer(token_reviewer(kube, refresh));
    }
    Ok(verifier.and(issuer))
}

/// The cluster's service-account issuer, its documents read through the
/// Kubernetes connection.
pub(crate) fn service_account_issuer(
    pinned: Option<String>,
    audience: &str,
    kube: &k8s::Client,
    refresh: KeyRefresh,
    algorithms: Vec<Algorithm>,
    max_token_seconds: u64,
) -> Issuer {
    let documents = std::sync::Arc::new(k8s::ClusterIssuerDocuments::new(kube.clone(), refresh.timeout));
    let source = JwksSource::with_documents(
        JwksOptions {
            url: String::new(),
            discover: true,
            algorithms,
            ttl: refresh.ttl,
            cooldown: refresh.cooldown,
            timeout: refresh.timeout,
        },
        documents,
    );
    let rules = TokenRules {
        issuer: pinned.unwrap_or_default(),
        audience: audience.to_owned(),
        max_lifetime_seconds: Some(max_token_seconds),
        ..TokenRules::default()
    };
    tracing::info!(audience = %rules.audience, "trusting Kubernetes ServiceAccount tokens");
    Issuer::new(IssuerKind::ServiceAccounts, Vec::new(), rules).with_jwks(source)
}

/// Kubernetes' word on ServiceAccount tokens, through `kube`.
pub(crate) fn token_reviewer(kube: &k8s::Client, refresh: KeyRefresh) -> crate::auth::Reviewer {
    crate::auth::Reviewer::new(std::sync::Arc::new(k8s::ClusterTokenReviews::new(
        kube.clone(),
        refresh.timeout,
    )))
}

/// What `/.well-known/krayne` tells `krayne login`: where people sign in.
pub(crate) fn login_settings(jwt: &JwtArgs, verifier: &Verifier) -> Result<Option<LoginSettings>, String> {
    let Some(client_id) = jwt.login_client_id.clone().filter(|c| !c.is_empty()) else {
        if jwt.login_issuer.is_some() {
            return Err("--login-issuer needs --login-client-id".into());
        }
        return Ok(None);
    };
    let issuer = jwt
        .login_issuer
        .clone()
        .or_else(|| jwt.oidc_issuer_url.clone())
        .ok_or("--login-client-id needs --login-issuer (or --oidc-issuer-url)")?;
    if !verifier.issuers().iter().any(|i| i.named() == Some(issuer.as_str())) {
        return Err(format!(
            "--login-issuer {issuer} is not a trusted issuer (--jwt-issuer or --issuers-file): its tokens would be refused"
        ));
    }
    Ok(Some(LoginSettings {
        issuer,
        client_id,
        scopes: jwt.login_scopes.clone(),
    }))
}

/// Krayne's own pods for the clusters' NetworkPolicies: `namespace`, and
/// `labels` as `key=value,…`.
fn policy_peers(namespace: &str, labels: &str, extra_ingress: &str) -> Result<PolicyPeers, String> {
    let namespace = namespace.trim();
    if namespace.is_empty() {
        return Err("--cluster-network-policy-namespace: name the namespace krayne runs in".into());
    }
    let mut pod_labels = std::collections::BTreeMap::new();
    for pair in labels.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (key, value) = pair
            .split_once('=')
            .ok_or_else(|| format!("--cluster-network-policy-pod-labels: {pair:?} is not key=value"))?;
        pod_labels.insert(key.trim().to_owned(), value.trim().to_owned());
    }
    if pod_labels.is_empty() {
        return Err("--cluster-network-policy-pod-labels: name at least one label of krayne's pods".into());
    }
    Ok(PolicyPeers {
        namespace: namespace.to_owned(),
        pod_labels,
        extra_ingress: PolicyPeers::parse_extra_ingress(extra_ingress)
            .map_err(|e| format!("--cluster-network-policy-extra-ingress: {e}"))?,
    })
}

/// The service, HTTP and connection settings from the HTTP flags.
/// `--head-answer-budget-mib`'s default (the sandbox's budget).
pub(crate) const DEFAULT_HEAD_ANSWER_BUDGET_MIB: u64 = 16;

/// Ray's heads over HTTP, their answers held within `budget_mib` MiB
/// together (at least 8).
pub(crate) fn ray_heads(budget_mib: u64) -> std::sync::Arc<dyn crate::domain::RayHeads> {
    let budget = usize::try_from(budget_mib.max(8).saturating_mul(1024 * 1024)).unwrap_or(usize::MAX);
    std::sync::Arc::new(krayne_ray::HttpRayHeads::new(budget))
}

pub(crate) fn settings(http: &HttpArgs) -> Result<(ControlSettings, RestSettings, ConnectionLimits), String> {
    let public_url = http
        .public_url
        .as_deref()
        .map(PublicUrl::parse)
        .transpose()
        .map_err(|e| format!("--public-url {e}"))?;
    let apps_domain = http
        .apps_domain
        .as_deref()
        .map(AppsDomain::parse)
        .transpose()
        .map_err(|e| format!("--apps-domain {e}"))?;
    let network_policy = http
        .cluster_network_policy_namespace
        .as_deref()
        .map(|namespace| {
            policy_peers(
                namespace,
                &http.cluster_network_policy_pod_labels,
                &http.cluster_network_policy_extra_ingress,
            )
        })
        .transpose()?;
    let gpu_image = http.default_ray_gpu_image.clone().filter(|i| !i.is_empty());
    if http.default_ray_image.contains('@') && gpu_image.is_none() {
        return Err(
            "--default-ray-image is pinned by digest, to which no `-gpu` can be added: name GPU pods' image with \
             --default-ray-gpu-image"
                .into(),
        );
    }
    let ray_auth = match &http.ray_auth_key_file {
        Some(path) => {
            let key = std::fs::read(path).map_err(|e| format!("--ray-auth-key-file {}: {e}", path.display()))?;
            Some(RayAuthKey::new(&key).map_err(|e| format!("--ray-auth-key-file: {e}"))?)
        }
        None => {
            tracing::warn!(
                "no --ray-auth-key-file: new clusters do not require Ray's token authentication, so only a \
                 NetworkPolicy (where enforced) keeps other pods from their heads' Jobs API"
            );
            None
        }
    };
    let keys = match &http.session_secret_file {
        Some(path) => {
            let secret = std::fs::read(path).map_err(|e| format!("--session-secret-file {}: {e}", path.display()))?;
            Some(SessionKeys::from_secret(&secret).map_err(|e| format!("--session-secret-file: {e}"))?)
        }
        None => {
            tracing::info!("no --session-secret-file: browser sessions to clusters' services are off");
            None
        }
    };
    let service = ControlSettings {
        package_limit: http.max_package_mib.max(1) * 1024 * 1024,
        manifest: ManifestSettings {
            default_image: http.default_ray_image.clone(),
            default_gpu_image: gpu_image,
            notebook_behind: Some(public_url.as_ref().map_or("", PublicUrl::prefix).to_owned()),
            pod_security: match http.cluster_pod_security {
                ClusterPodSecurity::Krayne => PodSecurity::Krayne,
                ClusterPodSecurity::Restricted => PodSecurity::Restricted,
            },
            ray_token_auth: false,
        },
        sessions: SessionSettings {
            keys,
            lifetime: Duration::from_secs(http.session_ttl_seconds.max(1)),
            ..SessionSettings::default()
        },
        public_url,
        apps_domain,
        network_policy,
        ray_auth,
        companions_every: Duration::from_secs(http.companions_interval_seconds.max(1)),
        rayjobs_every: Duration::from_secs(http.rayjobs_interval_seconds.max(1)),
        rayjob_retention: (http.rayjob_retention_seconds > 0)
            .then(|| Duration::from_secs(http.rayjob_retention_seconds)),
        wait_unschedulable_grace: Duration::from_secs(http.wait_unschedulable_seconds),
        rate_limit: RateLimit::new(http.rate_limit_per_second, http.rate_limit_burst),
        denials: DenialSettings {
            rate: RateLimit::new(http.unauthenticated_rate_per_second, http.unauthenticated_burst),
            window: Duration::from_secs(http.audit_denial_window_seconds),
        },
        tunnels: TunnelSettings {
            max_per_principal: http.max_tunnels_per_caller.max(1),
            max_per_namespace: http.max_tunnels_per_namespace.max(1),
            idle_timeout: Duration::from_secs(http.tunnel_idle_timeout_seconds.max(1)),
            reauthorize_every: Duration::from_secs(http.tunnel_reauthorize_seconds.max(1)),
            ..TunnelSettings::default()
        },
        watches: WatchSettings {
            max_per_principal: http.max_watches_per_caller.max(1),
            max_per_namespace: http.max_watches_per_namespace.max(1),
            history: http.watch_history.max(1),
            queue: http.watch_queue.max(1),
            stall: Duration::from_secs(http.watch_stall_seconds.max(1)),
            bookmark_every: Duration::from_secs(http.watch_bookmark_seconds.max(1)),
        },
        ..ControlSettings::default()
    };
    let rest = RestSettings {
        body_limit: http.body_limit_bytes,
        request_timeout: Duration::from_secs(http.request_timeout_seconds),
        body_timeout: Duration::from_secs(http.request_body_timeout_seconds.max(1)),
        cors_origins: http.cors_origins.clone(),
    };
    let connections = ConnectionLimits {
        header_read_timeout: Duration::from_secs(http.header_read_timeout_seconds.max(1)),
        max_header_bytes: http.max_header_bytes,
    };
    Ok((service, rest, connections))
}

async fn serve(args: ServeArgs) -> Result<(), String> {
    let sites = args.sites_file.as_deref().map(sites::read_sites).transpose()?;
    let site_names: Vec<String> = sites.iter().flatten().map(|e| e.spec.name.to_string()).collect();
    let (mapping, hash) = load_mapping(&args.teams_file, &site_names).map_err(|e| format!("--teams-file {e}"))?;
    tracing::info!(file = %args.teams_file.display(), sha256 = %hash, "team mapping loaded");
    let verifier = verifier(&args.jwt)?;
    let login = login_settings(&args.jwt, &verifier)?;
    let client = k8s::connect(args.kubeconfig.as_deref(), args.kube_context.as_deref()).await?;
    let verifier = with_service_accounts(verifier, &args.jwt, &client)?;
    let auth = Authenticator::new(verifier, mapping);
    let reload = watch_mapping(
        auth.clone(),
        args.teams_file.clone(),
        hash,
        args.teams_watch,
        site_names,
    )?;
    let in_cluster = args.kubeconfig.is_none() && std::env::var_os("KUBERNETES_SERVICE_HOST").is_some();
    let mode = args.service_upstream.unwrap_or(if in_cluster {
        UpstreamMode::Direct
    } else {
        UpstreamMode::PortForward
    });
    let upstream = upstream(mode, &client);
    let kube_timeout = Duration::from_secs(args.kube_timeout_seconds.max(1));
    // With sites, krayne's own Kubernetes is the site without a kubeconfig
    // (if one is named): its Kueue is the one read.
    let home_site = sites
        .iter()
        .flatten()
        .find(|e| e.kubeconfig.is_none())
        .map(|e| e.spec.name.clone());
    let api = k8s::KubeClusterStore::new(client.clone())
        .with_timeout(kube_timeout)
        .with_site(home_site.unwrap_or_default());
    let upkeep = Upkeep {
        migrate: args.migrate_on_start,
        sweep_after: SWEEP_AFTER,
        url_file: args.database.database_url_file.clone(),
        ca_file: args.database.database_ca_file.clone(),
        ..Upkeep::default()
    };
    let sink = store::open(
        &database(&args.database)?,
        &QueueOptions::default(),
        upkeep,
        FIRST_UPKEEP,
    )
    .await?;
    let cache = cache_options(&args.cache);
    let fleet = match &sites {
        Some(entries) => Some(sites::fleet(entries, &client, &upstream, kube_timeout, cache.as_ref()).await?),
        None => None,
    };
    let store: std::sync::Arc<dyn crate::domain::ClusterStore> = match &fleet {
        Some(fleet) => fleet.clone(),
        None => k8s::cluster_store(api.clone(), cache.as_ref())?,
    };
    let mut parts = Parts::new(store, sink.clone(), auth);
    let api = std::sync::Arc::new(api);
    parts.rayjobs = Some(match &fleet {
        Some(fleet) => fleet.clone(),
        None => api.clone(),
    });
    parts.kueue = Some(match &fleet {
        Some(fleet) => fleet.clone(),
        None => api,
    });
    parts.run_ledger = Some(std::sync::Arc::new(sink.run_ledger()));
    parts.quota_lock = Some(std::sync::Arc::new(sink.admission_lock()));
    parts.usage_ledger = Some(std::sync::Arc::new(sink.usage_ledger()));
    parts.activity = Some((
        std::sync::Arc::new(sink.activity_ledger()),
        Duration::from_secs(args.lifecycle.usage_record_seconds),
    ));
    (parts.control, parts.rest, parts.connections) = settings(&args.http)?;
    parts.control.audit_reads = args.audit_reads;
    parts.control.login = login;
    parts.upstream = Some(match &fleet {
        Some(fleet) => fleet.clone(),
        None => upstream,
    });
    parts.ray = Some(ray_heads(args.http.head_answer_budget_mib));
    let leadership = leadership(&args.lifecycle, &client)?;
    if args.lifecycle.usage_accounting {
        parts.usage_leadership = leadership.clone();
    }
    parts.lifecycle = lifecycle(&args.lifecycle, leadership);
    parts.mapping_reload = Some(reload);
    if let Some(l) = &mut parts.lifecycle {
        l.policies = Some(std::sync::Arc::new(sink.policy_ledger()));
    }
    parts.control.reaper = reaper_limits(&args.lifecycle)?;
    let header = args
        .http
        .trusted_proxy_header
        .parse()
        .map_err(|e| format!("--trusted-proxy-header {e}"))?;
    parts.trusted_proxies = TrustedProxies::parse(&args.http.trusted_proxies)?.with_header(header);
    parts.reflection_needs_token = args.http.grpc_reflection_requires_token;
    parts.grace = Duration::from_secs(args.http.shutdown_grace_seconds);
    parts.drain_delay = Duration::from_secs(args.http.shutdown_delay_seconds);
    parts.control.version = version_info(&[
        ("watch-cache", args.cache.cache),
        ("audit-reads", args.audit_reads),
        ("trusted-proxies", !args.http.trusted_proxies.is_empty()),
        ("reflection-needs-token", args.http.grpc_reflection_requires_token),
        ("service-account-tokens", args.jwt.service_account_tokens),
        ("login", parts.control.login.is_some()),
        ("service-tunnels", true),
        ("sites", fleet.is_some()),
        ("browser-sessions", parts.control.sessions.keys.is_some()),
        ("apps-domain", parts.control.apps_domain.is_some()),
        (
            "restricted-pods",
            parts.control.manifest.pod_security == PodSecurity::Restricted,
        ),
    ]);
    let running = app::start(parts, args.http.listen, args.http.ops_listen, app::shutdown_signal()).await?;
    tracing::info!(api = %running.api_addr, ops = %running.ops_addr, "krayne-server serving");
    running.wait().await;
    Ok(())
}

/// The replica's candidacy for the Lease that elects the one replica
/// running the lifecycle reaper and usage accounting; `None` when both
/// are off.
fn leadership(
    args: &crate::config::LifecycleArgs,
    client: &k8s::Client,
) -> Result<Option<std::sync::Arc<dyn crate::domain::Leadership>>, String> {
    let lifecycle = lifecycle_mode(args);
    if lifecycle.is_none() && !args.usage_accounting {
        return Ok(None);
    }
    let identity = match &args.lifecycle_identity {
        Some(id) if !id.is_empty() => id.clone(),
        _ => format!("{}-{}", host_name(), std::process::id()),
    };
    let leadership = k8s::LeaseLeadership::stand(
        client.clone(),
        &args.lifecycle_lease_namespace,
        &args.lifecycle_lease_name,
        &identity,
        k8s::LeaseTerms {
            duration: Duration::from_secs(args.lifecycle_lease_seconds),
            max_skew: Duration::from_secs(args.lifecycle_max_clock_skew_seconds),
        },
    )
    .map_err(|e| format!("--lifecycle-lease-name {}: {e}", args.lifecycle_lease_name))?;
    tracing::info!(
        lifecycle = lifecycle.map_or("off", LifecycleMode::as_str),
        usage_accounting = args.usage_accounting,
        %identity,
        lease = %args.lifecycle_lease_name,
        "standing for the lease"
    );
    Ok(Some(std::sync::Arc::new(leadership)))
}

/// `--lifecycle`, `None` when off.
fn lifecycle_mode(args: &crate::config::LifecycleArgs) -> Option<LifecycleMode> {
    match args.lifecycle {
        crate::config::LifecycleFlag::Off => None,
        crate::config::LifecycleFlag::Report => Some(LifecycleMode::Report),
        crate::config::LifecycleFlag::Act => Some(LifecycleMode::Act),
    }
}

/// The lifecycle reaper's mode, led through `leadership`, when it is on.
fn lifecycle(
    args: &crate::config::LifecycleArgs,
    leadership: Option<std::sync::Arc<dyn crate::domain::Leadership>>,
) -> Option<app::Lifecycle> {
    Some(app::Lifecycle {
        mode: lifecycle_mode(args)?,
        leadership: leadership?,
        every: Duration::from_secs(args.lifecycle_interval_seconds),
        policies: None,
    })
}

/// The caps on the reaper's actions and a new policy's settle time.
fn reaper_limits(args: &crate::config::LifecycleArgs) -> Result<krayne_control::ReaperLimits, String> {
    let settle = match args.lifecycle_policy_settle.trim() {
        "0" | "0s" => jiff::SignedDuration::ZERO,
        text => crate::domain::lifecycle::parse_duration(text).map_err(|e| format!("--lifecycle-policy-settle {e}"))?,
    };
    Ok(krayne_control::ReaperLimits {
        max_actions_per_pass: args.lifecycle_max_actions_per_pass,
        max_actions_per_namespace: args.lifecycle_max_actions_per_namespace,
        policy_settle: settle,
    })
}

/// The host's name, for a replica's identity outside a pod.
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "krayne".to_owned())
}

/// How long opening a connection to a head's service may take.
const UPSTREAM_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The service upstream of `mode`, over `client` for port-forwards.
pub(crate) fn upstream(mode: UpstreamMode, client: &k8s::Client) -> std::sync::Arc<dyn crate::domain::ServiceUpstream> {
    tracing::info!(mode = ?mode, "clusters' services are reached through this upstream");
    let forward = k8s::PortForwardUpstream::new(client.clone(), UPSTREAM_CONNECT_TIMEOUT);
    match mode {
        // Services on a pod's loopback are reached through a forward even
        // here: nothing on the cluster network reaches them.
        UpstreamMode::Direct => std::sync::Arc::new(k8s::DirectUpstream::new(UPSTREAM_CONNECT_TIMEOUT, forward)),
        UpstreamMode::PortForward => std::sync::Arc::new(forward),
    }
}

/// The commit the binary was built from (`KRAYNE_GIT_COMMIT` at build
/// time; the Dockerfile passes its `REVISION`).
const COMMIT: &str = match option_env!("KRAYNE_GIT_COMMIT") {
    Some(commit) => commit,
    None => "unknown",
};

/// What `GET /v1/version` answers: this build, and the features that are on.
pub(crate) fn version_info(features: &[(&str, bool)]) -> VersionInfo {
    VersionInfo {
        server_version: env!("CARGO_PKG_VERSION").to_owned(),
        commit: COMMIT.to_owned(),
        api_version: "v1".to_owned(),
        features: features
            .iter()
            .filter(|(_, on)| *on)
            .map(|(f, _)| (*f).to_owned())
            .collect(),
    }
}

/// The watch cache's options, or `None` when it is off.
pub(crate) fn cache_options(cache: &CacheArgs) -> Option<CacheOptions> {
    cache.cache.then(|| CacheOptions {
        namespaces: cache.cache_namespaces.clone(),
        namespaces_file: cache.cache_namespaces_file.clone(),
        write_wait: Duration::from_millis(cache.cache_write_wait_ms),
        whole_lists_up_to: cache.cache_whole_lists_up_to,
    })
}

/// `90d`, `12h`, `30m`, `1h30m`: days count as 24 hours.
fn duration(text: &str) -> Result<jiff::SignedDuration, String> {
    let span: jiff::Span = text.parse().map_err(|e: jiff::Error| e.to_string())?;
    span.to_duration(jiff::SpanRelativeTo::days_are_24_hours())
        .map_err(|e| e.to_string())
}

/// Rows still pending after this long were left by a crash: no request
/// lives longer (unary requests time out well before).
pub(crate) const SWEEP_AFTER: Duration = Duration::from_secs(120);

/// How long a starting server waits for the audit database's first
/// answer (migrations, the sweep) before it serves without it.
pub(crate) const FIRST_UPKEEP: Duration = Duration::from_secs(10);

/// The database flags as options; the URL is read from its file when one
/// is named.
pub(crate) fn database(db: &DatabaseArgs) -> Result<DatabaseOptions, String> {
    let url = match &db.database_url_file {
        Some(file) => store::read_url(file).map_err(|e| format!("--database-url-file {e}"))?,
        None => db.database_url.clone(),
    };
    Ok(DatabaseOptions {
        url,
        max_connections: db.database_max_connections,
        statement_timeout: Duration::from_secs(db.database_statement_timeout_seconds),
        acquire_timeout: Duration::from_secs(db.database_acquire_timeout_seconds),
        ca_file: db.database_ca_file.clone(),
    })
}

#[expect(clippy::print_stdout)]
async fn migrate(args: &MigrateArgs) -> Result<(), String> {
    let options = database(&args.database)?;
    let store = store::Store::connect(&options)?;
    store.migrate().await?;
    println!("migrations applied to {}", store::redact(&options.url));
    if let Some(role) = &args.grant_to {
        store.grant_runtime(role).await?;
        println!("granted {role} what serving needs (no DELETE, TRUNCATE or DDL on the audit log)");
    }
    Ok(())
}

#[expect(clippy::print_stdout)]
async fn prune(args: &PruneArgs) -> Result<(), String> {
    let age = duration(&args.older_than).map_err(|e| format!("--older-than {:?}: {e}", args.older_than))?;
    let cutoff = jiff::Timestamp::now()
        .checked_sub(age)
        .map_err(|e| format!("--older-than: {e}"))?;
    let store = store::Store::connect(&database(&args.database)?)?;
    let deleted = store
        .prune(&cutoff.to_string(), args.batch_size)
        .await
        .map_err(|e| format!("prune: {e}"))?;
    println!("deleted {deleted} audit rows older than {cutoff}");
    let runs = store
        .prune_runs(&cutoff.to_string(), args.batch_size)
        .await
        .map_err(|e| format!("prune: {e}"))?;
    println!("deleted {runs} kept RayJob runs (driver logs) older than {cutoff}");
    Ok(())
}

#[expect(clippy::print_stdout)]
fn openapi() -> Result<(), String> {
    let doc = crate::rest::openapi().to_pretty_json().map_err(|e| e.to_string())?;
    println!("{doc}");
    Ok(())
}

#[expect(clippy::print_stdout)]
fn mint_token(args: &MintArgs) -> Result<(), String> {
    let alg: Algorithm = args
        .alg
        .parse()
        .map_err(|_| format!("--alg: unknown algorithm {:?}", args.alg))?;
    let key = std::fs::read(&args.key).map_err(|e| format!("--key {}: {e}", args.key.display()))?;
    let ttl = duration(&args.ttl).map_err(|e| format!("--ttl {:?}: {e}", args.ttl))?;
    let request = MintRequest {
        subject: args.sub.clone(),
        email: args.email.clone(),
        groups: args.groups.clone(),
        ttl_seconds: ttl.as_secs(),
        issuer: args.issuer.clone(),
        audience: args.audience.clone(),
    };
    println!("{}", mint(&request, alg, &key)?);
    Ok(())
}
