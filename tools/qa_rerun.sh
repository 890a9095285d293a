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

# A small tmpfs at $R/$1 of size $2, with a file of $3 bytes in it (default: as much as fits).
# Needs root.
full_tmpfs() {
  mkdir -p "$R/$1" && mount -t tmpfs -o "size=$2" tmpfs "$R/$1" && head -c "${3:-100000000}" /dev/zero >"$R/$1/fill" 2>/dev/null
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
  # The same dataset on a filesystem too small for it (root: a 100 MB tmpfs).
  if is_root; then
    full_tmpfs h4fs 100M 0
    run 60 '$G train --dlio-config $S $T ++workload.dataset.data_folder=$R/h4fs/big ++workload.workflow.generate_data=True ++workload.dataset.num_files_train=8 ++workload.dataset.num_samples_per_file=2 ++workload.dataset.record_length_bytes_stdev=1000000000; ls -A $R/h4fs/big/train'
    unmount h4fs
  else
    echo "    CANNOT RUN HERE: the too-small filesystem needs root (tmpfs)"
  fi
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
  # The memory table's sanity: peak below persistent, then persistent negative.
  local M=$R/prof/memory/Tesla_V100-PCIE-32GB/resnet50/memory.csv
  cp "$M" "$R/M.bak"
  awk -F, 'NR==1{print;next}{print $1",100,"$3}' "$R/M.bak" >"$M"
  run 30 '$G predict --gpu v100 --model resnet50 -b 4 --profiles $R/prof --torch 1 --json 2>&1 | grep -E "warn|error|peak_allocated_mib|\"memory\""'
  awk -F, 'NR==1{print;next}{print $1","$2",-5000"}' "$R/M.bak" >"$M"
  run 30 '$G predict --gpu v100 --model resnet50 -b 4 --profiles $R/prof --torch 1 2>&1 | grep -E "warn|error|^source" | tail -2'
  cp "$R/M.bak" "$M"
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
  for _ in 1 2 3; do
    rm -rf "$R/race"
    run 120 "\$G train --dlio-config \$S \$T $A >\$R/u8a.log 2>&1 & sleep 0.3; \$G train --dlio-config \$S \$T $A >\$R/u8b.log 2>&1; b=\$?; wait \$!; echo \"rc a \$? b \$b\"; grep -h error \$R/u8a.log \$R/u8b.log"
  done
  rm -rf "$R/race"
}

case_U9() {
  if ! is_root; then echo "    CANNOT RUN HERE: needs root for a tmpfs"; return; fi
  setup_dlio
  full_tmpfs u9full 2M 1500000
  run 120 '$G train --dlio-config $S ++workload.dataset.record_length_bytes=4096 ++workload.dataset.record_length_bytes_stdev=0 ++workload.reader.batch_size=1 ++workload.train.epochs=3 ++workload.dataset.data_folder=$R/d ++workload.dataset.num_files_train=8 ++workload.workflow.checkpoint=True ++workload.checkpoint.checkpoint_folder=$R/u9full/ck ++workload.model.model_size_bytes=300000 ++workload.checkpoint.checkpoint_after_epoch=1 ++workload.checkpoint.epochs_between_checkpoints=1 2>&1 | grep -E "error|Epoch|Stopped" ; ls -A $R/u9full/ck 2>&1'
  unmount u9full
}

case_D1() {
  rm -rf "$R/cacheD1"
  for _ in 1 2; do
    run 400 'export GPEMU_CACHE_DIR=$R/cacheD1; $G train >$R/d1a.log 2>&1 & sleep 0.5; $G train >$R/d1b.log 2>&1; b=$?; wait $!; echo "rc a $? b $b"; grep -hE "gpemu: error|waiting" $R/d1a.log $R/d1b.log; ls -A $GPEMU_CACHE_DIR'
    rm -rf "$R/cacheD1"
  done
}

case_D2() {
  rm -rf "$R/p"; mkdir -p "$R/p"; echo precious >"$R/p/victim_0_of_8.npz"
  local O="$T ++workload.dataset.data_folder=$R/p/data ++workload.workflow.generate_data=True"
  run 60 "\$G train --dlio-config \$S $O ++workload.dataset.file_prefix=\$R/p/victim ++workload.dataset.num_files_train=8"
  run 60 "\$G train --dlio-config \$S $O ++workload.dataset.file_prefix=../../escape ++workload.dataset.num_files_train=8"
  run 10 'cat $R/p/victim_0_of_8.npz; ls $R/p'
  run 60 "\$G train --dlio-config \$S $O ++workload.dataset.num_files_train=8 | tail -1"
  echo precious >"$R/p/victim.txt"
  sed -i '0,/"path": "img_0_of_8.npz"/s//"path": "..\/..\/victim.txt"/' "$R/p/data/train/.gpemu-dlio-dataset.json"
  run 60 "\$G train --dlio-config \$S $O ++workload.dataset.num_files_train=4 2>&1 | grep -iE 'warn|error'; cat \$R/p/victim.txt"
}

case_D3() {
  if is_root; then
    full_tmpfs d3full 1M 1000000
    run 60 '$G train --synthetic -n 100 --clock virtual --trace $R/d3full/t.json 2>&1 | tail -2; echo "rc ${PIPESTATUS[0]}"; ls -A $R/d3full'
    setup_dlio
    run 60 '$G train --dlio-config $S $T ++workload.dataset.data_folder=$R/d ++workload.dataset.num_files_train=8 --trace $R/d3full/dt.json 2>&1 | tail -1; echo "rc ${PIPESTATUS[0]}"; ls -A $R/d3full'
    unmount d3full
  else
    echo "    CANNOT RUN HERE: the full-tmpfs part needs root"
  fi
  run 60 '$G train --synthetic -n 100 --trace /dev/full | tail -1'
  run 60 '$G train --synthetic -n 100 --clock virtual --report /dev/full | tail -1'
  setup_dlio
  run 60 '$G train --dlio-config $S $T ++workload.dataset.data_folder=$R/d ++workload.dataset.num_files_train=8 --trace /dev/full | tail -1'
  run 120 '$G validate --profiles $ROOT/../shared/reference/gpemu-profiles --points /dev/full | tail -1'
  run 120 '$G validate --profiles $ROOT/../shared/reference/gpemu-profiles --plot /dev/full | tail -1'
}

case_D4() {
  run 60 '/usr/bin/time -f "%e s" $G train --synthetic -n 100 --trace /nonexistent/dir/t.json'
  run 60 '/usr/bin/time -f "%e s" $G train --synthetic -n 100 --report /nonexistent/dir/r.html'
  setup_dlio
  run 60 '/usr/bin/time -f "%e s" $G train --dlio-config $S $T ++workload.dataset.data_folder=$R/d ++workload.dataset.num_files_train=8 --trace /nonexistent/dir/t.json'
}

case_D5() {
  rm -rf "$R/s5s"
  run 60 '$G dataset synth --out $R/s5s --images 3000 & sleep 3; kill -INT $!; wait $!; echo "rc $?"; ls -A $R/s5s 2>&1 | head -3'
  rm -rf "$R/s5s"
  run 60 '$G dataset synth --out $R/s5s --images 3000 & sleep 3; kill -KILL $!; wait $!; echo "rc $?"; find $R/s5s -type f | wc -l; ls -A $R/s5s | grep incomplete'
  run 60 '$G train --data $R/s5s --clock virtual'
  run 60 '$G dataset synth --out $R/s5s --images 100 --classes 3'
  rm -rf "$R/s5s"
}

case_D6() {
  rm -rf "$R/cacheD6"
  run 60 'export GPEMU_CACHE_DIR=$R/cacheD6; $G train & sleep 4; kill -INT $!; wait $!; echo "rc $?"; ls -A $GPEMU_CACHE_DIR'
  run 60 'export GPEMU_CACHE_DIR=$R/cacheD6; $G train & sleep 4; kill -TERM $!; wait $!; echo "rc $?"; ls -A $GPEMU_CACHE_DIR'
  run 60 'export GPEMU_CACHE_DIR=$R/cacheD6; $G train & sleep 4; kill -KILL $!; wait $!; echo "rc $?"; ls -A $GPEMU_CACHE_DIR'
  run 300 'export GPEMU_CACHE_DIR=$R/cacheD6; $G train --clock virtual >/dev/null 2>&1; echo "rc $?"; ls -A $GPEMU_CACHE_DIR'
  rm -rf "$R/cacheD6"
}

case_D7() {
  if is_root; then
    full_tmpfs d7full 20M 0
    run 60 '$G train --dlio-config $S $T ++workload.dataset.data_folder=$R/d7full/d ++workload.workflow.generate_data=True ++workload.dataset.num_files_train=8 ++workload.dataset.record_length_bytes=5000000; ls -A $R/d7full/d/train 2>&1; df -h $R/d7full | tail -1'
    unmount d7full
  else
    echo "    CANNOT RUN HERE: the ENOSPC part needs root (tmpfs)"
  fi
  rm -rf "$R/d7"
  for sig in INT TERM KILL; do
    run 60 "\$G train --dlio-config \$S \$T ++workload.dataset.data_folder=\$R/d7 ++workload.workflow.generate_data=True ++workload.dataset.num_files_train=64 ++workload.dataset.record_length_bytes=20000000 & sleep 2; kill -$sig \$!; wait \$!; echo \"rc \$?\"; ls -A \$R/d7/train"
  done
  run 120 '$G train --dlio-config $S $T ++workload.dataset.data_folder=$R/d7 ++workload.workflow.generate_data=True ++workload.dataset.num_files_train=8 | tail -1; ls -A $R/d7/train'
  rm -rf "$R/d7"
}

case_D8() {
  setup_dlio; rm -rf "$R/d8"; cp -r "$R/d" "$R/d8"; rm -f "$R/d8/train/.gpemu-lock"
  sed -i '0,/"bytes": 4554/s//"bytes": "5634"/' "$R/d8/train/.gpemu-dlio-dataset.json"
  run 60 '$G train --dlio-config $S $T ++workload.dataset.data_folder=$R/d8 ++workload.dataset.num_files_train=8 ++workload.workflow.generate_data=True 2>&1 | grep -iE "warn|error|train_au"'
  sed -i '0,/"bytes": 4554/s//"bytes": "5634"/' "$R/d8/train/.gpemu-dlio-dataset.json"
  run 60 '$G train --dlio-config $S $T ++workload.dataset.data_folder=$R/d8 ++workload.dataset.num_files_train=8'
  rm -rf "$R/d8"
}

case_D9() {
  setup_dlio; rm -rf "$R/d9"; cp -r "$R/d" "$R/d9"; rm -f "$R/d9/train/.gpemu-lock"
  truncate -s 100 "$R/d9/train/img_3_of_8.npz"
  run 60 '$G train --dlio-config $S $T ++workload.dataset.data_folder=$R/d9 ++workload.dataset.num_files_train=8 ++workload.workflow.generate_data=False 2>&1 | grep -E "Epoch|error"'
  rm -rf "$R/d9"
}

# ---- Part B helpers: clients of gpemu serve, written to $R/sv ----
setup_sv() {
  mkdir -p "$R/sv/run" "$R/sv/jobs" "$R/sv/tor"
  chmod 700 "$R/sv/run"
  cat >"$R/sv/cl.py" <<'PYEOF'
# Shared helpers: a line client of gpemu serve.
import json, socket, sys, time
def connect(path, timeout=None):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.settimeout(timeout); s.connect(path)
    return s, s.makefile("rb")
def req(s, f, obj):
    s.sendall((json.dumps(obj) + "\n").encode()); return json.loads(f.readline())
def post(s, obj):
    s.sendall((json.dumps(obj) + "\n").encode())
PYEOF
  cat >"$R/sv/hog.py" <<'PYEOF'
# hog.py SOCK N NS: hello, malloc 30 GiB, N kernels of NS ns posted without reading; then waits
# (to be killed with -9).
import sys, time; sys.path.insert(0, sys.path[0]); from cl import *
s, f = connect(sys.argv[1]); print(req(s, f, {"op": "hello", "name": "hog"})["ok"], flush=True)
print(req(s, f, {"op": "malloc", "bytes": 30 << 30}).get("ok"), flush=True)
for _ in range(int(sys.argv[2])): post(s, {"op": "kernel", "ns": int(sys.argv[3])})
print("posted", flush=True); time.sleep(3600)
PYEOF
  cat >"$R/sv/vic.py" <<'PYEOF'
# vic.py SOCK T: hello, malloc 1 GiB, one 1 ms batch; prints how long the batch took (gives up at T s).
import sys, time; sys.path.insert(0, sys.path[0]); from cl import *
s, f = connect(sys.argv[1], float(sys.argv[2])); req(s, f, {"op": "hello", "name": "victim"})
print("malloc 1 GiB:", req(s, f, {"op": "malloc", "bytes": 1 << 30}).get("ok"))
t = time.time()
try:
    r = req(s, f, {"op": "batch", "ns": 1000000}); print("batch of 1 ms took %.1f s (ok %s)" % (time.time() - t, r.get("ok")))
except socket.timeout:
    print("batch of 1 ms: no reply in %s s" % sys.argv[2])
PYEOF
  cat >"$R/sv/noread.py" <<'PYEOF'
# noread.py SOCK T: hello, malloc 1 GiB, then 9,900 smi requests without reading; holds T s.
import sys, time; sys.path.insert(0, sys.path[0]); from cl import *
s, f = connect(sys.argv[1]); req(s, f, {"op": "hello", "name": "noread"}); req(s, f, {"op": "malloc", "bytes": 1 << 30})
s.settimeout(float(sys.argv[2])); n = 0
try:
    for _ in range(9900): post(s, {"op": "smi"}); n += 1
except Exception as e: print("send stopped after", n, "requests:", type(e).__name__, flush=True)
time.sleep(max(0, float(sys.argv[2]) - 1))
PYEOF
  cat >"$R/sv/trickle.py" <<'PYEOF'
# trickle.py SOCK T: hello, malloc 1 GiB, then one byte of a request every 0.1 s (never a newline)
# for T s; prints when the server dropped it.
import sys, time; sys.path.insert(0, sys.path[0]); from cl import *
s, f = connect(sys.argv[1]); req(s, f, {"op": "hello", "name": "trickle"}); req(s, f, {"op": "malloc", "bytes": 1 << 30})
t = time.time(); end = t + float(sys.argv[2])
try:
    while time.time() < end: s.sendall(b" "); time.sleep(0.1)
    print("trickle: still connected after", sys.argv[2], "s", flush=True)
except Exception as e: print("trickle: dropped after %.1f s (%s)" % (time.time() - t, type(e).__name__), flush=True)
PYEOF
  cat >"$R/sv/names.py" <<'PYEOF'
# names.py SOCK: hello with a name holding terminal escapes; prints the reply and holds 20 s.
import sys, time; sys.path.insert(0, sys.path[0]); from cl import *
s, f = connect(sys.argv[1])
print(req(s, f, {"op": "hello", "name": "\u001b]0;owned\u0007\u001b[2J\u001b[1;31mEVIL\u001b[0m\r\nGPU  0  fake-line"}), flush=True)
time.sleep(20)
PYEOF
  cat >"$R/sv/slow.py" <<'PYEOF'
# slow.py PORT SECONDS: 'GET /metrics' then one header line every 0.5 s (a slowloris).
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1]))); s.sendall(b"GET /metrics HTTP/1.1\r\n")
end = time.time() + float(sys.argv[2]); i = 0
try:
    while time.time() < end: s.sendall(b"X-%d: a\r\n" % i); i += 1; time.sleep(0.5)
    print("slowloris: still connected after", sys.argv[2], "s", flush=True)
except Exception as e: print("slowloris: dropped after %d header lines (%s)" % (i, type(e).__name__), flush=True)
PYEOF
  cat >"$R/sv/fake.py" <<'PYEOF'
# fake.py PATH [sane]: a fake gpemu serve: logs every request to PATH.log and answers with invented
# figures: by default impossible ones of the wrong types; with 'sane', replies of the real server's
# shape whose names hold terminal escapes and whose batch end times go backwards.
import json, os, socket, sys, threading
p = sys.argv[1]; sane = len(sys.argv) > 2
if os.path.exists(p): os.unlink(p)
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); srv.bind(p); os.chmod(p, 0o777); srv.listen(8)
log = open(p + ".log", "a"); evil = "\u001b[2J\u001b[31mPWNED fake GPU\r\nGPU  9  forged"
gid = "V100-PCIE-32GB" if sane else 0
def serve(c):
    f = c.makefile("rb"); n = [0]
    for line in f:
        r = json.loads(line); log.write(line.decode()); log.flush(); op = r.get("op")
        if op == "hello": a = {"ok": True, "client": 1, "gpu": {"index": 0, "id": gid, "name": evil, "policy": "fifo", "memory_bytes": 1 << 34}}
        elif op == "smi": a = {"ok": True, "driver": "gpemu", "gpus": [{"index": 0, "id": gid, "name": evil, "uuid": "GPU-x", "policy": "fifo",
                               "memory_total_bytes": 1 << 35 if sane else 0, "memory_used_bytes": 1 << 30 if sane else 10**15,
                               "utilization_pct": 50.0 if sane else 1e9,
                               "processes": [{"pid": 1, "client": 1, "name": evil, "memory_bytes": 1 << 30}]}]}
        elif op == "malloc": a = {"ok": True, "ptr": 4096, "size": r.get("bytes", 0)}
        elif op in ("batch", "sync", "event_sync"): n[0] += 1; a = {"ok": True, "end_ns": 10**12 - n[0] * 10**9}
        else: a = {"ok": True}
        c.sendall((json.dumps(a) + "\n").encode())
while True:
    c, _ = srv.accept(); threading.Thread(target=serve, args=(c,), daemon=True).start()
PYEOF
  cat >"$R/sv/tor/tloop.py" <<'PYEOF'
import sys, torch
x = torch.randn(256, 256, device="cuda")
for i in range(int(sys.argv[1]) if len(sys.argv) > 1 else 10):
    y = x @ x
torch.cuda.synchronize(); print("tloop done")
PYEOF
  cat >"$R/sv/tor/multi.py" <<'PYEOF'
# Three spawned processes, each allocating 20 GiB on cuda:0 of a 32 GB V100.
import torch, torch.multiprocessing as mp
def child(i):
    x = torch.empty(20 << 30, dtype=torch.uint8, device="cuda:0"); torch.cuda.synchronize()
    print("child", i, "holds", torch.cuda.memory_allocated() >> 30, "GiB", flush=True)
    import time; time.sleep(2)
if __name__ == "__main__":
    ps = [mp.get_context("spawn").Process(target=child, args=(i,)) for i in range(3)]
    [p.start() for p in ps]; [p.join() for p in ps]; print("exit codes", [p.exitcode for p in ps])
PYEOF
  cat >"$R/sv/tor/ddp_die.py" <<'PYEOF'
# ddp_die.py PORT: 2 ranks all-reduce in a loop; rank 1 exits with 7 after iteration 2.
import os, sys, torch, torch.distributed as dist, torch.multiprocessing as mp
def run(rank, port):
    dist.init_process_group("nccl", init_method="tcp://127.0.0.1:%s" % port, rank=rank, world_size=2)
    torch.cuda.set_device(rank); t = torch.ones(1 << 20, device="cuda")
    for i in range(6):
        dist.all_reduce(t); torch.cuda.synchronize(); print("rank", rank, "iter", i, flush=True)
        if rank == 1 and i == 2: os._exit(7)
if __name__ == "__main__":
    mp.spawn(run, args=(sys.argv[1],), nprocs=2)
PYEOF
  cat >"$R/sv/tor/unsup.py" <<'PYEOF'
import torch
x = torch.ones(4, device="cuda")
for name, f in [("print(x)", lambda: print(x)), ("str(x)", lambda: str(x)),
                ("storage()._share_cuda_()", lambda: x.storage()._share_cuda_()),
                ("set_per_process_memory_fraction(0.5)", lambda: torch.cuda.set_per_process_memory_fraction(0.5))]:
    try: f(); print(name, "-> ok")
    except Exception as e: print(name, "->", type(e).__name__, str(e)[:200])
PYEOF
  cat >"$R/sv/jobs/jobs1.json" <<'PYEOF'
{"jobs": [{"name": "secret-project-x", "model": "resnet18", "batch_size": 8, "iterations": 5}]}
PYEOF
}

# Starts `gpemu serve $*` in the background with output to $R/sv/serve.log; sets SERVE_PID.
start_serve() {
  (cd "$R" && exec "$G" serve "$@" >"$R/sv/serve.log" 2>&1) &
  SERVE_PID=$!
  local sock=""
  local prev=""
  for a in "$@"; do [ "$prev" = "--socket" ] && sock=$a; prev=$a; done
  for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
  sleep 0.3
}
stop_serve() { kill -TERM "$SERVE_PID" 2>/dev/null; wait "$SERVE_PID" 2>/dev/null; return 0; }

# ---- Part B: reliability-findings-2026-12-04.md ----

# Two throw-away users (attacker, victim), made when missing and removed by cleanup_users.
MADE_USERS=""
setup_users() {
  is_root || return 1
  for u in qaatk qavic; do
    id "$u" >/dev/null 2>&1 || { useradd -m "$u" && MADE_USERS="$MADE_USERS $u"; }
  done
  chmod o+rx "$R" "$ROOT" 2>/dev/null
  return 0
}
cleanup_users() { for u in $MADE_USERS; do userdel -r "$u" 2>/dev/null || echo "could not remove the user $u"; done; MADE_USERS=""; }
as_user() { local u=$1; shift; setpriv --reuid="$(id -u "$u")" --regid="$(id -g "$u")" --clear-groups env HOME="$(getent passwd "$u" | cut -d: -f6)" "$@"; }
# As as_user, in the background; BG_PID is the command's own pid (setpriv and env exec it).
as_user_bg() { local u=$1; shift; setpriv --reuid="$(id -u "$u")" --regid="$(id -g "$u")" --clear-groups env HOME="$(getent passwd "$u" | cut -d: -f6)" "$@" & BG_PID=$!; }

case_N1() {
  if ! setup_users; then echo "    CANNOT RUN HERE: needs root and a second user"; return; fi
  mkdir -p "$R/shared" "$R/victimdir" && chmod 1777 "$R/shared"
  echo "ROOT SECRET 2" >"$R/victimdir/important2.conf"; chmod 600 "$R/victimdir/important2.conf"
  local N; N=$(cat /proc/sys/kernel/ns_last_pid)
  as_user qaatk $PY -c "
import os
for p in range($N+1,$N+3000): os.symlink('$R/victimdir/important2.conf','$R/shared/out.json.tmp-%d'%p)"
  run 60 '$G train --synthetic -n 5 --clock virtual --trace $R/shared/out.json | tail -1; cat $R/victimdir/important2.conf; ls -l $R/shared/out.json | cut -c1-11,14-60; ls $R/shared | grep -vc "^out.json.tmp-[0-9]*$"'
  # Second variant: the target itself is the attacker's symlink in the sticky shared folder.
  echo "ROOT SECRET 1" >"$R/victimdir/important.conf"; chmod 600 "$R/victimdir/important.conf"
  rm -f "$R/shared/"out.json*
  as_user qaatk ln -s "$R/victimdir/important.conf" "$R/shared/out.json"
  run 60 '$G train --synthetic -n 5 --clock virtual --trace $R/shared/out.json | tail -1; cat $R/victimdir/important.conf; stat -c "%a %U %n" $R/victimdir/important.conf'
  rm -rf "$R/shared" "$R/victimdir"
}

case_N2() {
  if ! setup_users; then echo "    CANNOT RUN HERE: needs root and two users"; return; fi
  setup_sv
  local vu; vu=$(id -u qavic)
  local dir=/tmp/gpemu-$vu
  if [ -e "$dir" ]; then echo "    $dir exists already: left alone, case skipped"; return; fi
  chmod -R o+rX "$R/sv"
  as_user qaatk mkdir -m 0777 "$dir"; as_user qaatk chmod 0777 "$dir"
  as_user_bg qaatk $PY "$R/sv/fake.py" "$dir/serve.sock"
  local fp=$BG_PID
  sleep 1
  run 30 'as_user qavic env -u XDG_RUNTIME_DIR $G smi'
  run 60 "as_user qavic env -u XDG_RUNTIME_DIR \$G share --jobs \$R/sv/jobs/jobs1.json --connect $dir/serve.sock"
  run 10 'as_user qavic env -u XDG_RUNTIME_DIR timeout 3 $G serve --gpu v100; echo "rc $? (124: stopped by timeout after 3 s)"'
  echo "    requests the fake server received:"; sed 's/^/      /' "$dir/serve.sock.log" 2>/dev/null | cut -c1-200 | head -5
  kill "$fp" 2>/dev/null; wait "$fp" 2>/dev/null
  rm -rf "$dir"
}
export -f as_user 2>/dev/null

case_N3() {
  setup_sv
  local sock=$R/sv/run/s3.sock
  start_serve --gpu a100 --socket "$sock"
  $PY "$R/sv/hog.py" "$sock" 3 10000000000 >"$R/sv/hog.log" 2>&1 &
  local hp=$!
  sleep 1.5
  run 20 '$G smi --socket $R/sv/run/s3.sock | grep -E "%|hog"'
  kill -9 "$hp"; wait "$hp" 2>/dev/null
  sed 's/^/    hog: /' "$R/sv/hog.log"
  run 60 '$PY $R/sv/vic.py $R/sv/run/s3.sock 40'
  # What smi says of the GPU after the hog's death (its running kernel was to end ~10 s after it
  # started): utilisation over the last second, with no process left.
  run 30 'for t in 1 3 6 12; do sleep $((t - ${p:-0})); p=$t; echo "$t s after the victim: $($G smi --socket $R/sv/run/s3.sock | grep -E "^ +0 " | head -1)"; done'
  stop_serve
}

case_N4() {
  mkdir -p "$R/n4"
  echo '{"jobs":[{"compute_s":3600,"iterations":100000}]}' >"$R/n4/w.json"
  echo '{"jobs":[{"compute_s":0.01,"iterations":100000000}]}' >"$R/n4/l.json"
  echo '{"jobs":[{"compute_s":0.01,"iterations":1000000}]}' >"$R/n4/m.json"
  $PY -c "
import json; j=[{'name':'big','compute_s':0.01,'iterations':100000000}]+[{'name':'j%d'%i,'compute_s':3600,'iterations':3000000} for i in range(5)]
json.dump({'jobs':j}, open('$R/n4/mix.json','w'))
j=[{'name':'big','compute_s':0.01,'iterations':500000}]+[{'name':'j%d'%i,'compute_s':3600,'iterations':100000} for i in range(5)]
json.dump({'jobs':j}, open('$R/n4/mix2.json','w'))"
  run 120 'ulimit -v 4000000; /usr/bin/time -f "%e s, maxrss %M KB" $G share --jobs $R/n4/w.json --clock virtual | tail -3'
  run 60 'ulimit -v 4000000; /usr/bin/time -f "%e s, maxrss %M KB" $G share --jobs $R/n4/l.json --clock virtual --json | tail -3'
  run 60 'ulimit -v 4000000; /usr/bin/time -f "%e s, maxrss %M KB" $G share --jobs $R/n4/mix.json --clock virtual | tail -3'
  # Within the accepted limits: a mix at the 10^6-step total, and 10^6 steps with and without --steps.
  run 120 'ulimit -v 4000000; /usr/bin/time -f "%e s, maxrss %M KB" $G share --jobs $R/n4/mix2.json --clock virtual | tail -2'
  run 120 'ulimit -v 4000000; /usr/bin/time -f "%e s, maxrss %M KB" $G share --jobs $R/n4/m.json --clock virtual | tail -2'
  run 120 'ulimit -v 4000000; /usr/bin/time -f "%e s, maxrss %M KB" $G share --jobs $R/n4/m.json --clock virtual --json --steps >/dev/null'
}

case_N5() {
  setup_sv
  local sock=$R/sv/run/s5.sock
  start_serve --gpu v100 --socket "$sock"
  kill -STOP "$SERVE_PID"
  run 60 'SECONDS=0; timeout 15 $G smi --socket $R/sv/run/s5.sock; echo "rc $? after $SECONDS s"'
  run 60 'SECONDS=0; $G smi --socket $R/sv/run/s5.sock --timeout-s 3; echo "rc $? after $SECONDS s"'
  run 60 'SECONDS=0; timeout -k 5 10 $G torch --connect --socket $R/sv/run/s5.sock -- $R/sv/tor/tloop.py 5; echo "rc $? after $SECONDS s"'
  run 60 'SECONDS=0; timeout -k 5 10 $G share --jobs $R/sv/jobs/jobs1.json --connect $R/sv/run/s5.sock; echo "rc $? after $SECONDS s"'
  kill -CONT "$SERVE_PID"; stop_serve
}

case_N6() {
  setup_sv
  local sock=$R/sv/run/s6.sock
  start_serve --gpu v100 --socket "$sock" --metrics 0
  local port; port=$(grep -oE 'metrics[^0-9]*[0-9.]*:[0-9]+' "$R/sv/serve.log" | grep -oE '[0-9]+$' | head -1)
  echo "    serve: $(head -3 "$R/sv/serve.log" | tr '\n' ' ' | cut -c1-250)"
  $PY "$R/sv/slow.py" "$port" 12 >"$R/sv/slow.log" 2>&1 &
  local sp=$!
  sleep 1
  run 20 "curl -s -m 5 -o /dev/null -w 'http=%{http_code} after %{time_total} s\n' http://127.0.0.1:$port/metrics"
  run 20 "curl -s -m 5 -o /dev/null -w 'POST /admin: http=%{http_code}\n' -X POST http://127.0.0.1:$port/admin; printf 'garbage\r\n\r\n' | timeout 3 curl -s -m 3 telnet://127.0.0.1:$port | head -1"
  local t0=$SECONDS
  kill -TERM "$SERVE_PID"; wait "$SERVE_PID" 2>/dev/null
  echo "    serve stopped $((SECONDS - t0)) s after SIGTERM (bash SECONDS: whole seconds)"
  wait "$sp"; sed 's/^/    /' "$R/sv/slow.log"
}

case_N7() {
  if is_root; then
    full_tmpfs n7full 2M
    run 30 '$G predict --gpu v100 --model resnet50 -b 8 --json >$R/n7full/p.json; echo "rc $?"; wc -c <$R/n7full/p.json'
    run 30 '$G train --synthetic -n 20 --clock virtual --json >$R/n7full/p2.json; echo "rc $?"'
    setup_dlio
    run 60 '$G train --dlio-config $S $T ++workload.dataset.data_folder=$R/d ++workload.dataset.num_files_train=8 >$R/n7full/p3.log; echo "rc $?"'
    unmount n7full
  else
    echo "    (no tmpfs without root: /dev/full only)"
  fi
  run 30 '$G predict --gpu v100 --model resnet50 -b 8 >/dev/full; echo "rc $?"'
  run 30 '$G devices >/dev/full; echo "rc $?"'
}

case_N8() {
  setup_sv
  run 120 '$G torch --gpu v100 --json /dev/full -- $R/sv/tor/tloop.py 10; echo "rc $?"'
  run 120 '$G torch --gpu v100 --report /dev/full -- $R/sv/tor/tloop.py 10; echo "rc $?"'
  if is_root; then
    full_tmpfs n8full 1M
    run 120 '$G torch --gpu v100 --json $R/n8full/tj.json --trace $R/n8full/tt.json -- $R/sv/tor/tloop.py 10; echo "rc $?"; ls -A $R/n8full'
    unmount n8full
  else
    echo "    CANNOT RUN HERE: the full tmpfs needs root"
  fi
}

case_N9() {
  setup_sv
  mkdir -p "$R/xdg" && chmod 700 "$R/xdg"
  run 60 'XDG_RUNTIME_DIR=$R/xdg $G share --jobs $R/sv/jobs/jobs1.json --connect; echo "rc $?"'
  run 60 'XDG_RUNTIME_DIR=$R/xdg $G share --connect --jobs $R/sv/jobs/jobs1.json; echo "rc $?"'
}

case_N10() {
  setup_sv
  run 180 '$G torch --gpu v100 -- $R/sv/tor/multi.py'
}

case_N11() {
  setup_sv
  local sock=$R/sv/run/s11.sock
  start_serve --gpu v100 --socket "$sock" --idle-timeout-s 5
  $PY "$R/sv/noread.py" "$sock" 30 >"$R/sv/noread.log" 2>&1 &
  local np=$!
  sleep 13
  run 20 '$G smi --socket $R/sv/run/s11.sock'
  kill "$np" 2>/dev/null; wait "$np" 2>/dev/null
  sed 's/^/    noread: /' "$R/sv/noread.log"
  # A client that sends one byte every 0.1 s and never ends its line.
  run 40 '$PY $R/sv/trickle.py $R/sv/run/s11.sock 20'
  stop_serve
}

case_N12() {
  setup_sv
  local sock=$R/sv/run/s12.sock
  start_serve --gpu v100 --socket "$sock"
  run 30 '$PY $R/sv/names.py $R/sv/run/s12.sock >$R/sv/names.log & sleep 1; $G smi --socket $R/sv/run/s12.sock | cat -v | tail -3; kill $!; cat $R/sv/names.log'
  stop_serve
  # What a client prints of names a server sends: a fake server (ours) with escapes in the GPU name
  # and impossible figures.
  $PY "$R/sv/fake.py" "$R/sv/run/fake.sock" &
  local fp=$!
  sleep 1
  run 30 '$G smi --socket $R/sv/run/fake.sock | cat -v'
  run 30 '$G share --jobs $R/sv/jobs/jobs1.json --connect $R/sv/run/fake.sock | cat -v'
  kill "$fp"; wait "$fp" 2>/dev/null
  $PY "$R/sv/fake.py" "$R/sv/run/fake2.sock" sane &
  fp=$!
  sleep 1
  run 30 '$G smi --socket $R/sv/run/fake2.sock | cat -v'
  run 30 '$G share --jobs $R/sv/jobs/jobs1.json --connect $R/sv/run/fake2.sock | cat -v'
  kill "$fp"; wait "$fp" 2>/dev/null
  printf '{"jobs":[{"name":"\\u001b[31mred\\u0000x","compute_s":0.01,"iterations":3}]}\n' >"$R/sv/jobs/esc.json"
  run 30 '$G share --jobs $R/sv/jobs/esc.json --clock virtual | cat -v'
}

case_N13() {
  setup_sv
  run 120 'SECONDS=0; $G torch --gpus 2 --gpu a100 --clock virtual -- $R/sv/tor/ddp_die.py 29517 2>&1 | grep -vE "^ *(File|\^|return|raise|self\.)" | tail -8; echo "rc ${PIPESTATUS[0]} after $SECONDS s"'
}

case_N14() {
  setup_sv
  run 120 '$G torch --gpu v100 -- $R/sv/tor/unsup.py'
}

case_N15() {
  mkdir -p "$R/n15"
  echo '{"jobs":[{"compute_s":1e-300,"iterations":10}]}' >"$R/n15/tiny.json"
  echo '{"jobs":[{"compute_s":0.01,"iterations":5,"iterations":7}]}' >"$R/n15/dup.json"
  echo '{"jobs":[{"compute_s":1,"iterations":100}]}' >"$R/n15/long.json"
  run 30 '$G share --jobs $R/n15/tiny.json --clock virtual'
  run 30 '$G share --jobs $R/n15/dup.json --clock virtual'
  run 30 '$G share --jobs $R/n15/long.json & sleep 2; kill -INT $!; wait $!; echo "rc $?"'
}

case_N16() {
  setup_sv
  local sock=$R/sv/run/s16.sock
  start_serve --gpu v100 --socket "$sock" --metrics 0.0.0.0:0
  sed 's/^/    /' "$R/sv/serve.log" | head -4
  ss -ltnp 2>/dev/null | grep "pid=$SERVE_PID," | awk '{print "    ss: " $4}'
  stop_serve
}

case_N17() {
  if is_root; then
    chmod -R o+rX "$R"; chmod 0 "$F"
    run 30 'setpriv --reuid=65534 --regid=65534 --clear-groups $G predict --gpu v100 --model resnet50 -b 1 --profiles $R/prof --torch 1 2>&1 | grep -iE "error|warn|^source"'
    restore_prof
  else
    echo "    (the unreadable-table part needs root: skipped)"
  fi
  rm "$F"; mkdir "$F"
  run 30 '$G predict --gpu v100 --model resnet50 -b 1 --profiles $R/prof --torch 1 2>&1 | grep -iE "error|warn|^source"'
  rmdir "$F"; restore_prof
  sed -i '6s/.*/5.0,1e300/' "$F"
  run 30 '$G predict --gpu v100 --model resnet50 -b 5 --profiles $R/prof --torch 1 2>&1 | grep -iE "error|warn|^source"'
  restore_prof
}

case_N18() {
  run 30 '$G train --dlio-config $S $T ++workload.dataset.data_folder=$R/d ++workload.dataset.num_samples_per_file=1000000000'
}

case_N19() {
  setup_dlio
  run 300 'ulimit -v 4000000; /usr/bin/time -f "%e s, maxrss %M KB" $G train --dlio-config $S $T ++workload.dataset.data_folder=$R/d ++workload.dataset.num_files_train=8 ++workload.train.epochs=1000000 --clock virtual 2>&1 | tail -3'
  for e in 10000 100000; do
    run 300 "/usr/bin/time -f '%e s, maxrss %M KB' \$G train --dlio-config \$S \$T ++workload.dataset.data_folder=\$R/d ++workload.dataset.num_files_train=8 ++workload.train.epochs=$e --clock virtual 2>&1 | tail -1"
  done
  # 10^6 virtual steps in 80-step epochs (the issue's flat-memory target).
  run 300 "/usr/bin/time -f '%e s, maxrss %M KB' \$G train --dlio-config \$S \$T ++workload.dataset.data_folder=\$R/d80 ++workload.workflow.generate_data=True ++workload.dataset.num_files_train=80 ++workload.train.epochs=12500 --clock virtual 2>&1 | tail -1"
}

# ---- main ----
ALL_IDS=${ALL_IDS:-"C1 C2 C3 H1 H2 H3 H4 S1 S2 S3 S4 S5 S6 S7 S8 S9 S10 S11 S12 S13 S14 U1 U2 U3 U4 U5 U6 U7 U8 U9 D1 D2 D3 D4 D5 D6 D7 D8 D9 N1 N2 N3 N4 N5 N6 N7 N8 N9 N10 N11 N12 N13 N14 N15 N16 N17 N18 N19"}
setup_prof
ids=${*:-$ALL_IDS}
for id in $ids; do
  echo "### $id"
  "case_$id"
  echo
done
cleanup_users
