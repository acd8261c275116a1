#!/bin/sh
# The tree config's whole training time on each class of CPU the README names, one record each
# (benchmarks/train_time.py): as `auto` chooses (bf16 where the CPU has it natively), in fp32,
# and on the AVX2 path (`--isa avx2`: on an AVX-512 CPU a proxy, said so in its record). Run it
# alone on the machine (every other process stopped): these are timings. About half an hour on
# 2 cores.
#   NLTK_DATA=../shared/data/nltk_data sh benchmarks/train_time_classes.sh [key=value ...]
set -eu
day=$(date +%Y%m%d)
out=benchmarks/results
python benchmarks/train_time.py --out "$out/train_time-$day.json" "$@"
python benchmarks/train_time.py --out "$out/train_time-fp32-$day.json" train.precision=fp32 "$@"
python benchmarks/train_time.py --isa avx2 --out "$out/train_time-avx2-proxy-$day.json" "$@"
