{{/* Names and labels shared by every template. */}}

{{/* The chart's name in object names and the app.kubernetes.io/name label (nameOverride). */}}
{{- define "isg.name" -}}
{{- .Values.nameOverride | default .Chart.Name | trunc 52 | trimSuffix "-" -}}
{{- end -}}

{{/* The name of every object: the release name, with the chart name appended unless it is in it. */}}
{{- define "isg.fullname" -}}
{{- $name := include "isg.name" . -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" -}}
{{- else if contains $name .Release.Name -}}
{{- .Release.Name | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The namespace of every namespaced object of the release (namespaceOverride), which is also
the guard's own namespace: its Lease, Events' reporter and webhook Service live there. */}}
{{- define "isg.namespace" -}}
{{- .Values.namespaceOverride | default .Release.Namespace -}}
{{- end -}}

{{/* The webhook pods' ServiceAccount: the chart's (serviceAccount.create) or one of yours. */}}
{{- define "isg.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- .Values.serviceAccount.name | default (include "isg.fullname" .) -}}
{{- else -}}
{{- required "serviceAccount.name: with serviceAccount.create=false, name the existing ServiceAccount the webhook pods run as (the chart binds its RBAC to it)" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* imagePullSecrets of every pod: global.imagePullSecrets (names or {name}) and imagePullSecrets. */}}
{{- define "isg.imagePullSecrets" -}}
{{- $secrets := list -}}
{{- range concat (.Values.global.imagePullSecrets | default list) (.Values.imagePullSecrets | default list) -}}
{{- if kindIs "string" . -}}
{{- $secrets = append $secrets (dict "name" .) -}}
{{- else -}}
{{- $secrets = append $secrets . -}}
{{- end -}}
{{- end -}}
{{- with ($secrets | uniq) }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end -}}
{{- end -}}

{{- define "isg.selectorLabels" -}}
app.kubernetes.io/name: {{ include "isg.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "isg.labels" -}}
{{ include "isg.selectorLabels" . }}
app.kubernetes.io/part-of: ingress-status-guard
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* [registry/]repository then @digest, or :tag (default appVersion); global.imageRegistry
wins over image.registry, as in the charts that share a `global` block. */}}
{{- define "isg.image" -}}
{{- $image := .Values.image -}}
{{- $registry := .Values.global.imageRegistry | default $image.registry -}}
{{- $repository := $image.repository -}}
{{- if $registry -}}
{{- $repository = printf "%s/%s" (trimSuffix "/" $registry) $repository -}}
{{- end -}}
{{- if $image.digest -}}
{{- printf "%s@%s" $repository $image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repository ($image.tag | default .Chart.AppVersion) -}}
{{- end -}}
{{- end -}}

{{/* "true" when the NetworkPolicy is on and admits to the webhook port less than any source. */}}
{{- define "isg.networkPolicyNarrowed" -}}
{{- $np := .Values.networkPolicy -}}
{{- if and $np.enabled (not (has "0.0.0.0/0" $np.webhookFrom)) (not (has "::/0" $np.webhookFrom)) -}}
true
{{- end -}}
{{- end -}}

{{- define "isg.tlsSecret" -}}
{{- .Values.certificate.secretName | default (printf "%s-tls" (include "isg.fullname" .)) -}}
{{- end -}}

{{/* The policies of the config file: the `policies` list, or the one `policy` shorthand. */}}
{{- define "isg.policies" -}}
{{- $policies := list -}}
{{- if .Values.policies -}}
{{- $policies = .Values.policies -}}
{{- else -}}
{{- $p := .Values.policy -}}
{{- if and (not $p.publishService) (not $p.publishStatusAddress) -}}
{{- fail "policy: set policy.publishStatusAddress (the addresses your load balancer publishes) or policy.publishService (NAMESPACE/NAME of the controller's Service), or give a policies list" -}}
{{- end -}}
{{- $one := dict "name" $p.name "ingressClasses" $p.ingressClasses "watchIngressWithoutClass" $p.watchIngressWithoutClass "mode" $p.mode "keepPorts" $p.keepPorts "onUnresolved" $p.onUnresolved -}}
{{- if $p.controllerClasses -}}
{{- $_ := set $one "controllerClasses" $p.controllerClasses -}}
{{- end -}}
{{- if $p.publishService -}}
{{- $_ := set $one "publishService" $p.publishService -}}
{{- else -}}
{{- $_ := set $one "publishStatusAddress" $p.publishStatusAddress -}}
{{- end -}}
{{- $policies = list $one -}}
{{- end -}}
{{- /* One scope. In webhook mode the reconciler reads webhook.namespaceSelector from the
  webhook configuration itself (--webhook-configuration). admission.mode=policy has no webhook
  configuration, so there it narrows every policy (and so their admission policies' bindings
  and the reconciler): a policy's own selector is kept and the scope added to it, its
  matchLabels becoming In expressions. */ -}}
{{- $scope := .Values.webhook.namespaceSelector -}}
{{- if and $scope (eq .Values.admission.mode "policy") -}}
{{- $scoped := list -}}
{{- range $i, $policy := $policies -}}
{{- $policy = deepCopy $policy -}}
{{- $own := $policy.namespaceSelector -}}
{{- if not $own -}}
{{- $_ := set $policy "namespaceSelector" (deepCopy $scope) -}}
{{- else if kindIs "string" $own -}}
{{- fail (printf "policies[%d] (%s): namespaceSelector is text while webhook.namespaceSelector is set; write it as a LabelSelector ({matchLabels, matchExpressions}) so the chart can add the webhook's scope to it" $i ($policy.name | toString)) -}}
{{- else -}}
{{- $expressions := concat ($own.matchExpressions | default list) ($scope.matchExpressions | default list) -}}
{{- range $key, $value := ($scope.matchLabels | default dict) -}}
{{- $expressions = append $expressions (dict "key" $key "operator" "In" "values" (list $value)) -}}
{{- end -}}
{{- $selector := dict "matchExpressions" $expressions -}}
{{- with $own.matchLabels -}}
{{- $_ := set $selector "matchLabels" . -}}
{{- end -}}
{{- $_ := set $policy "namespaceSelector" $selector -}}
{{- end -}}
{{- $scoped = append $scoped $policy -}}
{{- end -}}
{{- $policies = $scoped -}}
{{- end -}}
{{- toYaml $policies -}}
{{- end -}}

{{/* Every source of every policy: the one-source shorthand of a policy, or its sources list. */}}
{{- define "isg.sources" -}}
{{- $all := list -}}
{{- range (include "isg.policies" . | fromYamlArray) -}}
{{- if .sources -}}
{{- $all = concat $all .sources -}}
{{- else -}}
{{- $all = append $all (pick . "publishService" "publishStatusAddress" "publishPods" "publishGateway") -}}
{{- end -}}
{{- end -}}
{{- toYaml $all -}}
{{- end -}}

{{/* The namespaces of the node-IP sources (publishPods), each once. */}}
{{- define "isg.podNamespaces" -}}
{{- $namespaces := list -}}
{{- range (include "isg.sources" . | fromYamlArray) -}}
{{- if .publishPods -}}
{{- $namespaces = append $namespaces .publishPods.namespace | uniq -}}
{{- end -}}
{{- end -}}
{{- toYaml $namespaces -}}
{{- end -}}

{{/* "true" when a policy has a namespaceSelector (the webhook then watches Namespaces). */}}
{{- define "isg.needsNamespaces" -}}
{{- range (include "isg.policies" . | fromYamlArray) -}}
{{- if .namespaceSelector -}}true{{- end -}}
{{- end -}}
{{- end -}}

{{/* "true" when webhook.namespaceSelector selects by something (matchLabels or
matchExpressions): the guard then watches the Namespaces it selects. An empty selector reviews
every namespace, and the guard reads no Namespace for it. */}}
{{- define "isg.webhookSelectsNamespaces" -}}
{{- with .Values.webhook.namespaceSelector -}}
{{- if or .matchLabels .matchExpressions -}}true{{- end -}}
{{- end -}}
{{- end -}}

{{/* namespace -> list of Service names: every publishService of the policies. */}}
{{- define "isg.publishServices" -}}
{{- $byNamespace := dict -}}
{{- range (include "isg.sources" . | fromYamlArray) -}}
{{- if .publishService -}}
{{- $parts := splitList "/" .publishService -}}
{{- if ne (len $parts) 2 -}}
{{- fail (printf "publishService %q: must be NAMESPACE/NAME" .publishService) -}}
{{- end -}}
{{- $ns := index $parts 0 -}}
{{- $names := get $byNamespace $ns | default (list) -}}
{{- $_ := set $byNamespace $ns (append $names (index $parts 1) | uniq) -}}
{{- end -}}
{{- end -}}
{{- toYaml $byNamespace -}}
{{- end -}}

{{/* namespace -> list of Gateway names: every publishGateway of the policies. */}}
{{- define "isg.publishGateways" -}}
{{- $byNamespace := dict -}}
{{- range (include "isg.sources" . | fromYamlArray) -}}
{{- if .publishGateway -}}
{{- $parts := splitList "/" .publishGateway -}}
{{- if ne (len $parts) 2 -}}
{{- fail (printf "publishGateway %q: must be NAMESPACE/NAME" .publishGateway) -}}
{{- end -}}
{{- $ns := index $parts 0 -}}
{{- $names := get $byNamespace $ns | default (list) -}}
{{- $_ := set $byNamespace $ns (append $names (index $parts 1) | uniq) -}}
{{- end -}}
{{- end -}}
{{- toYaml $byNamespace -}}
{{- end -}}

{{/* "true" when a policy governs Gateways (kind: Gateway, or gatewayClasses or gatewayControllers): the webhook
is then also registered for gateways/status. */}}
{{- define "isg.governsGateways" -}}
{{- range (include "isg.policies" . | fromYamlArray) -}}
{{- if or .gatewayClasses .gatewayControllers (eq (toString (.kind | default "")) "Gateway") -}}true{{- end -}}
{{- end -}}
{{- end -}}

{{/* "true" when a policy governs LoadBalancer Services (kind: Service): the webhook is then also
registered for services/status, and the reconciler may list/watch Services and patch their status. */}}
{{- define "isg.governsServices" -}}
{{- range (include "isg.policies" . | fromYamlArray) -}}
{{- if or .loadBalancerClasses (eq (toString (.kind | default "")) "Service") -}}true{{- end -}}
{{- end -}}
{{- end -}}

{{/* "true" when a policy matches Gateways by controller (the webhook watches GatewayClasses). */}}
{{- define "isg.needsGatewayClasses" -}}
{{- range (include "isg.policies" . | fromYamlArray) -}}
{{- if .gatewayControllers -}}true{{- end -}}
{{- end -}}
{{- end -}}

{{/* The pod of the certgen Job and CronJob (certificate.mode selfSigned). */}}
{{- define "isg.certgenPod" -}}
{{- $fullname := include "isg.fullname" . -}}
metadata:
  labels:
    {{- include "isg.selectorLabels" . | nindent 4 }}
    app.kubernetes.io/component: certgen
spec:
  serviceAccountName: {{ $fullname }}-certgen
  restartPolicy: OnFailure
  {{- with include "isg.imagePullSecrets" . }}{{ . | nindent 2 }}{{ end }}
  securityContext:
    runAsNonRoot: true
    runAsUser: 65532
    runAsGroup: 65532
    seccompProfile:
      type: RuntimeDefault
  containers:
    - name: certgen
      image: {{ include "isg.image" . }}
      imagePullPolicy: {{ .Values.image.pullPolicy }}
      args:
        - certs
        - bootstrap
        - --service={{ $fullname }}
        - --secret={{ include "isg.tlsSecret" . }}
        - --webhook-configuration={{ $fullname }}
        - --renew-before-days={{ .Values.certificate.selfSigned.renewBeforeDays }}
        - --validity-days={{ .Values.certificate.selfSigned.validityDays }}
        - --log-format={{ .Values.log.format }}
      env:
        - name: POD_NAMESPACE
          valueFrom:
            fieldRef:
              fieldPath: metadata.namespace
      # One run: 7 MiB peak RSS measured for `certs generate`; the Kubernetes client adds a few.
      resources:
        requests:
          cpu: 10m
          memory: 16Mi
        limits:
          memory: 64Mi
      securityContext:
        allowPrivilegeEscalation: false
        readOnlyRootFilesystem: true
        runAsNonRoot: true
        capabilities:
          drop: [ALL]
{{- end -}}

{{/* The names the release's guard may give its admission objects (a MutatingAdmissionPolicy or
ValidatingAdmissionPolicy and its binding share one), by the binary's one rule
(`render-admission-policy --names`): <fullname>-<kind>-<n> for kinds ingress, gateway and service and n
from 0 to 15, the fullname being the guard's leader Lease, and a policy taking the slot of its
place among the file's policies of its kind. Fixed whatever the policies are called: a rename
never changes a name, so the RBAC below grants the same names under `helm template` (Argo CD),
helm install and kustomize. In policy mode a fullname that cannot start a DNS-1123 label of at
most 63 characters (<fullname>-gateway-15) fails the render, as the guard refuses such a Lease:
RBAC grants by name, never by a wider rule. */}}
{{- define "isg.admissionObjectNames" -}}
{{- $fullname := include "isg.fullname" . -}}
{{- $label := regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$" $fullname -}}
{{- if and (eq (toString .Values.admission.mode) "policy") (or (gt (len $fullname) 52) (not $label)) -}}
{{- fail (printf "admission.mode=policy: the release fullname %q cannot start its admission objects' names (<fullname>-<kind>-<n>, up to <fullname>-gateway-15, must be DNS-1123 labels of at most 63 characters); give a release name or fullnameOverride of at most 52 lowercase letters, digits and '-'" $fullname) -}}
{{- end -}}
{{- $names := list -}}
{{- range $kind := list "ingress" "gateway" "service" -}}
{{- range $n := until 16 -}}
{{- $names = append $names (printf "%s-%s-%d" $fullname $kind $n) -}}
{{- end -}}
{{- end -}}
{{- toYaml $names -}}
{{- end -}}

{{/* Fails a policy-mode render with more policies of a kind than the 16 names of that kind, as
the guard refuses such a file at start. */}}
{{- define "isg.checkSlots" -}}
{{- if eq (toString .Values.admission.mode) "policy" -}}
{{- $counts := dict "Ingress" 0 "Gateway" 0 "Service" 0 -}}
{{- range (include "isg.policies" . | fromYamlArray) -}}
{{- $kind := "Ingress" -}}
{{- if or .gatewayClasses .gatewayControllers (eq (toString (.kind | default "")) "Gateway") -}}{{- $kind = "Gateway" -}}{{- end -}}
{{- if eq (toString (.kind | default "")) "Service" -}}{{- $kind = "Service" -}}{{- end -}}
{{- $_ := set $counts $kind (add1 (get $counts $kind)) -}}
{{- if gt (get $counts $kind) 16 -}}
{{- fail (printf "policies: the %s policy %q is number %d of its kind, and admission.mode=policy keeps at most 16 policies of a kind (their objects are named <fullname>-%s-0 to -15); merge policies, or install another release for the rest" $kind (.name | toString) (get $counts $kind) (lower $kind)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The ingress-status-guard/lease label the guard puts on its admission objects, as the
binary computes it from its Lease: <namespace>.<fullname>, or h-<60 hex digits of its sha256> when it is
not a label value. */}}
{{- define "isg.ownerLabel" -}}
{{- $full := printf "%s.%s" (include "isg.namespace" .) (include "isg.fullname" .) -}}
{{- if and (le (len $full) 63) (regexMatch "^[A-Za-z0-9._-]+$" $full) -}}
{{- $full -}}
{{- else -}}
h-{{ sha256sum $full | trunc 60 }}
{{- end -}}
{{- end -}}

{{/* The names of the admission objects in the cluster that carry this release's owner label
(helm lookup; empty under `helm template` and other renders without a cluster): beyond the
fixed names, those of a version that named objects per policy (<fullname>-<policy>), which the
guard may then delete. Once deleted, the next upgrade drops them. */}}
{{- define "isg.retiredAdmissionObjectNames" -}}
{{- $root := . -}}
{{- $owner := include "isg.ownerLabel" . -}}
{{- $names := list -}}
{{- range (include "isg.servedAdmissionKinds" . | fromYamlArray) -}}
{{- $found := lookup (index . 0) (index . 1) "" "" -}}
{{- range ($found.items | default list) -}}
{{- if eq (dig "metadata" "labels" "ingress-status-guard/lease" "" .) $owner -}}
{{- $names = append $names .metadata.name -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toYaml ($names | uniq | sortAlpha) -}}
{{- end -}}

{{/* The four kinds of admission objects as [apiVersion, kind] pairs, in the versions the cluster
serves: a lookup of a version it does not serve fails the render. */}}
{{- define "isg.servedAdmissionKinds" -}}
{{- $root := . -}}
{{- $served := list -}}
{{- $kinds := list (list "admissionregistration.k8s.io/v1" "MutatingAdmissionPolicy") (list "admissionregistration.k8s.io/v1beta1" "MutatingAdmissionPolicy") (list "admissionregistration.k8s.io/v1" "MutatingAdmissionPolicyBinding") (list "admissionregistration.k8s.io/v1beta1" "MutatingAdmissionPolicyBinding") (list "admissionregistration.k8s.io/v1" "ValidatingAdmissionPolicy") (list "admissionregistration.k8s.io/v1" "ValidatingAdmissionPolicyBinding") -}}
{{- range $kinds -}}
{{- if $root.Capabilities.APIVersions.Has (printf "%s/%s" (index . 0) (index . 1)) -}}
{{- $served = append $served . -}}
{{- end -}}
{{- end -}}
{{- toYaml $served -}}
{{- end -}}

{{/* Fails an install or upgrade in policy mode when an admission object of a name this release
would own carries another guard's owner label: the guard would leave it alone, and the policy
would enforce the other guard's value (a release reinstalled in another namespace after
`helm uninstall --no-hooks`). helm lookup: nothing is seen under `helm template`, where the
IngressStatusGuardAdmissionPolicyForeign alert tells instead. The labels earlier versions gave
this release are its own: h- and the Adler-32 in decimal, and h- and 8 hex digits of a 32-bit
FNV-1a, which a template cannot compute and so lets pass (the guard itself tells). */}}
{{- define "isg.checkObjectOwners" -}}
{{- if eq (toString .Values.admission.mode) "policy" -}}
{{- $root := . -}}
{{- $owner := include "isg.ownerLabel" . -}}
{{- $full := printf "%s.%s" (include "isg.namespace" .) (include "isg.fullname" .) -}}
{{- $own := list $owner (printf "h-%s" (adler32sum $full)) -}}
{{- $kinds := include "isg.servedAdmissionKinds" . | fromYamlArray -}}
{{- range $name := (include "isg.admissionObjectNames" . | fromYamlArray) -}}
{{- range $kinds -}}
{{- $label := dig "metadata" "labels" "ingress-status-guard/lease" "" (lookup (index . 0) (index . 1) "" $name) -}}
{{- $legacy := and (ne $owner $full) (regexMatch "^h-[0-9a-f]{8}$" $label) -}}
{{- if and $label (not (has $label $own)) (not $legacy) -}}
{{- fail (printf "admission.mode=policy: the %s %q, a name this release would own, carries ingress-status-guard/lease=%s, another guard's (this release's is %s). If that guard is gone, delete its objects (kubectl delete mutatingadmissionpolicies,mutatingadmissionpolicybindings,validatingadmissionpolicies,validatingadmissionpolicybindings -l ingress-status-guard/lease=%s); else give this release another name" (index . 1) $name $label $owner $label) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The pod of the doctor hook Job and the `helm test` Pod: `doctor --wait` as the doctor
ServiceAccount, with the release's policy file, under the restricted Pod Security profile.
Takes a dict: root (the chart's context), wait, restartPolicy. */}}
{{- define "isg.doctorPod" -}}
{{- $root := .root -}}
{{- $fullname := include "isg.fullname" $root -}}
metadata:
  labels:
    {{- include "isg.selectorLabels" $root | nindent 4 }}
    app.kubernetes.io/component: doctor
    {{- with $root.Values.commonLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  serviceAccountName: {{ $fullname }}-doctor
  restartPolicy: {{ .restartPolicy }}
  {{- with include "isg.imagePullSecrets" $root }}{{ . | nindent 2 }}{{ end }}
  {{- with $root.Values.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $root.Values.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  securityContext:
    runAsNonRoot: true
    runAsUser: 65532
    runAsGroup: 65532
    seccompProfile:
      type: RuntimeDefault
  containers:
    - name: doctor
      image: {{ include "isg.image" $root }}
      imagePullPolicy: {{ $root.Values.image.pullPolicy }}
      args:
        - doctor
        - --config=/etc/ingress-status-guard/config/config.yaml
        - --admission={{ $root.Values.admission.mode }}
        {{- if ne $root.Values.admission.mode "policy" }}
        - --webhook-configuration={{ $fullname }}
        {{- end }}
        - --leader-election-namespace={{ include "isg.namespace" $root }}
        - --leader-election-lease-name={{ $fullname }}
        - --wait={{ .wait }}
        {{- with $root.Values.doctor.probe }}
        - --probe={{ . }}
        {{- else }}
        - --probe-namespace={{ $root.Values.doctor.probeNamespace | default (include "isg.namespace" $root) }}
        {{- end }}
        {{- if $root.Values.doctor.checkPermissions }}
        - --service-account={{ include "isg.namespace" $root }}/{{ include "isg.serviceAccountName" $root }}
        {{- end }}
      resources:
        requests: {cpu: 10m, memory: 16Mi}
        limits: {memory: 64Mi}
      securityContext:
        allowPrivilegeEscalation: false
        readOnlyRootFilesystem: true
        runAsNonRoot: true
        capabilities:
          drop: [ALL]
      volumeMounts:
        - name: config
          mountPath: /etc/ingress-status-guard/config
          readOnly: true
  volumes:
    - name: config
      configMap:
        name: {{ $fullname }}-config
{{- end -}}
