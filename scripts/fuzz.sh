#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz) with clang in a build dir of their
# own, seeds each corpus from tests/fixtures and small inline samples, and
# runs every target for FUZZ_SECONDS (default 60), one after another. Prints a
# line per target: executions, executions per second, coverage (libFuzzer's
# cov: edges and ft: features), corpus size and crashes. Exits 1 when a target
# crashed; its input is kept under <build>/artifacts and its log under
# <build>/logs.
#
#   scripts/fuzz.sh [TARGET...]          e.g. scripts/fuzz.sh cdi_spec mig_config
#   FUZZ_SECONDS=300 scripts/fuzz.sh     longer runs; the corpora grow between runs
#   FUZZ_BUILD=dir                       build dir (default build-fuzz)
#   GPUOP_BUILD_LOCK=/tmp/x.lock         build under flock (shared machines)
#   FUZZ_JOBS=1                          parallel compile jobs (default: ninja's)
set -euo pipefail
# ctest shows only the tail of the output: say which line stopped the script.
trap 'echo "fuzz: line $LINENO failed: $BASH_COMMAND" >&2' ERR
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${FUZZ_BUILD:-$root/build-fuzz}
seconds=${FUZZ_SECONDS:-60}

# libFuzzer comes with clang (libclang-rt-14-dev on Debian 12; install-deps.sh).
if ! command -v clang++ >/dev/null 2>&1; then
  echo "fuzz: clang++ is missing; run scripts/install-deps.sh" >&2
  exit 1
fi

lock=()
if [ -n "${GPUOP_BUILD_LOCK:-}" ]; then lock=(flock "$GPUOP_BUILD_LOCK"); fi
start=$SECONDS
if [ ! -f "$build/build.ninja" ]; then
  "${lock[@]}" cmake -S "$root" -B "$build" -G Ninja -DCMAKE_C_COMPILER=clang \
    -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only" \
    "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only" -DGPUOP_FUZZ=ON -DGPUOP_WERROR=ON \
    -DGPUOP_BUILD_TESTS=OFF -DGPUOP_BUILD_BENCH=OFF -DGPUOP_STATIC_DEPS=OFF >/dev/null
fi
"${lock[@]}" ninja -C "$build" ${FUZZ_JOBS:+-j "$FUZZ_JOBS"} fuzz_all | grep -v '^\[' || true
[ "${PIPESTATUS[0]}" -eq 0 ] || { echo "fuzz: build failed" >&2; exit 1; }
echo "fuzz: built in $((SECONDS - start)) s"

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for bin in "$build"/bin/fuzz_*; do targets+=("${bin##*/fuzz_}"); done
fi

# Seeds: regenerated each run (small text, no binary blobs in git).
seeds=$build/seeds
rm -rf "$seeds"
fx=$root/tests/fixtures
# seed TARGET NAME TEXT: one inline seed.
seed() { mkdir -p "$seeds/$1" && printf '%s' "$3" >"$seeds/$1/$2"; }
# seed_files TARGET [PREFIX] FILE...: fixture files; PREFIX (printf format,
# e.g. '\x03') is a first byte of options, for the targets that take one.
seed_files() {
  local t=$1 prefix=$2
  shift 2
  mkdir -p "$seeds/$t"
  for f in "$@"; do
    { printf "$prefix"; cat "$f"; } >"$seeds/$t/$(basename "$(dirname "$f")")-${f##*/}"
  done
}

seed_files cdi_spec '' "$fx"/cdi/*.yaml
seed cdi_spec min.json '{"cdiVersion":"0.6.0","kind":"nvidia.com/gpu","annotations":{"a":"b"},
"devices":[{"name":"0","containerEdits":{"deviceNodes":[{"path":"/dev/nvidia0","hostPath":"/dev/x",
"type":"c","major":195,"minor":0,"fileMode":438,"permissions":"rw","uid":0,"gid":0}]}}],
"containerEdits":{"env":["A=1"],"mounts":[{"hostPath":"/a","containerPath":"/b","options":["ro"],
"type":"bind"}],"hooks":[{"hookName":"createContainer","path":"/bin/h","args":["h"],"env":["X=1"],
"timeout":5}],"additionalGids":[44]}}'

# ld.so.cache: the host's own, and one ldconfig writes for a two-library root.
mkdir -p "$seeds/ld_cache"
[ -f /etc/ld.so.cache ] && cp /etc/ld.so.cache "$seeds/ld_cache/host.cache"
# ldconfig lives in /sbin, which a non-root user's PATH often lacks (CI).
ldconfig=$(PATH=$PATH:/usr/sbin:/sbin command -v ldconfig || true)
if [ -n "$ldconfig" ]; then
  ldroot=$build/seeds-ldroot
  rm -rf "$ldroot" && mkdir -p "$ldroot/etc" "$ldroot/usr/lib"
  echo /usr/lib >"$ldroot/etc/ld.so.conf"
  for lib in libz.so.1 libdl.so.2; do
    # awk reads to the end: an early exit could kill ldconfig with SIGPIPE,
    # which pipefail turns into a failure (seen in CI, now and then).
    src=$("$ldconfig" -p 2>/dev/null | awk -v l="$lib" '!found && $1 == l && /x86-64|64bit|aarch64/ {print $NF; found = 1}')
    [ -n "$src" ] && cp -L "$src" "$ldroot/usr/lib/$lib"
  done
  "$ldconfig" -r "$ldroot" 2>/dev/null && cp "$ldroot/etc/ld.so.cache" "$seeds/ld_cache/small.cache"
  rm -rf "$ldroot"
fi

seed_files mig_config '' "$fx"/mig/*.yaml
seed mig_config small.yaml 'version: v1
mig-configs:
  a:
    - devices: [0, 1]
      device-filter: "0x233010DE:0x16C110DE"
      mig-enabled: true
      mig-devices: {"1c.2g.20gb": 2, "3g.40gb+me": 1}
'
seed mig_config profile '1c.2g.20gb+me'

seed_files deviceplugin_config '' "$fx"/deviceplugin/*
seed deviceplugin_config csv 'envvar,cdi-cri'

seed machine mixed.yaml 'name: mixed
driverVersion: "550.90.07"
cudaVersion: "12.4"
gpus:
  - model: h100-80gb
    count: 2
    migEnabled: true
  - model: NVIDIA L40S
    count: 2
  - model: gb200
    fabric: {clusterUuid: "0b1e8d3c-5a0c-4a49-9b9e-52d6c0b6d3a1", cliqueId: 7}
'

seed kubeconfig token.yaml 'apiVersion: v1
kind: Config
current-context: ctx
contexts:
- name: ctx
  context: {cluster: c, user: u, namespace: gpu-operator}
clusters:
- name: c
  cluster: {server: "https://10.0.0.1:6443/", insecure-skip-tls-verify: true, certificate-authority-data: "LS0tLS1CRUdJTg=="}
users:
- name: u
  user: {token: abc, client-certificate-data: "Y2VydA==", client-key-data: "a2V5"}
- name: exec
  user: {exec: {command: aws}}
'

seed http_request get $'GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: keep-alive, Upgrade\r\n\r\n'
seed http_request pipelined $'HEAD http://h:9400/healthz?x#y HTTP/1.0\nContent-Length: 0\n\nGET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n'

seed label_selector set 'app=x,tier!=gpu,env in (a,b),!old,zone notin (z),example.com/k,n>5,m<3'
seed label_selector json '{"matchLabels":{"a":"b"},"matchExpressions":[{"key":"k","operator":"In","values":["x","y"]},{"key":"e","operator":"DoesNotExist"}]}'
seed field_selector fields 'metadata.name=n,spec.nodeName!=node\,1,status.phase==Running,a=\\\='

seed json_patch ops '[{"a":{"b":[1,2,{"c":null}],"d~e/f":"x"}},[{"op":"add","path":"/a/b/-","value":3},{"op":"remove","path":"/a/d~0e~1f"},{"op":"replace","path":"/a/b/0","value":{}},{"op":"move","from":"/a/b/1","path":"/m"},{"op":"copy","from":"/a","path":"/c"},{"op":"test","path":"/m","value":2}]]'
seed json_patch merge '[{"a":{"b":1,"c":[1]},"d":"x"},{"a":{"b":null,"e":{"f":true}},"d":[null]}]'

# Protobuf request bodies (magic, runtime.Unknown, object) as client-go writes
# them; bytes, so printf escapes (seed_bytes TARGET NAME PRINTF-FORMAT).
seed_bytes() { mkdir -p "$seeds/$1" && printf "$3" >"$seeds/$1/$2"; }
seed_bytes kube_protobuf namespace 'k8s\000\012\017\012\002v1\022\011Namespace\022\017\012\007\012\001n\032\000B\000\022\000'\
'\032\002\012\000\032\000\042\000'
seed_bytes kube_protobuf deployment 'k8s\000\012\025\012\007apps/v1\022\012Deployment\022\225\002\012\034\012\003web\032\007d'\
'efaultB\000Z\012\012\003app\022\003web\022\362\001\010\002\022\014\012\012\012\003app'\
'\022\003web\032\277\001\012\022\012\000\032\000B\000Z\012\012\003app\022\003web\022\250'\
'\001\012\026\012\001v\022\021\022\017\012\006Memory\022\005\012\0031Gi\022\140\012\003we'\
'b\022\005nginx\032\005sleep\032\00436002\007\030P\042\003TCP:\006\012\001A\022\0011B\017'\
'\012\015\012\003cpu\022\006\012\004500mR\032\012\026\022\024\012\010/healthz\022\010\010'\
'\001\032\004http\020\005J\007\012\001v\032\002/v\032\006Always\262\001\013\012\001k\022'\
'\006Exists\222\001\025\012\023\012\021\012\017\012\015\012\004zone\022\002In\032\001a'\
'\042\036\012\015RollingUpdate\022\015\012\007\010\001\032\00325\045\022\002\020\001\032'\
'\000\032\000\042\000'
seed_bytes kube_protobuf pod 'k8s\000\012\011\012\002v1\022\003Pod\022\275\001\012\016\012\001p\032\007defaultB\000'\
'\022\250\001\012\026\012\001v\022\021\022\017\012\006Memory\022\005\012\0031Gi\022\140'\
'\012\003web\022\005nginx\032\005sleep\032\00436002\007\030P\042\003TCP:\006\012\001A\022'\
'\0011B\017\012\015\012\003cpu\022\006\012\004500mR\032\012\026\022\024\012\010/healthz'\
'\022\010\010\001\032\004http\020\005J\007\012\001v\032\002/v\032\006Always\262\001\013'\
'\012\001k\022\006Exists\222\001\025\012\023\012\021\012\017\012\015\012\004zone\022\002I'\
'n\032\001a\032\000\032\000\042\000'
seed_bytes kube_protobuf service 'k8s\000\012\015\012\002v1\022\007Service\022\074\012\016\012\001s\032\007defaultB\000'\
'\022\046\012\016\022\003TCP\030P\042\005\010\000\020\220\077\022\012\012\003app\022\003w'\
'eb\042\010NodePort\032\002\012\000\032\000\042\000'

seed strategic_merge pod '[{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":{"a":"x"},"finalizers":["f"]},"spec":{"containers":[{"name":"main","image":"i","env":[{"name":"A","value":"1"}]},{"name":"side","image":"b"}],"volumes":[{"name":"v","hostPath":{"path":"/"}}],"tolerations":[{"key":"k","operator":"Exists"}]}},{"metadata":{"labels":{"a":null},"$deleteFromPrimitiveList/finalizers":["f"]},"spec":{"$setElementOrder/containers":[{"name":"side"},{"name":"main"}],"containers":[{"name":"main","env":[{"name":"B","value":"2"},{"name":"A","$patch":"delete"}]}],"volumes":[{"$patch":"replace"}],"$retainKeys":["containers"]}}]'
seed strategic_merge node '[{"apiVersion":"v1","kind":"Node","metadata":{"name":"n"},"status":{"conditions":[{"type":"Ready","status":"True"}]}},{"status":{"conditions":[{"type":"Ready","status":"False"},{"type":"X","status":"True"}]},"spec":{"taints":[{"key":"k","effect":"NoSchedule"}]}}]'
seed strategic_merge daemonset '[{"apiVersion":"apps/v1","kind":"DaemonSet","metadata":{"name":"d"},"spec":{"template":{"spec":{"containers":[{"name":"c","args":["a"],"ports":[{"containerPort":80}]}]}}}},{"spec":{"template":{"spec":{"containers":[{"name":"c","args":["b"],"ports":[{"containerPort":81,"$patch":"merge"}]}]}}}}]'

seed_files cluster_policy '' "$fx"/clusterpolicy/*.yaml "$fx"/clusterpolicy/invalid/*.yaml \
  "$fx"/clusterpolicy/nvidia-v26.7.0/clusterpolicy-seed-flags.yaml

for bits in '\x00' '\x03' '\x07'; do
  b=$(printf "$bits" | od -An -tx1 | tr -d ' ')
  mkdir -p "$seeds/containerd" "$seeds/crio" "$seeds/docker"
  for f in "$fx"/runtime/containerd-*/root/etc/containerd/config.toml \
    "$fx"/runtime/containerd-*/want/etc/containerd/config.toml; do
    d=${f#"$fx"/runtime/}
    { printf "$bits"; cat "$f"; } >"$seeds/containerd/$b-${d%%/*}-${f##*/}"
  done
  seed_files crio "$bits" "$fx"/runtime/crio/want/etc/crio/crio.conf.d/99-nvidia.conf
  seed_files docker "$bits" "$fx"/runtime/docker/root/etc/docker/daemon.json
  mv "$seeds/crio/crio.conf.d-99-nvidia.conf" "$seeds/crio/$b-99-nvidia.conf"
  mv "$seeds/docker/docker-daemon.json" "$seeds/docker/$b-daemon.json"
done
seed containerd v1 $'\x01version = 1\n[plugins.cri.containerd]\nsnapshotter = "overlayfs"\n'
seed containerd imports $'\x02version = 3\nimports = ["/etc/containerd/conf.d/*.toml", "rel/x.toml"]\n'
seed docker record $'\x0c{"original":"{}","written":"{\\"runtimes\\":{}}","replaced":{"default-runtime":"runc"}}'

# Run each target; its corpus (build/corpus/T) keeps what it found.
printf '%-22s %12s %10s %8s %8s %10s %s\n' target executions exec/s cov ft corpus crashes
failed=0
mkdir -p "$build/logs" "$build/artifacts"
for t in "${targets[@]}"; do
  bin=$build/bin/fuzz_$t
  [ -x "$bin" ] || { echo "fuzz: no target $t" >&2; exit 2; }
  mkdir -p "$build/corpus/$t" "$seeds/$t"
  dict=()
  [ -f "$root/tests/fuzz/dict/$t.dict" ] && dict=("-dict=$root/tests/fuzz/dict/$t.dict")
  log=$build/logs/$t.log
  rc=0
  TMPDIR=${TMPDIR:-/tmp} "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -max_len=65536 -print_final_stats=1 -artifact_prefix="$build/artifacts/$t-" "${dict[@]}" \
    "$build/corpus/$t" "$seeds/$t" >"$log" 2>&1 || rc=$?
  execs=$(awk '/stat::number_of_executed_units/ {print $2}' "$log")
  last=$(grep -E "^#[0-9]+" "$log" | tail -1 || true)
  field() { sed -n "s|.* $1: *\([^ ]*\).*|\1|p" <<<"$last"; }
  crashes=0
  if [ "$rc" -ne 0 ]; then
    crashes=1
    failed=1
  fi
  printf '%-22s %12s %10s %8s %8s %10s %s\n' "$t" "${execs:-?}" "$(field exec/s)" "$(field cov)" \
    "$(field ft)" "$(field corp)" "$crashes"
  if [ "$rc" -ne 0 ]; then
    grep -E 'ERROR: |SUMMARY: |fuzz invariant broken|artifact_prefix|Test unit written' "$log" | head -5 | sed 's/^/    /'
  fi
done
echo "fuzz: done in $((SECONDS - start)) s"
exit $failed
