#!/usr/bin/env python3
"""Checks documents the way the upstream API server and CDI library would, for the tests.

Three kinds of document, each checked against rules written from the upstream code (no text is
copied; where each rule comes from is noted beside it):
  resourceslice  a resource.k8s.io/v1 ResourceSlice
  claimtemplate  a resource.k8s.io/v1 ResourceClaimTemplate (and the claim spec inside it)
  cdi            a Container Device Interface spec (what a DRA driver writes for the runtime)

Sources (read with the search tools, 2026-12):
  [V]  kubernetes/kubernetes pkg/apis/resource/validation/validation.go, the version with
       DRAConsumableCapacity (index file id 153543185; the older 797475e1137914faab71f4c3b18d9041bf73cfc8
       has no requestPolicy): ValidateResourceSlice, validateResourceSliceSpec, validateDevice,
       validateDeviceAttribute, validateRequestPolicy*, validateQualifiedName, validateCIdentifier,
       ValidateResourceClaimTemplate, validateDeviceClaim, validateDeviceRequest,
       validateExactDeviceRequest, validateDeviceAllocationMode, validateCELSelector,
       validateDeviceConstraint, validateOpaqueConfiguration, validateRawExtension.
  [C]  kubernetes/kubernetes pkg/apis/core/validation/validation.go: ValidateCSIDriverName (the
       driver name: at most 63, a DNS subdomain once lower-cased), ValidateDNS1123Label/Subdomain,
       ValidateNodeName (a DNS subdomain).
  [T]  kubernetes/api resource/v1/types.go at 3e2530e16653153f11415a5e2527ce7b96a1f80d: the limits
       (ResourceSliceMaxDevices 128, 64 with taints or counters; PoolNameMaxLength 253;
       ResourceSliceMaxAttributesAndCapacitiesPerDevice 32; DeviceMaxDomainLength 63;
       DeviceMaxIDLength 32; DeviceAttributeMaxValueLength 64; validValues at most 10;
       DeviceRequestsMaxSize 32; DeviceSelectorsMaxSize 32; FirstAvailableDeviceRequestMaxSize 8;
       DeviceConstraintsMaxSize 32; DeviceConfigMaxSize 32; CELSelectorExpressionMaxLength 10Ki;
       OpaqueParametersMaxLength 10Ki) and the defaulting of allocationMode/count.
  [A]  kubernetes/apimachinery pkg/util/validation: the DNS-1123 label (63) and subdomain (253)
       forms, the C identifier form, the qualified name form of annotation keys; resource.Quantity's
       grammar (pkg/api/resource/quantity.go).
  [S]  cncf-tags/container-device-interface at 05ae4b5bb730a036cb3f79477bd6676eea4a8c83:
       schema/schema.json and schema/defs.json (required fields, types), specs-go/config.go (the
       fields; specs are read with yaml.UnmarshalStrict, so unknown fields are errors),
       specs-go/version.go (known versions, the minimum version a feature needs),
       pkg/parser/parser.go (vendor, class and device names), pkg/cdi/spec.go and device.go
       (at least one device, unique names, non-empty edits), pkg/cdi/container-edits.go (env
       "K=V", device node type/permissions, hook names, mount paths).

Each problem is (kind, field, message); kind is one of the field.Error types (Required, Invalid,
TooLong, TooMany, Forbidden, Duplicate, NotSupported), which apiserver.py turns into the causes
of a 422 Status.

usage: schema.py resourceslice|claimtemplate|cdi|claim|deviceclass FILE
                                                       (exit 0: valid; 1: every problem listed)
       schema.py cases SAMPLE_DIR OUT_DIR   (the good samples and the table of bad ones,
                                             tests/k8s/schemas; each bad one written to OUT_DIR)
"""
import json
import re
import sys
from fractions import Fraction

# ---- shared forms [A] ----
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
C_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
QUALIFIED_NAME_PART = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
# [V] semverRe: three numeric parts, optional pre-release and build parts
SEMVER = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
                    r"(-(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(\.(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*)?"
                    r"(\+[0-9a-zA-Z-]+(\.[0-9a-zA-Z-]+)*)?$")
# [A] quantity.go: sign, digits with an optional fraction, then a binary or decimal suffix or an
# exponent.
QUANTITY = re.compile(r"^([+-]?)(\d+(?:\.\d*)?|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?$")
SUFFIX = {"": 1, "n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000),
          "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
          "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}

# [T] limits
MAX_DEVICES, MAX_DEVICES_ADVANCED = 128, 64
POOL_NAME_MAX = 253
MAX_ATTRS_AND_CAPS = 32
DOMAIN_MAX, ID_MAX = 63, 32
ATTR_VALUE_MAX = 64
VALID_VALUES_MAX = 10
REQUESTS_MAX, SELECTORS_MAX, FIRST_AVAILABLE_MAX = 32, 32, 8
CONSTRAINTS_MAX, CONFIG_MAX = 32, 32
CEL_MAX, OPAQUE_MAX = 10 * 1024, 10 * 1024


def parse_quantity(s):
    """A Kubernetes quantity (string or number) as an exact Fraction; ValueError if not one."""
    if isinstance(s, bool):
        raise ValueError(s)
    if isinstance(s, int):
        return Fraction(s)
    if not isinstance(s, str):
        raise ValueError(s)
    m = QUANTITY.match(s)
    if not m:
        raise ValueError(s)
    sign, num, suf = m.groups()
    v = Fraction(num if not num.endswith(".") else num[:-1] or "0")
    suf = suf or ""
    v *= Fraction(10) ** int(suf[1:]) if suf[:1] in ("e", "E") else SUFFIX[suf]
    return -v if sign == "-" else v


def quantity_value(q):
    """Quantity.Value(): the integer value, rounded up (as upstream's Value() does)."""
    f = parse_quantity(q)
    return -((-f.numerator) // f.denominator)


class Checker:
    """Collects problems as (kind, field, message)."""

    def __init__(self):
        self.problems = []

    def add(self, kind, path, msg):
        self.problems.append((kind, path, msg))

    def required(self, path, msg=""):
        self.add("Required", path, "Required value" + (": " + msg if msg else ""))

    def invalid(self, path, value, msg):
        self.add("Invalid", path, f"Invalid value: {json.dumps(value)}: {msg}")

    def too_long(self, path, n):
        self.add("TooLong", path, f"Too long: may not be more than {n} bytes")

    def too_many(self, path, have, n):
        self.add("TooMany", path, f"Too many: {have}: must have at most {n} items")

    def forbidden(self, path, msg):
        self.add("Forbidden", path, "Forbidden: " + msg)

    def duplicate(self, path, value):
        self.add("Duplicate", path, f"Duplicate value: {json.dumps(value)}")

    def not_supported(self, path, value, allowed):
        self.add("NotSupported", path, f"Unsupported value: {json.dumps(value)}: supported values: "
                 + ", ".join(json.dumps(a) for a in allowed))

    # -- typed access: a wrong JSON type is a problem of its own, named by field --
    def obj(self, parent, key, path, required=False):
        v = parent.get(key) if isinstance(parent, dict) else None
        if v is None:
            if required:
                self.required(path)
            return None
        if not isinstance(v, dict):
            self.invalid(path, v, "must be an object")
            return None
        return v

    def arr(self, parent, key, path):
        v = parent.get(key) if isinstance(parent, dict) else None
        if v is None:
            return []
        if not isinstance(v, list):
            self.invalid(path, v, "must be a list")
            return []
        return v

    def string(self, parent, key, path, required=False):
        v = parent.get(key) if isinstance(parent, dict) else None
        if v is None or v == "" and required:
            if required:
                self.required(path)
            return None
        if not isinstance(v, str):
            self.invalid(path, v, "must be a string")
            return None
        return v

    # -- the name forms --
    def dns_label(self, path, v):
        if len(v) > 63:
            self.too_long(path, 63)
        if not DNS_LABEL.match(v):
            self.invalid(path, v, "a lowercase RFC 1123 label must consist of lower case alphanumeric "
                         "characters or '-', and must start and end with an alphanumeric character")

    def dns_subdomain(self, path, v):
        if len(v) > 253:
            self.too_long(path, 253)
        if not DNS_SUBDOMAIN.match(v):
            self.invalid(path, v, "a lowercase RFC 1123 subdomain must consist of lower case "
                         "alphanumeric characters, '-' or '.', and must start and end with an "
                         "alphanumeric character")

    def driver_name(self, path, v):
        # [C] ValidateCSIDriverName
        if v is None or v == "":
            return self.required(path)
        if len(v) > 63:
            self.too_long(path, 63)
        if not DNS_SUBDOMAIN.match(v.lower()) or len(v) > 253:
            self.invalid(path, v, "must be a DNS subdomain (e.g. gpu.example.com)")

    def pool_name(self, path, v):
        # [V] validatePoolName: at most 253, each '/'-separated part a DNS subdomain
        if not v:
            return self.required(path)
        if len(v) > POOL_NAME_MAX:
            self.too_long(path, POOL_NAME_MAX)
        for part in v.split("/"):
            self.dns_subdomain(path, part)

    def c_identifier(self, path, v):
        # [V] validateCIdentifier
        if len(v) > ID_MAX:
            self.too_long(path, ID_MAX)
        if not C_IDENTIFIER.match(v):
            self.invalid(path, v, "a valid C identifier must start with alphabetic character or "
                         "'_', followed by a string of alphanumeric characters or '_'")

    def qualified_name(self, path, name):
        # [V] validateQualifiedName: ID, or DOMAIN/ID with DOMAIN a driver name
        parts = name.split("/")
        if len(parts) == 1:
            self.c_identifier(path, parts[0])
        else:
            if not parts[0]:
                self.invalid(path, "", "the domain must not be empty")
            else:
                self.driver_name(path, parts[0])
            if not parts[1]:
                self.invalid(path, "", "the name must not be empty")
            else:
                self.c_identifier(path, parts[1])

    def metadata_name(self, md, path="metadata", label=False):
        name = self.string(md or {}, "name", path + ".name")
        if not name:
            if not (md or {}).get("generateName"):
                self.required(path + ".name", "name or generateName is required")
            return
        (self.dns_label if label else self.dns_subdomain)(path + ".name", name)

    def quantity(self, path, v, required=True):
        if v is None:
            if required:
                self.required(path)
            return None
        try:
            return parse_quantity(v)
        except ValueError:
            self.invalid(path, v, "quantities must match the regular expression "
                         "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")
            return None

    def key_path(self, path, key):
        return f"{path}[{key}]"

    def max_items(self, path, items, n):
        """validateSlice/validateSet short-circuit: too many items, nothing else checked [V]."""
        if len(items) > n:
            self.too_many(path, len(items), n)
            return False
        return True

    def unique(self, path, items, key):
        seen = set()
        for i, it in enumerate(items):
            k = key(it)
            if k is None:
                continue
            if k in seen:
                self.duplicate(f"{path}[{i}]", k)
            seen.add(k)


# ---- ResourceSlice [V] ValidateResourceSlice ----
def check_resourceslice(doc):
    c = Checker()
    if not isinstance(doc, dict):
        c.invalid("", doc, "must be an object")
        return c.problems
    c.metadata_name(c.obj(doc, "metadata", "metadata", True))
    spec = c.obj(doc, "spec", "spec", True)
    if spec is None:
        return c.problems
    c.driver_name("spec.driver", c.string(spec, "driver", "spec.driver"))
    pool = c.obj(spec, "pool", "spec.pool", True)
    if pool is not None:
        c.pool_name("spec.pool.name", c.string(pool, "name", "spec.pool.name"))
        count = pool.get("resourceSliceCount", 0)
        if not isinstance(count, int) or isinstance(count, bool) or count <= 0:
            c.invalid("spec.pool.resourceSliceCount", count, "must be greater than zero")
        gen = pool.get("generation", 0)
        if not isinstance(gen, int) or isinstance(gen, bool) or gen < 0:
            c.invalid("spec.pool.generation", gen, "must be greater than or equal to zero")

    # Exactly one of nodeName, nodeSelector, allNodes, perDeviceNodeSelection.
    chosen = []
    if "nodeName" in spec and spec["nodeName"] is not None:
        node = spec["nodeName"]
        if node == "":
            c.invalid("spec.nodeName", node, "must be either unset or set to a non-empty string")
        elif not isinstance(node, str):
            c.invalid("spec.nodeName", node, "must be a string")
        else:
            chosen.append("`nodeName`")
            c.dns_subdomain("spec.nodeName", node)
    sel = c.obj(spec, "nodeSelector", "spec.nodeSelector")
    if sel is not None:
        chosen.append("`nodeSelector`")
        terms = c.arr(sel, "nodeSelectorTerms", "spec.nodeSelector.nodeSelectorTerms")
        if len(terms) != 1:
            c.invalid("spec.nodeSelector.nodeSelectorTerms", terms, "must have exactly one node selector term")
    per_device = False
    for key in ("allNodes", "perDeviceNodeSelection"):
        if spec.get(key) is not None:
            if spec[key] is True:
                chosen.append(f"`{key}`")
                per_device = per_device or key == "perDeviceNodeSelection"
            else:
                c.invalid(f"spec.{key}", spec[key], "must be either unset or set to true")
    one_of = "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required"
    if not chosen:
        c.required("spec", one_of)
    elif len(chosen) > 1:
        c.invalid("spec", "{" + ", ".join(chosen) + "}", one_of + ", but multiple fields are set")

    devices = c.arr(spec, "devices", "spec.devices")
    if devices and spec.get("sharedCounters"):
        c.invalid("spec", "", "only one of `sharedCounters` or `devices` is allowed")
    advanced = any(isinstance(d, dict) and (d.get("taints") or d.get("consumesCounters")) for d in devices)
    limit = MAX_DEVICES_ADVANCED if advanced else MAX_DEVICES
    if c.max_items("spec.devices", devices, limit):
        for i, d in enumerate(devices):
            check_device(c, d, f"spec.devices[{i}]", per_device)
        c.unique("spec.devices", devices, lambda d: d.get("name") if isinstance(d, dict) else None)
    return c.problems


def check_device(c, d, path, per_device):
    # [V] validateDevice
    if not isinstance(d, dict):
        return c.invalid(path, d, "must be an object")
    name = c.string(d, "name", path + ".name", required=True)
    if name:
        c.dns_label(path + ".name", name)
    multi = d.get("allowMultipleAllocations")
    if multi is not None and not isinstance(multi, bool):
        c.invalid(path + ".allowMultipleAllocations", multi, "must be a boolean")
        multi = False
    attrs = c.obj(d, "attributes", path + ".attributes") or {}
    caps = c.obj(d, "capacity", path + ".capacity") or {}
    if len(attrs) + len(caps) > MAX_ATTRS_AND_CAPS:
        c.invalid(path, len(attrs) + len(caps),
                  f"the total number of attributes and capacities must not exceed {MAX_ATTRS_AND_CAPS}")
    for key, attr in sorted(attrs.items()):
        p = c.key_path(path + ".attributes", key)
        c.qualified_name(p, key)
        check_attribute(c, attr, p)
    for key, cap in sorted(caps.items()):
        p = c.key_path(path + ".capacity", key)
        c.qualified_name(p, key)
        if not isinstance(cap, dict):
            c.invalid(p, cap, "must be an object")
            continue
        value = c.quantity(p + ".value", cap.get("value"))
        policy = cap.get("requestPolicy")
        if policy is None:
            continue
        if not multi:
            # [V] validateSingleAllocatableDeviceCapacity
            c.forbidden(p + ".requestPolicy", "allowMultipleAllocations must be true")
        elif not isinstance(policy, dict):
            c.invalid(p + ".requestPolicy", policy, "must be an object")
        elif value is not None:
            check_request_policy(c, value, policy, p + ".requestPolicy")
    for key in ("nodeName", "nodeSelector", "allNodes"):
        if d.get(key) is not None and not per_device:
            c.invalid(path, None, "`nodeName`, `nodeSelector` and `allNodes` can only be set if "
                      "`perDeviceNodeSelection` is set to true in the ResourceSlice spec")
            break
    if per_device:
        set_ = [k for k in ("nodeName", "nodeSelector") if d.get(k)]
        set_ += ["allNodes"] if d.get("allNodes") is True else []
        if len(set_) != 1:
            c.invalid(path, set_, "exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required "
                      "when `perDeviceNodeSelection` is set to true in the ResourceSlice spec")
    for j, t in enumerate(c.arr(d, "taints", path + ".taints")):
        tp = f"{path}.taints[{j}]"
        if not isinstance(t, dict) or not t.get("key"):
            c.required(tp + ".key")
        eff = t.get("effect") if isinstance(t, dict) else None
        if not eff:
            c.required(tp + ".effect")
        elif eff not in ("NoSchedule", "NoExecute", "None"):
            c.not_supported(tp + ".effect", eff, ["NoExecute", "NoSchedule", "None"])


def check_attribute(c, attr, p):
    # [V] validateDeviceAttribute: exactly one of bool, int, string, version
    if not isinstance(attr, dict):
        return c.invalid(p, attr, "must be an object")
    kinds = [k for k in ("bool", "int", "string", "version") if attr.get(k) is not None]
    unknown = [k for k in attr if k not in ("bool", "int", "string", "version")]
    for k in unknown:
        c.invalid(f"{p}.{k}", attr[k], "unknown field (one of bool, int, string, version)")
    if len(kinds) != 1:
        c.invalid(p, attr if kinds else "", "exactly one value must be specified")
    if "bool" in kinds and not isinstance(attr["bool"], bool):
        c.invalid(p + ".bool", attr["bool"], "must be a boolean")
    if "int" in kinds and (not isinstance(attr["int"], int) or isinstance(attr["int"], bool)):
        c.invalid(p + ".int", attr["int"], "must be an integer")
    for k in ("string", "version"):
        if k not in kinds:
            continue
        v = attr[k]
        if not isinstance(v, str):
            c.invalid(f"{p}.{k}", v, "must be a string")
            continue
        if k == "version" and not SEMVER.match(v):
            c.invalid(p + ".version", v, "must be a string compatible with semver.org spec 2.0.0")
        if len(v) > ATTR_VALUE_MAX:
            c.too_long(f"{p}.{k}", ATTR_VALUE_MAX)


def check_request_policy(c, capacity, policy, p):
    # [V] validateRequestPolicy, validateValidRequestValues, validateRequestPolicyValidValues,
    # validateRequestPolicyRange, validateRequestPolicyRangeStep
    values, rng = policy.get("validValues"), policy.get("validRange")
    if values and rng is not None:
        return c.forbidden(p, 'exactly one policy can be specified, cannot specify "validValues" and '
                           '"validRange" at the same time')
    default = c.quantity(p + ".default", policy.get("default"), required=False)
    if values:
        if policy.get("default") is None:
            return c.required(p + ".default", "required when validValues is defined")
        if not isinstance(values, list):
            return c.invalid(p + ".validValues", values, "must be a list")
        qs = [c.quantity(f"{p}.validValues[{i}]", v) for i, v in enumerate(values)]
        if None in qs or default is None:
            return
        for i in range(len(qs) - 1):
            if qs[i] > qs[i + 1]:
                c.invalid(f"{p}.validValues[{i + 1}]", values[i + 1], "values must be sorted in ascending order")
        if not c.max_items(p + ".validValues", qs, VALID_VALUES_MAX):
            return
        for i, q in enumerate(qs):
            if q > capacity:
                c.invalid(f"{p}.validValues[{i}]", values[i], f"option is larger than capacity value: {capacity}")
        c.unique(p + ".validValues", qs, lambda q: q)
        if default not in qs:
            c.invalid(p + ".validValues", policy["default"],
                      "default value is not valid according to the requestPolicy")
        return
    if rng is None:
        return
    rp = p + ".validRange"
    if not isinstance(rng, dict):
        return c.invalid(rp, rng, "must be an object")
    if policy.get("default") is None:
        return c.required(p + ".default", "required when validRange is defined")
    if default is None:
        return
    if rng.get("min") is None:
        return c.required(rp + ".min", "required when validRange is defined")
    lo = c.quantity(rp + ".min", rng["min"])
    hi = c.quantity(rp + ".max", rng.get("max"), required=False)
    step = c.quantity(rp + ".step", rng.get("step"), required=False)
    if lo is None:
        return
    if lo > capacity:
        c.invalid(rp + ".min", rng["min"], f"min is larger than capacity value: {capacity}")
    if default < lo:
        c.invalid(rp + ".min", policy["default"], f"default is less than min: {rng['min']}")
    if hi is not None:
        if lo > hi:
            c.invalid(rp + ".max", rng["min"], f"min is larger than max: {rng['max']}")
        if hi > capacity:
            c.invalid(rp + ".max", rng["max"], f"max is larger than capacity value: {capacity}")
        if default > hi:
            c.invalid(rp + ".max", policy["default"], f"default is more than max: {rng['max']}")
    if step is not None:
        if step <= 0:
            # Not an upstream message: a step of 0 would divide by zero there; refused here.
            return c.invalid(rp + ".step", rng["step"], "must be greater than zero")
        if lo + step > capacity:
            c.invalid(rp + ".step", rng["step"], f"one step {lo + step} is larger than capacity value: {capacity}")
        for what, v, raw in (("default", default, policy["default"]), ("max", hi, rng.get("max"))):
            off = quantity_value(raw) - quantity_value(rng["min"]) if v is not None else 0
            if off % quantity_value(rng["step"]) != 0:
                c.invalid(rp + ".step", raw, f"value is not a multiple of a given step ({rng['step']}) "
                          f"from ({rng['min']})")


# ---- ResourceClaimTemplate [V] ValidateResourceClaimTemplate ----
def check_claimtemplate(doc):
    c = Checker()
    if not isinstance(doc, dict):
        c.invalid("", doc, "must be an object")
        return c.problems
    c.metadata_name(c.obj(doc, "metadata", "metadata", True))
    spec = c.obj(doc, "spec", "spec", True)
    if spec is None:
        return c.problems
    md = c.obj(spec, "metadata", "spec.metadata")
    if md is not None:
        for k in ("labels", "annotations"):
            m = c.obj(md, k, f"spec.metadata.{k}")
            for key, v in (m or {}).items():
                if not isinstance(v, str):
                    c.invalid(f"spec.metadata.{k}[{key}]", v, "must be a string")
    inner = c.obj(spec, "spec", "spec.spec", True)
    if inner is not None:
        check_claim_spec(c, inner, "spec.spec")
    return c.problems


def check_claim(doc):
    """[V] ValidateResourceClaim: the name, then the spec as in a template (the status is
    written by the scheduler through /status and is not checked here)."""
    c = Checker()
    if not isinstance(doc, dict):
        c.invalid("", doc, "must be an object")
        return c.problems
    c.metadata_name(c.obj(doc, "metadata", "metadata", True))
    spec = c.obj(doc, "spec", "spec", True)
    if spec is not None:
        check_claim_spec(c, spec, "spec")
    return c.problems


def check_deviceclass(doc):
    """[V] ValidateDeviceClass / validateDeviceClassSpec: the name, the selectors (a CEL
    expression each, at most 10Ki; at most 32), the configs (opaque; at most 32)."""
    c = Checker()
    if not isinstance(doc, dict):
        c.invalid("", doc, "must be an object")
        return c.problems
    c.metadata_name(c.obj(doc, "metadata", "metadata", True))
    spec = c.obj(doc, "spec", "spec") or {}
    selectors = c.arr(spec, "selectors", "spec.selectors")
    if c.max_items("spec.selectors", selectors, SELECTORS_MAX):
        for i, sel in enumerate(selectors):
            cel = c.obj(sel, "cel", f"spec.selectors[{i}].cel", True)
            if cel is not None:
                expr = c.string(cel, "expression", f"spec.selectors[{i}].cel.expression", required=True)
                if expr and len(expr) > CEL_MAX:
                    c.too_long(f"spec.selectors[{i}].cel.expression", CEL_MAX)
    config = c.arr(spec, "config", "spec.config")
    if c.max_items("spec.config", config, CONFIG_MAX):
        for i, k in enumerate(config):
            check_opaque(c, k, f"spec.config[{i}]")
    return c.problems


def check_claim_spec(c, spec, path):
    # [V] validateDeviceClaim, with the defaulting of [T] (allocationMode ExactCount, count 1)
    devices = c.obj(spec, "devices", path + ".devices") or {}
    dp = path + ".devices"
    requests = c.arr(devices, "requests", dp + ".requests")
    names = {}
    if c.max_items(dp + ".requests", requests, REQUESTS_MAX):
        for i, r in enumerate(requests):
            rp = f"{dp}.requests[{i}]"
            if not isinstance(r, dict):
                c.invalid(rp, r, "must be an object")
                continue
            name = c.string(r, "name", rp + ".name", required=True)
            if name:
                c.dns_label(rp + ".name", name)
            exactly, first = r.get("exactly"), r.get("firstAvailable")
            subs = set()
            if exactly is None and not first:
                c.required(rp, "exactly one of `exactly` or `firstAvailable` is required")
            elif exactly is not None and first:
                c.invalid(rp, None, "exactly one of `exactly` or `firstAvailable` is required, "
                          "but multiple fields are set")
            elif exactly is not None:
                check_exact_request(c, exactly, rp + ".exactly")
            else:
                if c.max_items(rp + ".firstAvailable", first, FIRST_AVAILABLE_MAX):
                    for j, s in enumerate(first):
                        sp = f"{rp}.firstAvailable[{j}]"
                        sname = c.string(s, "name", sp + ".name", required=True)
                        if sname:
                            c.dns_label(sp + ".name", sname)
                            subs.add(sname)
                        check_exact_request(c, s, sp)
                    c.unique(rp + ".firstAvailable", first,
                             lambda s: s.get("name") if isinstance(s, dict) else None)
            if name:
                names[name] = subs
        c.unique(dp + ".requests", requests, lambda r: r.get("name") if isinstance(r, dict) else None)

    def request_refs(items, p):
        for j, ref in enumerate(items):
            segs = ref.split("/") if isinstance(ref, str) else [None]
            ok = len(segs) <= 2 and segs[0] in names and (len(segs) == 1 or segs[1] in names[segs[0]])
            if not ok:
                c.invalid(f"{p}[{j}]", ref, "must be the name of a request in the claim or the name "
                          "of a request and a subrequest separated by '/'")

    constraints = c.arr(devices, "constraints", dp + ".constraints")
    if c.max_items(dp + ".constraints", constraints, CONSTRAINTS_MAX):
        for i, k in enumerate(constraints):
            kp = f"{dp}.constraints[{i}]"
            request_refs(c.arr(k, "requests", kp + ".requests"), kp + ".requests")
            attr = k.get("matchAttribute") or k.get("distinctAttribute") if isinstance(k, dict) else None
            if not attr:
                c.required(kp, 'exactly one of "matchAttribute" or "distinctAttribute" is required')
            else:
                which = "matchAttribute" if k.get("matchAttribute") else "distinctAttribute"
                c.qualified_name(f"{kp}.{which}", attr)
                if "/" not in attr:
                    c.invalid(f"{kp}.{which}", attr, "a fully qualified name must be a domain and a "
                              "name separated by a slash")
    config = c.arr(devices, "config", dp + ".config")
    if c.max_items(dp + ".config", config, CONFIG_MAX):
        for i, k in enumerate(config):
            kp = f"{dp}.config[{i}]"
            request_refs(c.arr(k, "requests", kp + ".requests"), kp + ".requests")
            check_opaque(c, k, kp)


def check_exact_request(c, r, p):
    # [V] validateExactDeviceRequest / validateDeviceSubRequest
    if not isinstance(r, dict):
        return c.invalid(p, r, "must be an object")
    cls = c.string(r, "deviceClassName", p + ".deviceClassName", required=True)
    if cls:
        c.dns_subdomain(p + ".deviceClassName", cls)
    selectors = c.arr(r, "selectors", p + ".selectors")
    if c.max_items(p + ".selectors", selectors, SELECTORS_MAX):
        for i, s in enumerate(selectors):
            sp = f"{p}.selectors[{i}]"
            cel = c.obj(s, "cel", sp + ".cel", True)
            if cel is None:
                continue
            expr = c.string(cel, "expression", sp + ".cel.expression", required=True)
            if expr and len(expr) > CEL_MAX:
                c.too_long(sp + ".cel.expression", CEL_MAX)
    mode = r.get("allocationMode") or "ExactCount"
    count = r.get("count")
    if mode == "ExactCount":
        if count is None:
            count = 1
        if not isinstance(count, int) or isinstance(count, bool) or count <= 0:
            c.invalid(p + ".count", count, "must be greater than zero")
    elif mode == "All":
        if count not in (None, 0):
            c.invalid(p + ".count", count, "must not be specified when allocationMode is 'All'")
    else:
        c.not_supported(p + ".allocationMode", mode, ["All", "ExactCount"])
    cap = c.obj(r, "capacity", p + ".capacity")
    if cap is not None:
        reqs = c.obj(cap, "requests", p + ".capacity.requests") or {}
        for key, v in sorted(reqs.items()):
            kp = c.key_path(p + ".capacity.requests", key)
            c.qualified_name(kp, key)
            c.quantity(kp, v)


def check_opaque(c, k, kp):
    # [V] validateDeviceConfiguration / validateOpaqueConfiguration / validateRawExtension
    opaque = c.obj(k, "opaque", kp + ".opaque", True)
    if opaque is None:
        return
    c.driver_name(kp + ".opaque.driver", c.string(opaque, "driver", kp + ".opaque.driver"))
    params = opaque.get("parameters")
    if params is None:
        c.required(kp + ".opaque.parameters")
    elif len(json.dumps(params, separators=(",", ":"))) > OPAQUE_MAX:
        c.too_long(kp + ".opaque.parameters", OPAQUE_MAX)
    elif not isinstance(params, dict):
        c.invalid(kp + ".opaque.parameters", "<value omitted>", "must be a valid JSON object")


# ---- CDI [S] ----
CDI_VERSIONS = ["1.1.0", "1.0.0", "0.8.0", "0.7.0", "0.6.0", "0.5.0", "0.4.0", "0.3.0", "0.2.0", "0.1.0"]
CDI_SPEC_FIELDS = {"cdiVersion", "kind", "annotations", "devices", "containerEdits"}
CDI_DEVICE_FIELDS = {"name", "annotations", "containerEdits"}
CDI_EDIT_FIELDS = {"env", "deviceNodes", "netDevices", "hooks", "mounts", "intelRdt", "additionalGids"}
CDI_NODE_FIELDS = {"path", "hostPath", "type", "major", "minor", "fileMode", "permissions", "uid", "gid"}
CDI_MOUNT_FIELDS = {"hostPath", "containerPath", "options", "type"}
CDI_HOOK_FIELDS = {"hookName", "path", "args", "env", "timeout"}
CDI_HOOK_NAMES = ["prestart", "createRuntime", "createContainer", "startContainer", "poststart", "poststop"]


def cdi_vendor_or_class(c, path, what, name):
    # [S] parser.go validateVendorOrClassName: a letter first, then letters, digits, '_', '-' or
    # '.', ending in a letter or digit.
    if not name:
        return c.invalid(path, name, f"invalid {what}: empty name")
    if not name[0].isascii() or not name[0].isalpha():
        c.invalid(path, name, f"invalid {what}: should start with a letter")
    elif len(name) > 1 and not re.match(r"^[A-Za-z0-9_.-]*[A-Za-z0-9]$", name[1:]):
        c.invalid(path, name, f"invalid {what}: only letters, digits, '_', '-', '.' and ending in a "
                  "letter or digit")


def cdi_device_name(c, path, name):
    # [S] parser.go ValidateDeviceName: like a class name, but may start with a digit and may hold ':'
    if not re.match(r"^[A-Za-z0-9]([A-Za-z0-9_.:-]*[A-Za-z0-9])?$", name):
        c.invalid(path, name, "a device name starts and ends with a letter or digit, with letters, "
                  "digits, '_', '-', '.' or ':' between")


def cdi_unknown(c, obj, allowed, path):
    for k in sorted(set(obj) - allowed):
        c.invalid(f"{path}.{k}" if path else k, obj[k], "unknown field (specs are read strictly)")


def cdi_strings(c, obj, key, path):
    v = c.arr(obj, key, path)
    for i, s in enumerate(v):
        if not isinstance(s, str):
            c.invalid(f"{path}[{i}]", s, "must be a string")
    return [s for s in v if isinstance(s, str)]


def cdi_env(c, env, path):
    # [S] container-edits.go ValidateEnv: '=' after a non-empty name
    for i, e in enumerate(env):
        if e.find("=") <= 0:
            c.invalid(f"{path}[{i}]", e, 'an environment entry is "NAME=VALUE"')


def cdi_annotations(c, obj, path):
    # [S] ValidateSpecAnnotations: string values, keys as Kubernetes annotation keys
    ann = c.obj(obj, "annotations", path)
    for k, v in (ann or {}).items():
        kp = c.key_path(path, k)
        if not isinstance(v, str):
            c.invalid(kp, v, "must be a string")
        prefix, _, name = k.rpartition("/")
        if prefix:
            c.dns_subdomain(kp, prefix)
        if len(name) > 63 or not QUALIFIED_NAME_PART.match(name):
            c.invalid(kp, k, "a qualified name is an optional DNS subdomain and '/', then at most 63 "
                      "alphanumeric characters, '-', '_' or '.', starting and ending alphanumeric")
    return ann or {}


def cdi_edits(c, e, path, needs):
    if not isinstance(e, dict):
        c.invalid(path, e, "must be an object")
        return True
    cdi_unknown(c, e, CDI_EDIT_FIELDS, path)
    cdi_env(c, cdi_strings(c, e, "env", path + ".env"), path + ".env")
    for i, d in enumerate(c.arr(e, "deviceNodes", path + ".deviceNodes")):
        p = f"{path}.deviceNodes[{i}]"
        if not isinstance(d, dict):
            c.invalid(p, d, "must be an object")
            continue
        cdi_unknown(c, d, CDI_NODE_FIELDS, p)
        if not c.string(d, "path", p + ".path", required=True):
            continue
        if d.get("hostPath"):
            needs.append("0.5.0")
        if d.get("type", "") not in ("", "b", "c", "u", "p"):
            c.not_supported(p + ".type", d["type"], ["b", "c", "u", "p"])
        perm = d.get("permissions", "")
        if perm and perm.strip("rwm") != "":
            c.invalid(p + ".permissions", perm, "device permissions are a subset of \"rwm\"")
    for i, m in enumerate(c.arr(e, "mounts", path + ".mounts")):
        p = f"{path}.mounts[{i}]"
        if not isinstance(m, dict):
            c.invalid(p, m, "must be an object")
            continue
        cdi_unknown(c, m, CDI_MOUNT_FIELDS, p)
        c.string(m, "hostPath", p + ".hostPath", required=True)
        c.string(m, "containerPath", p + ".containerPath", required=True)
        cdi_strings(c, m, "options", p + ".options")
        if c.string(m, "type", p + ".type"):
            needs.append("0.4.0")
    for i, h in enumerate(c.arr(e, "hooks", path + ".hooks")):
        p = f"{path}.hooks[{i}]"
        if not isinstance(h, dict):
            c.invalid(p, h, "must be an object")
            continue
        cdi_unknown(c, h, CDI_HOOK_FIELDS, p)
        name = c.string(h, "hookName", p + ".hookName", required=True)
        if name and name not in CDI_HOOK_NAMES:
            c.not_supported(p + ".hookName", name, CDI_HOOK_NAMES)
        c.string(h, "path", p + ".path", required=True)
        cdi_strings(c, h, "args", p + ".args")
        cdi_env(c, cdi_strings(c, h, "env", p + ".env"), p + ".env")
        t = h.get("timeout")
        if t is not None and (not isinstance(t, int) or isinstance(t, bool) or not 0 <= t <= 2**32 - 1):
            c.invalid(p + ".timeout", t, "must be an integer from 0 to 4294967295")
    if e.get("intelRdt") is not None or e.get("additionalGids"):
        needs.append("0.7.0")
    rdt = e.get("intelRdt") or {}
    rdt_new = isinstance(rdt, dict) and (rdt.get("schemata") is not None or rdt.get("enableMonitoring"))
    if e.get("netDevices") or rdt_new:
        needs.append("1.1.0")
    return not any(e.get(k) for k in CDI_EDIT_FIELDS)


def check_cdi(doc):
    c = Checker()
    if not isinstance(doc, dict):
        c.invalid("", doc, "must be an object")
        return c.problems
    cdi_unknown(c, doc, CDI_SPEC_FIELDS, "")
    needs = []
    version = c.string(doc, "cdiVersion", "cdiVersion", required=True)
    if version is not None and version.lstrip("v") not in CDI_VERSIONS:
        c.not_supported("cdiVersion", version, CDI_VERSIONS)
    kind = c.string(doc, "kind", "kind", required=True)
    if kind is not None:
        vendor, slash, cls = kind.partition("/")
        if not slash or not vendor or not cls:
            c.invalid("kind", kind, 'a kind is "vendor/class" (e.g. "example.com/gpu")')
        else:
            cdi_vendor_or_class(c, "kind", "vendor", vendor)
            cdi_vendor_or_class(c, "kind", "class", cls)
            if "." in cls:
                needs.append("0.6.0")
    if cdi_annotations(c, doc, "annotations"):
        needs.append("0.6.0")
    if "containerEdits" in doc:
        cdi_edits(c, doc["containerEdits"], "containerEdits", needs)
    if "devices" not in doc:
        c.required("devices")
    devices = c.arr(doc, "devices", "devices")
    if "devices" in doc and not devices:
        c.invalid("devices", devices, "a spec has at least one device")
    for i, d in enumerate(devices):
        p = f"devices[{i}]"
        if not isinstance(d, dict):
            c.invalid(p, d, "must be an object")
            continue
        cdi_unknown(c, d, CDI_DEVICE_FIELDS, p)
        name = c.string(d, "name", p + ".name", required=True)
        if name:
            cdi_device_name(c, p + ".name", name)
            if name[0].isdigit():
                needs.append("0.5.0")
        if cdi_annotations(c, d, p + ".annotations"):
            needs.append("0.6.0")
        if "containerEdits" not in d:
            c.required(p + ".containerEdits")
        elif cdi_edits(c, d["containerEdits"], p + ".containerEdits", needs):
            c.invalid(p + ".containerEdits", d["containerEdits"],
                      "a device's container edits must not be empty")
    c.unique("devices", devices, lambda d: d.get("name") if isinstance(d, dict) else None)
    if version is not None and version.lstrip("v") in CDI_VERSIONS and needs:
        # [S] version.go: the spec's version must be at least what its features need.
        want = min(needs, key=CDI_VERSIONS.index)
        if CDI_VERSIONS.index(want) < CDI_VERSIONS.index(version.lstrip("v")):
            c.invalid("cdiVersion", version, f"the spec version must be at least v{want} for what it uses")
    return c.problems


CHECKS = {"resourceslice": check_resourceslice, "claimtemplate": check_claimtemplate, "cdi": check_cdi}
# Also used by apiserver.py (not sampled in schemas/): claims and device classes.
MORE_CHECKS = {"claim": check_claim, "deviceclass": check_deviceclass}


# ---- the table of bad samples (schemas/bad.json) ----
def apply_case(doc, sets):
    """The good document with the case's changes: [[path, value], ...]; see bad.json's "about"."""
    import copy
    doc = copy.deepcopy(doc)
    for path, value in sets:
        parent = doc
        for k in path[:-1]:
            parent = parent[k]
        last = path[-1]
        if value == "$delete":
            del parent[last]
        elif isinstance(value, dict) and "$devices" in value:
            dev = parent[last][0]
            parent[last] = [dict(copy.deepcopy(dev), name=f"gpu-{i}") for i in range(value["$devices"])]
        elif isinstance(parent, list) and last == len(parent):
            parent.append(value)
        else:
            parent[last] = value
    return doc


def run_cases(sample_dir, out_dir):
    """Every good sample (KIND*.json) and each bad one checked here, the bad ones written to
    out_dir/NAME.json; a line per case: "good FILE", "ok NAME KIND FIELD" or "FAIL NAME: ...".
    0 when every good sample passes and every bad one is refused naming its field."""
    import os
    with open(os.path.join(sample_dir, "bad.json")) as f:
        cases = json.load(f)["cases"]
    good, fails = {}, 0
    for kind in CHECKS:
        with open(os.path.join(sample_dir, kind + ".json")) as f:
            good[kind] = json.load(f)
    for name in sorted(os.listdir(sample_dir)):
        kind = next((k for k in CHECKS if name.startswith(k) and name.endswith(".json")), None)
        if kind is None:
            continue
        with open(os.path.join(sample_dir, name)) as f:
            problems = CHECKS[kind](json.load(f))
        if problems:
            fails += 1
            print(f"FAIL good {name}: {problems}")
        else:
            print(f"good {name}")
    for case in cases:
        doc = apply_case(good[case["kind"]], case["set"])
        with open(os.path.join(out_dir, case["name"] + ".json"), "w") as f:
            json.dump(doc, f)
        problems = CHECKS[case["kind"]](doc)
        if any(p == case["field"] for _, p, _ in problems):
            print(f"ok {case['name']} {case['kind']} {case['field']}")
        else:
            fails += 1
            print(f"FAIL {case['name']}: wanted {case['field']}, got {problems}")
    return 1 if fails else 0


def main(argv):
    if len(argv) == 4 and argv[1] == "cases":
        return run_cases(argv[2], argv[3])
    checks = dict(CHECKS, **MORE_CHECKS)
    if len(argv) != 3 or argv[1] not in checks:
        sys.stderr.write("usage: schema.py resourceslice|claimtemplate|cdi|claim|deviceclass FILE\n"
                         "       schema.py cases SAMPLE_DIR OUT_DIR\n")
        return 2
    try:
        with open(argv[2]) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        print(f"{argv[2]}: not a JSON document: {e}")
        return 1
    problems = checks[argv[1]](doc)
    for _, path, msg in problems:
        print(f"{argv[2]}: {path}: {msg}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
