"""Model-independent unsupervised-syntax evaluation (ON-LSTM, Shen et al., ICLR 2019).

* :mod:`treelm.syntax.trees` -- ``build_tree`` from per-token levels and nested-list tree
  helpers (brackets, JSON, spans, depth, mirror, ASCII drawing; reading brackets and JSON
  back), all iterative;
* :mod:`treelm.syntax.metrics` -- sentence- and corpus-level unlabeled F1, per-label recall,
  depth, ``evaluate``;
* :mod:`treelm.syntax.baselines` -- left/right-branching, balanced and random trees, scored by
  ``evaluate_baselines``;
* :mod:`treelm.syntax.report` -- ``parsing_report``, the numbers of the paper's Table 2 for a run
  and a treebank (what ``eval-parse`` prints, ``format_table``), and ``format_parse``;
* :mod:`treelm.syntax.render` -- PNG drawings (imported lazily: it needs matplotlib);
* :mod:`treelm.syntax.levels` -- per-token master-gate levels of a trained ON-LSTM LM, batched
  (imported lazily: it needs torch);
* :mod:`treelm.syntax.source_levels` -- the same over the source sentence of a translation run
  whose encoder has ON-LSTM layers (either direction of a bidirectional encoder);
* :mod:`treelm.syntax.sources` -- ``level_source``, where the verbs obtain levels: the one place
  that tells the two kinds of run apart (above both modules, which do not import each other);
* :mod:`treelm.syntax.parse` -- reading input lines into levels, a chunk at a time;
* :mod:`treelm.syntax.tree_files` -- files of bracketed trees from any parser (one a line, any
  labels), read against the sentences they parse;
* :mod:`treelm.syntax.readings` -- every (layer, rule) tree of a checkpoint over the sentences
  of some parts, the levels read once per part: what eval-parse, parse, ensemble, the
  training-time tracker and a study's scoring build their trees with (imported lazily: torch);
* :mod:`treelm.syntax.ensemble` -- tree ensembles (tree averaging, Shayegh et al., ICLR 2024):
  per sentence, the binary tree sharing the most spans with K sources' trees, by dynamic
  programming over spans.

The verbs ``parse``, ``eval-parse``, ``ensemble``, ``plot`` and ``plot-tree`` are in
:mod:`treelm.parsing`, above the API (:mod:`treelm.api`), which reads trees through this package.

Gold trees come from :mod:`treelm.data.treebank`.
"""

from treelm.syntax.baselines import (
    balanced,
    balanced_left,
    evaluate_baselines,
    left_branching,
    random_tree,
    right_branching,
)
from treelm.syntax.ensemble import (
    best_binary_tree,
    ensemble_tree,
    ensemble_trees,
    span_votes,
    tree_votes,
)
from treelm.syntax.metrics import (
    PRF,
    brackets,
    corpus_f1,
    evaluate,
    label_recall,
    sentence_f1,
    sentence_prf,
    span_prf,
)
from treelm.syntax.tree_files import read_tree, read_tree_file, read_tree_lines
from treelm.syntax.trees import (
    ascii_tree,
    build_tree,
    leaf_depths,
    leaves_and_spans,
    mean_leaf_depth,
    mirror_tree,
    read_bracket_tree,
    read_json_tree,
    tree_depth,
    tree_leaves,
    tree_spans,
    tree_to_brackets,
    tree_to_json,
)

__all__ = [
    "PRF",
    "ascii_tree",
    "balanced",
    "balanced_left",
    "best_binary_tree",
    "brackets",
    "build_tree",
    "corpus_f1",
    "ensemble_tree",
    "ensemble_trees",
    "evaluate",
    "evaluate_baselines",
    "label_recall",
    "leaf_depths",
    "leaves_and_spans",
    "left_branching",
    "mean_leaf_depth",
    "mirror_tree",
    "random_tree",
    "read_bracket_tree",
    "read_json_tree",
    "read_tree",
    "read_tree_file",
    "read_tree_lines",
    "right_branching",
    "sentence_f1",
    "sentence_prf",
    "span_prf",
    "span_votes",
    "tree_depth",
    "tree_leaves",
    "tree_spans",
    "tree_to_brackets",
    "tree_to_json",
    "tree_votes",
]
