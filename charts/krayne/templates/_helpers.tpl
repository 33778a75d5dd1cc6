{{/*
Names, labels and checks shared by the templates.
*/}}

{{- define "krayne.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "krayne.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The name of an object outside the release's namespace: cluster-scoped ones
(ClusterRole, ClusterRoleBinding) and the Roles in rbac.namespaces. It
carries the release's namespace, so two releases of the same name in two
namespaces (staging and production, both `krayne`) do not collide.
*/}}
{{- define "krayne.globalName" -}}
{{- printf "%s-%s" .Release.Namespace (include "krayne.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "krayne.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "krayne.labels" -}}
helm.sh/chart: {{ include "krayne.chart" . }}
{{ include "krayne.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: krayne
{{- end }}

{{- define "krayne.selectorLabels" -}}
app.kubernetes.io/name: {{ include "krayne.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The selector labels as `key=value,…`, for the server's flags. */}}
{{- define "krayne.selectorLabelsFlag" -}}
app.kubernetes.io/name={{ include "krayne.name" . }},app.kubernetes.io/instance={{ .Release.Name }}
{{- end }}

{{- define "krayne.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "krayne.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "krayne.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{- define "krayne.teamsConfigMap" -}}
{{- default (printf "%s-teams" (include "krayne.fullname" .)) .Values.teams.existingConfigMap }}
{{- end }}

{{- define "krayne.databaseSecret" -}}
{{- default (include "krayne.fullname" .) .Values.database.existingSecret }}
{{- end }}

{{- define "krayne.sessionSecret" -}}
{{- default (printf "%s-sessions" (include "krayne.fullname" .)) .Values.server.sessions.existingSecret }}
{{- end }}

{{/* "true" when browser sessions are on (a secret is given); empty otherwise. */}}
{{- define "krayne.sessionsOn" -}}
{{- if or .Values.server.sessions.existingSecret .Values.server.sessions.secret }}true{{ end }}
{{- end }}

{{/* The Secret holding the key Ray tokens are derived from (key `key`). */}}
{{- define "krayne.rayAuthSecret" -}}
{{- default (printf "%s-ray-auth" (include "krayne.fullname" .)) .Values.server.rayAuth.existingSecret }}
{{- end }}

{{/* The ConfigMap of the namespaces the watch cache covers (rbac.namespaces). */}}
{{- define "krayne.namespacesConfigMap" -}}
{{- printf "%s-namespaces" (include "krayne.fullname" .) }}
{{- end }}

{{/* "true" when the cache's namespaces come from that ConfigMap; empty otherwise. */}}
{{- define "krayne.namespacesOn" -}}
{{- if and (not .Values.rbac.clusterWide) .Values.rbac.namespaces }}true{{ end }}
{{- end }}

{{/* "true" when a CA for the database's certificate is given; empty otherwise. */}}
{{- define "krayne.databaseCaOn" -}}
{{- if or .Values.database.tls.caSecret.name .Values.database.tls.caConfigMap.name }}true{{ end }}
{{- end }}

{{/*
The migration Job's database URL: migrations.database.existingSecret, else
a hook Secret the chart makes (from migrations.database.url, or from
database.url when the release's own Secret would not exist yet at
pre-install), else the server's existing Secret.
*/}}
{{- define "krayne.migrationsSecretCreated" -}}
{{- $m := .Values.migrations.database }}
{{- if and (not $m.existingSecret) (or $m.url (not .Values.database.existingSecret)) }}true{{ end }}
{{- end }}

{{- define "krayne.migrationsSecret" -}}
{{- if .Values.migrations.database.existingSecret }}
{{- .Values.migrations.database.existingSecret }}
{{- else if include "krayne.migrationsSecretCreated" . }}
{{- printf "%s-migrations" (include "krayne.fullname" .) }}
{{- else }}
{{- .Values.database.existingSecret }}
{{- end }}
{{- end }}

{{- define "krayne.migrationsSecretKey" -}}
{{- if .Values.migrations.database.existingSecret }}
{{- .Values.migrations.database.existingSecretKey }}
{{- else if include "krayne.migrationsSecretCreated" . }}
{{- print "database-url" }}
{{- else }}
{{- .Values.database.existingSecretKey }}
{{- end }}
{{- end }}

{{/*
The audit retention CronJob's database URL: the migration Job's role (the
schema's owner, which may DELETE; the runtime role granted by
migrations.grantTo may not). migrations.database.existingSecret, else a
Secret of the release made from migrations.database.url (the migration
Job's own hook Secret is deleted once the Job succeeds), else the server's
own Secret: then the server's role is the owner, as for the migration Job.
*/}}
{{- define "krayne.retentionSecretCreated" -}}
{{- if and (not .Values.migrations.database.existingSecret) .Values.migrations.database.url }}true{{ end }}
{{- end }}

{{- define "krayne.retentionSecret" -}}
{{- if .Values.migrations.database.existingSecret }}
{{- .Values.migrations.database.existingSecret }}
{{- else if include "krayne.retentionSecretCreated" . }}
{{- printf "%s-audit-retention" (include "krayne.fullname" .) }}
{{- else }}
{{- include "krayne.databaseSecret" . }}
{{- end }}
{{- end }}

{{- define "krayne.retentionSecretKey" -}}
{{- if .Values.migrations.database.existingSecret }}
{{- .Values.migrations.database.existingSecretKey }}
{{- else if include "krayne.retentionSecretCreated" . }}
{{- print "database-url" }}
{{- else }}
{{- include "krayne.databaseSecretKey" . }}
{{- end }}
{{- end }}

{{/* Labels of the audit retention Job's pods: selected by no Service, PDB or policy of the release. */}}
{{- define "krayne.retentionPodLabels" -}}
app.kubernetes.io/name: {{ include "krayne.name" . }}-audit-retention
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: audit-retention
app.kubernetes.io/part-of: krayne
{{- end }}

{{/* Labels of the migration Job's pods: not the Deployment's selector labels, so no Service, PDB or policy picks them. */}}
{{- define "krayne.migrationsPodLabels" -}}
app.kubernetes.io/name: {{ include "krayne.name" . }}-migrate
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: migrations
app.kubernetes.io/part-of: krayne
{{- end }}

{{/* The pods' and the containers' securityContext (values, hardened by default). */}}
{{- define "krayne.podSecurityContext" -}}
{{- toYaml .Values.podSecurityContext }}
{{- end }}

{{- define "krayne.containerSecurityContext" -}}
{{- toYaml .Values.containerSecurityContext }}
{{- end }}

{{/* The host of the apps wildcard: `*.<server.appsDomain>` without a port. */}}
{{- define "krayne.appsHost" -}}
{{- printf "*.%s" (regexReplaceAll ":[0-9]+$" .Values.server.appsDomain "") }}
{{- end }}

{{/*
ingress-nginx annotations that keep krayne's traffic working: 100 MiB
package uploads (and Jupyter's), and tunnels, watches and followed logs
that stay open for an hour (WebSockets need nothing more on nginx). gRPC:
backend-protocol GRPC, and no body limit, since a gRPC tunnel is one request
body for its whole life (ingress-nginx applies proxy-*-timeout to grpc_*
as well in releases with kubernetes/ingress-nginx#11258).
*/}}
{{- define "krayne.nginxDefaults.http" -}}
nginx.ingress.kubernetes.io/proxy-body-size: "128m"
nginx.ingress.kubernetes.io/proxy-read-timeout: "3600"
nginx.ingress.kubernetes.io/proxy-send-timeout: "3600"
nginx.ingress.kubernetes.io/proxy-buffering: "off"
nginx.ingress.kubernetes.io/proxy-request-buffering: "off"
{{- end }}

{{- define "krayne.nginxDefaults.grpc" -}}
nginx.ingress.kubernetes.io/backend-protocol: "GRPC"
nginx.ingress.kubernetes.io/proxy-body-size: "0"
nginx.ingress.kubernetes.io/proxy-read-timeout: "3600"
nginx.ingress.kubernetes.io/proxy-send-timeout: "3600"
{{- end }}

{{/*
Annotations of one Ingress: (dict "ingress" <its values> "role" "http"|"grpc").
The nginx defaults apply with className nginx; the Ingress's own
annotations win key by key.
*/}}
{{- define "krayne.ingressAnnotations" -}}
{{- $own := deepCopy (default (dict) .ingress.annotations) }}
{{- if eq .ingress.className "nginx" }}
{{- $own = merge $own (fromYaml (include (printf "krayne.nginxDefaults.%s" .role) .)) }}
{{- end }}
{{- with $own }}
{{- toYaml . }}
{{- end }}
{{- end }}

{{/* PromQL label matchers of this release's krayne series. */}}
{{- define "krayne.alertSelector" -}}
{{- if .Values.prometheusRule.metricSelector }}
{{- .Values.prometheusRule.metricSelector }}
{{- else }}
{{- printf "namespace=%q, job=%q" .Release.Namespace (printf "%s-ops" (include "krayne.fullname" .)) }}
{{- end }}
{{- end }}

{{/* kube-state-metrics matchers of this release's server containers. */}}
{{- define "krayne.ksmSelector" -}}
{{- printf "namespace=%q, container=\"krayne\", pod=~%q" .Release.Namespace (printf "%s-[a-z0-9]+-[a-z0-9]+" (include "krayne.fullname" .)) }}
{{- end }}

{{/* An alert label as Prometheus templates it (`$labels.pod` between double braces). */}}
{{- define "krayne.promLabel" -}}
{{- printf "{{ $labels.%s }}" . }}
{{- end }}

{{- define "krayne.databaseSecretKey" -}}
{{- if .Values.database.existingSecret }}
{{- .Values.database.existingSecretKey }}
{{- else }}
{{- print "database-url" }}
{{- end }}
{{- end }}

{{- define "krayne.jwtKeysSecret" -}}
{{- default (printf "%s-jwt-keys" (include "krayne.fullname" .)) .Values.auth.publicKeys.existingSecret }}
{{- end }}

{{/*
`KRAYNE_JWT_PUBLIC_KEYS`: ALG:PATH of every mounted public key.
*/}}
{{- define "krayne.jwtPublicKeys" -}}
{{- $paths := list }}
{{- range .Values.auth.publicKeys.keys }}
{{- $paths = append $paths (printf "%s:/etc/krayne/jwt-keys/%s" .algorithm .file) }}
{{- end }}
{{- join "," $paths }}
{{- end }}

{{/*
Values the schema cannot express; rendering stops with a clear message.
*/}}
{{- define "krayne.validate" -}}
{{- $a := .Values.auth }}
{{- if not (or $a.oidcIssuerUrl $a.jwksUrl $a.publicKeys.keys $a.hs256.existingSecret $a.issuers $a.serviceAccountTokens.enabled) }}
{{- fail "krayne: set how tokens are verified: auth.oidcIssuerUrl, auth.jwksUrl, auth.publicKeys.keys, auth.issuers or auth.serviceAccountTokens (auth.hs256.existingSecret for development)" }}
{{- end }}
{{- if and $a.login.clientId (not (or $a.login.issuer $a.oidcIssuerUrl)) }}
{{- fail "krayne: auth.login.clientId needs auth.login.issuer (or auth.oidcIssuerUrl): where people sign in" }}
{{- end }}
{{- if and $a.oidcIssuerUrl $a.jwksUrl }}
{{- fail "krayne: set auth.oidcIssuerUrl or auth.jwksUrl, not both" }}
{{- end }}
{{- if not $a.publicKeys.existingSecret }}
{{- range $a.publicKeys.keys }}
{{- if not .pem }}
{{- fail (printf "krayne: auth.publicKeys.keys[%s] needs `pem` (or set auth.publicKeys.existingSecret)" .file) }}
{{- end }}
{{- end }}
{{- end }}
{{- if and .Values.autoscaling.enabled (lt (int .Values.autoscaling.maxReplicas) (int .Values.autoscaling.minReplicas)) }}
{{- fail "krayne: autoscaling.maxReplicas must be at least autoscaling.minReplicas" }}
{{- end }}
{{- if not (or .Values.database.existingSecret .Values.database.url) }}
{{- fail "krayne: set the audit database: database.existingSecret (recommended) or database.url" }}
{{- end }}
{{- if and $a.hs256.existingSecret (or $a.oidcIssuerUrl $a.jwksUrl $a.issuers $a.serviceAccountTokens.enabled) (not $a.hs256.allowWithJwks) }}
{{- fail "krayne: auth.hs256.existingSecret (development tokens) together with an OIDC or JWKS issuer lets whoever holds the shared secret mint any identity; remove it, or set auth.hs256.allowWithJwks: true" }}
{{- end }}
{{- if and (contains "@" .Values.server.defaultRayImage) (not .Values.server.defaultRayGpuImage) }}
{{- fail "krayne: server.defaultRayImage is pinned by digest, so GPU pods cannot get it with `-gpu` appended: set server.defaultRayGpuImage (e.g. rayproject/ray:2.60.0-py312-gpu@sha256:…)" }}
{{- end }}
{{- if and .Values.database.tls.caSecret.name .Values.database.tls.caConfigMap.name }}
{{- fail "krayne: set database.tls.caSecret or database.tls.caConfigMap, not both" }}
{{- end }}
{{- if and (not .Values.rbac.clusterWide) (not .Values.rbac.namespaces) }}
{{- fail "krayne: say where krayne manages RayClusters: rbac.namespaces (Roles in just those namespaces; recommended) or rbac.clusterWide: true (one ClusterRole: every namespace, port-forward into any pod)" }}
{{- end }}
{{- if and (or .Values.ingress.apps.enabled (and .Values.gateway.enabled .Values.gateway.apps.enabled)) (not .Values.server.appsDomain) }}
{{- fail "krayne: the apps Ingress or HTTPRoute needs server.appsDomain" }}
{{- end }}
{{- if .Values.gateway.enabled }}
{{- range .Values.gateway.grpc.hostnames }}
{{- if has . $.Values.gateway.api.hostnames }}
{{- fail (printf "krayne: %s is a hostname of both gateway.api and gateway.grpc; an HTTPRoute and a GRPCRoute may not share one" .) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
