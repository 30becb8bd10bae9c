{{/*
Shared building blocks of the automem components (the tempo-distributed templates/lib pattern).
Each takes (dict "ctx" $ "component" "<component>"); the component's values block is
.Values.<valuesKey>, where valuesKey is the component name in camelCase.
Components: single-binary (target all), gateway, ingest, recall, enrich, consolidate.
*/}}

{{/* automem.lib.valuesKey -- "single-binary" -> "singleBinary"; others unchanged. */}}
{{- define "automem.lib.valuesKey" -}}
{{- if eq . "single-binary" }}singleBinary{{ else }}{{ . }}{{ end }}
{{- end }}

{{/* automem.lib.target -- the --target of a component. */}}
{{- define "automem.lib.target" -}}
{{- if eq . "single-binary" }}all{{ else }}{{ . }}{{ end }}
{{- end }}

{{/* automem.lib.servesHttp -- "true" when the component runs the gateway. */}}
{{- define "automem.lib.servesHttp" -}}
{{- if has . (list "single-binary" "gateway") }}true{{ end }}
{{- end }}

{{/* automem.lib.servesGrpc -- "true" when the component runs a gRPC server. */}}
{{- define "automem.lib.servesGrpc" -}}
{{- if has . (list "single-binary" "ingest" "recall" "enrich" "consolidate") }}true{{ end }}
{{- end }}

{{/* automem.lib.secretEnv -- env entries read from the Secret; every key is optional. */}}
{{- define "automem.lib.secretEnv" -}}
{{- $secret := include "automem.secretName" . }}
{{- range $key := splitList " " (include "automem.secretKeys" .) }}
- name: {{ $key }}
  valueFrom:
    secretKeyRef:
      name: {{ $secret }}
      key: {{ $key }}
      optional: true
{{- end }}
{{- end }}

{{/*
automem.lib.consoleSecretEnv -- AUTOMEM_CONSOLE_SECRET from the Secret, for a component that
runs the gateway: every replica seals and opens console login cookies with the one value.
Optional: an existingSecret without it leaves each gateway pod a random secret of its own.
*/}}
{{- define "automem.lib.consoleSecretEnv" -}}
{{- if include "automem.lib.servesHttp" .component }}
- name: AUTOMEM_CONSOLE_SECRET
  valueFrom:
    secretKeyRef:
      name: {{ include "automem.secretName" .ctx }}
      key: AUTOMEM_CONSOLE_SECRET
      optional: true
{{- end }}
{{- end }}

{{/* automem.lib.probeTimings -- the shared timings of one probe kind. */}}
{{- define "automem.lib.probeTimings" -}}
periodSeconds: {{ .periodSeconds }}
timeoutSeconds: {{ .timeoutSeconds }}
failureThreshold: {{ .failureThreshold }}
{{- end }}

{{/* automem.lib.probeHandler -- readiness: httpGet /readyz for the gateway, native grpc on the
component's own service otherwise (NOT_SERVING while a store it needs is unreachable). */}}
{{- define "automem.lib.probeHandler" -}}
{{- if include "automem.lib.servesHttp" .component }}
httpGet:
  path: /readyz
  port: http
{{- else }}
grpc:
  port: {{ include "automem.lib.probePort" .ctx }}
  service: {{ include "automem.healthService" .component }}
{{- end }}
{{- end }}

{{/* automem.lib.livenessHandler -- liveness and startup: answered by the process alone
(httpGet /livez, or the grpc health service "liveness"), so a store outage never restarts pods. */}}
{{- define "automem.lib.livenessHandler" -}}
{{- if include "automem.lib.servesHttp" .component }}
httpGet:
  path: /livez
  port: http
{{- else }}
grpc:
  port: {{ include "automem.lib.probePort" .ctx }}
  service: liveness
{{- end }}
{{- end }}

{{/* automem.lib.probePort -- the port of the grpc probes: the gRPC port, or with grpc.tls
the plaintext health-only port (the kubelet's grpc probes cannot do TLS). */}}
{{- define "automem.lib.probePort" -}}
{{- if .Values.grpc.tls.enabled }}{{ .Values.grpc.tls.healthPort }}{{ else }}{{ .Values.ports.grpc }}{{ end }}
{{- end }}

{{/* automem.lib.tlsMountPath -- where the grpc.tls Secret is mounted. */}}
{{- define "automem.lib.tlsMountPath" -}}
/etc/automem/grpc-tls
{{- end }}

{{/* automem.lib.spread -- topologySpreadConstraints and affinity of a component's pod: its
own values, else (scheduling.spreadByDefault) soft spreads by zone and node and a preferred
anti-affinity by node among the component's pods. */}}
{{- define "automem.lib.spread" -}}
{{- $ctx := .ctx }}
{{- $v := index $ctx.Values (include "automem.lib.valuesKey" .component) }}
{{- $spread := $ctx.Values.scheduling.spreadByDefault }}
{{- if $v.topologySpreadConstraints }}
topologySpreadConstraints:
  {{- toYaml $v.topologySpreadConstraints | nindent 2 }}
{{- else if $spread }}
topologySpreadConstraints:
  {{- range $key := list "topology.kubernetes.io/zone" "kubernetes.io/hostname" }}
  - maxSkew: {{ $ctx.Values.scheduling.maxSkew }}
    topologyKey: {{ $key }}
    whenUnsatisfiable: ScheduleAnyway
    labelSelector:
      matchLabels:
        {{- include "automem.selectorLabels" (dict "ctx" $ctx "component" $.component) | nindent 8 }}
  {{- end }}
{{- end }}
{{- if $v.affinity }}
affinity:
  {{- toYaml $v.affinity | nindent 2 }}
{{- else if $spread }}
affinity:
  podAntiAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 100
        podAffinityTerm:
          topologyKey: kubernetes.io/hostname
          labelSelector:
            matchLabels:
              {{- include "automem.selectorLabels" (dict "ctx" $ctx "component" .component) | nindent 14 }}
{{- end }}
{{- end }}

{{/* automem.lib.deployment -- the Deployment of a component. */}}
{{- define "automem.lib.deployment" -}}
{{- $ctx := .ctx }}
{{- $c := .component }}
{{- $v := index $ctx.Values (include "automem.lib.valuesKey" $c) }}
{{- $name := include "automem.componentName" . }}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ $name }}
  namespace: {{ $ctx.Release.Namespace }}
  labels:
    {{- include "automem.labels" . | nindent 4 }}
spec:
  {{- if not $v.autoscaling.enabled }}
  replicas: {{ $v.replicas }}
  {{- end }}
  revisionHistoryLimit: 5
  {{- if has $c (list "single-binary" "consolidate") }}
  strategy:
    # One scheduler at a time: stop the old pod before the new one starts.
    type: Recreate
  {{- else }}
  strategy:
    type: RollingUpdate
    rollingUpdate:
      maxSurge: 25%
      maxUnavailable: 0
  {{- end }}
  selector:
    matchLabels:
      {{- include "automem.selectorLabels" . | nindent 6 }}
  template:
    metadata:
      labels:
        {{- include "automem.labels" . | nindent 8 }}
        {{- with $ctx.Values.podLabels }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
        {{- with $v.podLabels }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      annotations:
        checksum/config: {{ include (print $ctx.Template.BasePath "/configmap.yaml") $ctx | sha256sum }}
        checksum/secret: {{ list $ctx.Values.auth $ctx.Values.falkordb.password $ctx.Values.qdrant.apiKey $ctx.Values.nats.token $ctx.Values.existingSecret | toJson | sha256sum }}
        {{- with $ctx.Values.podAnnotations }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
        {{- with $v.podAnnotations }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
    spec:
      serviceAccountName: {{ include "automem.serviceAccountName" $ctx }}
      automountServiceAccountToken: {{ $ctx.Values.serviceAccount.automountToken }}
      enableServiceLinks: false
      terminationGracePeriodSeconds: {{ $ctx.Values.terminationGracePeriodSeconds }}
      {{- with $ctx.Values.priorityClassName }}
      priorityClassName: {{ . }}
      {{- end }}
      {{- with $ctx.Values.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      securityContext:
        {{- toYaml $ctx.Values.podSecurityContext | nindent 8 }}
      containers:
        - name: {{ $c }}
          image: {{ include "automem.image" (dict "ctx" $ctx "values" $v) }}
          imagePullPolicy: {{ $ctx.Values.image.pullPolicy }}
          args:
            - serve
            - --target={{ include "automem.lib.target" $c }}
            {{- range $v.extraArgs }}
            - {{ . | quote }}
            {{- end }}
          ports:
            {{- if include "automem.lib.servesHttp" $c }}
            - name: http
              containerPort: {{ $ctx.Values.ports.http }}
              protocol: TCP
            {{- end }}
            {{- if include "automem.lib.servesGrpc" $c }}
            - name: grpc
              containerPort: {{ $ctx.Values.ports.grpc }}
              protocol: TCP
            {{- if $ctx.Values.grpc.tls.enabled }}
            - name: grpc-health
              containerPort: {{ $ctx.Values.grpc.tls.healthPort }}
              protocol: TCP
            {{- end }}
            {{- end }}
            - name: metrics
              containerPort: {{ $ctx.Values.ports.metrics }}
              protocol: TCP
          envFrom:
            - configMapRef:
                name: {{ include "automem.fullname" $ctx }}
          env:
            - name: POD_NAME
              valueFrom:
                fieldRef:
                  fieldPath: metadata.name
            - name: AUTOMEM_METRICS_PORT
              value: {{ $ctx.Values.ports.metrics | quote }}
            - name: OTEL_SERVICE_NAME
              value: automem-{{ $c }}
            - name: OTEL_RESOURCE_ATTRIBUTES
              value: {{ printf "service.namespace=automem,automem.component=%s,k8s.namespace.name=%s,k8s.pod.name=$(POD_NAME)%s" $c $ctx.Release.Namespace (ternary (printf ",%s" $ctx.Values.otel.resourceAttributes) "" (ne $ctx.Values.otel.resourceAttributes "")) | quote }}
            {{- include "automem.lib.secretEnv" $ctx | trim | nindent 12 }}
            {{- with include "automem.lib.consoleSecretEnv" . | trim }}
            {{- . | nindent 12 }}
            {{- end }}
            {{- with $v.extraEnv }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          startupProbe:
            {{- include "automem.lib.livenessHandler" . | trim | nindent 12 }}
            {{- include "automem.lib.probeTimings" $ctx.Values.probes.startup | nindent 12 }}
          livenessProbe:
            {{- include "automem.lib.livenessHandler" . | trim | nindent 12 }}
            {{- include "automem.lib.probeTimings" $ctx.Values.probes.liveness | nindent 12 }}
          readinessProbe:
            {{- include "automem.lib.probeHandler" . | trim | nindent 12 }}
            {{- include "automem.lib.probeTimings" $ctx.Values.probes.readiness | nindent 12 }}
          {{- with $v.resources }}
          resources:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          securityContext:
            {{- toYaml $ctx.Values.containerSecurityContext | nindent 12 }}
          volumeMounts:
            - name: tmp
              mountPath: /tmp
            - name: data
              mountPath: /var/lib/automem
            {{- if $ctx.Values.grpc.tls.enabled }}
            - name: grpc-tls
              mountPath: {{ include "automem.lib.tlsMountPath" $ctx }}
              readOnly: true
            {{- end }}
            {{- with $v.extraVolumeMounts }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
        {{- with $v.extraContainers }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      volumes:
        - name: tmp
          emptyDir: {}
        {{- if $ctx.Values.grpc.tls.enabled }}
        - name: grpc-tls
          secret:
            secretName: {{ $ctx.Values.grpc.tls.secretName }}
            defaultMode: 0440
        {{- end }}
        {{- with $v.extraVolumes }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
        - name: data
          {{- if and (eq $c "single-binary") $v.persistence.enabled }}
          persistentVolumeClaim:
            claimName: {{ default $name $v.persistence.existingClaim }}
          {{- else }}
          emptyDir: {}
          {{- end }}
      {{- with $v.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $v.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- include "automem.lib.spread" . | nindent 6 }}
{{- end }}

{{/* automem.lib.service -- the Service of a component (http and/or grpc ports). */}}
{{- define "automem.lib.service" -}}
{{- $ctx := .ctx }}
{{- $c := .component }}
{{- $v := index $ctx.Values (include "automem.lib.valuesKey" $c) }}
apiVersion: v1
kind: Service
metadata:
  name: {{ include "automem.componentName" . }}
  namespace: {{ $ctx.Release.Namespace }}
  labels:
    {{- include "automem.labels" . | nindent 4 }}
  {{- with $v.service.annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  type: {{ $v.service.type }}
  selector:
    {{- include "automem.selectorLabels" . | nindent 4 }}
  ports:
    {{- if include "automem.lib.servesHttp" $c }}
    - name: http
      port: {{ $ctx.Values.ports.http }}
      targetPort: http
      protocol: TCP
      appProtocol: http
    {{- end }}
    {{- if include "automem.lib.servesGrpc" $c }}
    - name: grpc
      port: {{ $ctx.Values.ports.grpc }}
      targetPort: grpc
      protocol: TCP
      appProtocol: grpc
    {{- end }}
    - name: metrics
      port: {{ $ctx.Values.ports.metrics }}
      targetPort: metrics
      protocol: TCP
      appProtocol: http
{{- if and (include "automem.lib.servesGrpc" $c) $ctx.Values.grpc.clientLoadBalancing (eq $ctx.Values.deploymentMode "Distributed") }}
---
# Headless: DNS answers with every ready pod, so the gateway's round_robin channel spreads calls.
apiVersion: v1
kind: Service
metadata:
  name: {{ include "automem.headlessName" . }}
  namespace: {{ $ctx.Release.Namespace }}
  labels:
    {{- include "automem.labels" . | nindent 4 }}
spec:
  clusterIP: None
  selector:
    {{- include "automem.selectorLabels" . | nindent 4 }}
  ports:
    - name: grpc
      port: {{ $ctx.Values.ports.grpc }}
      targetPort: grpc
      protocol: TCP
      appProtocol: grpc
{{- end }}
{{- end }}

{{/* automem.lib.hpa -- the HorizontalPodAutoscaler of a component, when enabled. */}}
{{- define "automem.lib.hpa" -}}
{{- $ctx := .ctx }}
{{- $v := index $ctx.Values (include "automem.lib.valuesKey" .component) }}
{{- if $v.autoscaling.enabled }}
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: {{ include "automem.componentName" . }}
  namespace: {{ $ctx.Release.Namespace }}
  labels:
    {{- include "automem.labels" . | nindent 4 }}
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: {{ include "automem.componentName" . }}
  minReplicas: {{ $v.autoscaling.minReplicas }}
  maxReplicas: {{ $v.autoscaling.maxReplicas }}
  metrics:
    {{- with $v.autoscaling.targetCPUUtilizationPercentage }}
    - type: Resource
      resource:
        name: cpu
        target:
          type: Utilization
          averageUtilization: {{ . }}
    {{- end }}
    {{- with $v.autoscaling.targetMemoryUtilizationPercentage }}
    - type: Resource
      resource:
        name: memory
        target:
          type: Utilization
          averageUtilization: {{ . }}
    {{- end }}
{{- end }}
{{- end }}

{{/* automem.lib.pdb -- the PodDisruptionBudget of a component, when enabled. */}}
{{- define "automem.lib.pdb" -}}
{{- $ctx := .ctx }}
{{- $v := index $ctx.Values (include "automem.lib.valuesKey" .component) }}
{{- $pdb := $v.podDisruptionBudget }}
{{- if $pdb.enabled }}
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ include "automem.componentName" . }}
  namespace: {{ $ctx.Release.Namespace }}
  labels:
    {{- include "automem.labels" . | nindent 4 }}
spec:
  {{- if ne (toString $pdb.minAvailable) "" }}
  minAvailable: {{ $pdb.minAvailable }}
  {{- else }}
  maxUnavailable: {{ $pdb.maxUnavailable }}
  {{- end }}
  selector:
    matchLabels:
      {{- include "automem.selectorLabels" . | nindent 6 }}
{{- end }}
{{- end }}

{{/* automem.lib.pvc -- the data PVC of the single binary, when persistence is on. */}}
{{- define "automem.lib.pvc" -}}
{{- $ctx := .ctx }}
{{- $p := $ctx.Values.singleBinary.persistence }}
{{- if and $p.enabled (not $p.existingClaim) }}
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: {{ include "automem.componentName" . }}
  namespace: {{ $ctx.Release.Namespace }}
  labels:
    {{- include "automem.labels" . | nindent 4 }}
  annotations:
    helm.sh/resource-policy: keep
spec:
  accessModes:
    - ReadWriteOnce
  {{- with $p.storageClass }}
  storageClassName: {{ . }}
  {{- end }}
  resources:
    requests:
      storage: {{ $p.size }}
{{- end }}
{{- end }}
