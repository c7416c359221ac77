{{/* Chart name, truncated to the 63 characters of a label value. */}}
{{- define "cellfit.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name of the release's objects. */}}
{{- define "cellfit.fullname" -}}
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

{{- define "cellfit.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "cellfit.selectorLabels" -}}
app.kubernetes.io/name: {{ include "cellfit.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "cellfit.labels" -}}
helm.sh/chart: {{ include "cellfit.chart" . }}
{{ include "cellfit.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: scheduler
{{- end }}

{{- define "cellfit.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "cellfit.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The Lease kube-scheduler replicas elect their leader on. */}}
{{- define "cellfit.leaseName" -}}
{{- default (include "cellfit.fullname" .) .Values.kubeScheduler.leaderElection.resourceName }}
{{- end }}

{{/* The Lease whose holder runs cellfit's live drivers (estimator, placer, nudge). */}}
{{- define "cellfit.controllersLeaseName" -}}
{{- default (printf "%s-controllers" (include "cellfit.fullname" .) | trunc 63 | trimSuffix "-") .Values.leaderElection.leaseName }}
{{- end }}

{{/* The cell exchange's ledger ConfigMap (in the release namespace). */}}
{{- define "cellfit.exchangeLedgerName" -}}
{{- default (printf "%s-exchange-ledger" (include "cellfit.fullname" .) | trunc 63 | trimSuffix "-") .Values.exchange.ledgerName }}
{{- end }}

{{/* The cellfit ClusterRole's name (also used by the e2e suite to prove it sufficient). */}}
{{- define "cellfit.extenderRoleName" -}}
{{- printf "%s-extender" (include "cellfit.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "cellfit.kubeSchedulerRoleName" -}}
{{- printf "%s-kube-scheduler" (include "cellfit.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* kube-scheduler's image tag: the value, else the cluster's version without a build suffix
     (v1.32.5-eks-1234 -> v1.32.5), which is how registry.k8s.io tags its images. */}}
{{- define "cellfit.kubeSchedulerTag" -}}
{{- if .Values.kubeScheduler.image.tag }}
{{- .Values.kubeScheduler.image.tag }}
{{- else }}
{{- $version := .Capabilities.KubeVersion.Version }}
{{- regexFind "^v[0-9]+\\.[0-9]+\\.[0-9]+" $version | default $version }}
{{- end }}
{{- end }}

{{- define "cellfit.cellfitImage" -}}
{{- printf "%s:%s" .Values.cellfit.image.repository (default .Chart.AppVersion .Values.cellfit.image.tag) }}
{{- end }}

{{/* The loopback address kube-scheduler calls the extender on: the listen address, unless
     cellfit listens on every address. */}}
{{- define "cellfit.extenderHost" -}}
{{- $host := .Values.cellfit.listenAddress }}
{{- if or (eq $host "0.0.0.0") (eq $host "::") (eq $host "") }}127.0.0.1{{ else if contains ":" $host }}[{{ $host }}]{{ else }}{{ $host }}{{ end }}
{{- end }}

{{/* cellfit's configuration file, built from the values (cellfit validates it on start and
     `cellfit check-config` validates it offline). */}}
{{- define "cellfit.config" -}}
{{- $policy := deepCopy .Values.policy }}
{{- if eq (toString (default "" $policy.rackLabel)) "" }}
{{- $_ := set $policy "rackLabel" nil }}
{{- end }}
{{- $preemption := deepCopy .Values.preemption }}
{{- if eq (toString $preemption.maxPreemptions) "unlimited" }}
{{- $_ := set $preemption "maxPreemptions" nil }}
{{- end }}
{{- if eq (toString $preemption.resumeHoldSeconds) "unlimited" }}
{{- $_ := set $preemption "resumeHoldSeconds" nil }}
{{- end }}
{{- $exchange := merge (dict "ledgerName" (include "cellfit.exchangeLedgerName" .)) (omit .Values.exchange "ledgerName") }}
{{- if eq (toString $exchange.returnGraceSeconds) "drain" }}
{{- $_ := set $exchange "returnGraceSeconds" nil }}
{{- end }}
{{- /* The sampling pods' profile and class: the chart's unless the estimator names its own
       (a value set overrides; merge would let the chart's win). */}}
{{- $estimator := deepCopy .Values.estimator }}
{{- if not (hasKey $estimator "schedulerName") }}
{{- $_ := set $estimator "schedulerName" .Values.schedulerName }}
{{- end }}
{{- if not (hasKey $estimator "priorityClassName") }}
{{- $_ := set $estimator "priorityClassName" .Values.priorityClasses.sampling.name }}
{{- end }}
{{- /* Without the pod-create webhook nothing rewrites a placed Job's pods: the placer rewrites
       the template only (a Job the API server will not take so is refused, with an Event),
       never falling back to the webhook (auto) and leaving pods in their template's shape. */}}
{{- $allox := deepCopy .Values.allox }}
{{- if not .Values.cellfit.admission.enabled }}
{{- if and (hasKey $allox "mechanism") (ne (toString $allox.mechanism) "template") }}
{{- fail (printf "allox.mechanism %s needs cellfit.admission.enabled=true (the pod-create webhook rewrites the placed pods); without it use template" (toString $allox.mechanism)) }}
{{- end }}
{{- $_ := set $allox "mechanism" "template" }}
{{- end }}
{{- /* The solver process answers within solverTimeoutSeconds once its walk stops at the budget,
       or is killed and its pass starts no Job: cellfit refuses a budget past half of it at
       startup, the render before. */}}
{{- if and (ne (toString $allox.decisionBudgetSeconds) "<nil>") (ne (toString $allox.solverProcess) "false") }}
{{- $timeout := float64 (default 60 $allox.solverTimeoutSeconds) }}
{{- if gt (mulf (float64 $allox.decisionBudgetSeconds) 2.0) $timeout }}
{{- fail (printf "allox.decisionBudgetSeconds %v must be at most half of allox.solverTimeoutSeconds %v with allox.solverProcess (the solver process answers within it once its walk stops, or is killed and its pass starts no Job)" $allox.decisionBudgetSeconds $timeout) }}
{{- end }}
{{- end }}
{{- $server := dict "host" .Values.cellfit.listenAddress "port" .Values.cellfit.port "maxRequestBytes" .Values.cellfit.maxRequestBytes }}
{{- range $listener, $limits := .Values.cellfit.listenerLimits }}
{{- if $limits }}
{{- $_ := set $server (printf "%sListener" $listener) $limits }}
{{- end }}
{{- end }}
{{- if .Values.cellfit.metrics.enabled }}
{{- if eq (int .Values.cellfit.metrics.port) (int .Values.cellfit.port) }}
{{- fail (printf "cellfit.metrics.port must differ from cellfit.port (both %v)" .Values.cellfit.port) }}
{{- end }}
{{- $_ := set $server "metricsHost" .Values.cellfit.metrics.listenAddress }}
{{- $_ := set $server "metricsPort" .Values.cellfit.metrics.port }}
{{- $_ := set $server "pairedSchedulerHealthUrl" (printf "https://127.0.0.1:%v/healthz" .Values.kubeScheduler.securePort) }}
{{- end }}
{{- if .Values.cellfit.inspect.enabled }}
{{- if has (int .Values.cellfit.inspect.port) (list (int .Values.cellfit.port) (int .Values.cellfit.metrics.port)) }}
{{- fail (printf "cellfit.inspect.port %v must differ from cellfit.port and cellfit.metrics.port" .Values.cellfit.inspect.port) }}
{{- end }}
{{- $_ := set $server "inspectHost" .Values.cellfit.inspect.listenAddress }}
{{- $_ := set $server "inspectPort" .Values.cellfit.inspect.port }}
{{- end }}
{{- $admission := dict "enabled" false }}
{{- if .Values.cellfit.admission.enabled }}
{{- if and .Values.cellfit.inspect.enabled (eq (int .Values.cellfit.admission.port) (int .Values.cellfit.inspect.port)) }}
{{- fail (printf "cellfit.admission.port %v must differ from cellfit.inspect.port" .Values.cellfit.admission.port) }}
{{- end }}
{{- if has (int .Values.cellfit.admission.port) (list (int .Values.cellfit.port) (int .Values.cellfit.metrics.port)) }}
{{- fail (printf "cellfit.admission.port %v must differ from cellfit.port and cellfit.metrics.port" .Values.cellfit.admission.port) }}
{{- end }}
{{- $admission = dict "enabled" true "host" .Values.cellfit.admission.listenAddress "port" .Values.cellfit.admission.port
      "certFile" "/etc/cellfit-webhook/tls.crt" "keyFile" "/etc/cellfit-webhook/tls.key"
      "resumedPriorityClass" .Values.priorityClasses.resumed.name "rejectInvalid" .Values.cellfit.admission.rejectInvalid }}
{{- end }}
{{- $config := dict
  "server" $server
  "admission" $admission
  "cluster" (merge (dict "mode" "in-cluster") .Values.cluster)
  "policy" $policy
  "cells" .Values.cells
  "preemption" $preemption
  "estimator" $estimator
  "allox" $allox
  "leaderElection" (merge (dict "namespace" .Release.Namespace "leaseName" (include "cellfit.controllersLeaseName" .)) (omit .Values.leaderElection "leaseName"))
  "nudge" (merge (dict "schedulerName" .Values.schedulerName) .Values.nudge)
  "exchange" $exchange
  "reclaim" .Values.reclaim
  "logging" .Values.logging }}
{{- toYaml $config }}
{{- end }}

{{/* cellfit's configuration less what it applies without a restart (cells.virtualClusters
and the booking limits): its checksum rolls the pods. Whether VCs are configured at all stays
in it, since switching to or from the implicit default VC needs a restart. */}}
{{- define "cellfit.configNeedingRestart" -}}
{{- $values := deepCopy .Values }}
{{- $_ := set $values.cells "virtualClusters" (ternary "configured" "implicit default" (not (empty .Values.cells.virtualClusters))) }}
{{- $_ := unset $values.cells "unseenPodGraceSeconds" }}
{{- $_ := unset $values.cells "gangBookingTimeoutSeconds" }}
{{- $_ := unset $values.cells "victimExitMarginSeconds" }}
{{- include "cellfit.config" (dict "Values" $values "Release" .Release "Chart" .Chart) }}
{{- end }}

{{/* A Go duration ("1m30s", "1500ms") in milliseconds, as a string. */}}
{{- define "cellfit.durationMilliseconds" -}}
{{- $total := 0.0 }}
{{- range regexFindAll "[0-9]+(\\.[0-9]+)?(ns|us|µs|ms|s|m|h)" . -1 }}
{{- $number := regexFind "^[0-9]+(\\.[0-9]+)?" . }}
{{- $scale := get (dict "ns" 0.000001 "us" 0.001 "µs" 0.001 "ms" 1.0 "s" 1000.0 "m" 60000.0 "h" 3600000.0) (trimPrefix $number .) }}
{{- $total = addf $total (mulf (float64 $number) $scale) }}
{{- end }}
{{- $total }}
{{- end }}

{{/* The KubeSchedulerConfiguration of the cellfit profile. */}}
{{- define "cellfit.schedulerConfig" -}}
{{- $le := .Values.kubeScheduler.leaderElection -}}
{{- $ext := .Values.kubeScheduler.extender -}}
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: {{ $le.enabled }}
  resourceLock: leases
  resourceName: {{ include "cellfit.leaseName" . }}
  resourceNamespace: {{ .Release.Namespace }}
  leaseDuration: {{ $le.leaseDuration }}
  renewDeadline: {{ $le.renewDeadline }}
  retryPeriod: {{ $le.retryPeriod }}
{{- if .Values.kubeScheduler.percentageOfNodesToScore }}
percentageOfNodesToScore: {{ .Values.kubeScheduler.percentageOfNodesToScore }}
{{- end }}
profiles:
  - schedulerName: {{ .Values.schedulerName }}
extenders:
  # cellfit runs in the same pod; deploy/kube-scheduler-config.yaml explains every field.
  - urlPrefix: http://{{ include "cellfit.extenderHost" . }}:{{ .Values.cellfit.port }}/v1/extender
    filterVerb: filter
    prioritizeVerb: prioritize
    preemptVerb: preempt
    bindVerb: bind
    weight: {{ $ext.weight }}
    enableHTTPS: false
    nodeCacheCapable: {{ $ext.nodeCacheCapable }}
    httpTimeout: {{ $ext.httpTimeout }}
    ignorable: {{ $ext.ignorable }}
{{- with $ext.managedResources }}
    managedResources:
{{- toYaml . | nindent 6 }}
{{- end }}
{{- end }}

{{/* Restricted container securityContext (Pod Security Standard "restricted"). */}}
{{- define "cellfit.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/* The webhook's Service and Secret share this name. */}}
{{- define "cellfit.webhookName" -}}
{{- printf "%s-webhook" (include "cellfit.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
