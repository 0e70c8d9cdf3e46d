#!/bin/sh
# The webhook's TLS: a CA of its own and a certificate for the Service
# gpuslice-webhook.gpuslice-system.svc signed by it, in certs/ beside this script (the Secret
# the kustomization makes), and certs/cabundle.yaml, the patch that gives the API server that
# CA. Run it once before kubectl apply -k deploy/kubernetes/webhook; again to renew (a year).
# usage: make-cert.sh [DAYS]
set -eu
D=$(cd "$(dirname "$0")" && pwd)/certs
DAYS=${1:-365}
case $DAYS in ''|*[!0-9]*) echo "make-cert.sh: DAYS \"$DAYS\" is not a whole number of days" >&2; exit 2 ;; esac
command -v openssl >/dev/null || { echo "make-cert.sh: openssl is needed (apt-get install openssl)" >&2; exit 1; }
mkdir -p "$D"
umask 077
SVC=gpuslice-webhook.gpuslice-system.svc
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$D/ca.key" -out "$D/ca.crt" -days "$DAYS" \
    -subj "/CN=gpuslice-webhook-ca" >/dev/null 2>&1
openssl req -newkey rsa:2048 -nodes -keyout "$D/tls.key" -out "$D/tls.csr" -subj "/CN=$SVC" >/dev/null 2>&1
printf 'subjectAltName=DNS:%s,DNS:%s.cluster.local,DNS:gpuslice-webhook.gpuslice-system\nextendedKeyUsage=serverAuth\n' "$SVC" "$SVC" >"$D/tls.ext"
openssl x509 -req -in "$D/tls.csr" -CA "$D/ca.crt" -CAkey "$D/ca.key" -CAcreateserial \
    -out "$D/tls.crt" -days "$DAYS" -extfile "$D/tls.ext" >/dev/null 2>&1
rm -f "$D/tls.csr" "$D/tls.ext" "$D/ca.srl"
cat >"$D/cabundle.yaml" <<YAML
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: gpuslice-inject
webhooks:
  - name: inject.gpuslice.io
    clientConfig:
      caBundle: $(base64 -w0 <"$D/ca.crt")
YAML
echo "make-cert.sh: $D/tls.crt for $SVC, valid $DAYS days; $D/cabundle.yaml gives the API server its CA"
