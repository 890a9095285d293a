#!/usr/bin/env bash
# Re-runs the reproduction commands of ../shared/qa/reliability-findings.md (C1..D9) and
# ../shared/qa/reliability-findings-2026-12-04.md (N1..N19), as written there, adapted only in
# paths. Each case prints the commands it ran, their exit status and the lines that show the
# verdict; the verdict itself (present / fixed) is left to the reader (docs/qa-rerun-*.md).
#
#   bash tools/qa_rerun.sh [ID...]        # no ID: every case, in the files' order
#
# Environment: G (the binary, default build/gpemu), R (a scratch folder it creates, default
# /tmp/qa-rerun-<pid>; nothing outside it is written but what a case names: a tmpfs mounted in
# $R, throw-away users when root). Every command runs under `timeout`; the memory-heavy ones under
# `ulimit -v`. Cases that need root (tmpfs, a second user) say "CANNOT RUN HERE" when not root.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
G=$(realpath "${G:-$ROOT/build/gpemu}")
R=${R:-/tmp/qa-rerun-$$}
mkdir -p "$R"
R=$(realpath "$R")
S=$ROOT/configs/dlio/unet3d_a100.yaml
T="++workload.dataset.record_length_bytes=4096 ++workload.dataset.record_length_bytes_stdev=0 ++workload.reader.batch_size=1 ++workload.train.epochs=1 ++workload.workflow.checkpoint=False"
PY=/usr/bin/python3
export G R S T PY ROOT
LINES_SHOWN=${LINES_SHOWN:-6}
# Since e4a8a39 the default program is PyTorch 2's, and --profiles (PyTorch 1.x measurements) is
# then not read at all (a note says so); the profile cases add --torch 1 so the tables are read.

# run TIMEOUT CMD...: prints the command, the last LINES_SHOWN lines of its output and its status.
run() {
  local t=$1
  shift
  echo "\$ $*"
  (cd "$R" && timeout -k 5 "$t" bash -o pipefail -c "$*") >"$R/out.txt" 2>&1
  local rc=$?
  sed -e 's/^/    /' "$R/out.txt" | cut -c1-300 | tail -n "$LINES_SHOWN"
  echo "    [rc $rc]"
  return 0
}

is_root() { [ "$(id -u)" = 0 ]; }

# A one-model copy of the reference profiles ($R/prof) and F, its V100/resnet50 forward table.
setup_prof() {
  rm -rf "$R/prof"
  for p in time/compute/forward time/compute/backward time/transfer memory; do
    mkdir -p "$R/prof/$p/Tesla_V100-PCIE-32GB"
    cp -r "$ROOT/../shared/reference/gpemu-profiles/$p/Tesla_V100-PCIE-32GB/resnet50" "$R/prof/$p/Tesla_V100-PCIE-32GB/"
  done
  F=$R/prof/time/compute/forward/Tesla_V100-PCIE-32GB/resnet50/time_by_batch_size.csv
  cp "$F" "$R/F.bak"
  export F
}
restore_prof() { rm -rf "$F" && cp "$R/F.bak" "$F"; chmod 644 "$F"; }

# A small tmpfs at $R/$1 of size $2, filled; echoes nothing. Needs root.
full_tmpfs() {
  mkdir -p "$R/$1" && mount -t tmpfs -o "size=$2" tmpfs "$R/$1" && head -c 100000000 /dev/zero >"$R/$1/fill" 2>/dev/null
  return 0
}
unmount() { umount "$R/$1" 2>/dev/null; rmdir "$R/$1" 2>/dev/null; return 0; }

# An ImageFolder of 50 images in 5 classes at $R/ds.
setup_ds() {
  [ -d "$R/ds" ] || (cd "$R" && timeout 60 "$G" dataset synth --out "$R/ds" --images 50 --classes 5 >/dev/null 2>&1)
}

# The dlio tiny dataset at $R/d (8 files), generated once.
setup_dlio() {
  [ -f "$R/d/train/.gpemu-dlio-dataset.json" ] && return 0
  (cd "$R" && timeout 60 "$G" train --dlio-config "$S" $T ++workload.dataset.data_folder="$R/d" \
    ++workload.workflow.generate_data=True ++workload.dataset.num_files_train=8 >/dev/null 2>&1)
}

# ---- Part A: reliability-findings.md (2026-12-01) ----

case_C1() {
  mkdir -p "$R/deep/V100-PCIE-32GB"
  $PY -c "n=100000; open('$R/deep/V100-PCIE-32GB/resnet50.json','w').write('{\"a\":'*n+'1'+'}'*n)"
  run 60 '$G predict --gpu v100 --model resnet50 -b 1 --profiles $R/deep'
  run 60 '$G predict --gpu v100 --model resnet50 -b 1 --profiles $R/deep --torch 1'
  run 60 '$G train --clock virtual --synthetic -n 2 -b 1 --model resnet50 --profiles $R/deep --torch 1'
}

npy_case() { # $1 folder, $2 descr, $3 shape
  mkdir -p "$R/$1/train"
  $PY - "$R/$1/train/img_0_of_1.npy" "$2" "$3" <<'PYEOF'
import struct, sys
d="{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (sys.argv[2], sys.argv[3]); d+=' '*((64-(10+len(d)+1)%64)%64)+'\n'
open(sys.argv[1],'wb').write(b'\x93NUMPY\x01\x00'+struct.pack('<H',len(d))+d.encode()+bytes(8192))
PYEOF
}
case_C2() {
  npy_case npy '|u1' '(9223372036854775808, 4096)'
  npy_case npy2 '|u1' '(4294967296, 4294967296, 2)'
  npy_case npy3 '|u1' '(100000000000, 0)'
  for f in npy npy2 npy3; do
    run 60 "ulimit -v 4000000; /usr/bin/time -f 'maxrss %M KB' \$G train --dlio-config \$S \$T ++workload.dataset.data_folder=\$R/$f ++workload.dataset.format=npy ++workload.dataset.num_files_train=1 ++workload.dataset.num_samples_per_file=1"
  done
}

case_C3() {
  $PY -c "
s='a: &a [x,x,x,x,x,x,x,x,x]\n'
for i in range(1,8): p=chr(96+i); n=chr(97+i); s+=f'{n}: &{n} [*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p}]\n'
open('$R/laughs8.yaml','w').write(s+open('$S').read())"
  run 60 'ulimit -v 6000000; /usr/bin/time -f "maxrss %M KB %e s" $G train --dlio-config $R/laughs8.yaml'
}

case_H1() {
  for n in 16 32; do run 60 "/usr/bin/time -f 'gpus $n: %e s' \$G train --clock virtual --synthetic -n 2 --gpus $n >/dev/null"; done
  run 60 '$G train --clock virtual --synthetic -n 2 --gpus 64'
  run 60 '/usr/bin/time -f "%e s" $G train --clock virtual --synthetic -n 2 --gpus 64 --nodes 8 --network 100gbe | tail -2'
  setup_ds
  run 60 '$G analyze --clock virtual --data $R/ds --gpus 64'
  run 60 '/usr/bin/time -f "%e s" $G analyze --clock virtual --data $R/ds --gpus 64 --nodes 8 --network 100gbe | tail -2'
}

case_H2() {
  $PY -c "b=open('$S').read(); open('$R/h.yaml','w').write(b+'hydra:\n'+''.join(f'  k{i}: {i}\n' for i in range(100000)))"
  run 120 '/usr/bin/time -f "%e s, maxrss %M KB" $G train --dlio-config $R/h.yaml'
}

case_H3() {
  run 60 '$G train --dlio-config $S $T ++workload.dataset.data_folder=$R/h3 ++workload.workflow.generate_data=True ++workload.dataset.num_files_train=8 ++workload.train.epochs=2147483647 --clock virtual'
  run 60 '$G train --dlio-config $S $T ++workload.dataset.data_folder=$R/h3 ++workload.workflow.generate_data=True ++workload.dataset.num_files_train=8 ++workload.reader.preprocess_time=2147483647'
  run 60 '$G calibrate --rounds 1000000 --out $R/h3cal.json'
  run 120 '/usr/bin/time -f "%e s, maxrss %M KB" $G train --synthetic -n 5 --epochs 1000000 --clock virtual | grep -E "^iterations|maxrss"'
  # The per-step growth of gpemu train's record: 10^5 and 10^6 epochs of 5 steps, and the largest
  # accepted run under a 3 GB limit.
  run 120 '/usr/bin/time -f "%e s, maxrss %M KB" $G train --synthetic -n 5 --epochs 100000 --clock virtual | grep -E "^iterations|maxrss"'
  run 60 'ulimit -v 3000000; /usr/bin/time -f "%e s, maxrss %M KB" $G train --synthetic -n 1000 --epochs 1000000 --clock virtual'
}

case_H4() {
  run 60 'timeout 20 $G train --dlio-config $S $T ++workload.dataset.data_folder=$R/big ++workload.workflow.generate_data=True ++workload.dataset.num_files_train=8 ++workload.dataset.num_samples_per_file=2 ++workload.dataset.record_length_bytes_stdev=1000000000; echo "rc $? after $SECONDS s"; du -sh $R/big'
  rm -rf "$R/big"
  run 60 '$G train --dlio-config $S $T ++workload.dataset.data_folder=$R/big ++workload.workflow.generate_data=True ++workload.workflow.checkpoint=True ++workload.checkpoint.checkpoint_folder=$R/bigck ++workload.checkpoint.checkpoint_after_epoch=1 ++workload.model.model_size_bytes=1e15; ls -A $R/bigck 2>&1'
  rm -rf "$R/big" "$R/bigck"
}

case_S1() {
  run 30 '$G predict --gpu v100 --model gpt2_small -b 8 --seq-len 4294967296 --json'
  run 30 '$G predict --gpu v100 --model gpt2_small -b 8 --seq-len 9223372036854775807 --json'
  sed -i '6s/.*/5.0,1e300/' "$F"
  run 30 '$G predict --gpu v100 --model resnet50 -b 5 --profiles $R/prof --json --torch 1 | grep -E "forward_ms|provenance|source"; $G predict --gpu v100 --model resnet50 -b 5 --profiles $R/prof --torch 1 2>&1 | grep -iE "^source|left out|skipp|warn|note"'
  restore_prof
  run 30 '$G train --dlio-config $S $T ++workload.dataset.data_folder=$R/d ++workload.workflow.generate_data=True ++workload.dataset.num_files_train=8 ++workload.train.computation_time=1e12'
  run 30 '$G train --dlio-config $S $T ++workload.dataset.data_folder=$R/d ++workload.workflow.generate_data=True ++workload.dataset.num_files_train=8 ++workload.train.computation_time=1e6 ++workload.train.epochs=1000 --clock virtual'
  run 30 '$G train --dlio-config $S $T ++workload.dataset.data_folder=$R/d ++workload.workflow.generate_data=True ++workload.dataset.num_files_train=8 ++workload.train.computation_time=1e9 --clock virtual'
}

case_S2() {
  run 30 '$G predict --gpu h100 --model gpt2_small -b 8 --seq-len 999999999999999999999999 --json | grep seq_len'
}

case_S3() {
  run 30 '$G train --clock virtual --synthetic -n 5 --cv nan'
  run 30 '$G train --clock virtual --synthetic -n 5 --cv -1'
  run 30 '$G train --clock virtual --synthetic -n 5 --cv 1e9'
  mkdir -p "$R/cv/V100-PCIE-32GB"
  $PY - "$R/cv/V100-PCIE-32GB/resnet50.json" <<'PYEOF'
import json, sys
json.dump({"format": "gpemu-profile/1", "gpu": "V100-PCIE-32GB", "model": "resnet50",
           "rows": [{"batch_size": 1, "forward_s": 0.005, "forward_cv": 1e9, "backward_s": 0.01}]}, open(sys.argv[1], "w"))
PYEOF
  run 30 '$G train --synthetic -n 20 -b 1 --model resnet50 --profiles $R/cv --clock virtual --torch 1'
}

case_S4() {
  mkdir -p "$R/dl/train" "$R/dlnox/train"
  $PY -c "
import numpy as np
for i in range(8):
    np.savez('$R/dl/train/img_%d_of_8.npz' % i, x=np.random.randint(255,size=(64,64,2),dtype=np.uint8), y=np.zeros((1,),dtype=np.uint8))
    np.savez('$R/dlnox/train/img_%d_of_8.npz' % i, y=np.zeros((4096,),dtype=np.uint8))"
  run 30 '$G train --dlio-config $S $T ++workload.dataset.data_folder=$R/dl ++workload.dataset.num_files_train=8 ++workload.dataset.num_samples_per_file=2 --json'
  run 30 '$G train --dlio-config $S $T ++workload.dataset.data_folder=$R/dlnox ++workload.dataset.num_files_train=8 ++workload.dataset.num_samples_per_file=1'
}

case_S5() {
  npy_case s5 '|u0' '(2, 4096)'
  npy_case s5b '|u1' '(2, 0)'
  run 30 '$G train --dlio-config $S $T ++workload.dataset.data_folder=$R/s5 ++workload.dataset.format=npy ++workload.dataset.num_files_train=1 ++workload.dataset.num_samples_per_file=2'
  run 30 '$G train --dlio-config $S $T ++workload.dataset.data_folder=$R/s5b ++workload.dataset.format=npy ++workload.dataset.num_files_train=1 ++workload.dataset.num_samples_per_file=2'
  setup_dlio; rm -rf "$R/s5m"; cp -r "$R/d" "$R/s5m"; rm -f "$R/s5m/train/.gpemu-lock"
  $PY -c "
import json; p='$R/s5m/train/.gpemu-dlio-dataset.json'; m=json.load(open(p))
def walk(o):
    if isinstance(o, dict):
        for k in o:
            if k == 'record_length': o[k] = 0
            else: walk(o[k])
    elif isinstance(o, list):
        for v in o: walk(v)
walk(m); json.dump(m, open(p,'w'))"
  run 30 '$G train --dlio-config $S $T ++workload.dataset.data_folder=$R/s5m ++workload.dataset.num_files_train=8'
}

case_S6() {
  run 60 '$G train --dlio-config $S $T ++workload.dataset.data_folder=$R/d ++workload.workflow.generate_data=True ++workload.dataset.num_files_train=8 ++workload.workflow.checkpoint=True ++workload.checkpoint.checkpoint_folder=$R/ck ++workload.checkpoint.steps_between_checkpoints=1 | grep -iE "au|warn|measured" | tail -4'
  rm -rf "$R/ck"
  run 60 '$G train --dlio-config $S $T ++workload.dataset.data_folder=$R/d ++workload.dataset.num_files_train=8 ++workload.output.metric.exclude_start_steps=1000 | grep -iE "au|warn|measured" | tail -4'
}

case_S7() {
  mkdir -p "$R/s7" && cp -r "$R/prof" "$R/s7/base"
  local before
  before=$(sha256sum "$ROOT/data/calibration.json" 2>/dev/null)
  run 120 '$G calibrate --profiles $R/s7/base --out $R/cal.json --no-crossval'
  run 30 '$G calibrate --profiles $R/s7/base --out $R/cal.json --no-crossval --rounds 0'
  run 30 '$G calibrate --profiles $R/s7/base --out $R/cal.json --no-crossval --rounds -1'
  [ "$before" = "$(sha256sum "$ROOT/data/calibration.json" 2>/dev/null)" ] && echo "    data/calibration.json unchanged"
}

case_S8() {
  run 30 'GPEMU_DATA_DIR=/nonexistent $G predict --gpu v100 --model resnet50 -b 8'
}

case_S9() {
  setup_ds
  run 30 '$G analyze --clock virtual --data $R/ds -b 8 --storage-mb-per-s 5e-324'
  run 30 '$G analyze --clock virtual --data $R/ds -b 8 --storage-latency-us 1e30'
}

case_S10() {
  run 30 '$G predict --gpu k80 --model resnet50 -b 64 --precision bf16'
  run 30 '$G predict --gpu v100 --model resnet50 -b 64 --precision bf16'
}

case_S11() {
  awk -F, 'NR==1{print;next}{print $1",0"}' "$R/F.bak" >"$F"
  run 30 '$G predict --gpu v100 --model resnet50 -b 64 --profiles $R/prof --json --torch 1 | grep -E "forward_ms|source"; $G predict --gpu v100 --model resnet50 -b 64 --profiles $R/prof --torch 1 2>&1 | grep -iE "^source|error|left out"'
  restore_prof
  mkdir -p "$R/dup/V100-PCIE-32GB"
  printf '{"format": "gpemu-profile/1", "gpu": "V100-PCIE-32GB", "gpu": "V100-PCIE-32GB", "model": "resnet50", "rows": [{"batch_size": 1, "forward_s": 0.005, "backward_s": 0.01}]}\n' >"$R/dup/V100-PCIE-32GB/resnet50.json"
  run 30 '$G predict --gpu v100 --model resnet50 -b 1 --profiles $R/dup --torch 1 | grep -iE "^source|error"'
  mkdir -p "$R/fwonly/V100-PCIE-32GB"
  printf '{"format": "gpemu-profile/1", "gpu": "V100-PCIE-32GB", "model": "resnet50", "rows": [{"batch_size": 1, "forward_s": 0.005}]}\n' >"$R/fwonly/V100-PCIE-32GB/resnet50.json"
  run 30 '$G predict --gpu v100 --model resnet50 -b 1 --profiles $R/fwonly --torch 1 | grep -iE "^source|error"'
}

case_S12() {
  setup_ds
  for o in "--cache-bytes inf" "--cache-bytes 1e30G" "--cache-bytes 18446744073709551616" "--cache-bytes 0.5" "--bucket-cap-mb inf" "--bucket-cap-mb 1e-30" "--seed -1" "-n -1" "-n 0" "--seq-len 0"; do
    run 30 "\$G train --clock virtual --data \$R/ds -b 8 --workers 1 $o 2>&1 | tail -1"
  done
  run 30 '$G train --clock virtual --data $R/ds -b 8 --seq-len 512 2>&1 | tail -1'
  run 30 '$G predict --gpu v100 --model resnet50 -b 8 --seq-len 512'
}

case_S13() {
  printf -- '---\n' | cat "$S" - >"$R/two.yaml"; printf 'model:\n  name: x\n' >>"$R/two.yaml"
  run 30 '$G train --dlio-config $R/two.yaml $T ++workload.dataset.data_folder=$R/d ++workload.dataset.num_files_train=8'
  run 30 '$G train --dlio-config $S $T ++workload.dataset.data_folder=$R/d ++workload.dataset.num_files_train=8 "++workload.train.computation_time={type: gamma, shape: 0, scale: 0}"'
  sed 's/^  epochs: 5/  epochs: !!str 2/' "$S" >"$R/str.yaml"
  run 30 '$G train --dlio-config $R/str.yaml ++workload.dataset.record_length_bytes=4096 ++workload.dataset.record_length_bytes_stdev=0 ++workload.reader.batch_size=1 ++workload.workflow.checkpoint=False ++workload.dataset.data_folder=$R/d ++workload.dataset.num_files_train=8 --clock virtual | grep -E "Epoch|error" | tail -2'
  run 30 '$G train --dlio-config $S $T ++workload.dataset.data_folder=$R/d ++workload.dataset.num_files_train=8 "~workload.train"'
  run 30 '$G train --dlio-config $S $T ++workload.dataset.data_folder=/ ++workload.workflow.generate_data=True ++workload.dataset.num_files_train=8; ls -d /train 2>&1'
  run 30 "\$G train --dlio-config \$S \$T ++workload.dataset.data_folder=\$R/d ++workload.dataset.num_files_train=8 \"++workload.gpemu.gpu=''\""
}

case_S14() {
  # `gpemu train` without --data trains on the cached default dataset; -n without --data now means
  # in-memory batches, so the case gives neither.
  run 300 'export GPEMU_CACHE_DIR=$R/c1; $G train --clock virtual >/dev/null 2>&1; rm -rf $GPEMU_CACHE_DIR/imagenet-like-*/class_00[1-9]*; $G train --clock virtual 2>&1 | grep -iE "data:|damaged|generat"'
  rm -rf "$R/c1"
}

case_U1() {
  setup_ds
  local D="++workload.dataset.data_folder=$R/u1 ++workload.workflow.generate_data=True"
  for o in "++workload.dataset.record_length_bytes=1e12" "++workload.dataset.num_files_train=1000000000000" "++workload.dataset.num_samples_per_file=1000000000" "++workload.dataset.num_files_train=9223372036854775807"; do
    run 60 "ulimit -v 4000000; \$G train --dlio-config \$S \$T $D $o"
  done
  run 60 'ulimit -v 4000000; $G train --dlio-config $S $T ++workload.dataset.data_folder=$R/u1 ++workload.workflow.train=False ++workload.workflow.checkpoint=True ++workload.checkpoint.checkpoint_folder=$R/u1ck ++workload.checkpoint.num_checkpoints_write=1000000000'
  run 60 'ulimit -v 4000000; $G train --clock virtual --data $R/ds --workers 2147483647'
  run 60 '$G train --clock virtual --data $R/ds --workers 100000'
  run 60 '$G train --dlio-config $S $T ++workload.dataset.data_folder=$R/u1 ++workload.workflow.generate_data=True ++workload.dataset.num_files_train=8 ++workload.reader.read_threads=100000'
  npy_case u1a '<f99999999999999999999' '(1, 4096)'
  npy_case u1b '|u1' '(18446744073709551616, 1)'
  for f in u1a u1b; do
    run 30 "\$G train --dlio-config \$S \$T ++workload.dataset.data_folder=\$R/$f ++workload.dataset.format=npy ++workload.dataset.num_files_train=1 ++workload.dataset.num_samples_per_file=1"
  done
  mkdir -p "$R/u1j/V100-PCIE-32GB"
  printf '{"format": "gpemu-profile/1", "gpu": "V100-PCIE-32GB", "model": "resnet50",\n"rows": [{"batch_size": 1, "forward_s": 1e309, "backward_s": 0.01}]}\n' >"$R/u1j/V100-PCIE-32GB/resnet50.json"
  run 30 '$G predict --gpu v100 --model resnet50 -b 1 --profiles $R/u1j --torch 1'
  setup_dlio; rm -rf "$R/u1m"; cp -r "$R/d" "$R/u1m"; rm -f "$R/u1m/train/.gpemu-lock"
  sed -i '0,/"bytes": 4554/s//"bytes": "4554"/' "$R/u1m/train/.gpemu-dlio-dataset.json"
  run 30 '$G train --dlio-config $S $T ++workload.dataset.data_folder=$R/u1m ++workload.dataset.num_files_train=8'
  sed -i '0,/"first_offset": 163,/s///' "$R/u1m/train/.gpemu-dlio-dataset.json"
  run 30 '$G train --dlio-config $S $T ++workload.dataset.data_folder=$R/u1m ++workload.dataset.num_files_train=8'
  mkdir -p "$R/loop/up" && ln -sfn .. "$R/loop/up/c0" 2>/dev/null
  rm -rf "$R/loopds" && cp -r "$R/ds" "$R/loopds" && ln -s ../class_0000 "$R/loopds/class_0000/loop"
  run 30 '$G train --clock virtual --data $R/loopds -b 8 2>&1 | tail -2'
  rm -rf "$R/loopprof" && cp -r "$R/prof" "$R/loopprof"
  local lt=$R/loopprof/time/compute/forward/Tesla_V100-PCIE-32GB/resnet50/time_by_batch_size.csv
  rm "$lt" && ln -s "$lt" "$lt"
  run 30 '$G predict --gpu v100 --model resnet50 -b 1 --profiles $R/loopprof --torch 1 2>&1 | grep -iE "error|warn|^source"'
  mkdir -p "$R/u1caldir"
  run 60 '$G calibrate --profiles $ROOT/../shared/reference/gpemu-profiles --no-crossval --out $R/u1caldir; ls -d $R/u1caldir.tmp* 2>&1'
  rm -rf "$R/u1" "$R/u1ck"
}

case_U2() {
  sed -i '6s/.*/5.0,1e300/' "$F"
  run 30 '$G train --clock virtual --synthetic -n 2 -b 5 --model resnet50 --profiles $R/prof --torch 1 2>&1 | grep -iE "error|warn|forward mean|GPU costs"'
  restore_prof
}

case_U3() {
  rm -rf "$R/z"
  (cd "$R" && "$G" dataset synth --out "$R/z" --images 10 --classes 1 >/dev/null 2>&1)
  : >"$R/z/class_0000/img_00000000.JPEG"
  run 60 '$G train --data $R/z -b 4'
}

case_U4() {
  run 30 '$G train --synthetic -n 10 --trace /proc/t.json'
  run 60 '$G calibrate --profiles $ROOT/../shared/reference/gpemu-profiles --no-crossval --out /proc/c.json'
  if is_root; then
    chmod -R o+rX "$R"; chmod 0 "$F"
    run 30 'setpriv --reuid=65534 --regid=65534 --clear-groups $G predict --gpu v100 --model resnet50 -b 1 --profiles $R/prof --torch 1 2>&1 | grep -iE "error|warn|^source"'
    restore_prof
    full_tmpfs u4full 256k
    run 60 '$G train --dlio-config $S $T ++workload.dataset.data_folder=$R/u4full/d ++workload.workflow.generate_data=True ++workload.dataset.num_files_train=8 ++workload.dataset.record_length_bytes=100000'
    unmount u4full
  else
    echo "    CANNOT RUN HERE: the permission and full-disk parts need root (setpriv, tmpfs)"
  fi
}

case_U5() {
  $PY -c "open('$F','a').write('1'*50000000+',1\n')"
  run 60 '$G predict --gpu v100 --model resnet50 -b 64 --profiles $R/prof --torch 1 2>&1 | wc -c'
  restore_prof
  tr '\n' '\r' <"$R/F.bak" >"$F"
  run 60 '$G predict --gpu v100 --model resnet50 -b 64 --profiles $R/prof --torch 1 2>&1 | grep -iE "error|warn" | cut -c1-200'
  restore_prof
  head -c 300 /dev/urandom >"$F"
  run 60 '$G predict --gpu v100 --model resnet50 -b 64 --profiles $R/prof --torch 1 2>&1 | grep -iE "error|warn" | cat -v | cut -c1-200'
  restore_prof
}

case_U6() {
  rm "$F"; mkdir "$F"
  run 30 '$G predict --gpu v100 --model resnet50 -b 1 --profiles $R/prof --torch 1 2>&1 | grep -iE "error|warn|^source"'
  rmdir "$F"; mkfifo "$F"
  run 30 '$G predict --gpu v100 --model resnet50 -b 1 --profiles $R/prof --torch 1 2>&1 | grep -iE "error|warn|^source"'
  rm -f "$F"; ln -s /dev/zero "$F"
  run 30 '$G predict --gpu v100 --model resnet50 -b 1 --profiles $R/prof --torch 1 2>&1 | grep -iE "error|warn|^source"'
  restore_prof
  : >"$R/empty.yaml"
  run 30 '$G train --dlio-config $R/empty.yaml'
  setup_ds
  run 30 '$G analyze --clock virtual --data $R/ds --storage-latency-us 1e30'
  $PY -c "open('$R/deepy.yaml','w').write('a: '+'['*100000+']'*100000+'\n')"
  run 30 '$G train --dlio-config $R/deepy.yaml'
  printf 'model:\n  name: "un\0et"\n' >"$R/nul.yaml"
  run 30 '$G train --dlio-config $R/nul.yaml'
  rm -rf "$R/fifods" && cp -r "$R/ds" "$R/fifods" && mkfifo "$R/fifods/class_0000/zz.jpg"
  run 30 '$G train --clock virtual --data $R/fifods -b 8'
}

case_U7() {
  for c in resnet50_a100 resnet50_v100 dlrm_b200; do
    run 60 "\$G train --dlio-config \$ROOT/configs/dlio/$c.yaml \$T ++workload.dataset.data_folder=\$R/u7$c ++workload.workflow.generate_data=True ++workload.dataset.num_files_train=8 --clock virtual 2>&1 | grep -E 'error|train_au_meet' | cut -c1-250"
    rm -rf "$R/u7$c"
  done
  grep -n -i "figures and parsing only" "$ROOT/docs/dlio.md" | head -3 | sed 's/^/    /'
}

case_U8() {
  local A="++workload.dataset.data_folder=$R/race ++workload.workflow.generate_data=True ++workload.dataset.num_files_train=16 ++workload.dataset.record_length_bytes=5000000"
  for i in 1 2 3; do
    rm -rf "$R/race"
    run 120 "\$G train --dlio-config \$S \$T $A >\$R/u8a.log 2>&1 & sleep 0.3; \$G train --dlio-config \$S \$T $A >\$R/u8b.log 2>&1; b=\$?; wait \$!; echo \"rc a \$? b \$b\"; grep -h error \$R/u8a.log \$R/u8b.log"
  done
  rm -rf "$R/race"
}

case_U9() {
  if ! is_root; then echo "    CANNOT RUN HERE: needs root for a tmpfs"; return; fi
  setup_dlio
  full_tmpfs u9full 2M; rm -f "$R/u9full/fill"; head -c 1500000 /dev/zero >"$R/u9full/fill"
  run 120 '$G train --dlio-config $S ++workload.dataset.record_length_bytes=4096 ++workload.dataset.record_length_bytes_stdev=0 ++workload.reader.batch_size=1 ++workload.train.epochs=3 ++workload.dataset.data_folder=$R/d ++workload.dataset.num_files_train=8 ++workload.workflow.checkpoint=True ++workload.checkpoint.checkpoint_folder=$R/u9full/ck ++workload.model.model_size_bytes=300000 ++workload.checkpoint.checkpoint_after_epoch=1 ++workload.checkpoint.epochs_between_checkpoints=1 2>&1 | grep -E "error|Epoch|Stopped" ; ls -A $R/u9full/ck 2>&1'
  unmount u9full
}

# ---- main ----
ALL_IDS=${ALL_IDS:-"C1 C2 C3 H1 H2 H3 H4 S1 S2 S3 S4 S5 S6 S7 S8 S9 S10 S11 S12 S13 S14 U1 U2 U3 U4 U5 U6 U7 U8 U9"}
setup_prof
ids=${*:-$ALL_IDS}
for id in $ids; do
  echo "### $id"
  "case_$id"
  echo
done
