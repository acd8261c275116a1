"""Bad input, every verb: exit 2, one line on stderr naming the problem, no traceback, and no
run directory left behind. A new verb adds its cases to CASES.

Each case is (id, argv, expected text in the message). ``{run}`` is a trained tiny ON-LSTM run,
``{tmp}`` a fresh directory, ``{out}`` the run directory a failed ``train`` must not leave.
"""

from __future__ import annotations

import io
import os
import re
from pathlib import Path
from typing import Any

import pytest
import torch

from treelm.cli import main

TRAIN = ["train", "--config", "configs/tiny-lm.yaml", "--out", "{out}", "--quiet"]
TAGGING = ["train", "--config", "configs/tiny-tagging.yaml", "--out", "{out}", "--quiet"]
LOGIC = ["train", "--config", "configs/tiny-logic.yaml", "--out", "{out}", "--quiet"]
FILES = ["data.source=files", "data.test={tmp}/pairs.txt"]
LISTOPS = ["train", "--config", "configs/tiny-listops.yaml", "--out", "{out}", "--quiet"]
TRANSL = ["train", "--config", "configs/tiny-translation.yaml", "--out", "{out}", "--quiet"]

CASES: list[tuple[Any, ...]] = [
    # ---------------------------------------------------------------- train: config values
    ("lr-text", [*TRAIN, "train.lr=abc"], "train.lr = 'abc': expected a finite number"),
    ("lr-negative", [*TRAIN, "train.lr=-1"], "train.lr = -1.0: must be > 0"),
    ("lr-nan", [*TRAIN, "train.lr=.nan"], "train.lr"),
    ("epochs-text", [*TRAIN, "train.epochs=abc"], "train.epochs = 'abc': expected an integer"),
    ("epochs-zero", [*TRAIN, "train.epochs=0"], "train.epochs = 0: must be an integer >= 1"),
    ("batch-float", [*TRAIN, "train.batch_size=2.5"], "train.batch_size = 2.5: expected an int"),
    ("batch-zero", [*TRAIN, "train.batch_size=0"], "train.batch_size = 0"),
    ("bptt-zero", [*TRAIN, "train.bptt=0"], "train.bptt = 0"),
    ("clip-negative", [*TRAIN, "train.clip=-1"], "train.clip = -1.0: must be >= 0"),
    ("optimizer", [*TRAIN, "train.optimizer=adamw"], "train.optimizer = 'adamw': choose one"),
    ("momentum-adam", [*TRAIN, "train.optimizer=adam", "train.momentum=0.9"],
     "options of train.optimizer = 'sgd'"),
    ("nesterov-no-momentum", [*TRAIN, "train.nesterov=true"], "needs train.momentum > 0"),
    ("momentum-range", [*TRAIN, "train.momentum=1.5"], "train.momentum = 1.5: must be in [0, 1)"),
    ("schedule", [*TRAIN, "train.lr_schedule=cosine"], "train.lr_schedule = 'cosine'"),
    ("linear-time", [*TRAIN, "train.lr_schedule=linear_time"], "needs train.max_minutes"),
    ("bool-text", [*TRAIN, "train.variable_bptt=maybe"], "train.variable_bptt = 'maybe'"),
    ("device-cuda", [*TRAIN, "train.device=cuda"], "no CUDA device"),
    ("device-tpu", [*TRAIN, "train.device=tpu"], "train.device = 'tpu'"),
    ("unknown-train", [*TRAIN, "train.bogus=1"], "unknown train options ['bogus']"),
    ("dropout-text", [*TRAIN, "model.dropout=abc"], "model.dropout = 'abc'"),
    ("dropout-range", [*TRAIN, "model.dropout=1.5"], "model.dropout = 1.5: must be in [0, 1)"),
    ("sizes-text", [*TRAIN, "model.sizes=abc"], "model.sizes = 'abc': expected a list"),
    ("sizes-short", [*TRAIN, "model.sizes=[16]"], "sizes needs an input size and a layer at least"),
    ("sizes-zero", [*TRAIN, "model.sizes=[16,0]"], "model.sizes"),
    ("cell", [*TRAIN, "model.cell=xyz"], "unknown cell 'xyz'"),
    ("chunk", [*TRAIN, "model.cell_options={chunk_size: 7}"], "chunk"),
    ("model-type", [*TRAIN, "model.type=gpt"], "unknown model type 'gpt'"),
    ("model-option", [*TRAIN, "model.colour=red"], "colour"),
    ("task", [*TRAIN, "task=translate"], "unknown task 'translate'"),
    ("level", [*TRAIN, "data.level=chars"], "data.level = 'chars': choose one of word, char"),
    ("tokenizer", [*TRAIN, "data.tokenizer=wordpiece"], "data.tokenizer = 'wordpiece'"),
    ("level-vs-tokenizer", [*TRAIN, "data.level=char"], "contradict each other"),
    ("split-text", [*TRAIN, "data.split=abc"], "data.split = 'abc': expected a list"),
    ("split-sum", [*TRAIN, "data.split=[0.5,0.6,0.1]"], "summing to 1"),
    ("source", [*TRAIN, "data.source=wiki"], "data.source = 'wiki'"),
    ("ptb-with-file", [*TRAIN, "data.source=ptb"], "need data.source=files"),
    ("file-and-train", [*TRAIN, "data.train=tests/data/tiny.txt"], "contradict each other"),
    ("three-files-missing", [*TRAIN, "data.file=null", "data.train=tests/data/tiny.txt"],
     "missing: data.valid, data.test"),
    ("min-count", [*TRAIN, "data.min_count=0"], "data.min_count = 0"),
    ("unknown-data", [*TRAIN, "data.lang=en"], "unknown data options ['lang']"),
    ("override-form", [*TRAIN, "train.lr"], "not of the form key=value"),
    ("override-section", [*TRAIN, "optim.lr=1"], "the key must start with one of"),
    ("section-type", [*TRAIN, "train=3"], "train: expected a section"),
    # ---------------------------------------------------------------- train: files and dirs
    ("config-missing", ["train", "--config", "{tmp}/nope.yaml", "--out", "{out}"],
     "no such config file"),
    ("config-yaml", ["train", "--config", "{tmp}/bad.yaml", "--out", "{out}"], "not valid YAML"),
    ("data-missing", [*TRAIN, "data.file={tmp}/no.txt"], "no.txt: no such file"),
    ("data-empty", [*TRAIN, "data.file={tmp}/empty.txt"], "empty corpus"),
    ("data-binary", [*TRAIN, "data.file={tmp}/binary.txt"], "not UTF-8"),
    ("data-dir", [*TRAIN, "data.file={tmp}"], "is a directory"),
    ("data-too-short", [*TRAIN, "data.file={tmp}/short.txt"], "too few"),
    ("out-unwritable", ["train", "--config", "configs/tiny-lm.yaml", "--out",
                        "{tmp}/empty.txt/run", "--quiet"], "cannot write the run directory"),
    ("no-out", ["train", "--config", "configs/tiny-lm.yaml"], "train needs --config"),
    ("resume-not-run", ["train", "--resume", "{tmp}"],
     "not a treelm run directory (no checkpoint.json)"),
    ("resume-and-config", ["train", "--resume", "{run}", "--config", "configs/tiny-lm.yaml"],
     "drop --config"),
    ("out-exists", ["train", "--config", "configs/tiny-lm.yaml", "--out", "{run}"],
     "already holds a run"),
    ("out-foreign", ["train", "--config", "configs/tiny-lm.yaml", "--out", "{tmp}", "--quiet"],
     "{tmp}: exists and is not a treelm run ("),      # issue 43: e.g. --out docs
    # ---------------------------------------------------------------- train: slot filling
    ("tag-window-even", [*TAGGING, "model.window=4"], "window must be odd"),
    ("tag-feedback", [*TAGGING, "model.feedback=output"], "model.feedback = 'output'"),
    ("tag-feedback-cell", [*TAGGING, "model.feedback=labels", "model.cell=lstm"],
     "bad options for cell 'lstm'"),
    ("tag-feedback-layers", [*TAGGING, "model.feedback=labels", "model.cell=jordan",
                             "model.sizes=[8,8,8]"], "one recurrent layer"),
    ("tag-unknown-policy", [*TAGGING, "data.unknown_labels=drop"], "data.unknown_labels"),
    ("tag-missing-split", [*TAGGING, "data.test=null"], "missing: data.test"),
    ("tag-missing-dir", [*TAGGING, "data.valid={tmp}/nodir"], "nodir: no such file"),
    ("tag-lm-keys", [*TAGGING, "train.bptt=35"], "unknown train options ['bptt']"),
    ("tag-intent-weight", [*TAGGING, "train.intent_weight=-1"], "train.intent_weight"),
    # ---------------------------------------------------------------- train: logical inference
    ("logic-generate-and-file", [*LOGIC, "data.train={tmp}/pairs.txt"], "contradict each other"),
    ("logic-files-missing", [*LOGIC, "data.source=files", "data.train={tmp}/pairs.txt"],
     "missing: data.test"),
    ("logic-ops-order", [*LOGIC, "data.max_test_ops=2"], "below data.max_train_ops = 3"),
    ("logic-variables", [*LOGIC, "data.pair_variables=7"], "data.pair_variables = 7"),
    ("logic-too-few", [*LOGIC, "data.test_size=5000"], "distinct pairs have 1 operator"),
    ("logic-unknown-data", [*LOGIC, "data.operators=3"], "unknown data options ['operators']"),
    ("logic-relation", [*LOGIC, *FILES, "data.train={tmp}/pairs.txt"],
     "pairs.txt:2: unknown relation '~'"),
    ("logic-formula", [*LOGIC, *FILES, "data.train={tmp}/formula.txt"],
     "formula.txt:1: first formula: unbalanced brackets"),
    ("logic-fields", [*LOGIC, *FILES, "data.train={tmp}/short.txt"],
     "short.txt:1: expected 'relation<TAB>formula<TAB>formula'"),
    ("logic-wrong-label", [*LOGIC, *FILES, "data.train={tmp}/wrong.txt"],
     "wrong.txt:1: relation '=', but the formulas are in relation '#'"),
    ("logic-empty-dir", [*LOGIC, *FILES, "data.train={tmp}"], "a directory without train0"),
    ("logic-mlp-size", [*LOGIC, "model.mlp_size=0"], "model.mlp_size = 0"),
    ("logic-lm-keys", [*LOGIC, "train.bptt=35"], "unknown train options ['bptt']"),
    # ---------------------------------------------------------------- train: ListOps
    ("listops-args", [*LISTOPS, "data.max_args=1"], "data.max_args = 1: must be at least 2"),
    ("listops-pool", [*LISTOPS, "model.pool=max"], "model.pool = 'max': choose one of"),
    ("listops-label", [*LISTOPS, "data.source=files", "data.train={tmp}/wrong.txt",
                       "data.test={tmp}/wrong.txt"],
     "wrong.txt:1: expected 'label<TAB>expression', got 3"),
    # ---------------------------------------------------------------- train: translation
    ("tr-synthetic", [*TRANSL, "data.synthetic=rot13"], "data.synthetic = 'rot13'"),
    ("tr-dir-and-synthetic", [*TRANSL, "data.dir={tmp}"], "contradict each other"),
    ("tr-no-data", [*TRANSL, "data.synthetic=null"], "needs data.dir"),
    ("tr-missing-file", [*TRANSL, "data.synthetic=null", "data.dir={tmp}"],
     "train.de: no such file"),
    ("tr-lengths", [*TRANSL, "data.synthetic_lengths=[9,3]"], "[shortest, longest]"),
    ("tr-vocab", [*TRANSL, "data.synthetic_vocab=30"], "must be 2 to 26"),
    ("tr-empty-policy", [*TRANSL, "data.empty_lines=ignore"], "data.empty_lines = 'ignore'"),
    ("tr-smoothing", [*TRANSL, "train.label_smoothing=1"], "train.label_smoothing = 1.0"),
    ("tr-select", [*TRANSL, "train.select_by=chrf"], "train.select_by = 'chrf'"),
    ("tr-beam", [*TRANSL, "train.eval_beam=0"], "train.eval_beam = 0"),
    ("tr-attention", [*TRANSL, "model.attention=cosine"], "model.attention = 'cosine'"),
    ("tr-dot-sizes", [*TRANSL, "model.attention=dot"], "attention: dot needs"),
    ("tr-lm-keys", [*TRANSL, "train.bptt=35"], "unknown train options ['bptt']"),
    # ---------------------------------------------------------------- eval
    ("eval-not-run", ["eval", "{tmp}"], "not a treelm run directory"),
    ("eval-missing", ["eval", "{tmp}/nothing"], "no such run directory"),
    ("eval-batch", ["eval", "{run}", "--batch-size", "0"], "--batch-size: must be an integer >= 1"),
    ("eval-threads", ["eval", "{run}", "--threads", "0"], "--threads: must be an integer >= 1"),
    # ---------------------------------------------------------------- generate, probe
    ("gen-temperature-nan", ["generate", "{run}", "--temperature", "nan"], "--temperature"),
    ("gen-temperature-neg", ["generate", "{run}", "--temperature", "-1"], "--temperature"),
    ("gen-length", ["generate", "{run}", "--length", "-1"], "--length: must be an integer >= 0"),
    ("gen-top-p", ["generate", "{run}", "--top-p", "2"], "--top-p: must be a number in (0, 1]"),
    ("gen-top-k", ["generate", "{run}", "--top-k", "0"], "--top-k: must be an integer >= 1"),
    ("gen-beam", ["generate", "{run}", "--beam", "0"], "--beam: must be an integer >= 1"),
    ("gen-beam-sample", ["generate", "{run}", "--beam", "2", "--temperature", "1"],
     "--beam searches deterministically"),
    ("gen-unknown", ["generate", "{run}", "--prompt", "the zyzzyvas", "--unk", "error"],
     "--prompt: 'zyzzyvas' not in the run's vocabulary"),
    ("gen-not-run", ["generate", "{tmp}"], "not a treelm run directory"),
    ("probe-top", ["probe", "{run}", "--prompt", "the", "--top-k", "0"], "--top-k: must be an"),
    ("probe-unknown", ["probe", "{run}", "--prompt", "the", "--prompt", "zyzzyvas", "--unk",
                       "error"], "--prompt 2: 'zyzzyvas' not in the run's vocabulary"),
    # ---------------------------------------------------------------- syntax verbs
    ("parse-empty", ["parse", "{run}", ""], "no input: the sentence is empty"),
    ("parse-layer", ["parse", "{run}", "the cat", "--layer", "9"], "--layer 9"),
    ("parse-layer-text", ["parse", "{run}", "the cat", "--layer", "top"],
     "argument --layer: must be a layer number or 'all', got top"),
    ("plot-layer-all", ["plot", "{run}", "the cat", "--layer", "all", "-o", "{tmp}/p.png"],
     "argument --layer: 'all' is not possible here"),
    ("eval-parse-labels-none", ["eval-parse", "{run}", "--treebank", "{tmp}/t.mrg", "--labels",
                                " , "], "argument --labels: give one label or more"),
    ("parse-file", ["parse", "{run}", "--input", "{tmp}/none.txt"], "none.txt: no such file"),
    ("parse-both", ["parse", "{run}", "the cat", "--input", "{tmp}/short.txt"], "not both"),
    ("parse-batch", ["parse", "{run}", "the cat", "--batch-size", "0"], "--batch-size"),
    ("parse-unk", ["parse", "{run}", "the qqqzzz", "--unk", "error"],
     "the sentence: 'qqqzzz' not in the run's vocabulary"),
    ("eval-parse-bank", ["eval-parse", "{run}", "--treebank", "{tmp}/nobank"], "nobank"),
    ("ensemble-no-sentences", ["ensemble", "{run}"], "ensemble needs the sentences: --input"),
    ("ensemble-empty-input", ["ensemble", "{run}", "--input", "{tmp}/empty.txt"],
     "no input: {tmp}/empty.txt is empty"),
    ("ensemble-short-trees", ["ensemble", "{run}", "{tmp}/short.txt", "--input",
                              "{tmp}/unk-lm.txt"],
     "short.txt: 1 lines (one tree a line) for the 2 lines of {tmp}/unk-lm.txt"),
    ("ensemble-binary-trees", ["ensemble", "{tmp}/binary.txt", "--input", "{tmp}/unk-lm.txt"],
     "binary.txt:2: not UTF-8"),
    ("teacher-trees-nothing", ["teacher-trees", "-o", "{tmp}/t.txt"],
     "teacher-trees needs SOURCEs or --baseline"),
    ("teacher-trees-corpus", ["teacher-trees", "--baseline", "right_branching", "--corpus",
                              "{tmp}/no.txt", "--exclude", "none", "-o", "{tmp}/t.txt"],
     "--corpus {tmp}/no.txt: No such file"),
    ("teacher-trees-empty", ["teacher-trees", "--baseline", "right_branching", "--corpus",
                             "{tmp}/empty.txt", "--exclude", "none", "-o", "{tmp}/t.txt"],
     "no sentence in it"),
    ("plot-suffix", ["plot", "{run}", "the cat", "-o", "{tmp}/x.txt"], "x.txt"),
    ("plot-dir", ["plot", "{run}", "the cat", "-o", "{tmp}"], "is a directory"),
    ("plot-tree-bad", ["plot-tree", "((a b)", "-o", "{tmp}/t.png"], "malformed tree"),
    ("plot-tree-suffix", ["plot-tree", "(a b)", "-o", "{tmp}/t.doc"], "must end in .png"),
    ("plot-tree-layer", ["plot-tree", "(a b)", "--layer", "1", "-o", "{tmp}/t.png"],
     "--layer needs --run"),
    ("plot-tree-direction", ["plot-tree", "(a b)", "--direction", "backward", "-o",
                             "{tmp}/t.png"], "--direction needs --run"),
    ("parse-direction-lm", ["parse", "{run}", "the cat", "--direction", "backward"],
     "needs a translation run with a bidirectional encoder"),
    # ---------------------------------------------------------------- tag
    ("tag-lm-run", ["tag", "{run}", "--input", "{tmp}/short.txt"], "holds a 'lm' run"),
    ("tag-input-missing", ["tag", "{run}", "--input", "{tmp}/none.txt"], "none.txt: no such"),
    ("tag-empty-line", ["tag", "{run}", "--input", "{tmp}/empty.txt"],
     "no input: {tmp}/empty.txt is empty"),
    ("tag-batch", ["tag", "{run}", "--input", "{tmp}/short.txt", "--batch-size", "0"],
     "--batch-size: must be an integer >= 1"),
    # ---------------------------------------------------------------- suite
    ("suite-not-run", ["suite", "agreement", "{tmp}"], "not a treelm run directory"),
    ("suite-batch", ["suite", "agreement", "{run}", "--batch-size", "0"],
     "--batch-size: must be an integer >= 1"),
    ("suite-max", ["suite", "agreement", "{run}", "--max-per-construction", "0"],
     "--max-per-construction: must be an integer >= 1"),
    ("suite-pairs-missing", ["suite", "agreement", "{run}", "--pairs", "{tmp}/none.tsv"],
     "none.tsv: no such file"),
    ("suite-pairs-columns", ["suite", "agreement", "{run}", "--pairs", "{tmp}/short.txt"],
     "short.txt:1: expected 3 tab-separated fields"),
    ("suite-pairs-empty-field", ["suite", "agreement", "{run}", "--pairs", "{tmp}/pairs.tsv"],
     "pairs.tsv:2: the grammatical field is empty"),
    ("suite-pairs-and-seed", ["suite", "agreement", "{run}", "--pairs", "{tmp}/pairs.tsv",
                              "--seed", "1"], "drop --seed"),
    ("suite-json-dir", ["suite", "agreement", "{run}", "-o", "{tmp}"], "is a directory"),
    # ---------------------------------------------------------------- translate
    ("translate-lm-run", ["translate", "{run}", "--input", "{tmp}/short.txt"],
     "holds a 'lm' run"),
    ("translate-input-missing", ["translate", "{run}", "--input", "{tmp}/none.txt"],
     "none.txt: no such file"),
    ("translate-binary", ["translate", "{run}", "--input", "{tmp}/binary.txt"],
     "binary.txt:2: not UTF-8"),
    ("translate-beam", ["translate", "{run}", "--beam", "0"], "--beam: must be an integer >= 1"),
    ("translate-batch", ["translate", "{run}", "--batch-size", "0"], "--batch-size: must be an"),
    ("translate-alpha", ["translate", "{run}", "--length-penalty", "nan"],
     "--length-penalty: must be a finite number >= 0, got nan"),
    ("translate-plot", ["translate", "{run}", "--input", "{tmp}/short.txt", "-o",
                        "{tmp}/a.txt"], "must end in .png"),
    # ---------------------------------------------------------------- serve
    ("serve-not-a-run", ["serve", "{tmp}", "--port", "0"], "not a treelm run directory"),
    ("serve-port", ["serve", "{run}", "--port", "70000"],
     "argument --port: must be an integer in [0, 65535], got 70000"),
    # ---------------------------------------------------------------- study
    ("study-missing", ["study", "{tmp}/none.yaml", "--status"], "no such study file"),
    ("study-not-yaml", ["study", "{tmp}/short.txt", "--status"],
     "a study is a mapping with keys"),
    ("study-jobs", ["study", "{tmp}/none.yaml", "--jobs", "0"],
     "argument --jobs: must be an integer >= 1, got 0"),
    # ---------------------------------------------------------------- issue 25: unknown symbols
    # --unk error refuses, naming the input line and the symbols ({tag}: a tagging run, {tr}: a
    # BPE translation run, whose only unknown symbols are characters its piece model never saw)
    ("parse-unk-file", ["parse", "{run}", "--input", "{tmp}/unk-lm.txt", "--unk", "error"],
     "unk-lm.txt:2: 'zyzzyvas' not in the run's vocabulary"),
    ("parse-unk-stdin", ["parse", "{run}", "--unk", "error"],
     "stdin:2: 'zyzzyvas', 'qqqzzz' not in", "the company\nthe zyzzyvas qqqzzz\n"),
    ("plot-unk", ["plot", "{run}", "the zyzzyvas", "-o", "{tmp}/p.png", "--unk", "error"],
     "the sentence: 'zyzzyvas' not in the run's vocabulary"),
    ("plot-unk-stdin", ["plot", "{run}", "-o", "{tmp}/p.png", "--unk", "error"],
     "the sentence: 'zyzzyvas'", "the zyzzyvas\n"),
    ("plot-tree-unk", ["plot-tree", "--run", "{run}", "the zyzzyvas", "-o", "{tmp}/t.png",
                       "--unk", "error"], "the sentence: 'zyzzyvas' not in"),
    ("tag-unk", ["tag", "{tag}", "--input", "{tmp}/unk.txt", "--unk", "error"],
     "unk.txt:2: 'qqzzy' not in the run's vocabulary"),
    ("tag-unk-stdin", ["tag", "{tag}", "--unk", "error"], "stdin:1: 'qqzzy', 'zzqqy' not in",
     "fly qqzzy to zzqqy\n"),
    ("translate-unk", ["translate", "{tr}", "--input", "{tmp}/unk-de.txt", "--unk", "error"],
     "unk-de.txt:2: '€' not in the run's source vocabulary"),
    ("translate-unk-stdin", ["translate", "{tr}", "--unk", "error"], "stdin:1: '€', '♞' not in",
     "Der Hund € ♞\n"),
    ("suite-unk", ["suite", "agreement", "{run}", "--pairs", "{tmp}/pairs-unk.tsv", "--unk",
                   "error"], "pairs-unk.tsv:2: 'zyzzyvas' not in"),
    ("suite-unk-generated", ["suite", "agreement", "{run}", "--max-per-construction", "1",
                             "--unk", "error"], "pair 1 ("),
    # ---------------------------------------------------------------- issue 25: empty input
    # no text at all (empty or blank stdin / file / argument) is "no input", in every verb
    ("parse-stdin-empty", ["parse", "{run}"], "no input: stdin is empty", ""),
    ("parse-stdin-blank", ["parse", "{run}", "-"], "no input: stdin is empty", "\n  \n\n"),
    ("parse-file-empty", ["parse", "{run}", "--input", "{tmp}/empty.txt"],
     "no input: {tmp}/empty.txt is empty"),
    ("parse-file-zero", ["parse", "{run}", "--input", "{tmp}/zero.txt"], "no input"),
    ("plot-stdin-empty", ["plot", "{run}", "-o", "{tmp}/p.png"], "no input: stdin is empty", ""),
    ("plot-empty-arg", ["plot", "{run}", " ", "-o", "{tmp}/p.png"],
     "no input: the sentence is empty"),
    ("plot-tree-stdin-empty", ["plot-tree", "-o", "{tmp}/t.png"], "no input: stdin is empty",
     ""),
    ("plot-tree-empty-arg", ["plot-tree", "", "-o", "{tmp}/t.png"],
     "no input: the tree is empty"),
    ("plot-tree-run-empty", ["plot-tree", "--run", "{run}", "-o", "{tmp}/t.png"],
     "no input: stdin is empty", " \n"),
    ("tag-stdin-empty", ["tag", "{tag}"], "no input: stdin is empty", ""),
    ("tag-stdin-blank", ["tag", "{tag}"], "no input: stdin is empty", "\n\t\n"),
    ("tag-file-zero", ["tag", "{tag}", "--input", "{tmp}/zero.txt"],
     "no input: {tmp}/zero.txt is empty"),
    ("translate-stdin-empty", ["translate", "{tr}"], "no input: stdin is empty", ""),
    ("translate-stdin-blank", ["translate", "{tr}"], "no input: stdin is empty", "\n\n"),
    ("translate-file-empty", ["translate", "{tr}", "--input", "{tmp}/empty.txt"],
     "no input: {tmp}/empty.txt is empty"),
    ("suite-pairs-empty", ["suite", "agreement", "{run}", "--pairs", "{tmp}/empty.txt"],
     "no pairs"),
    ("eval-data-empty-lm", ["eval", "{run}", "--data", "{tmp}/empty.txt"], "empty corpus"),
    ("eval-data-empty-tag", ["eval", "{tag}", "--data", "{tmp}/empty.txt"], "no utterances"),
    ("eval-data-empty-logic", ["eval", "{logic}", "--data", "{tmp}/empty.txt"], "no pairs"),
    ("eval-data-empty-tr", ["eval", "{tr}", "--data", "{tmp}/zero"], "no sentence pairs"),
    # ---------------------------------------------------------------- issue 25: binary files
    ("config-binary", ["train", "--config", "{tmp}/binary.bin", "--out", "{out}"],
     "binary.bin:1: not UTF-8 text"),
    ("config-nul", ["train", "--config", "{tmp}/nul.txt", "--out", "{out}"],
     "nul.txt:2: binary data (a NUL byte)"),
    ("config-dir", ["train", "--config", "{tmp}", "--out", "{out}"],
     "is a directory, not a config file"),
    ("resume-binary-config", ["train", "--resume", "{tmp}/fake-run"], "config.yaml:1: not UTF-8"),
    ("tag-binary", ["tag", "{tag}", "--input", "{tmp}/binary.bin"], "binary.bin:1: not UTF-8"),
    ("tag-nul", ["tag", "{tag}", "--input", "{tmp}/nul.txt"], "nul.txt:2: binary data"),
    ("tag-input-dir", ["tag", "{tag}", "--input", "{tmp}"], "is a directory"),
    ("tag-stdin-nul", ["tag", "{tag}"], "stdin:2: binary data", "fly to boston\n\0\0\n"),
    ("parse-binary", ["parse", "{run}", "--input", "{tmp}/binary.bin"], "not UTF-8 text"),
    ("parse-stdin-nul", ["parse", "{run}"], "stdin:1: binary data", "a\0b\n"),
    ("translate-nul", ["translate", "{tr}", "--input", "{tmp}/nul.txt"], "nul.txt:2: binary"),
    ("translate-stdin-nul", ["translate", "{tr}"], "stdin:3: binary data", "a\nb\n\0\n"),
    ("suite-pairs-binary", ["suite", "agreement", "{run}", "--pairs", "{tmp}/binary.bin"],
     "not UTF-8"),
    ("eval-data-binary-lm", ["eval", "{run}", "--data", "{tmp}/binary.bin"], "not UTF-8"),
    ("eval-data-binary-tag", ["eval", "{tag}", "--data", "{tmp}/binary.bin"], "not UTF-8"),
    ("eval-data-binary-logic", ["eval", "{logic}", "--data", "{tmp}/binary.bin"], "not UTF-8"),
    ("eval-data-binary-tr", ["eval", "{tr}", "--data", "{tmp}/bin"], "bin.de:1: not UTF-8"),
    # ---------------------------------------------------------------- issue 25: eval --data
    ("eval-data-missing-lm", ["eval", "{run}", "--data", "{tmp}/none.txt"],
     "none.txt: no such file"),
    ("eval-data-missing-tag", ["eval", "{tag}", "--data", "{tmp}/none"],
     "none: no such file or directory"),
    ("eval-data-missing-logic", ["eval", "{logic}", "--data", "{tmp}/none"],
     "none: no such file or directory"),
    ("eval-data-missing-tr", ["eval", "{tr}", "--data", "{tmp}/none"],
     "none.de: no such file (nor none.de.gz); --data takes a file stem"),
    ("eval-data-side-file", ["eval", "{tr}", "--data", "{tmp}/none.de"],
     "none.de: give the file stem, {tmp}/none"),
    ("eval-data-dir-lm", ["eval", "{run}", "--data", "{tmp}"], "is a directory"),
    ("eval-data-tag-no-tag", ["eval", "{tag}", "--data", "{tmp}/words.txt"],
     "words.txt:2: a word without a tag"),
    ("eval-data-tag-no-seq-out", ["eval", "{tag}", "--data", "{tmp}/seq-in-only"],
     "seq.out: no such file"),
    ("eval-data-tag-misaligned", ["eval", "{tag}", "--data", "{tmp}/seq-short"],
     "seq.out: 1 lines, but"),
    ("eval-data-logic-fields", ["eval", "{logic}", "--data", "{tmp}/short.txt"],
     "short.txt:1: expected 'relation<TAB>formula<TAB>formula'"),
    ("eval-data-logic-relation", ["eval", "{logic}", "--data", "{tmp}/pairs.txt"],
     "pairs.txt:2: unknown relation '~'"),
    ("eval-data-logic-wrong", ["eval", "{logic}", "--data", "{tmp}/wrong.txt"],
     "wrong.txt:1: relation '=', but the formulas are in relation '#'"),
    ("eval-data-logic-dir", ["eval", "{logic}", "--data", "{tmp}/seq-in-only"],
     "a directory without test0"),
    ("eval-data-tr-misaligned", ["eval", "{tr}", "--data", "{tmp}/mis"], "mis.en: 1 lines, but"),
    ("eval-data-tr-empty-line", ["eval", "{tr}", "--data", "{tmp}/gap"], "gap.de:2: empty line"),
    ("eval-data-and-split", ["eval", "{run}", "--data", "{tmp}/short.txt", "--split", "test"],
     "drop --split"),
    ("eval-beam-lm", ["eval", "{run}", "--beam", "5"], "--beam: a lm run has no search"),
    ("eval-alpha-tag", ["eval", "{tag}", "--length-penalty", "0.5"],
     "--length-penalty: a tagging run"),
    ("eval-beam-alpha-logic", ["eval", "{logic}", "--beam", "2", "--length-penalty", "1"],
     "--beam and --length-penalty: a logic run"),
    ("eval-beam-zero", ["eval", "{tr}", "--beam", "0"], "--beam: must be an integer >= 1"),
    ("eval-alpha-nan", ["eval", "{tr}", "--length-penalty", "nan"],
     "--length-penalty: must be a finite number"),
    ("eval-alpha-negative", ["eval", "{tr}", "--length-penalty", "-1"],
     "--length-penalty: must be"),
    # ---------------------------------------------------------------- gradflow
    ("gradflow-none", ["gradflow"], "needs either --runs"),
    ("gradflow-cell", ["gradflow", "--cells", "bogus"], "unknown cell 'bogus'"),
    ("gradflow-png-dir", ["gradflow", "--cells", "elman", "-o", "{tmp}"], "is a directory"),
    ("gradflow-csv", ["gradflow", "--cells", "elman", "--csv", "{tmp}/g.txt"], "end in .csv"),
    ("gradflow-tensor", ["gradflow", "--cells", "tensor", "--hidden", "2000"], "M·H²"),
    ("gradflow-length", ["gradflow", "--cells", "elman", "--length", "0"],
     "--length: must be an integer >= 1"),
    ("gradflow-seed", ["gradflow", "--cells", "elman", "--seed", str(2**64)],
     "--seed: must be an integer from 0 to 2**64 - 1"),          # was torch's OverflowError
    ("gen-seed", ["generate", "{run}", "--seed", "-1"], "--seed: must be an integer from 0"),
    # flags anywhere (issue 38): before the run, between the run and the sentence
    ("parse-layer-between", ["parse", "{run}", "--layer", "9", "the cat"], "--layer 9"),
    ("parse-unk-first", ["parse", "--unk", "error", "{run}", "the qqqzzz"], "'qqqzzz' not in"),
]


ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    os.chdir(ROOT)
    run = tmp_path_factory.mktemp("bad") / "run"
    assert main(["train", "--config", "configs/tiny-lm.yaml", "--out", str(run), "--quiet",
                 "train.epochs=1"]) == 0
    return run


RUNS = {"{tag}": "tagging_run", "{tr}": "bpe_translation_run", "{logic}": "logic_run"}


def write_inputs(tmp: Path) -> None:
    """The files the cases name: text of every kind a user might bring."""
    (tmp / "empty.txt").write_text("  \n")
    (tmp / "zero.txt").write_text("")
    (tmp / "binary.txt").write_bytes(b"ok\n\xff\xfe bad\n")
    (tmp / "binary.bin").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xd8")
    (tmp / "nul.txt").write_bytes(b"text\nmore\x00text\n")
    (tmp / "short.txt").write_text("one line only\n")
    (tmp / "bad.yaml").write_text("train: [unclosed\n")
    (tmp / "pairs.tsv").write_text("agr\tthe dog runs\tthe dog run\nagr\t\tthe dog run\n")
    (tmp / "pairs-unk.tsv").write_text("agr\tthe company is\tthe company are\n"
                                       "agr\tthe zyzzyvas is\tthe zyzzyvas are\n")
    (tmp / "pairs.txt").write_text("=\ta\ta\n~\ta\tb\n")
    (tmp / "formula.txt").write_text("<\t( a ( and b )\ta\n")
    (tmp / "wrong.txt").write_text("=\ta\tb\n")
    (tmp / "unk-lm.txt").write_text("the company\nthe zyzzyvas\n")
    (tmp / "unk.txt").write_text("fly to boston\nfly to qqzzy\n")
    (tmp / "unk-de.txt").write_text("Der Hund läuft.\nDer € Hund.\n")
    (tmp / "words.txt").write_text("flights B-x\nboston\n")
    for name, lines in (("seq-in-only", {"seq.in": "a b\n"}),
                        ("seq-short", {"seq.in": "a b\nc\n", "seq.out": "O O\n"})):
        (tmp / name).mkdir()
        for f, text in lines.items():
            (tmp / name / f).write_text(text)
    for stem, de, en in (("mis", b"a\nb\n", b"a\n"), ("gap", b"a\n\nc\n", b"a\nb\nc\n"),
                         ("bin", b"\xff\xfe\n", b"a\n"), ("zero", b"", b"")):
        (tmp / f"{stem}.de").write_bytes(de)
        (tmp / f"{stem}.en").write_bytes(en)
    (tmp / "fake-run").mkdir()
    (tmp / "fake-run" / "config.yaml").write_bytes(b"\xff\xfe\x00binary")


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_exit_2(case, tiny_run, tmp_path, root, capsys, monkeypatch,
                                      request):
    os.chdir(root)
    write_inputs(tmp_path)
    out = tmp_path / "out"
    name, argv, expected, *stdin = case
    if name == "device-cuda" and torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device: train.device=cuda is valid here")
    monkeypatch.setattr("sys.stdin", io.StringIO(stdin[0] if stdin else ""))
    runs = {"{run}": str(tiny_run), "{tmp}": str(tmp_path), "{out}": str(out)}
    for key, fixture in RUNS.items():
        if any(key in a for a in argv):
            runs[key] = str(request.getfixturevalue(fixture))

    def fill(text: str) -> str:
        for key, value in runs.items():
            text = text.replace(key, value)
        return text

    argv, expected = [fill(a) for a in argv], fill(expected)
    capsys.readouterr()
    try:
        rc = main(argv)
    except SystemExit as e:     # a usage error, said by the verb's parser: "treelm VERB: error:"
        rc = e.code
    err = capsys.readouterr().err
    assert rc == 2, f"{name}: exit {rc}, stderr {err!r}"
    lines = err.strip().splitlines()
    assert len(lines) == 1 and re.match(r"treelm( [\w-]+)*: error: ", lines[0]), err
    assert "Traceback" not in err
    assert expected in lines[0], lines[0]
    assert not out.exists(), f"{name}: left {out} behind"


# (id, argv, stdin, what stderr says: one line holding this, or "" for nothing, the number of
# output lines or None): input that is not wrong, and what every verb does with it
WORKS: list[tuple[str, list[str], str, str, int | None]] = [
    # --unk map (the default): read as <unk>, one line on stderr counting them
    ("gen-unk-map", ["generate", "{run}", "--prompt", "the zyzzyvas", "--length", "2"], "",
     "1 symbol(s) outside the run's vocabulary read as <unk>: 'zyzzyvas'", None),
    ("probe-unk-map", ["probe", "{run}", "--prompt", "zyzzyvas qqqzzz", "--prompt", "zyzzyvas"],
     "", "3 symbol(s) outside the run's vocabulary read as <unk>: 'zyzzyvas', 'qqqzzz'", None),
    ("parse-unk-map", ["parse", "{run}", "the zyzzyvas"], "",
     "1 symbol(s) outside the run's vocabulary read as <unk>: 'zyzzyvas'", 1),
    ("parse-unk-map-stdin", ["parse", "{run}"], "the zyzzyvas\n\nzyzzyvas company\n",
     "2 symbol(s) outside the run's vocabulary read as <unk>: 'zyzzyvas'", 3),
    ("plot-unk-map", ["plot", "{run}", "the zyzzyvas", "-o", "{tmp}/p.png"], "",
     "1 symbol(s) outside the run's vocabulary read as <unk>: 'zyzzyvas'", 1),
    ("plot-tree-unk-map", ["plot-tree", "--run", "{run}", "-o", "{tmp}/t.png"],
     "zyzzyvas company\n",
     "1 symbol(s) outside the run's vocabulary read as <unk>: 'zyzzyvas'", 1),
    ("tag-unk-map", ["tag", "{tag}", "--input", "{tmp}/unk.txt"], "",
     "1 symbol(s) outside the run's vocabulary read as <unk>: 'qqzzy'", 2),
    ("translate-unk-map", ["translate", "{tr}", "--beam", "1"], "Der € Hund.\n€\n",
     "2 symbol(s) outside the run's source vocabulary read as <unk>: '€'", 2),
    ("suite-unk-map", ["suite", "agreement", "{run}", "--pairs", "{tmp}/pairs-unk.tsv"], "",
     "2 symbol(s) outside the run's vocabulary read as <unk>, in 1 pair(s)", None),
    # a word no training sentence holds, made of the model's pieces: nothing is unknown
    ("translate-unseen-word", ["translate", "{tr}", "--unk", "error", "--beam", "2"],
     "Der Mann ist ausgebildet.\n", "", 1),
    # blank lines inside input: an empty result each, the output aligned with the input
    ("parse-blank-lines", ["parse", "{run}"], "\nthe company\n\n", "", 3),
    ("tag-blank-lines", ["tag", "{tag}"], "fly to boston\n\n", "", 2),
    ("translate-blank-lines", ["translate", "{tr}", "--beam", "1"], "\nDer Hund.\n \n", "", 3),
    # an empty prompt or prefix has a meaning: the start of a line
    ("gen-empty-prompt", ["generate", "{run}", "--length", "3", "--seed", "1"], "", "", None),
    ("probe-empty-prefix", ["probe", "{run}", "--prompt", "", "--top-k", "2"], "", "", 3),
]


@pytest.mark.parametrize("case", WORKS, ids=[c[0] for c in WORKS])
def test_documented_behaviour_where_input_is_not_wrong(case, tiny_run, tmp_path, root, capsys,
                                                       monkeypatch, request):
    os.chdir(root)
    write_inputs(tmp_path)
    name, argv, stdin, note, n_out = case
    monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    runs = {"{run}": str(tiny_run), "{tmp}": str(tmp_path)}
    for key, fixture in RUNS.items():
        if any(key in a for a in argv):
            runs[key] = str(request.getfixturevalue(fixture))
    for key, value in runs.items():
        argv = [a.replace(key, value) for a in argv]
    capsys.readouterr()
    rc = main(argv)
    cap = capsys.readouterr()
    assert rc == 0, f"{name}: exit {rc}, stderr {cap.err!r}"
    err = [ln for ln in cap.err.splitlines() if ln.strip()]
    if note:
        assert len(err) == 1 and err[0].startswith("treelm: ") and note in err[0], cap.err
    else:
        assert err == [], cap.err
    if n_out is not None:
        assert len(cap.out.split("\n")) - 1 == n_out, cap.out


def test_the_table_covers_every_verb():
    from treelm.cli import build_parser

    verbs = set(build_parser()._subparsers._group_actions[0].choices)
    covered = {c[1][0] for c in CASES}
    assert verbs <= covered, sorted(verbs - covered)
    assert len(CASES) + len(WORKS) >= 120


def test_version(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.startswith("treelm 0.")


# ---------------------------------------------------------------- a run's life (issue 25): one
# writer, finished runs, what a resume says, results on stdout, files only where asked, examples
def _one_error_line(err: str, *expected: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("treelm: error: "), err
    assert "Traceback" not in err and all(e in lines[0] for e in expected), lines[0]
    return lines[0]


def test_second_writer_on_a_locked_run_is_one_line_naming_the_holder(tiny_run, tmp_path,
                                                                      capsys):
    """A live process holds the run's lock (here: this one, through another open file: flock
    conflicts per open file); train --resume and train --force stop with one line naming it,
    and write nothing."""
    import shutil

    from treelm.rundir.files import RunFiles
    from treelm.rundir.lock import RunLock

    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    before = sorted(p.name for p in (run / "ckpt").iterdir())
    lock = RunLock(RunFiles(run).lock)
    assert lock.acquire() is None
    try:
        capsys.readouterr()
        for argv in (["train", "--resume", str(run)],
                     ["train", "--config", "configs/tiny-lm.yaml", "--out", str(run), "--force",
                      "--quiet", "train.epochs=1"]):
            assert main(argv) == 2
            _one_error_line(capsys.readouterr().err, "another treelm process is writing",
                            f"pid {os.getpid()} on ", "started ")
        assert sorted(p.name for p in (run / "ckpt").iterdir()) == before
    finally:
        lock.release()
    assert not RunFiles(run).lock.exists()


def test_out_may_be_an_empty_directory_and_force_writes_among_foreign_files(tmp_path,
                                                                           capsys):
    """--out into an existing empty directory trains (a dead writer's lock file alone counts as
    empty); a directory holding other files is refused in one line naming it, what is in it and
    --force; with --force the run is written among those files, which stay."""
    from treelm.rundir.files import RunFiles

    base = ["train", "--config", "configs/tiny-lm.yaml", "--quiet", "train.epochs=1"]
    empty = tmp_path / "empty"
    empty.mkdir()
    RunFiles(empty).lock.write_text("pid 1 on gone\n")
    assert main([*base, "--out", str(empty)]) == 0
    assert RunFiles(empty).pointer.exists()
    docs = tmp_path / "docs"
    docs.mkdir()
    for name in ("README.md", "guide.md", ".hidden"):
        (docs / name).write_text("mine\n")
    capsys.readouterr()
    assert main([*base, "--out", str(docs)]) == 2
    _one_error_line(capsys.readouterr().err, f"{docs}: exists and is not a treelm run "
                    "(3 entries, e.g. README.md); choose an empty or new directory, or --force")
    assert sorted(p.name for p in docs.iterdir()) == [".hidden", "README.md", "guide.md"]
    assert main([*base, "--out", str(docs), "--force"]) == 0
    assert RunFiles(docs).pointer.exists() and (docs / "README.md").read_text() == "mine\n"


def test_a_killed_holders_lock_is_taken_over_with_a_note(tiny_run, tmp_path, capsys):
    """SIGKILL leaves the lock file (with the dead holder's details) but the kernel drops its
    flock: the next writer takes it over and says whose it was."""
    import shutil
    import signal
    import subprocess
    import sys

    from treelm.rundir.files import RunFiles

    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from treelm.rundir.lock import RunLock; "
         "RunLock(sys.argv[1]).acquire(); print('locked', flush=True); time.sleep(60)",
         str(RunFiles(run).lock)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        assert main(["train", "--resume", str(run)]) == 2        # alive: refused
        _one_error_line(capsys.readouterr().err, f"pid {holder.pid} ")
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert RunFiles(run).lock.exists()
    assert main(["train", "--resume", str(run)]) == 0            # the run is finished: no train
    err = capsys.readouterr().err
    assert f"took over a stale lock of {run} (pid {holder.pid} on " in err
    assert "no longer running" in err and "is finished" in err
    assert not RunFiles(run).lock.exists()


def test_resume_of_a_finished_run_says_so_and_trains_nothing(tiny_run, tmp_path, capsys):
    """Epochs done: one line, exit 0, no training (the checkpoints stay as they were); raising
    train.epochs on the command line trains on, and the resume says from where. --quiet keeps
    the result JSON on stdout."""
    import json
    import shutil

    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    before = (run / "checkpoint.json").read_text()
    capsys.readouterr()
    assert main(["train", "--resume", str(run)]) == 0
    cap = capsys.readouterr()
    assert cap.out == ""
    lines = cap.err.strip().splitlines()
    assert len(lines) == 1 and lines[0] == (
        f"treelm: {run} is finished (all 1 epochs done): nothing to train (raise train.epochs, "
        f"train.max_minutes or train.max_units on the command line to train on)")
    assert (run / "checkpoint.json").read_text() == before
    from treelm.rundir.files import read_metrics
    assert read_metrics(run, "done")          # the log still ends as the finished run did
    step = json.loads(before)["last"]
    assert main(["train", "--resume", str(run), "--quiet", "train.epochs=2"]) == 0
    cap = capsys.readouterr()
    err = cap.err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"treelm: resuming {run} from step ")
    assert "(epoch 2, " in err[0] and step != json.loads((run / "checkpoint.json").read_text())[
        "last"]
    summary = json.loads(cap.out)                 # --quiet: no progress, the result remains
    assert summary["epochs"] == 2 and "best_valid_loss" in summary


def test_a_spent_budget_is_not_trained_again_unless_raised(tmp_path, root, capsys):
    """A run that stopped on train.max_minutes (here: before its first epoch ended) is finished
    for --resume; train.max_minutes=null lifts the budget and it trains to its epochs."""
    import json

    from treelm.rundir.files import read_metrics

    os.chdir(root)
    run = tmp_path / "run"
    assert main([*TRAIN[:-2], str(run), "--quiet", "train.epochs=1",
                 "train.max_minutes=0.0001"]) == 0
    valid = read_metrics(run, "valid")
    assert valid[0].get("initial") and valid[0]["step"] == 0      # the measured validation
    capsys.readouterr()
    assert main(["train", "--resume", str(run)]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is finished (its budget of 0.0001 min was spent)" in err[0]
    assert main(["train", "--resume", str(run), "--quiet", "train.max_minutes=null"]) == 0
    cap = capsys.readouterr()
    assert "resuming" in cap.err and json.loads(cap.out)["epochs"] == 1


def test_under_torchrun_the_result_prints_once(tmp_path, root):
    import json
    import socket
    import subprocess
    import sys

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
           "--master_addr=127.0.0.1", f"--master_port={port}", "-m", "treelm.cli", "train",
           "--config", "configs/tiny-lm.yaml", "--out", str(tmp_path / "ddp"), "train.epochs=1",
           "train.threads=1", "train.device=cpu", "train.precision=fp32"]
    proc = subprocess.run(cmd, cwd=root, env={**os.environ, "OMP_NUM_THREADS": "1"},
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stdout
    assert len(json.loads(lines[0])["rank_digests"]) == 2


def test_gradflow_writes_files_only_where_asked(tmp_path, capsys):
    os.chdir(tmp_path)
    assert main(["gradflow", "--cells", "elman", "--hidden", "8", "--length", "5",
                 "--batch-size", "2"]) == 0
    out = capsys.readouterr().out
    assert "lag 5:" in out and "wrote" not in out
    assert list(tmp_path.iterdir()) == []
    assert main(["gradflow", "--cells", "elman", "--hidden", "8", "--length", "5", "--batch-size",
                 "2", "--csv", "g.csv"]) == 0
    assert [p.name for p in tmp_path.iterdir()] == ["g.csv"]
    assert capsys.readouterr().out.strip().endswith("wrote g.csv")


def _subparsers(parser, path=("treelm",)):
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield (*path, name), sub
                yield from _subparsers(sub, (*path, name))


def test_every_verb_help_has_examples():
    """``treelm VERB --help`` ends with two or more example command lines, for every verb
    (and ``suite``'s own suites)."""
    from treelm.cli import build_parser

    subs = list(_subparsers(build_parser()))
    assert len(subs) >= 13
    for path, sub in subs:
        epilog = sub.epilog or ""
        assert epilog.lower().startswith("example"), f"{' '.join(path)} --help: no examples"
        examples = [ln for ln in epilog.splitlines() if ln.strip().startswith(
            ("treelm ", "echo ", "torchrun ", "cat "))]
        assert len(examples) >= 2, f"{' '.join(path)} --help: {len(examples)} example(s)"
        assert all(path[1] in ln for ln in examples[:1]), (path, examples)


def test_suite_pairs_tied_or_unk_are_counted_apart(tiny_run, tmp_path, capsys):
    import json

    from treelm.run import load_run

    vocab = load_run(tiny_run).vocab
    assert "the" in vocab and "company" in vocab and "zyzzyva" not in vocab
    f = tmp_path / "pairs.tsv"
    f.write_text("c\tthe company is\tthe company are\n"     # scored
                 "c\tthe company is\tthe company is\n"      # a tie: one sentence twice
                 "c\tthe zyzzyva is\tthe zyzzyvas is\n"     # identical after <unk> mapping
                 "c\tthe company is\tthe zyzzyva is\n")     # <unk> on one side
    assert main(["suite", "agreement", str(tiny_run), "--pairs", str(f), "--format", "json"]) == 0
    cap = capsys.readouterr()
    run = json.loads(cap.out)["runs"][0]
    c = run["constructions"]["c"]
    assert (c["pairs"], c["scored"], c["ties"], c["unk_in_difference"]) == (4, 1, 1, 2)
    assert c["accuracy"] == float(c["correct"]) and run["mean_accuracy"] == c["accuracy"]
    assert (run["scored"], run["ties"], run["unk_in_difference"]) == (1, 1, 2)
    table = cap.err
    assert "left out: ties" in table and "left out: <unk> in the difference" in table
