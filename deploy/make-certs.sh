#!/usr/bin/env bash
# make-certs.sh OUTDIR NAME=IP [NAME=IP ...] [-- CLIENT ...]
#
# A cluster CA and the certificates perpd's mutual TLS needs (docs/deploy.md,
# "Certificates"), with openssl, ECDSA P-256:
#   OUTDIR/ca.pem, ca-key.pem          the cluster CA (keep ca-key.pem offline)
#   OUTDIR/NAME.pem, NAME-key.pem      a node: serverAuth and clientAuth, with
#                                      its IP as a subject alternative name (perpd
#                                      does not check it; Prometheus does)
#   OUTDIR/CLIENT.pem, CLIENT-key.pem  an operator or a scraper: clientAuth only
# An existing CA in OUTDIR is reused, so run it again to add a node.
#
#   deploy/make-certs.sh ./tls node1=192.0.2.1 node2=192.0.2.2 node3=192.0.2.3 -- admin prometheus
# on the operator's machine, not a node: then copy ca.pem, NAME.pem and NAME-key.pem to
# /etc/perpd/tls on host NAME, and keep ca-key.pem off every node.
set -euo pipefail
[ $# -ge 2 ] || { sed -n 2,15p "$0" >&2; exit 2; }
out=$1; shift
mkdir -p "$out"
umask 077
days=${CERT_DAYS:-825}
if [ ! -f "$out/ca.pem" ]; then
  openssl req -x509 -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
    -keyout "$out/ca-key.pem" -out "$out/ca.pem" -days 3650 -subj "/CN=perpd cluster CA" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
fi
issue() { # name usage san
  local name=$1 usage=$2 san=$3 ext
  ext=$(mktemp)
  {
    echo "basicConstraints=critical,CA:FALSE"
    echo "keyUsage=critical,digitalSignature"
    echo "extendedKeyUsage=$usage"
    [ -n "$san" ] && echo "subjectAltName=$san"
  } >"$ext"
  openssl req -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
    -keyout "$out/$name-key.pem" -out "$out/$name.csr" -subj "/CN=$name" 2>/dev/null
  openssl x509 -req -in "$out/$name.csr" -CA "$out/ca.pem" -CAkey "$out/ca-key.pem" -CAcreateserial \
    -out "$out/$name.pem" -days "$days" -extfile "$ext" 2>/dev/null
  rm -f "$out/$name.csr" "$ext"
  echo "$out/$name.pem ($usage${san:+, $san})"
}
clients=0
for arg in "$@"; do
  if [ "$arg" = "--" ]; then clients=1; continue; fi
  if [ $clients = 1 ]; then
    issue "$arg" clientAuth ""
  else
    name=${arg%%=*}; ip=${arg#*=}
    [ "$name" != "$arg" ] || { echo "node argument $arg: want NAME=IP" >&2; exit 2; }
    issue "$name" serverAuth,clientAuth "IP:$ip,DNS:$name"
  fi
done
chmod 644 "$out"/*.pem
chmod 600 "$out"/*-key.pem
