"""Run directories: every file name of a run, crash-safe writes, checkpoints.

    RUN/config.yaml            resolved config (after overrides)
    RUN/tokenizer.json         the tokenizer's spec ({"kind": "word"}, ...)
    RUN/tokenizer.model        sentencepiece model bytes (bpe / unigram tokenizers only)
    RUN/vocab.json             the vocabulary (specials, symbols)
    RUN/<role>.tokenizer.json, RUN/<role>.vocab.json     further tables of a task ("src", "labels")
    RUN/metrics.jsonl          one JSON object per event (the precision and why, train progress,
                               valid, test)
    RUN/checkpoint.json        {"format", "model", "last": "ckpt/N", "best": "ckpt/M",
                               "best-trees": "ckpt/K", "best-trees-<rule>": "ckpt/J"
                               (the last two: train.eval_parse on dev trees only)}
    RUN/trees.json             per checkpoint, the layer and tree rule chosen on dev trees
                               (:mod:`treelm.rundir.trees`)
    RUN/ckpt/N/model.safetensors      weights (safetensors: no pickle)
    RUN/ckpt/N/averaged.safetensors   NT-ASGD averaged weights, when active
    RUN/ckpt/N/trainer.pt             optimiser, RNG, loop and task state (weights_only=True)
    RUN/train.lock             while `treelm train` writes the run: its flock and its pid, host
                               and start time (one writer per run; :mod:`treelm.rundir.lock`)
    RUN/tb/                    TensorBoard event files of the train and valid scalars, where the
                               `tensorboard` package is installed (:mod:`treelm.train.tensorboard`)

:mod:`treelm.rundir.files` owns the names and the metrics log, :mod:`treelm.rundir.checkpoint`
the checkpoints, :mod:`treelm.rundir.lock` the writer's lock, :mod:`treelm.rundir.trees` the
tree defaults. Nothing here knows about tasks or models beyond ``nn.Module``.
"""

from treelm.rundir.files import RunFiles, atomic_write_bytes, atomic_write_text, read_metrics

__all__ = ["RunFiles", "atomic_write_bytes", "atomic_write_text", "read_metrics"]
