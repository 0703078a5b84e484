#include "sim/kube/protobuf_tables.h"

namespace gpuop::simkube::protobuf_tables {
namespace {

// ---- Row builders ---------------------------------------------------------
// One per Go field shape. The emit rule follows the json tag: a value with
// `omitempty` is kUnlessEmpty, one without is kAlways, a pointer is kIfSet.

constexpr ProtoEmit kIfSet = ProtoEmit::kIfSet;
constexpr ProtoEmit kAlways = ProtoEmit::kAlways;
constexpr ProtoEmit kUnlessEmpty = ProtoEmit::kUnlessEmpty;

constexpr ProtoField Scalar(uint32_t n, std::string_view name, ProtoKind kind, ProtoEmit e) {
  return {n, name, kind, ProtoLabel::kSingular, e};
}
constexpr ProtoField Str(uint32_t n, std::string_view name, ProtoEmit e = kUnlessEmpty) {
  return Scalar(n, name, ProtoKind::kString, e);
}
constexpr ProtoField Int32(uint32_t n, std::string_view name, ProtoEmit e = kUnlessEmpty) {
  return Scalar(n, name, ProtoKind::kInt32, e);
}
constexpr ProtoField Int64(uint32_t n, std::string_view name, ProtoEmit e = kUnlessEmpty) {
  return Scalar(n, name, ProtoKind::kInt64, e);
}
constexpr ProtoField Bool(uint32_t n, std::string_view name, ProtoEmit e = kUnlessEmpty) {
  return Scalar(n, name, ProtoKind::kBool, e);
}
// A resource.Quantity: kAlways for a value (Go writes "0" for the zero one,
// as omitempty never omits a struct), kIfSet for a *Quantity.
constexpr ProtoField Qty(uint32_t n, std::string_view name, ProtoEmit e) {
  return Scalar(n, name, ProtoKind::kQuantity, e);
}
// An intstr.IntOrString: kAlways for a value, kIfSet for a pointer.
constexpr ProtoField IntStr(uint32_t n, std::string_view name, ProtoEmit e) {
  return Scalar(n, name, ProtoKind::kIntOrString, e);
}
// A *metav1.Time: written when set.
constexpr ProtoField Time(uint32_t n, std::string_view name) {
  return Scalar(n, name, ProtoKind::kTime, kIfSet);
}
// A metav1.Time value: always written, null for the zero time.
constexpr ProtoField TimeV(uint32_t n, std::string_view name) {
  return Scalar(n, name, ProtoKind::kTime, kAlways);
}
constexpr ProtoField Raw(uint32_t n, std::string_view name) {
  return Scalar(n, name, ProtoKind::kRawExtension, kIfSet);
}

// Lists and maps are left out when empty; kAlways (a slice without
// omitempty) writes null for an absent one, as Go does for a nil slice.
constexpr ProtoField Strs(uint32_t n, std::string_view name, ProtoEmit e = kUnlessEmpty) {
  return {n, name, ProtoKind::kString, ProtoLabel::kRepeated, e};
}
constexpr ProtoField Int32s(uint32_t n, std::string_view name, ProtoEmit e = kUnlessEmpty) {
  return {n, name, ProtoKind::kInt32, ProtoLabel::kRepeated, e};
}
constexpr ProtoField Int64s(uint32_t n, std::string_view name) {
  return {n, name, ProtoKind::kInt64, ProtoLabel::kRepeated};
}
constexpr ProtoField StrMap(uint32_t n, std::string_view name) {
  return {n, name, ProtoKind::kString, ProtoLabel::kMap};
}
constexpr ProtoField BytesMap(uint32_t n, std::string_view name) {
  return {n, name, ProtoKind::kBytes, ProtoLabel::kMap};
}
// A ResourceList (map<string, Quantity>).
constexpr ProtoField QtyMap(uint32_t n, std::string_view name) {
  return {n, name, ProtoKind::kQuantity, ProtoLabel::kMap};
}

// A pointer to a struct: written when on the wire.
constexpr ProtoField Msg(uint32_t n, std::string_view name, const ProtoMessage* m) {
  return {n, name, ProtoKind::kMessage, ProtoLabel::kSingular, kIfSet, m};
}
// A struct value: Go's encoding/json writes it even when empty (omitempty
// never omits a struct), so an absent one is its zero value.
constexpr ProtoField Struct(uint32_t n, std::string_view name, const ProtoMessage* m) {
  return {n, name, ProtoKind::kMessage, ProtoLabel::kSingular, kAlways, m};
}
// An embedded struct (`json:",inline"`): its fields are the parent's.
constexpr ProtoField Inline(uint32_t n, const ProtoMessage* m) {
  return {n, "", ProtoKind::kMessage, ProtoLabel::kSingular, kAlways, m};
}
constexpr ProtoField Msgs(uint32_t n, std::string_view name, const ProtoMessage* m,
                          ProtoEmit e = kIfSet) {
  return {n, name, ProtoKind::kMessage, ProtoLabel::kRepeated, e, m};
}

// k8s.io/apimachinery/pkg/apis/meta/v1

constexpr ProtoField kOwnerReferenceFields[] = {
    Str(5, "apiVersion", kAlways), Str(1, "kind", kAlways),
    Str(3, "name", kAlways),       Str(4, "uid", kAlways),
    Bool(6, "controller", kIfSet), Bool(7, "blockOwnerDeletion", kIfSet),
};
constexpr ProtoMessage kOwnerReference{"OwnerReference", kOwnerReferenceFields};

constexpr ProtoField kManagedFieldsEntryFields[] = {
    Str(1, "manager"),    Str(2, "operation"), Str(3, "apiVersion"),  Time(4, "time"),
    Str(6, "fieldsType"), Raw(7, "fieldsV1"),  Str(8, "subresource"),
};
constexpr ProtoMessage kManagedFieldsEntry{"ManagedFieldsEntry", kManagedFieldsEntryFields};

constexpr ProtoField kObjectMetaFields[] = {
    Str(1, "name"),
    Str(2, "generateName"),
    Str(3, "namespace"),
    Str(4, "selfLink"),
    Str(5, "uid"),
    Str(6, "resourceVersion"),
    Int64(7, "generation"),
    TimeV(8, "creationTimestamp"),
    Time(9, "deletionTimestamp"),
    Int64(10, "deletionGracePeriodSeconds", kIfSet),
    StrMap(11, "labels"),
    StrMap(12, "annotations"),
    Msgs(13, "ownerReferences", &kOwnerReference),
    Strs(14, "finalizers"),
    Msgs(17, "managedFields", &kManagedFieldsEntry),
};
constexpr ProtoMessage kObjectMeta{"ObjectMeta", kObjectMetaFields};

constexpr ProtoField kLabelSelectorRequirementFields[] = {
    Str(1, "key", kAlways), Str(2, "operator", kAlways), Strs(3, "values")};
constexpr ProtoMessage kLabelSelectorRequirement{"LabelSelectorRequirement",
                                                 kLabelSelectorRequirementFields};

constexpr ProtoField kLabelSelectorFields[] = {
    StrMap(1, "matchLabels"), Msgs(2, "matchExpressions", &kLabelSelectorRequirement)};
constexpr ProtoMessage kLabelSelector{"LabelSelector", kLabelSelectorFields};

constexpr ProtoField kPreconditionsFields[] = {Str(1, "uid", kIfSet),
                                               Str(2, "resourceVersion", kIfSet)};
constexpr ProtoMessage kPreconditions{"Preconditions", kPreconditionsFields};

constexpr ProtoField kDeleteOptionsFields[] = {
    Int64(1, "gracePeriodSeconds", kIfSet),
    Msg(2, "preconditions", &kPreconditions),
    Bool(3, "orphanDependents", kIfSet),
    Str(4, "propagationPolicy", kIfSet),
    Strs(5, "dryRun"),
};
constexpr ProtoMessage kDeleteOptions{"DeleteOptions", kDeleteOptionsFields};

// k8s.io/api/core/v1

constexpr ProtoField kObjectReferenceFields[] = {
    Str(1, "kind"),       Str(2, "namespace"),       Str(3, "name"),      Str(4, "uid"),
    Str(5, "apiVersion"), Str(6, "resourceVersion"), Str(7, "fieldPath"),
};
constexpr ProtoMessage kObjectReference{"ObjectReference", kObjectReferenceFields};

constexpr ProtoField kLocalObjectReferenceFields[] = {Str(1, "name")};
constexpr ProtoMessage kLocalObjectReference{"LocalObjectReference", kLocalObjectReferenceFields};

constexpr ProtoField kNamespaceSpecFields[] = {Strs(1, "finalizers")};
constexpr ProtoMessage kNamespaceSpec{"NamespaceSpec", kNamespaceSpecFields};

constexpr ProtoField kNamespaceConditionFields[] = {
    Str(1, "type", kAlways), Str(2, "status", kAlways), Time(4, "lastTransitionTime"),
    Str(5, "reason"),        Str(6, "message"),
};
constexpr ProtoMessage kNamespaceCondition{"NamespaceCondition", kNamespaceConditionFields};

constexpr ProtoField kNamespaceStatusFields[] = {Str(1, "phase"),
                                                 Msgs(2, "conditions", &kNamespaceCondition)};
constexpr ProtoMessage kNamespaceStatus{"NamespaceStatus", kNamespaceStatusFields};

constexpr ProtoField kNamespaceFields[] = {Msg(1, "metadata", &kObjectMeta),
                                           Msg(2, "spec", &kNamespaceSpec),
                                           Msg(3, "status", &kNamespaceStatus)};
constexpr ProtoMessage kNamespace{"Namespace", kNamespaceFields};

constexpr ProtoField kConfigMapFields[] = {Msg(1, "metadata", &kObjectMeta), StrMap(2, "data"),
                                           BytesMap(3, "binaryData"), Bool(4, "immutable", kIfSet)};
constexpr ProtoMessage kConfigMap{"ConfigMap", kConfigMapFields};

constexpr ProtoField kSecretFields[] = {
    Msg(1, "metadata", &kObjectMeta), BytesMap(2, "data"),          Str(3, "type"),
    StrMap(4, "stringData"),          Bool(5, "immutable", kIfSet),
};
constexpr ProtoMessage kSecret{"Secret", kSecretFields};

constexpr ProtoField kServiceAccountFields[] = {Msg(1, "metadata", &kObjectMeta),
                                                Msgs(2, "secrets", &kObjectReference),
                                                Msgs(3, "imagePullSecrets", &kLocalObjectReference),
                                                Bool(4, "automountServiceAccountToken", kIfSet)};
constexpr ProtoMessage kServiceAccount{"ServiceAccount", kServiceAccountFields};

// pods/binding, as a scheduler posts it.
constexpr ProtoField kBindingFields[] = {Msg(1, "metadata", &kObjectMeta),
                                         Msg(2, "target", &kObjectReference)};
constexpr ProtoMessage kBinding{"Binding", kBindingFields};

// k8s.io/api/policy/v1: pods/eviction, as kubectl drain posts it.
constexpr ProtoField kEvictionFields[] = {Msg(1, "metadata", &kObjectMeta),
                                          Msg(2, "deleteOptions", &kDeleteOptions)};
constexpr ProtoMessage kEviction{"Eviction", kEvictionFields};

// k8s.io/api/authentication/v1: serviceaccounts/token, as `kubectl create
// token` posts it (status is the server's).
constexpr ProtoField kBoundObjectReferenceFields[] = {Str(1, "kind"), Str(2, "apiVersion"),
                                                      Str(3, "name"), Str(4, "uid")};
constexpr ProtoMessage kBoundObjectReference{"BoundObjectReference", kBoundObjectReferenceFields};
constexpr ProtoField kTokenRequestSpecFields[] = {Strs(1, "audiences"),
                                                  Msg(3, "boundObjectRef", &kBoundObjectReference),
                                                  Int64(4, "expirationSeconds", kIfSet)};
constexpr ProtoMessage kTokenRequestSpec{"TokenRequestSpec", kTokenRequestSpecFields};
constexpr ProtoField kTokenRequestFields[] = {Msg(1, "metadata", &kObjectMeta),
                                              Msg(2, "spec", &kTokenRequestSpec)};
constexpr ProtoMessage kTokenRequest{"TokenRequest", kTokenRequestFields};

// k8s.io/api/authorization/v1: selfsubjectaccessreviews, as `kubectl auth
// can-i` posts them.
constexpr ProtoField kResourceAttributesFields[] = {
    Str(1, "namespace"), Str(2, "verb"),        Str(3, "group"), Str(4, "version"),
    Str(5, "resource"),  Str(6, "subresource"), Str(7, "name")};
constexpr ProtoMessage kResourceAttributes{"ResourceAttributes", kResourceAttributesFields};
constexpr ProtoField kNonResourceAttributesFields[] = {Str(1, "path"), Str(2, "verb")};
constexpr ProtoMessage kNonResourceAttributes{"NonResourceAttributes",
                                              kNonResourceAttributesFields};
constexpr ProtoField kSelfSubjectAccessReviewSpecFields[] = {
    Msg(1, "resourceAttributes", &kResourceAttributes),
    Msg(2, "nonResourceAttributes", &kNonResourceAttributes)};
constexpr ProtoMessage kSelfSubjectAccessReviewSpec{"SelfSubjectAccessReviewSpec",
                                                    kSelfSubjectAccessReviewSpecFields};
constexpr ProtoField kSelfSubjectAccessReviewFields[] = {
    Msg(1, "metadata", &kObjectMeta), Msg(2, "spec", &kSelfSubjectAccessReviewSpec)};
constexpr ProtoMessage kSelfSubjectAccessReview{"SelfSubjectAccessReview",
                                                kSelfSubjectAccessReviewFields};

// k8s.io/api/rbac/v1

constexpr ProtoField kPolicyRuleFields[] = {
    Strs(1, "verbs"),         Strs(2, "apiGroups"),       Strs(3, "resources"),
    Strs(4, "resourceNames"), Strs(5, "nonResourceURLs"),
};
constexpr ProtoMessage kPolicyRule{"PolicyRule", kPolicyRuleFields};

constexpr ProtoField kAggregationRuleFields[] = {Msgs(1, "clusterRoleSelectors", &kLabelSelector)};
constexpr ProtoMessage kAggregationRule{"AggregationRule", kAggregationRuleFields};

constexpr ProtoField kRoleFields[] = {Msg(1, "metadata", &kObjectMeta),
                                      Msgs(2, "rules", &kPolicyRule)};
constexpr ProtoMessage kRole{"Role", kRoleFields};

constexpr ProtoField kClusterRoleFields[] = {Msg(1, "metadata", &kObjectMeta),
                                             Msgs(2, "rules", &kPolicyRule),
                                             Msg(3, "aggregationRule", &kAggregationRule)};
constexpr ProtoMessage kClusterRole{"ClusterRole", kClusterRoleFields};

constexpr ProtoField kSubjectFields[] = {Str(1, "kind", kAlways), Str(2, "apiGroup"),
                                         Str(3, "name", kAlways), Str(4, "namespace")};
constexpr ProtoMessage kSubject{"Subject", kSubjectFields};

constexpr ProtoField kRoleRefFields[] = {Str(1, "apiGroup", kAlways), Str(2, "kind", kAlways),
                                         Str(3, "name", kAlways)};
constexpr ProtoMessage kRoleRef{"RoleRef", kRoleRefFields};

constexpr ProtoField kRoleBindingFields[] = {
    Msg(1, "metadata", &kObjectMeta), Msgs(2, "subjects", &kSubject), Msg(3, "roleRef", &kRoleRef)};
constexpr ProtoMessage kRoleBinding{"RoleBinding", kRoleBindingFields};
constexpr ProtoMessage kClusterRoleBinding{"ClusterRoleBinding", kRoleBindingFields};

// The wrappers with a JSON form of their own (ProtoKind kTime, kIntOrString)

// k8s.io/apimachinery/pkg/apis/meta/v1: Condition, in a Service's status.

constexpr ProtoField kConditionFields[] = {
    Str(1, "type", kAlways),        Str(2, "status", kAlways), Int64(3, "observedGeneration"),
    TimeV(4, "lastTransitionTime"), Str(5, "reason", kAlways), Str(6, "message", kAlways)};
constexpr ProtoMessage kCondition{"Condition", kConditionFields};

// k8s.io/api/core/v1: the pod tree (Pod, and the PodTemplateSpec of the
// workload kinds). Volume sources without a table here (the cloud and
// deprecated ones) are skipped like unknown fields.

// Environment.

constexpr ProtoField kObjectFieldSelectorFields[] = {Str(1, "apiVersion"),
                                                     Str(2, "fieldPath", kAlways)};
constexpr ProtoMessage kObjectFieldSelector{"ObjectFieldSelector", kObjectFieldSelectorFields};

constexpr ProtoField kResourceFieldSelectorFields[] = {
    Str(1, "containerName"), Str(2, "resource", kAlways), Qty(3, "divisor", kAlways)};
constexpr ProtoMessage kResourceFieldSelector{"ResourceFieldSelector",
                                              kResourceFieldSelectorFields};

// ConfigMapKeySelector and SecretKeySelector have the same fields.
constexpr ProtoField kKeySelectorFields[] = {Inline(1, &kLocalObjectReference),
                                             Str(2, "key", kAlways), Bool(3, "optional", kIfSet)};
constexpr ProtoMessage kConfigMapKeySelector{"ConfigMapKeySelector", kKeySelectorFields};
constexpr ProtoMessage kSecretKeySelector{"SecretKeySelector", kKeySelectorFields};

constexpr ProtoField kFileKeySelectorFields[] = {Str(1, "volumeName", kAlways),
                                                 Str(2, "path", kAlways), Str(3, "key", kAlways),
                                                 Bool(4, "optional", kIfSet)};
constexpr ProtoMessage kFileKeySelector{"FileKeySelector", kFileKeySelectorFields};

constexpr ProtoField kEnvVarSourceFields[] = {
    Msg(1, "fieldRef", &kObjectFieldSelector), Msg(2, "resourceFieldRef", &kResourceFieldSelector),
    Msg(3, "configMapKeyRef", &kConfigMapKeySelector), Msg(4, "secretKeyRef", &kSecretKeySelector),
    Msg(5, "fileKeyRef", &kFileKeySelector)};
constexpr ProtoMessage kEnvVarSource{"EnvVarSource", kEnvVarSourceFields};

constexpr ProtoField kEnvVarFields[] = {Str(1, "name", kAlways), Str(2, "value"),
                                        Msg(3, "valueFrom", &kEnvVarSource)};
constexpr ProtoMessage kEnvVar{"EnvVar", kEnvVarFields};

// ConfigMapEnvSource and SecretEnvSource have the same fields.
constexpr ProtoField kEnvSourceFields[] = {Inline(1, &kLocalObjectReference),
                                           Bool(2, "optional", kIfSet)};
constexpr ProtoMessage kConfigMapEnvSource{"ConfigMapEnvSource", kEnvSourceFields};
constexpr ProtoMessage kSecretEnvSource{"SecretEnvSource", kEnvSourceFields};

constexpr ProtoField kEnvFromSourceFields[] = {Str(1, "prefix"),
                                               Msg(2, "configMapRef", &kConfigMapEnvSource),
                                               Msg(3, "secretRef", &kSecretEnvSource)};
constexpr ProtoMessage kEnvFromSource{"EnvFromSource", kEnvFromSourceFields};

// Resources, ports, mounts.

constexpr ProtoField kContainerPortFields[] = {
    Str(1, "name"),     Int32(2, "hostPort"), Int32(3, "containerPort", kAlways),
    Str(4, "protocol"), Str(5, "hostIP"),
};
constexpr ProtoMessage kContainerPort{"ContainerPort", kContainerPortFields};

constexpr ProtoField kResourceClaimFields[] = {Str(1, "name", kAlways), Str(2, "request")};
constexpr ProtoMessage kResourceClaim{"ResourceClaim", kResourceClaimFields};

constexpr ProtoField kResourceRequirementsFields[] = {QtyMap(1, "limits"), QtyMap(2, "requests"),
                                                      Msgs(3, "claims", &kResourceClaim)};
constexpr ProtoMessage kResourceRequirements{"ResourceRequirements", kResourceRequirementsFields};

constexpr ProtoField kContainerResizePolicyFields[] = {Str(1, "resourceName", kAlways),
                                                       Str(2, "restartPolicy", kAlways)};
constexpr ProtoMessage kContainerResizePolicy{"ContainerResizePolicy",
                                              kContainerResizePolicyFields};

constexpr ProtoField kContainerRestartRuleOnExitCodesFields[] = {Str(1, "operator", kAlways),
                                                                 Int32s(2, "values")};
constexpr ProtoMessage kContainerRestartRuleOnExitCodes{"ContainerRestartRuleOnExitCodes",
                                                        kContainerRestartRuleOnExitCodesFields};
constexpr ProtoField kContainerRestartRuleFields[] = {
    Str(1, "action", kAlways), Msg(2, "exitCodes", &kContainerRestartRuleOnExitCodes)};
constexpr ProtoMessage kContainerRestartRule{"ContainerRestartRule", kContainerRestartRuleFields};

constexpr ProtoField kVolumeMountFields[] = {
    Str(1, "name", kAlways),      Bool(2, "readOnly"), Str(7, "recursiveReadOnly", kIfSet),
    Str(3, "mountPath", kAlways), Str(4, "subPath"),   Str(5, "mountPropagation", kIfSet),
    Str(6, "subPathExpr"),
};
constexpr ProtoMessage kVolumeMount{"VolumeMount", kVolumeMountFields};

constexpr ProtoField kVolumeDeviceFields[] = {Str(1, "name", kAlways),
                                              Str(2, "devicePath", kAlways)};
constexpr ProtoMessage kVolumeDevice{"VolumeDevice", kVolumeDeviceFields};

// Probes and lifecycle hooks.

constexpr ProtoField kExecActionFields[] = {Strs(1, "command")};
constexpr ProtoMessage kExecAction{"ExecAction", kExecActionFields};

constexpr ProtoField kHTTPHeaderFields[] = {Str(1, "name", kAlways), Str(2, "value", kAlways)};
constexpr ProtoMessage kHTTPHeader{"HTTPHeader", kHTTPHeaderFields};

constexpr ProtoField kHTTPGetActionFields[] = {
    Str(1, "path"),   IntStr(2, "port", kAlways),           Str(3, "host"),
    Str(4, "scheme"), Msgs(5, "httpHeaders", &kHTTPHeader),
};
constexpr ProtoMessage kHTTPGetAction{"HTTPGetAction", kHTTPGetActionFields};

constexpr ProtoField kTCPSocketActionFields[] = {IntStr(1, "port", kAlways), Str(2, "host")};
constexpr ProtoMessage kTCPSocketAction{"TCPSocketAction", kTCPSocketActionFields};

constexpr ProtoField kGRPCActionFields[] = {Int32(1, "port", kAlways), Str(2, "service", kIfSet)};
constexpr ProtoMessage kGRPCAction{"GRPCAction", kGRPCActionFields};

constexpr ProtoField kSleepActionFields[] = {Int64(1, "seconds", kAlways)};
constexpr ProtoMessage kSleepAction{"SleepAction", kSleepActionFields};

constexpr ProtoField kProbeHandlerFields[] = {
    Msg(1, "exec", &kExecAction), Msg(2, "httpGet", &kHTTPGetAction),
    Msg(3, "tcpSocket", &kTCPSocketAction), Msg(4, "grpc", &kGRPCAction)};
constexpr ProtoMessage kProbeHandler{"ProbeHandler", kProbeHandlerFields};

constexpr ProtoField kProbeFields[] = {
    Inline(1, &kProbeHandler),
    Int32(2, "initialDelaySeconds"),
    Int32(3, "timeoutSeconds"),
    Int32(4, "periodSeconds"),
    Int32(5, "successThreshold"),
    Int32(6, "failureThreshold"),
    Int64(7, "terminationGracePeriodSeconds", kIfSet),
};
constexpr ProtoMessage kProbe{"Probe", kProbeFields};

constexpr ProtoField kLifecycleHandlerFields[] = {
    Msg(1, "exec", &kExecAction), Msg(2, "httpGet", &kHTTPGetAction),
    Msg(3, "tcpSocket", &kTCPSocketAction), Msg(4, "sleep", &kSleepAction)};
constexpr ProtoMessage kLifecycleHandler{"LifecycleHandler", kLifecycleHandlerFields};

constexpr ProtoField kLifecycleFields[] = {Msg(1, "postStart", &kLifecycleHandler),
                                           Msg(2, "preStop", &kLifecycleHandler),
                                           Str(3, "stopSignal", kIfSet)};
constexpr ProtoMessage kLifecycle{"Lifecycle", kLifecycleFields};

// Security contexts.

constexpr ProtoField kCapabilitiesFields[] = {Strs(1, "add"), Strs(2, "drop")};
constexpr ProtoMessage kCapabilities{"Capabilities", kCapabilitiesFields};

constexpr ProtoField kSELinuxOptionsFields[] = {Str(1, "user"), Str(2, "role"), Str(3, "type"),
                                                Str(4, "level")};
constexpr ProtoMessage kSELinuxOptions{"SELinuxOptions", kSELinuxOptionsFields};

constexpr ProtoField kWindowsSecurityContextOptionsFields[] = {
    Str(1, "gmsaCredentialSpecName", kIfSet), Str(2, "gmsaCredentialSpec", kIfSet),
    Str(3, "runAsUserName", kIfSet), Bool(4, "hostProcess", kIfSet)};
constexpr ProtoMessage kWindowsSecurityContextOptions{"WindowsSecurityContextOptions",
                                                      kWindowsSecurityContextOptionsFields};

// SeccompProfile and AppArmorProfile have the same fields.
constexpr ProtoField kProfileFields[] = {Str(1, "type", kAlways),
                                         Str(2, "localhostProfile", kIfSet)};
constexpr ProtoMessage kSeccompProfile{"SeccompProfile", kProfileFields};
constexpr ProtoMessage kAppArmorProfile{"AppArmorProfile", kProfileFields};

constexpr ProtoField kUlimitFields[] = {Str(1, "name", kAlways), Int64(2, "hard", kAlways),
                                        Int64(3, "soft", kAlways)};
constexpr ProtoMessage kUlimit{"Ulimit", kUlimitFields};

constexpr ProtoField kSecurityContextFields[] = {
    Msg(1, "capabilities", &kCapabilities),
    Bool(2, "privileged", kIfSet),
    Msg(3, "seLinuxOptions", &kSELinuxOptions),
    Msg(10, "windowsOptions", &kWindowsSecurityContextOptions),
    Int64(4, "runAsUser", kIfSet),
    Int64(8, "runAsGroup", kIfSet),
    Bool(5, "runAsNonRoot", kIfSet),
    Bool(6, "readOnlyRootFilesystem", kIfSet),
    Bool(7, "allowPrivilegeEscalation", kIfSet),
    Str(9, "procMount", kIfSet),
    Msg(11, "seccompProfile", &kSeccompProfile),
    Msg(12, "appArmorProfile", &kAppArmorProfile),
    Msgs(13, "ulimits", &kUlimit),
};
constexpr ProtoMessage kSecurityContext{"SecurityContext", kSecurityContextFields};

constexpr ProtoField kSysctlFields[] = {Str(1, "name", kAlways), Str(2, "value", kAlways)};
constexpr ProtoMessage kSysctl{"Sysctl", kSysctlFields};

constexpr ProtoField kPodSecurityContextFields[] = {
    Msg(1, "seLinuxOptions", &kSELinuxOptions),
    Msg(8, "windowsOptions", &kWindowsSecurityContextOptions),
    Int64(2, "runAsUser", kIfSet),
    Int64(6, "runAsGroup", kIfSet),
    Bool(3, "runAsNonRoot", kIfSet),
    Int64s(4, "supplementalGroups"),
    Str(12, "supplementalGroupsPolicy", kIfSet),
    Int64(5, "fsGroup", kIfSet),
    Msgs(7, "sysctls", &kSysctl),
    Str(9, "fsGroupChangePolicy", kIfSet),
    Msg(10, "seccompProfile", &kSeccompProfile),
    Msg(11, "appArmorProfile", &kAppArmorProfile),
    Str(13, "seLinuxChangePolicy", kIfSet),
};
constexpr ProtoMessage kPodSecurityContext{"PodSecurityContext", kPodSecurityContextFields};

// Containers.

constexpr ProtoField kContainerFields[] = {
    Str(1, "name", kAlways),
    Str(2, "image"),
    Strs(3, "command"),
    Strs(4, "args"),
    Str(5, "workingDir"),
    Msgs(6, "ports", &kContainerPort),
    Msgs(19, "envFrom", &kEnvFromSource),
    Msgs(7, "env", &kEnvVar),
    Struct(8, "resources", &kResourceRequirements),
    Msgs(23, "resizePolicy", &kContainerResizePolicy),
    Str(24, "restartPolicy", kIfSet),
    Msgs(25, "restartPolicyRules", &kContainerRestartRule),
    Msgs(9, "volumeMounts", &kVolumeMount),
    Msgs(21, "volumeDevices", &kVolumeDevice),
    Msg(10, "livenessProbe", &kProbe),
    Msg(11, "readinessProbe", &kProbe),
    Msg(22, "startupProbe", &kProbe),
    Msg(12, "lifecycle", &kLifecycle),
    Str(13, "terminationMessagePath"),
    Str(20, "terminationMessagePolicy"),
    Str(14, "imagePullPolicy"),
    Msg(15, "securityContext", &kSecurityContext),
    Bool(16, "stdin"),
    Bool(17, "stdinOnce"),
    Bool(18, "tty"),
};
constexpr ProtoMessage kContainer{"Container", kContainerFields};

// EphemeralContainerCommon has Container's field numbers.
constexpr ProtoField kEphemeralContainerFields[] = {Inline(1, &kContainer),
                                                    Str(2, "targetContainerName")};
constexpr ProtoMessage kEphemeralContainer{"EphemeralContainer", kEphemeralContainerFields};

// Volumes.

constexpr ProtoField kKeyToPathFields[] = {Str(1, "key", kAlways), Str(2, "path", kAlways),
                                           Int32(3, "mode", kIfSet)};
constexpr ProtoMessage kKeyToPath{"KeyToPath", kKeyToPathFields};

constexpr ProtoField kHostPathVolumeSourceFields[] = {Str(1, "path", kAlways),
                                                      Str(2, "type", kIfSet)};
constexpr ProtoMessage kHostPathVolumeSource{"HostPathVolumeSource", kHostPathVolumeSourceFields};

constexpr ProtoField kEmptyDirVolumeSourceFields[] = {Str(1, "medium"),
                                                      Qty(2, "sizeLimit", kIfSet)};
constexpr ProtoMessage kEmptyDirVolumeSource{"EmptyDirVolumeSource", kEmptyDirVolumeSourceFields};

constexpr ProtoField kSecretVolumeSourceFields[] = {
    Str(1, "secretName"), Msgs(2, "items", &kKeyToPath), Int32(3, "defaultMode", kIfSet),
    Bool(4, "optional", kIfSet)};
constexpr ProtoMessage kSecretVolumeSource{"SecretVolumeSource", kSecretVolumeSourceFields};

constexpr ProtoField kConfigMapVolumeSourceFields[] = {
    Inline(1, &kLocalObjectReference), Msgs(2, "items", &kKeyToPath),
    Int32(3, "defaultMode", kIfSet), Bool(4, "optional", kIfSet)};
constexpr ProtoMessage kConfigMapVolumeSource{"ConfigMapVolumeSource",
                                              kConfigMapVolumeSourceFields};

constexpr ProtoField kNFSVolumeSourceFields[] = {Str(1, "server", kAlways), Str(2, "path", kAlways),
                                                 Bool(3, "readOnly")};
constexpr ProtoMessage kNFSVolumeSource{"NFSVolumeSource", kNFSVolumeSourceFields};

constexpr ProtoField kPersistentVolumeClaimVolumeSourceFields[] = {Str(1, "claimName", kAlways),
                                                                   Bool(2, "readOnly")};
constexpr ProtoMessage kPersistentVolumeClaimVolumeSource{"PersistentVolumeClaimVolumeSource",
                                                          kPersistentVolumeClaimVolumeSourceFields};

constexpr ProtoField kDownwardAPIVolumeFileFields[] = {
    Str(1, "path", kAlways), Msg(2, "fieldRef", &kObjectFieldSelector),
    Msg(3, "resourceFieldRef", &kResourceFieldSelector), Int32(4, "mode", kIfSet)};
constexpr ProtoMessage kDownwardAPIVolumeFile{"DownwardAPIVolumeFile",
                                              kDownwardAPIVolumeFileFields};

constexpr ProtoField kDownwardAPIVolumeSourceFields[] = {Msgs(1, "items", &kDownwardAPIVolumeFile),
                                                         Int32(2, "defaultMode", kIfSet)};
constexpr ProtoMessage kDownwardAPIVolumeSource{"DownwardAPIVolumeSource",
                                                kDownwardAPIVolumeSourceFields};

// SecretProjection and ConfigMapProjection have the same fields.
constexpr ProtoField kObjectProjectionFields[] = {
    Inline(1, &kLocalObjectReference), Msgs(2, "items", &kKeyToPath), Bool(4, "optional", kIfSet)};
constexpr ProtoMessage kSecretProjection{"SecretProjection", kObjectProjectionFields};
constexpr ProtoMessage kConfigMapProjection{"ConfigMapProjection", kObjectProjectionFields};

constexpr ProtoField kDownwardAPIProjectionFields[] = {Msgs(1, "items", &kDownwardAPIVolumeFile)};
constexpr ProtoMessage kDownwardAPIProjection{"DownwardAPIProjection",
                                              kDownwardAPIProjectionFields};

constexpr ProtoField kServiceAccountTokenProjectionFields[] = {
    Str(1, "audience"), Int64(2, "expirationSeconds", kIfSet), Str(3, "path", kAlways)};
constexpr ProtoMessage kServiceAccountTokenProjection{"ServiceAccountTokenProjection",
                                                      kServiceAccountTokenProjectionFields};

constexpr ProtoField kVolumeProjectionFields[] = {
    Msg(1, "secret", &kSecretProjection), Msg(2, "downwardAPI", &kDownwardAPIProjection),
    Msg(3, "configMap", &kConfigMapProjection),
    Msg(4, "serviceAccountToken", &kServiceAccountTokenProjection)};
constexpr ProtoMessage kVolumeProjection{"VolumeProjection", kVolumeProjectionFields};

constexpr ProtoField kProjectedVolumeSourceFields[] = {
    Msgs(1, "sources", &kVolumeProjection, kAlways), Int32(2, "defaultMode", kIfSet)};
constexpr ProtoMessage kProjectedVolumeSource{"ProjectedVolumeSource",
                                              kProjectedVolumeSourceFields};

constexpr ProtoField kCSIVolumeSourceFields[] = {
    Str(1, "driver", kAlways), Bool(2, "readOnly", kIfSet), Str(3, "fsType", kIfSet),
    StrMap(4, "volumeAttributes"), Msg(5, "nodePublishSecretRef", &kLocalObjectReference)};
constexpr ProtoMessage kCSIVolumeSource{"CSIVolumeSource", kCSIVolumeSourceFields};

constexpr ProtoField kImageVolumeSourceFields[] = {Str(1, "reference"), Str(2, "pullPolicy")};
constexpr ProtoMessage kImageVolumeSource{"ImageVolumeSource", kImageVolumeSourceFields};

constexpr ProtoField kVolumeSourceFields[] = {
    Msg(1, "hostPath", &kHostPathVolumeSource),
    Msg(2, "emptyDir", &kEmptyDirVolumeSource),
    Msg(6, "secret", &kSecretVolumeSource),
    Msg(7, "nfs", &kNFSVolumeSource),
    Msg(10, "persistentVolumeClaim", &kPersistentVolumeClaimVolumeSource),
    Msg(16, "downwardAPI", &kDownwardAPIVolumeSource),
    Msg(19, "configMap", &kConfigMapVolumeSource),
    Msg(26, "projected", &kProjectedVolumeSource),
    Msg(28, "csi", &kCSIVolumeSource),
    Msg(30, "image", &kImageVolumeSource),
};
constexpr ProtoMessage kVolumeSource{"VolumeSource", kVolumeSourceFields};

constexpr ProtoField kVolumeFields[] = {Str(1, "name", kAlways), Inline(2, &kVolumeSource)};
constexpr ProtoMessage kVolume{"Volume", kVolumeFields};

// Scheduling.

constexpr ProtoField kNodeSelectorRequirementFields[] = {
    Str(1, "key", kAlways), Str(2, "operator", kAlways), Strs(3, "values")};
constexpr ProtoMessage kNodeSelectorRequirement{"NodeSelectorRequirement",
                                                kNodeSelectorRequirementFields};

constexpr ProtoField kNodeSelectorTermFields[] = {
    Msgs(1, "matchExpressions", &kNodeSelectorRequirement),
    Msgs(2, "matchFields", &kNodeSelectorRequirement)};
constexpr ProtoMessage kNodeSelectorTerm{"NodeSelectorTerm", kNodeSelectorTermFields};

constexpr ProtoField kNodeSelectorFields[] = {
    Msgs(1, "nodeSelectorTerms", &kNodeSelectorTerm, kAlways)};
constexpr ProtoMessage kNodeSelector{"NodeSelector", kNodeSelectorFields};

constexpr ProtoField kPreferredSchedulingTermFields[] = {
    Int32(1, "weight", kAlways), Struct(2, "preference", &kNodeSelectorTerm)};
constexpr ProtoMessage kPreferredSchedulingTerm{"PreferredSchedulingTerm",
                                                kPreferredSchedulingTermFields};

constexpr ProtoField kNodeAffinityFields[] = {
    Msg(1, "requiredDuringSchedulingIgnoredDuringExecution", &kNodeSelector),
    Msgs(2, "preferredDuringSchedulingIgnoredDuringExecution", &kPreferredSchedulingTerm)};
constexpr ProtoMessage kNodeAffinity{"NodeAffinity", kNodeAffinityFields};

constexpr ProtoField kPodAffinityTermFields[] = {
    Msg(1, "labelSelector", &kLabelSelector),
    Strs(2, "namespaces"),
    Str(3, "topologyKey", kAlways),
    Msg(4, "namespaceSelector", &kLabelSelector),
    Strs(5, "matchLabelKeys"),
    Strs(6, "mismatchLabelKeys"),
};
constexpr ProtoMessage kPodAffinityTerm{"PodAffinityTerm", kPodAffinityTermFields};

constexpr ProtoField kWeightedPodAffinityTermFields[] = {
    Int32(1, "weight", kAlways), Struct(2, "podAffinityTerm", &kPodAffinityTerm)};
constexpr ProtoMessage kWeightedPodAffinityTerm{"WeightedPodAffinityTerm",
                                                kWeightedPodAffinityTermFields};

// PodAffinity and PodAntiAffinity have the same fields.
constexpr ProtoField kPodAffinityFields[] = {
    Msgs(1, "requiredDuringSchedulingIgnoredDuringExecution", &kPodAffinityTerm),
    Msgs(2, "preferredDuringSchedulingIgnoredDuringExecution", &kWeightedPodAffinityTerm)};
constexpr ProtoMessage kPodAffinity{"PodAffinity", kPodAffinityFields};
constexpr ProtoMessage kPodAntiAffinity{"PodAntiAffinity", kPodAffinityFields};

constexpr ProtoField kAffinityFields[] = {Msg(1, "nodeAffinity", &kNodeAffinity),
                                          Msg(2, "podAffinity", &kPodAffinity),
                                          Msg(3, "podAntiAffinity", &kPodAntiAffinity)};
constexpr ProtoMessage kAffinity{"Affinity", kAffinityFields};

constexpr ProtoField kTolerationFields[] = {
    Str(1, "key"),
    Str(2, "operator"),
    Str(3, "value"),
    Str(4, "effect"),
    Int64(5, "tolerationSeconds", kIfSet),
};
constexpr ProtoMessage kToleration{"Toleration", kTolerationFields};

constexpr ProtoField kTopologySpreadConstraintFields[] = {
    Int32(1, "maxSkew", kAlways),         Str(2, "topologyKey", kAlways),
    Str(3, "whenUnsatisfiable", kAlways), Msg(4, "labelSelector", &kLabelSelector),
    Int32(5, "minDomains", kIfSet),       Str(6, "nodeAffinityPolicy", kIfSet),
    Str(7, "nodeTaintsPolicy", kIfSet),   Strs(8, "matchLabelKeys"),
};
constexpr ProtoMessage kTopologySpreadConstraint{"TopologySpreadConstraint",
                                                 kTopologySpreadConstraintFields};

// The rest of PodSpec.

constexpr ProtoField kHostAliasFields[] = {Str(1, "ip", kAlways), Strs(2, "hostnames")};
constexpr ProtoMessage kHostAlias{"HostAlias", kHostAliasFields};

constexpr ProtoField kPodDNSConfigOptionFields[] = {Str(1, "name"), Str(2, "value", kIfSet)};
constexpr ProtoMessage kPodDNSConfigOption{"PodDNSConfigOption", kPodDNSConfigOptionFields};

constexpr ProtoField kPodDNSConfigFields[] = {Strs(1, "nameservers"), Strs(2, "searches"),
                                              Msgs(3, "options", &kPodDNSConfigOption)};
constexpr ProtoMessage kPodDNSConfig{"PodDNSConfig", kPodDNSConfigFields};

constexpr ProtoField kPodReadinessGateFields[] = {Str(1, "conditionType", kAlways)};
constexpr ProtoMessage kPodReadinessGate{"PodReadinessGate", kPodReadinessGateFields};

// PodOS and PodSchedulingGate: a required name.
constexpr ProtoField kNameOnlyFields[] = {Str(1, "name", kAlways)};
constexpr ProtoMessage kPodOS{"PodOS", kNameOnlyFields};
constexpr ProtoMessage kPodSchedulingGate{"PodSchedulingGate", kNameOnlyFields};

constexpr ProtoField kPodResourceClaimFields[] = {Str(1, "name", kAlways),
                                                  Str(3, "resourceClaimName", kIfSet),
                                                  Str(4, "resourceClaimTemplateName", kIfSet)};
constexpr ProtoMessage kPodResourceClaim{"PodResourceClaim", kPodResourceClaimFields};

constexpr ProtoField kPodSpecFields[] = {
    Msgs(1, "volumes", &kVolume),
    Msgs(20, "initContainers", &kContainer),
    Msgs(2, "containers", &kContainer, kAlways),
    Msgs(34, "ephemeralContainers", &kEphemeralContainer),
    Str(3, "restartPolicy"),
    Int64(4, "terminationGracePeriodSeconds", kIfSet),
    Int64(5, "activeDeadlineSeconds", kIfSet),
    Str(6, "dnsPolicy"),
    StrMap(7, "nodeSelector"),
    Str(8, "serviceAccountName"),
    Str(9, "serviceAccount"),
    Bool(21, "automountServiceAccountToken", kIfSet),
    Str(10, "nodeName"),
    Bool(11, "hostNetwork"),
    Bool(12, "hostPID"),
    Bool(13, "hostIPC"),
    Bool(27, "shareProcessNamespace", kIfSet),
    Msg(14, "securityContext", &kPodSecurityContext),
    Msgs(15, "imagePullSecrets", &kLocalObjectReference),
    Str(16, "hostname"),
    Str(17, "subdomain"),
    Msg(18, "affinity", &kAffinity),
    Str(19, "schedulerName"),
    Msgs(22, "tolerations", &kToleration),
    Msgs(23, "hostAliases", &kHostAlias),
    Str(24, "priorityClassName"),
    Int32(25, "priority", kIfSet),
    Msg(26, "dnsConfig", &kPodDNSConfig),
    Msgs(28, "readinessGates", &kPodReadinessGate),
    Str(29, "runtimeClassName", kIfSet),
    Bool(30, "enableServiceLinks", kIfSet),
    Str(31, "preemptionPolicy", kIfSet),
    QtyMap(32, "overhead"),
    Msgs(33, "topologySpreadConstraints", &kTopologySpreadConstraint),
    Bool(35, "setHostnameAsFQDN", kIfSet),
    Msg(36, "os", &kPodOS),
    Bool(37, "hostUsers", kIfSet),
    Msgs(38, "schedulingGates", &kPodSchedulingGate),
    Msgs(39, "resourceClaims", &kPodResourceClaim),
    Msg(40, "resources", &kResourceRequirements),
    Str(41, "hostnameOverride", kIfSet),
};
constexpr ProtoMessage kPodSpec{"PodSpec", kPodSpecFields};

// Pod status, as far as a client writes one (container statuses, which only
// the kubelet writes, are skipped).

constexpr ProtoField kPodConditionFields[] = {
    Str(1, "type", kAlways),   Int64(7, "observedGeneration"), Str(2, "status", kAlways),
    TimeV(3, "lastProbeTime"), TimeV(4, "lastTransitionTime"), Str(5, "reason"),
    Str(6, "message"),
};
constexpr ProtoMessage kPodCondition{"PodCondition", kPodConditionFields};

// PodIP and HostIP: a required ip.
constexpr ProtoField kIPFields[] = {Str(1, "ip", kAlways)};
constexpr ProtoMessage kPodIP{"PodIP", kIPFields};
constexpr ProtoMessage kHostIP{"HostIP", kIPFields};

constexpr ProtoField kPodStatusFields[] = {
    Int64(17, "observedGeneration"),
    Str(1, "phase"),
    Msgs(2, "conditions", &kPodCondition),
    Str(3, "message"),
    Str(4, "reason"),
    Str(11, "nominatedNodeName"),
    Str(5, "hostIP"),
    Msgs(16, "hostIPs", &kHostIP),
    Str(6, "podIP"),
    Msgs(12, "podIPs", &kPodIP),
    Time(7, "startTime"),
    Str(9, "qosClass"),
    Str(14, "resize"),
};
constexpr ProtoMessage kPodStatus{"PodStatus", kPodStatusFields};

constexpr ProtoField kPodFields[] = {Struct(1, "metadata", &kObjectMeta),
                                     Struct(2, "spec", &kPodSpec),
                                     Struct(3, "status", &kPodStatus)};
constexpr ProtoMessage kPod{"Pod", kPodFields};

constexpr ProtoField kPodTemplateSpecFields[] = {Struct(1, "metadata", &kObjectMeta),
                                                 Struct(2, "spec", &kPodSpec)};
constexpr ProtoMessage kPodTemplateSpec{"PodTemplateSpec", kPodTemplateSpecFields};

// k8s.io/api/core/v1: Service, as `kubectl expose` and `kubectl create
// service` post it.

constexpr ProtoField kServicePortFields[] = {
    Str(1, "name"),
    Str(2, "protocol"),
    Str(6, "appProtocol", kIfSet),
    Int32(3, "port", kAlways),
    IntStr(4, "targetPort", kAlways),
    Int32(5, "nodePort"),
};
constexpr ProtoMessage kServicePort{"ServicePort", kServicePortFields};

constexpr ProtoField kClientIPConfigFields[] = {Int32(1, "timeoutSeconds", kIfSet)};
constexpr ProtoMessage kClientIPConfig{"ClientIPConfig", kClientIPConfigFields};

constexpr ProtoField kSessionAffinityConfigFields[] = {Msg(1, "clientIP", &kClientIPConfig)};
constexpr ProtoMessage kSessionAffinityConfig{"SessionAffinityConfig",
                                              kSessionAffinityConfigFields};

constexpr ProtoField kServiceSpecFields[] = {
    Msgs(1, "ports", &kServicePort),
    StrMap(2, "selector"),
    Str(3, "clusterIP"),
    Strs(18, "clusterIPs"),
    Str(4, "type"),
    Strs(5, "externalIPs"),
    Str(7, "sessionAffinity"),
    Str(8, "loadBalancerIP"),
    Strs(9, "loadBalancerSourceRanges"),
    Str(10, "externalName"),
    Str(11, "externalTrafficPolicy"),
    Int32(12, "healthCheckNodePort"),
    Bool(13, "publishNotReadyAddresses"),
    Msg(14, "sessionAffinityConfig", &kSessionAffinityConfig),
    Strs(19, "ipFamilies"),
    Str(17, "ipFamilyPolicy", kIfSet),
    Bool(20, "allocateLoadBalancerNodePorts", kIfSet),
    Str(21, "loadBalancerClass", kIfSet),
    Str(22, "internalTrafficPolicy", kIfSet),
    Str(23, "trafficDistribution", kIfSet),
};
constexpr ProtoMessage kServiceSpec{"ServiceSpec", kServiceSpecFields};

constexpr ProtoField kPortStatusFields[] = {Int32(1, "port", kAlways), Str(2, "protocol", kAlways),
                                            Str(3, "error", kIfSet)};
constexpr ProtoMessage kPortStatus{"PortStatus", kPortStatusFields};

constexpr ProtoField kLoadBalancerIngressFields[] = {
    Str(1, "ip"), Str(2, "hostname"), Str(3, "ipMode", kIfSet), Msgs(4, "ports", &kPortStatus)};
constexpr ProtoMessage kLoadBalancerIngress{"LoadBalancerIngress", kLoadBalancerIngressFields};

constexpr ProtoField kLoadBalancerStatusFields[] = {Msgs(1, "ingress", &kLoadBalancerIngress)};
constexpr ProtoMessage kLoadBalancerStatus{"LoadBalancerStatus", kLoadBalancerStatusFields};

constexpr ProtoField kServiceStatusFields[] = {Struct(1, "loadBalancer", &kLoadBalancerStatus),
                                               Msgs(2, "conditions", &kCondition)};
constexpr ProtoMessage kServiceStatus{"ServiceStatus", kServiceStatusFields};

constexpr ProtoField kServiceFields[] = {Struct(1, "metadata", &kObjectMeta),
                                         Struct(2, "spec", &kServiceSpec),
                                         Struct(3, "status", &kServiceStatus)};
constexpr ProtoMessage kService{"Service", kServiceFields};

// k8s.io/api/apps/v1: Deployment, as `kubectl create deployment` posts it.

constexpr ProtoField kRollingUpdateDeploymentFields[] = {IntStr(1, "maxUnavailable", kIfSet),
                                                         IntStr(2, "maxSurge", kIfSet)};
constexpr ProtoMessage kRollingUpdateDeployment{"RollingUpdateDeployment",
                                                kRollingUpdateDeploymentFields};

constexpr ProtoField kDeploymentStrategyFields[] = {
    Str(1, "type"), Msg(2, "rollingUpdate", &kRollingUpdateDeployment)};
constexpr ProtoMessage kDeploymentStrategy{"DeploymentStrategy", kDeploymentStrategyFields};

constexpr ProtoField kDeploymentSpecFields[] = {
    Int32(1, "replicas", kIfSet),
    Msg(2, "selector", &kLabelSelector),
    Struct(3, "template", &kPodTemplateSpec),
    Struct(4, "strategy", &kDeploymentStrategy),
    Int32(5, "minReadySeconds"),
    Int32(6, "revisionHistoryLimit", kIfSet),
    Bool(7, "paused"),
    Int32(9, "progressDeadlineSeconds", kIfSet),
    Str(10, "podReplacementPolicy", kIfSet),
};
constexpr ProtoMessage kDeploymentSpec{"DeploymentSpec", kDeploymentSpecFields};

constexpr ProtoField kDeploymentConditionFields[] = {
    Str(1, "type", kAlways),        Str(2, "status", kAlways), TimeV(6, "lastUpdateTime"),
    TimeV(7, "lastTransitionTime"), Str(4, "reason"),          Str(5, "message"),
};
constexpr ProtoMessage kDeploymentCondition{"DeploymentCondition", kDeploymentConditionFields};

constexpr ProtoField kDeploymentStatusFields[] = {
    Int64(1, "observedGeneration"),
    Int32(2, "replicas"),
    Int32(3, "updatedReplicas"),
    Int32(7, "readyReplicas"),
    Int32(4, "availableReplicas"),
    Int32(5, "unavailableReplicas"),
    Int32(9, "terminatingReplicas", kIfSet),
    Msgs(6, "conditions", &kDeploymentCondition),
    Int32(8, "collisionCount", kIfSet),
};
constexpr ProtoMessage kDeploymentStatus{"DeploymentStatus", kDeploymentStatusFields};

constexpr ProtoField kDeploymentFields[] = {Struct(1, "metadata", &kObjectMeta),
                                            Struct(2, "spec", &kDeploymentSpec),
                                            Struct(3, "status", &kDeploymentStatus)};
constexpr ProtoMessage kDeployment{"Deployment", kDeploymentFields};

// k8s.io/api/batch/v1: Job, as `kubectl create job` posts it.

constexpr ProtoField kPodFailurePolicyOnExitCodesRequirementFields[] = {
    Str(1, "containerName", kIfSet), Str(2, "operator", kAlways), Int32s(3, "values", kAlways)};
constexpr ProtoMessage kPodFailurePolicyOnExitCodesRequirement{
    "PodFailurePolicyOnExitCodesRequirement", kPodFailurePolicyOnExitCodesRequirementFields};

constexpr ProtoField kPodFailurePolicyOnPodConditionsPatternFields[] = {Str(1, "type", kAlways),
                                                                        Str(2, "status")};
constexpr ProtoMessage kPodFailurePolicyOnPodConditionsPattern{
    "PodFailurePolicyOnPodConditionsPattern", kPodFailurePolicyOnPodConditionsPatternFields};

constexpr ProtoField kPodFailurePolicyRuleFields[] = {
    Str(1, "action", kAlways), Msg(2, "onExitCodes", &kPodFailurePolicyOnExitCodesRequirement),
    Msgs(3, "onPodConditions", &kPodFailurePolicyOnPodConditionsPattern)};
constexpr ProtoMessage kPodFailurePolicyRule{"PodFailurePolicyRule", kPodFailurePolicyRuleFields};

constexpr ProtoField kPodFailurePolicyFields[] = {
    Msgs(1, "rules", &kPodFailurePolicyRule, kAlways)};
constexpr ProtoMessage kPodFailurePolicy{"PodFailurePolicy", kPodFailurePolicyFields};

constexpr ProtoField kSuccessPolicyRuleFields[] = {Str(1, "succeededIndexes", kIfSet),
                                                   Int32(2, "succeededCount", kIfSet)};
constexpr ProtoMessage kSuccessPolicyRule{"SuccessPolicyRule", kSuccessPolicyRuleFields};

constexpr ProtoField kSuccessPolicyFields[] = {Msgs(1, "rules", &kSuccessPolicyRule, kAlways)};
constexpr ProtoMessage kSuccessPolicy{"SuccessPolicy", kSuccessPolicyFields};

constexpr ProtoField kJobSpecFields[] = {
    Int32(1, "parallelism", kIfSet),           Int32(2, "completions", kIfSet),
    Int64(3, "activeDeadlineSeconds", kIfSet), Msg(11, "podFailurePolicy", &kPodFailurePolicy),
    Msg(16, "successPolicy", &kSuccessPolicy), Int32(7, "backoffLimit", kIfSet),
    Int32(12, "backoffLimitPerIndex", kIfSet), Int32(13, "maxFailedIndexes", kIfSet),
    Msg(4, "selector", &kLabelSelector),       Bool(5, "manualSelector", kIfSet),
    Struct(6, "template", &kPodTemplateSpec),  Int32(8, "ttlSecondsAfterFinished", kIfSet),
    Str(9, "completionMode", kIfSet),          Bool(10, "suspend", kIfSet),
    Str(14, "podReplacementPolicy", kIfSet),   Str(15, "managedBy", kIfSet),
};
constexpr ProtoMessage kJobSpec{"JobSpec", kJobSpecFields};

constexpr ProtoField kJobConditionFields[] = {
    Str(1, "type", kAlways),        Str(2, "status", kAlways), TimeV(3, "lastProbeTime"),
    TimeV(4, "lastTransitionTime"), Str(5, "reason"),          Str(6, "message"),
};
constexpr ProtoMessage kJobCondition{"JobCondition", kJobConditionFields};

constexpr ProtoField kUncountedTerminatedPodsFields[] = {Strs(1, "succeeded"), Strs(2, "failed")};
constexpr ProtoMessage kUncountedTerminatedPods{"UncountedTerminatedPods",
                                                kUncountedTerminatedPodsFields};

constexpr ProtoField kJobStatusFields[] = {
    Msgs(1, "conditions", &kJobCondition),
    Time(2, "startTime"),
    Time(3, "completionTime"),
    Int32(4, "active"),
    Int32(5, "succeeded"),
    Int32(6, "failed"),
    Int32(11, "terminating", kIfSet),
    Str(7, "completedIndexes"),
    Str(10, "failedIndexes", kIfSet),
    Msg(8, "uncountedTerminatedPods", &kUncountedTerminatedPods),
    Int32(9, "ready", kIfSet),
};
constexpr ProtoMessage kJobStatus{"JobStatus", kJobStatusFields};

constexpr ProtoField kJobFields[] = {Struct(1, "metadata", &kObjectMeta),
                                     Struct(2, "spec", &kJobSpec),
                                     Struct(3, "status", &kJobStatus)};
constexpr ProtoMessage kJob{"Job", kJobFields};

// k8s.io/api/policy/v1: PodDisruptionBudget, as `kubectl create
// poddisruptionbudget` posts it.

constexpr ProtoField kPodDisruptionBudgetSpecFields[] = {
    IntStr(1, "minAvailable", kIfSet), Msg(2, "selector", &kLabelSelector),
    IntStr(3, "maxUnavailable", kIfSet), Str(4, "unhealthyPodEvictionPolicy", kIfSet)};
constexpr ProtoMessage kPodDisruptionBudgetSpec{"PodDisruptionBudgetSpec",
                                                kPodDisruptionBudgetSpecFields};

constexpr ProtoField kPodDisruptionBudgetStatusFields[] = {
    Int64(1, "observedGeneration"),
    {2, "disruptedPods", ProtoKind::kTime, ProtoLabel::kMap},
    Int32(3, "disruptionsAllowed", kAlways),
    Int32(4, "currentHealthy", kAlways),
    Int32(5, "desiredHealthy", kAlways),
    Int32(6, "expectedPods", kAlways),
    Msgs(7, "conditions", &kCondition)};
constexpr ProtoMessage kPodDisruptionBudgetStatus{"PodDisruptionBudgetStatus",
                                                  kPodDisruptionBudgetStatusFields};

constexpr ProtoField kPodDisruptionBudgetFields[] = {
    Struct(1, "metadata", &kObjectMeta), Struct(2, "spec", &kPodDisruptionBudgetSpec),
    Struct(3, "status", &kPodDisruptionBudgetStatus)};
constexpr ProtoMessage kPodDisruptionBudget{"PodDisruptionBudget", kPodDisruptionBudgetFields};

// k8s.io/api/scheduling/v1: PriorityClass, as `kubectl create priorityclass`
// posts it.

constexpr ProtoField kPriorityClassFields[] = {
    Struct(1, "metadata", &kObjectMeta),
    Int32(2, "value", kAlways),
    Bool(3, "globalDefault"),
    Str(4, "description"),
    Str(5, "preemptionPolicy", kIfSet),
};
constexpr ProtoMessage kPriorityClass{"PriorityClass", kPriorityClassFields};

// The wrappers with a JSON form of their own (ProtoKind kTime, kIntOrString)
// and the envelope.

constexpr ProtoField kTimestampFields[] = {Int64(1, "seconds")};  // nanos=2 unused
constexpr ProtoMessage kTimestamp{"Timestamp", kTimestampFields};

constexpr ProtoField kIntOrStringFields[] = {Int64(1, "type"), Int32(2, "intVal"),
                                             Str(3, "strVal")};
constexpr ProtoMessage kIntOrString{"IntOrString", kIntOrStringFields};

// runtime.Unknown; raw=2 is read as bytes, apart from the table.
constexpr ProtoField kTypeMetaFields[] = {Str(1, "apiVersion"), Str(2, "kind")};
constexpr ProtoMessage kTypeMeta{"TypeMeta", kTypeMetaFields};
constexpr ProtoField kUnknownFields[] = {Msg(1, "typeMeta", &kTypeMeta), Str(3, "contentEncoding"),
                                         Str(4, "contentType")};
constexpr ProtoMessage kUnknown{"Unknown", kUnknownFields};

constexpr ProtobufType kTypes[] = {
    {"v1", "Namespace", &kNamespace},
    {"v1", "ConfigMap", &kConfigMap},
    {"v1", "Secret", &kSecret},
    {"v1", "ServiceAccount", &kServiceAccount},
    {"v1", "Pod", &kPod},
    {"v1", "Service", &kService},
    {"v1", "Binding", &kBinding},
    {"apps/v1", "Deployment", &kDeployment},
    {"batch/v1", "Job", &kJob},
    {"policy/v1", "Eviction", &kEviction},
    {"policy/v1", "PodDisruptionBudget", &kPodDisruptionBudget},
    {"scheduling.k8s.io/v1", "PriorityClass", &kPriorityClass},
    {"authentication.k8s.io/v1", "TokenRequest", &kTokenRequest},
    {"authorization.k8s.io/v1", "SelfSubjectAccessReview", &kSelfSubjectAccessReview},
    {"rbac.authorization.k8s.io/v1", "Role", &kRole},
    {"rbac.authorization.k8s.io/v1", "ClusterRole", &kClusterRole},
    {"rbac.authorization.k8s.io/v1", "RoleBinding", &kRoleBinding},
    {"rbac.authorization.k8s.io/v1", "ClusterRoleBinding", &kClusterRoleBinding},
    {"", "DeleteOptions", &kDeleteOptions},
};

}  // namespace

std::span<const ProtobufType> Types() { return kTypes; }
const ProtoMessage& TimestampMessage() { return kTimestamp; }
const ProtoMessage& IntOrStringMessage() { return kIntOrString; }
const ProtoMessage& UnknownMessage() { return kUnknown; }

}  // namespace gpuop::simkube::protobuf_tables
