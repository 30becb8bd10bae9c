{{/*
Names, labels and small shared snippets. Component workloads are built from templates/lib/.
*/}}

{{/* automem.name -- the chart name (nameOverride wins). */}}
{{- define "automem.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* automem.fullname -- "<release>-<chart>" unless the release name already contains it. */}}
{{- define "automem.fullname" -}}
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
automem.boundedName -- .base followed by .suffix in at most .max characters:
(dict "base" "mem-automem" "suffix" "-dashboard" "max" 63). The base is cut (and a trailing
"-" trimmed), never the suffix, so names that differ by suffix stay different when cut.
*/}}
{{- define "automem.boundedName" -}}
{{- printf "%s%s" (.base | trunc (int (sub (int .max) (len .suffix))) | trimSuffix "-") .suffix }}
{{- end }}

{{/* automem.fullnameWith -- the full name with a suffix, within 63 characters: (dict "ctx" $ "suffix" "-dashboard"). */}}
{{- define "automem.fullnameWith" -}}
{{- include "automem.boundedName" (dict "base" (include "automem.fullname" .ctx) "suffix" .suffix "max" 63) }}
{{- end }}

{{/* automem.statefulComponents -- the components run as a StatefulSet. */}}
{{- define "automem.statefulComponents" -}}
nats falkordb
{{- end }}

{{/*
automem.componentName -- resource name of a component: (dict "ctx" $ "component" "ingest"),
optionally with "suffix" (e.g. "-headless"). Every name of a component, and every reference to
one (selectors' Services, serviceName, the ConfigMap's addresses), comes from here.
Kubernetes names are DNS-1123 labels of at most 63 characters, and a StatefulSet's at most 52:
its controller labels each pod "controller-revision-hash: <name>-<hash>", a value of at most 63.
The name is "<fullname>-<component><suffix>" with the full name cut to 50 characters (as it
always was), and further where "-<component><suffix>" needs it: the component and the suffix
stay whole, so names that fit are as before and no two names become equal.
- A stateful component (NATS, FalkorDB): its StatefulSet's name within 52, and its other names
  "<that name><suffix>" (the headless Service: within 52 + 9).
- Another component without suffix: "<fullname>-<component>" cut to 63 characters, as it always
  was (so an upgrade keeps every name, the single binary's PVC too); the longest component,
  single-binary, loses at most its last character, and stays unlike every other name.
*/}}
{{- define "automem.componentName" -}}
{{- $base := include "automem.fullname" .ctx | trunc 50 | trimSuffix "-" }}
{{- $suffix := default "" .suffix }}
{{- if has .component (splitList " " (include "automem.statefulComponents" .ctx)) }}
{{- include "automem.boundedName" (dict "base" $base "suffix" (printf "-%s%s" .component $suffix) "max" (min 63 (add 52 (len $suffix)))) }}
{{- else if $suffix }}
{{- include "automem.boundedName" (dict "base" $base "suffix" (printf "-%s%s" .component $suffix) "max" 63) }}
{{- else }}
{{- printf "%s-%s" $base .component | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{/* automem.headlessName -- the headless Service of a component (gRPC components, NATS, FalkorDB). */}}
{{- define "automem.headlessName" -}}
{{- include "automem.componentName" (dict "ctx" .ctx "component" .component "suffix" "-headless") }}
{{- end }}

{{/* automem.chart -- chart name and version for the helm.sh/chart label. */}}
{{- define "automem.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
automem.labels -- app.kubernetes.io/* labels of a component.
Takes (dict "ctx" $ "component" "<component>").
*/}}
{{- define "automem.labels" -}}
helm.sh/chart: {{ include "automem.chart" .ctx }}
{{ include "automem.selectorLabels" . }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/part-of: automem
{{- with .ctx.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
automem.selectorLabels -- the immutable selector labels of a component.
Takes (dict "ctx" $ "component" "<component>").
*/}}
{{- define "automem.selectorLabels" -}}
app.kubernetes.io/name: {{ include "automem.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/* automem.serviceAccountName -- the ServiceAccount automem pods use. */}}
{{- define "automem.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "automem.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* automem.secretName -- the Secret holding tokens and keys (existingSecret wins). */}}
{{- define "automem.secretName" -}}
{{- default (include "automem.fullname" .) .Values.existingSecret }}
{{- end }}

{{/*
automem.image -- image reference of a component; the component's image block overrides the
global one. Takes (dict "ctx" $ "values" <component values>).
*/}}
{{- define "automem.image" -}}
{{- $g := .ctx.Values.image }}
{{- $repo := default $g.repository .values.image.repository }}
{{- $tag := default (default .ctx.Chart.AppVersion $g.tag) .values.image.tag }}
{{- $ref := ternary (printf "%s/%s" $g.registry $repo) $repo (ne $g.registry "") }}
{{- if and $g.digest (not .values.image.tag) (not .values.image.repository) }}
{{- printf "%s@%s" $ref $g.digest }}
{{- else }}
{{- printf "%s:%s" $ref $tag }}
{{- end }}
{{- end }}

{{/* automem.natsUrl -- NATS_URL: the in-chart NATS Service or the external URL. */}}
{{- define "automem.natsUrl" -}}
{{- if .Values.nats.enabled }}
{{- printf "nats://%s:4222" (include "automem.componentName" (dict "ctx" . "component" "nats")) }}
{{- else }}
{{- .Values.nats.url }}
{{- end }}
{{- end }}

{{/* automem.falkordbHost -- FALKORDB_HOST: the in-chart FalkorDB Service or the external host. */}}
{{- define "automem.falkordbHost" -}}
{{- if .Values.falkordb.enabled }}
{{- include "automem.componentName" (dict "ctx" . "component" "falkordb") }}
{{- else }}
{{- .Values.falkordb.host }}
{{- end }}
{{- end }}

{{/* automem.httpComponent -- the component serving HTTP: the gateway or the single binary. */}}
{{- define "automem.httpComponent" -}}
{{- ternary "single-binary" "gateway" (eq .Values.deploymentMode "SingleBinary") }}
{{- end }}

{{/* automem.grpcComponents -- the components that serve gRPC, in a stable order. */}}
{{- define "automem.grpcComponents" -}}
ingest recall enrich consolidate
{{- end }}

{{/*
automem.healthService -- the grpc.health.v1 service name a component's probes check
(the name of the component's gRPC service in protos/automem/v1).
*/}}
{{- define "automem.healthService" -}}
{{- $names := dict "ingest" "automem.v1.IngestService" "recall" "automem.v1.RecallService" "enrich" "automem.v1.EnrichService" "consolidate" "automem.v1.ConsolidateService" }}
{{- get $names . }}
{{- end }}

{{/* automem.validate -- fail early on combinations the schema cannot express. */}}
{{- define "automem.validate" -}}
{{- if and (eq .Values.deploymentMode "SingleBinary") (ne (int .Values.singleBinary.replicas) 1) }}
{{- fail "singleBinary.replicas must be 1: the consolidate scheduler runs in the single binary" }}
{{- end }}
{{- if and .Values.grpc.tls.enabled (not .Values.grpc.tls.secretName) }}
{{- fail "grpc.tls.secretName is required when grpc.tls.enabled is true (a kubernetes.io/tls Secret with tls.crt, tls.key and ca.crt)" }}
{{- end }}
{{- if and .Values.grpc.tls.enabled (eq (int .Values.grpc.tls.healthPort) (int .Values.ports.grpc)) }}
{{- fail "grpc.tls.healthPort must differ from ports.grpc" }}
{{- end }}
{{- include "automem.validatePorts" . }}
{{- include "automem.validateEnv" . }}
{{- if and .Values.httpRoute.enabled (not .Values.httpRoute.parentRefs) }}
{{- fail "httpRoute.parentRefs needs at least one Gateway when httpRoute.enabled is true" }}
{{- end }}
{{- range $c := list "gateway" "ingest" "recall" "enrich" }}
{{- $a := (index $.Values $c).autoscaling }}
{{- if and $a.enabled (lt (int $a.maxReplicas) (int $a.minReplicas)) }}
{{- fail (printf "%s.autoscaling.maxReplicas must be >= minReplicas" $c) }}
{{- end }}
{{- if and $a.enabled (eq (int $a.targetCPUUtilizationPercentage) 0) (eq (int $a.targetMemoryUtilizationPercentage) 0) }}
{{- fail (printf "%s.autoscaling needs a CPU or memory target" $c) }}
{{- end }}
{{- end }}
{{- end }}
