{{/*
The environment of the automem containers: the ConfigMap's settings (envFrom), the env the
chart sets on every container, and the checks that config.extraEnv and <component>.extraEnv
do not set a variable the chart sets already (Kubernetes keeps the last of duplicate env
entries, and env wins over envFrom, both silently), nor two container ports coincide.
*/}}

{{/*
automem.configData -- the settings the chart itself writes to the ConfigMap (config.extraEnv
is appended to them; automem.validate refuses an extraEnv naming one of them).
*/}}
{{- define "automem.configData" -}}
# Non-secret settings only; tokens and keys come from the Secret (secretKeyRef).
AUTOMEM_HOST: "0.0.0.0"
PORT: {{ .Values.ports.http | quote }}
AUTOMEM_GRPC_PORT: {{ .Values.ports.grpc | quote }}
AUTOMEM_DATA_DIR: /var/lib/automem
AUTOMEM_LOG_LEVEL: {{ .Values.config.logLevel | quote }}
AUTOMEM_LOG_FORMAT: {{ .Values.config.logFormat | quote }}
AUTOMEM_ACCESS_LOG: {{ .Values.config.accessLog | quote }}
AUTOMEM_DEFAULT_SCOPE: {{ .Values.config.defaultScope | quote }}
AUTOMEM_EMBEDDING_PROVIDER: {{ .Values.config.embeddingProvider | quote }}
{{- with .Values.config.embeddingModel }}
EMBEDDING_MODEL: {{ . | quote }}
{{- end }}
{{- if gt (int .Values.config.vectorSize) 0 }}
VECTOR_SIZE: {{ .Values.config.vectorSize | quote }}
{{- end }}
{{- with .Values.config.openaiBaseUrl }}
OPENAI_BASE_URL: {{ . | quote }}
{{- end }}
{{- with .Values.config.classificationModel }}
CLASSIFICATION_MODEL: {{ . | quote }}
{{- end }}
NATS_URL: {{ include "automem.natsUrl" . | quote }}
FALKORDB_HOST: {{ include "automem.falkordbHost" . | quote }}
FALKORDB_PORT: {{ .Values.falkordb.port | quote }}
FALKORDB_GRAPH: {{ .Values.falkordb.graph | quote }}
QDRANT_URL: {{ .Values.qdrant.url | quote }}
QDRANT_COLLECTION: {{ .Values.qdrant.collection | quote }}
{{- if eq .Values.deploymentMode "Distributed" }}
# Where the gateway (and any service calling another) finds each gRPC service.
{{- range $c := splitList " " (include "automem.grpcComponents" .) }}
{{- $svc := dict "ctx" $ "component" $c }}
{{- if $.Values.grpc.clientLoadBalancing }}
AUTOMEM_{{ upper $c }}_ADDR: {{ printf "dns:///%s.%s.svc.%s:%v" (include "automem.headlessName" $svc) $.Release.Namespace $.Values.grpc.clusterDomain $.Values.ports.grpc | quote }}
{{- else }}
AUTOMEM_{{ upper $c }}_ADDR: {{ printf "%s:%v" (include "automem.componentName" $svc) $.Values.ports.grpc | quote }}
{{- end }}
{{- end }}
AUTOMEM_GRPC_LB_POLICY: {{ ternary "round_robin" "pick_first" .Values.grpc.clientLoadBalancing | quote }}
{{- end }}
{{- if .Values.grpc.tls.enabled }}
# gRPC over TLS (automem/common/grpc_tls.py), files of the grpc.tls Secret.
{{- $dir := include "automem.lib.tlsMountPath" . }}
AUTOMEM_GRPC_TLS: "true"
AUTOMEM_GRPC_TLS_CERT_FILE: {{ printf "%s/tls.crt" $dir | quote }}
AUTOMEM_GRPC_TLS_KEY_FILE: {{ printf "%s/tls.key" $dir | quote }}
AUTOMEM_GRPC_TLS_CA_FILE: {{ printf "%s/ca.crt" $dir | quote }}
AUTOMEM_GRPC_TLS_CLIENT_AUTH: {{ .Values.grpc.tls.clientAuth | quote }}
{{- with .Values.grpc.tls.serverName }}
AUTOMEM_GRPC_TLS_SERVER_NAME: {{ . | quote }}
{{- end }}
AUTOMEM_GRPC_HEALTH_PORT: {{ .Values.grpc.tls.healthPort | quote }}
{{- end }}
AUTOMEM_GRPC_MAX_CONNECTION_AGE_SECONDS: {{ .Values.grpc.maxConnectionAgeSeconds | quote }}
{{- if .Values.otel.enabled }}
OTEL_SDK_DISABLED: "false"
{{- with .Values.otel.endpoint }}
OTEL_EXPORTER_OTLP_ENDPOINT: {{ . | quote }}
{{- end }}
OTEL_EXPORTER_OTLP_PROTOCOL: {{ .Values.otel.protocol | quote }}
OTEL_TRACES_SAMPLER: {{ .Values.otel.sampler | quote }}
OTEL_TRACES_SAMPLER_ARG: {{ .Values.otel.samplerArg | quote }}
{{- else }}
{{- /* Traces off; not OTEL_SDK_DISABLED, which would turn the metrics off too. */}}
OTEL_TRACES_EXPORTER: "none"
{{- end }}
{{- end }}

{{/* automem.secretKeys -- the Secret's keys, each read into every automem container (optional). */}}
{{- define "automem.secretKeys" -}}
AUTOMEM_API_TOKEN ADMIN_API_TOKEN OPENAI_API_KEY FALKORDB_PASSWORD QDRANT_API_KEY NATS_TOKEN
{{- end }}

{{/*
automem.envSources -- (YAML map) every variable the chart sets, to the value that sets it: the
container env of automem.lib.deployment and the ConfigMap's automem.configData.
*/}}
{{- define "automem.envSources" -}}
{{- $secret := ternary (printf "existingSecret %s" .Values.existingSecret) "" (ne .Values.existingSecret "") }}
POD_NAME: the chart (the pod's name, from the downward API)
AUTOMEM_METRICS_PORT: ports.metrics
OTEL_SERVICE_NAME: the chart (automem-<component>)
OTEL_RESOURCE_ATTRIBUTES: otel.resourceAttributes (the chart adds component, namespace and pod)
AUTOMEM_API_TOKEN: {{ default "auth.apiToken" $secret }}
ADMIN_API_TOKEN: {{ default "auth.adminToken" $secret }}
OPENAI_API_KEY: {{ default "auth.openaiApiKey" $secret }}
FALKORDB_PASSWORD: {{ default "falkordb.password" $secret }}
QDRANT_API_KEY: {{ default "qdrant.apiKey" $secret }}
NATS_TOKEN: {{ default "nats.token" $secret }}
AUTOMEM_CONSOLE_SECRET: {{ default "auth.consoleSecret" $secret }}
AUTOMEM_HOST: the chart (0.0.0.0)
PORT: ports.http
AUTOMEM_GRPC_PORT: ports.grpc
AUTOMEM_DATA_DIR: the chart (the data volume's mount path; singleBinary.persistence)
AUTOMEM_LOG_LEVEL: config.logLevel
AUTOMEM_LOG_FORMAT: config.logFormat
AUTOMEM_ACCESS_LOG: config.accessLog
AUTOMEM_DEFAULT_SCOPE: config.defaultScope
AUTOMEM_EMBEDDING_PROVIDER: config.embeddingProvider
EMBEDDING_MODEL: config.embeddingModel
VECTOR_SIZE: config.vectorSize
OPENAI_BASE_URL: config.openaiBaseUrl
CLASSIFICATION_MODEL: config.classificationModel
NATS_URL: {{ ternary "nats.enabled (the in-chart NATS Service)" "nats.url" .Values.nats.enabled }}
FALKORDB_HOST: {{ ternary "falkordb.enabled (the in-chart FalkorDB Service)" "falkordb.host" .Values.falkordb.enabled }}
FALKORDB_PORT: falkordb.port
FALKORDB_GRAPH: falkordb.graph
QDRANT_URL: qdrant.url
QDRANT_COLLECTION: qdrant.collection
{{- range $c := splitList " " (include "automem.grpcComponents" .) }}
AUTOMEM_{{ upper $c }}_ADDR: the chart (the {{ $c }} Service; grpc.clientLoadBalancing, grpc.clusterDomain, ports.grpc)
{{- end }}
AUTOMEM_GRPC_LB_POLICY: grpc.clientLoadBalancing
AUTOMEM_GRPC_TLS: grpc.tls.enabled
AUTOMEM_GRPC_TLS_CERT_FILE: grpc.tls.secretName
AUTOMEM_GRPC_TLS_KEY_FILE: grpc.tls.secretName
AUTOMEM_GRPC_TLS_CA_FILE: grpc.tls.secretName
AUTOMEM_GRPC_TLS_CLIENT_AUTH: grpc.tls.clientAuth
AUTOMEM_GRPC_TLS_SERVER_NAME: grpc.tls.serverName
AUTOMEM_GRPC_HEALTH_PORT: grpc.tls.healthPort
AUTOMEM_GRPC_MAX_CONNECTION_AGE_SECONDS: grpc.maxConnectionAgeSeconds
OTEL_SDK_DISABLED: otel.enabled
OTEL_EXPORTER_OTLP_ENDPOINT: otel.endpoint
OTEL_EXPORTER_OTLP_PROTOCOL: otel.protocol
OTEL_TRACES_SAMPLER: otel.sampler
OTEL_TRACES_SAMPLER_ARG: otel.samplerArg
OTEL_TRACES_EXPORTER: otel.enabled
{{- end }}

{{/* automem.containerEnvNames -- the env entries the chart sets on automem containers (AUTOMEM_CONSOLE_SECRET on the gateway's). */}}
{{- define "automem.containerEnvNames" -}}
POD_NAME AUTOMEM_METRICS_PORT OTEL_SERVICE_NAME OTEL_RESOURCE_ATTRIBUTES AUTOMEM_CONSOLE_SECRET {{ include "automem.secretKeys" . }}
{{- end }}

{{/*
automem.validateEnv -- refuse an extra variable the chart sets already: config.extraEnv naming
a ConfigMap setting the chart writes (a duplicate key) or a container env entry (which wins
over the ConfigMap); <component>.extraEnv naming a container env entry (a duplicate entry), or
one name twice. A component's extraEnv may override a ConfigMap setting for that component
(say AUTOMEM_LOG_LEVEL=DEBUG on one of them): env wins over envFrom, as Kubernetes documents.
*/}}
{{- define "automem.validateEnv" -}}
{{- $sources := include "automem.envSources" . | fromYaml }}
{{- $own := include "automem.configData" . | fromYaml }}
{{- $containerEnv := splitList " " (include "automem.containerEnvNames" .) }}
{{- range $name, $_ := .Values.config.extraEnv }}
{{- if or (hasKey $own $name) (has $name $containerEnv) }}
{{- fail (printf "config.extraEnv.%s: the chart sets %s itself, from %s; set that instead of extraEnv" $name $name (get $sources $name | default "the chart")) }}
{{- end }}
{{- end }}
{{- $components := ternary (list "single-binary") (list "gateway" "ingest" "recall" "enrich" "consolidate") (eq .Values.deploymentMode "SingleBinary") }}
{{- range $c := $components }}
{{- $key := include "automem.lib.valuesKey" $c }}
{{- $seen := dict }}
{{- range $entry := (index $.Values $key).extraEnv }}
{{- $name := get $entry "name" | default "" | toString }}
{{- if and $name (has $name $containerEnv) }}
{{- fail (printf "%s.extraEnv: the chart sets %s itself, from %s; set that instead of extraEnv" $key $name (get $sources $name | default "the chart")) }}
{{- end }}
{{- if and $name (hasKey $seen $name) }}
{{- fail (printf "%s.extraEnv names %s twice (Kubernetes would keep only the last)" $key $name) }}
{{- end }}
{{- $_ := set $seen $name true }}
{{- end }}
{{- end }}
{{- end }}

{{/*
automem.validatePorts -- refuse two ports of one automem container being equal: per rendered
component, ports.http (gateway, single binary), ports.grpc and grpc.tls.healthPort (gRPC
components, the single binary; the latter with grpc.tls) and ports.metrics (all).
*/}}
{{- define "automem.validatePorts" -}}
{{- $components := ternary (list "single-binary") (list "gateway" "ingest" "recall" "enrich" "consolidate") (eq .Values.deploymentMode "SingleBinary") }}
{{- range $c := $components }}
{{- $ports := list }}
{{- if include "automem.lib.servesHttp" $c }}
{{- $ports = append $ports (list "ports.http" $.Values.ports.http) }}
{{- end }}
{{- if include "automem.lib.servesGrpc" $c }}
{{- $ports = append $ports (list "ports.grpc" $.Values.ports.grpc) }}
{{- if $.Values.grpc.tls.enabled }}
{{- $ports = append $ports (list "grpc.tls.healthPort" $.Values.grpc.tls.healthPort) }}
{{- end }}
{{- end }}
{{- $ports = append $ports (list "ports.metrics" $.Values.ports.metrics) }}
{{- range $i, $a := $ports }}
{{- range $b := slice $ports (add1 $i) }}
{{- if eq (int (index $a 1)) (int (index $b 1)) }}
{{- fail (printf "%s and %s are both %v: the %s container would listen twice on one port; give each its own" (index $a 0) (index $b 0) (index $a 1) $c) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
