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
{{- if not (or $a.oidcIssuerUrl $a.jwksUrl $a.publicKeys.keys $a.hs256.existingSecret) }}
{{- fail "krayne: set how tokens are verified: auth.oidcIssuerUrl, auth.jwksUrl or auth.publicKeys.keys (auth.hs256.existingSecret for development)" }}
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
{{- end }}
